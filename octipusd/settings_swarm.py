"""``swarm``: child agents' worktrees, limits per level and contract retries (seed 003, FACTS.md §1-2).

::

    [swarm]
    worktreeIsolation = false          # env SWARM_WORKTREE_ISOLATION: a git worktree per coding child
    worktreeLinkNodeModules = true     # env SWARM_WORKTREE_LINK_NODE_MODULES: symlink the root's node_modules
    worktreeSetupCommand = "npm ci"    # optional: runs in each new worktree before its child starts
    contractRetries = 1                # retries of a child whose scorer gate failed (0-5)
    orphanReaperIntervalMs = 600000    # how often the orphan reaper sweeps (while isolation is on)
    [swarm.levelDefaults.agent]        # root (depth 0), agent (depth 1), subagent (depth 2)
    tokens = 80000                     # a child's token budget at this level (default and highest)
    wallMs = 600000                    # a child's active-work limit at this level (default and highest)
    fanOut = 4                         # children a run at this level may have alive at once
    maxPendingDetached = 3             # detached children it may leave uncollected at once

This module holds only the models; :mod:`octipusd.settings` mounts them as ``Settings.swarm``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "LEVELS",
    "SWARM_ACCEPTED",
    "SWARM_FIRST_BOOT_ENV",
    "LevelDefaults",
    "LevelLimits",
    "SwarmSettings",
    "level_name",
]

#: The levels of the child tree, by depth: the root agent, its children, their children.
LEVELS: Final[tuple[str, ...]] = ("root", "agent", "subagent")

#: The seed's first-boot variables of this section (FACTS.md §1), mapped to their dotted keys.
SWARM_FIRST_BOOT_ENV: Final[dict[str, str]] = {
    "SWARM_WORKTREE_ISOLATION": "swarm.worktreeIsolation",
    "SWARM_WORKTREE_LINK_NODE_MODULES": "swarm.worktreeLinkNodeModules",
}

#: What each key accepts, for error messages.
SWARM_ACCEPTED: Final[dict[str, str]] = {
    "swarm.worktreeIsolation": "true or false (default false)",
    "swarm.worktreeLinkNodeModules": "true or false (default true)",
    "swarm.worktreeSetupCommand": "a shell command line (unset: none)",
    "swarm.contractRetries": "a whole number of retries from 0 to 5",
    "swarm.orphanReaperIntervalMs": "milliseconds from 1000 to 86400000",
    "tokens": "a whole number of tokens >= 1",
    "wallMs": "milliseconds from 1000 to 7200000",
    "fanOut": "a whole number of children from 0 to 100",
    "maxPendingDetached": "a whole number of children from 0 to 100",
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class LevelLimits(_Section):
    """The limits of one level of the child tree.

    Attributes:
        tokens: Token budget of a child at this level: its default, and the most ``spawn_child``'s
            ``tokenBudget`` may ask for (tokens). Unused at the root level (a root turn's budget
            is its model row's ``maxTokens``).
        wallMs: Active-work time limit of a child at this level (approval and delegation waits
            excluded): its default, and the most ``timeoutSeconds`` may ask for (milliseconds).
            Unused at the root level.
        fanOut: Children a run at this level may have alive at once (0: it may not spawn).
        maxPendingDetached: Detached children a run at this level may leave uncollected at once.
    """

    tokens: int = Field(ge=1)
    wallMs: int = Field(ge=1000, le=7_200_000)
    fanOut: int = Field(ge=0, le=100)
    maxPendingDetached: int = Field(ge=0, le=100)


#: FACTS.md §2's defaults per level; a configured level table overrides only the keys it gives.
_LEVEL_DEFAULTS: Final[dict[str, dict[str, int]]] = {
    "root": {"tokens": 200_000, "wallMs": 600_000, "fanOut": 6, "maxPendingDetached": 6},
    "agent": {"tokens": 80_000, "wallMs": 600_000, "fanOut": 4, "maxPendingDetached": 3},
    "subagent": {"tokens": 30_000, "wallMs": 600_000, "fanOut": 0, "maxPendingDetached": 0},
}


class LevelDefaults(_Section):
    """``swarm.levelDefaults``: one :class:`LevelLimits` per level (FACTS.md §2's defaults).

    A level's table may give only some keys (``[swarm.levelDefaults.agent]`` with ``fanOut = 1``):
    the others keep that level's defaults.
    """

    root: LevelLimits = LevelLimits(**_LEVEL_DEFAULTS["root"])
    agent: LevelLimits = LevelLimits(**_LEVEL_DEFAULTS["agent"])
    subagent: LevelLimits = LevelLimits(**_LEVEL_DEFAULTS["subagent"])

    @model_validator(mode="before")
    @classmethod
    def _over_defaults(cls, data: Any) -> Any:
        """Complete each given level table with that level's defaults (anything else is left to
        the field validation, which names the key)."""
        if not isinstance(data, Mapping):
            return data
        merged = dict(data)
        for level, given in data.items():
            if level in _LEVEL_DEFAULTS and isinstance(given, Mapping):
                merged[level] = {**_LEVEL_DEFAULTS[level], **given}
        return merged

    def at(self, depth: int) -> LevelLimits:
        """The limits of a run at ``depth`` (0 the root); deeper than the table: the last level."""
        return {"root": self.root, "agent": self.agent, "subagent": self.subagent}[level_name(depth)]


def level_name(depth: int) -> str:
    """The level of a run at ``depth``: ``root``, ``agent`` or ``subagent``."""
    return LEVELS[min(max(depth, 0), len(LEVELS) - 1)]


class SwarmSettings(_Section):
    """``swarm``: see the module.

    Attributes:
        worktreeIsolation: Give each eligible coding child its own git worktree (seed 003).
        worktreeLinkNodeModules: Link the project's ``node_modules`` into each new worktree.
        worktreeSetupCommand: A shell command run in each new worktree before its child starts
            (through the shell tool's policy), or None.
        contractRetries: Retries of a child that failed its scorer gate.
        orphanReaperIntervalMs: Period of the orphan reaper (it also runs at start-up).
        levelDefaults: Limits per level of the child tree.
    """

    worktreeIsolation: bool = False
    worktreeLinkNodeModules: bool = True
    worktreeSetupCommand: str | None = Field(default=None, min_length=1, max_length=4000)
    contractRetries: int = Field(default=1, ge=0, le=5)
    orphanReaperIntervalMs: int = Field(default=600_000, ge=1000, le=86_400_000)
    levelDefaults: LevelDefaults = Field(default_factory=LevelDefaults)
