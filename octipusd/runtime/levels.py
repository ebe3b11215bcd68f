"""Delegation limits per level of the child tree, from one table (``swarm.levelDefaults``).

Issue 15 item 1: depth, fan-out and token budget per level, each refusal naming its limit and
setting key. The levels are by depth (:data:`~octipusd.settings_swarm.LEVELS`): the root run
(depth 0), its children (``agent``, depth 1), theirs (``subagent``, depth 2). A parent's own level
decides whether and how many children it may have; the child's level (the parent's depth + 1)
decides the child's token budget and time limit:

* depth: a run may spawn only when its level's ``fanOut`` is above 0 and it is not at the deepest
  level (:data:`DEEPEST_DEPTH`); :func:`may_spawn` is also what gives a child the delegation tools,
  so the tool list and the refusal agree;
* fan-out: a parent has at most ``fanOut`` children alive at once (queued or running, attached or
  detached);
* detached: a parent leaves at most ``maxPendingDetached`` detached children uncollected at once
  (running, or ended and not collected yet);
* tokens: the child level's ``tokens`` is the child's default ``tokenBudget`` and the highest one
  it may ask for (counted as :func:`budget_tokens` says);
* time: the child level's ``wallMs`` is likewise its default and highest ``timeoutSeconds`` (the
  supervisor counts it as every run limit, as active work: approval and delegation waits excluded).

:func:`admit_child` applies them to one ``spawn_child`` request; it is pure (the caller passes the
parent's counts), so the check and the child's registration must not be separated by another
``spawn_child`` of the same parent: the bridge queues a run's mutating tool calls one at a time.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from octipusd.adapter import Usage
from octipusd.errors import InvalidRequestError
from octipusd.settings_swarm import LEVELS, LevelDefaults, level_name
from octipusd.toolkit import ChildRequest

__all__ = ["DEEPEST_DEPTH", "admit_child", "budget_tokens", "may_spawn"]

#: Depth of the deepest level of the child tree (``subagent``): a run there never spawns.
DEEPEST_DEPTH: Final[int] = len(LEVELS) - 1

#: Milliseconds per second (``wallMs`` is in milliseconds, ``timeoutSeconds`` in seconds).
_MS_PER_S: Final[float] = 1000.0


def _key(depth: int, limit: str) -> str:
    """The setting key of one limit of the level at ``depth``."""
    return f"swarm.levelDefaults.{level_name(depth)}.{limit}"


def _level(depth: int) -> str:
    """``a root``, ``an agent``, ``a subagent``: the level at ``depth`` with its article."""
    name = level_name(depth)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _run(depth: int) -> str:
    """``a root run (depth 0)``, ``an agent run (depth 1)``..., for messages."""
    return f"{_level(depth)} run (depth {depth})"


def _children(count: int) -> str:
    return f"{count} child" if count == 1 else f"{count} children"


def _refusal(levels: LevelDefaults, depth: int) -> str | None:
    """Why a run at ``depth`` may not spawn at all, or None when it may."""
    if levels.at(depth).fanOut == 0:
        return f"{_key(depth, 'fanOut')} is 0 (the depth limit)"
    if depth >= DEEPEST_DEPTH:
        return (
            f"the child tree has {len(LEVELS)} levels ({', '.join(LEVELS)}) and it is at the deepest "
            "(the depth limit)"
        )
    return None


def may_spawn(levels: LevelDefaults, depth: int) -> bool:
    """Whether a run at ``depth`` may have children (and so gets ``spawn_child``,
    ``collect_children`` and ``steer_child``).

    Args:
        levels: ``swarm.levelDefaults``.
        depth: The run's depth (0 for a root run).

    Returns:
        True when its level's ``fanOut`` is above 0 and it is above the deepest level.
    """
    return _refusal(levels, depth) is None


def admit_child(
    levels: LevelDefaults, *, depth: int, alive: int, uncollected_detached: int, request: ChildRequest
) -> ChildRequest:
    """Check one ``spawn_child`` request against the limits of the parent's and the child's levels.

    Args:
        levels: ``swarm.levelDefaults``.
        depth: The parent run's depth (0 for a root run); the child is at ``depth + 1``.
        alive: The parent's children alive now: queued or running, attached or detached.
        uncollected_detached: The parent's detached children not collected yet (running or ended).
        request: The validated request.

    Returns:
        The request with the child level's defaults applied: ``token_budget`` its ``tokens`` and
        ``timeout_seconds`` its ``wallMs`` (in seconds) when the request gives none.

    Raises:
        InvalidRequestError: the parent's level may not spawn (depth), it has ``fanOut`` children
            alive, a detached request finds ``maxPendingDetached`` detached children uncollected,
            or ``tokenBudget`` / ``timeoutSeconds`` is above the child level's limit. The message
            names the limit, its value with its unit and its setting key; nothing was started.
    """
    own = levels.at(depth)
    refusal = _refusal(levels, depth)
    if refusal is not None:
        raise InvalidRequestError(f"{_run(depth)} may not spawn children: {refusal}")
    if alive >= own.fanOut:
        raise InvalidRequestError(
            f"fan-out limit reached: {_level(depth)} run may have at most {_children(own.fanOut)} alive at once "
            f"({_key(depth, 'fanOut')}); collect or wait for one first"
        )
    if request.detach and uncollected_detached >= own.maxPendingDetached:
        raise InvalidRequestError(
            f"detached limit reached: {_level(depth)} run may leave at most {_children(own.maxPendingDetached)} "
            f"detached and uncollected at once ({_key(depth, 'maxPendingDetached')}); collect their "
            "results with collect_children first, or spawn this child without detach"
        )
    child_depth = depth + 1
    child = levels.at(child_depth)
    child_run = f"{_level(child_depth)} child"
    if request.token_budget is not None and request.token_budget > child.tokens:
        raise InvalidRequestError(
            f"tokenBudget: {request.token_budget} tokens is above the limit of {child_run}, "
            f"{child.tokens} tokens ({_key(child_depth, 'tokens')}); ask for at most that, or omit it"
        )
    wall_s = child.wallMs / _MS_PER_S
    if request.timeout_seconds is not None and request.timeout_seconds > wall_s:
        raise InvalidRequestError(
            f"timeoutSeconds: {request.timeout_seconds:g} s is above the limit of {child_run}, "
            f"{wall_s:g} s ({_key(child_depth, 'wallMs')} = {child.wallMs} ms); ask for at most that, "
            "or omit it"
        )
    return dataclasses.replace(
        request,
        token_budget=request.token_budget if request.token_budget is not None else child.tokens,
        timeout_seconds=request.timeout_seconds if request.timeout_seconds is not None else wall_s,
    )


def budget_tokens(usage: Usage) -> int:
    """The tokens a child's ``tokenBudget`` counts: input, output and cache writes (tokens).

    Cache reads are not counted. Claude Code re-reads its whole cached prompt (system prompt, tool
    schemas and the conversation so far) on every model request and reports it as
    ``cache_read_input_tokens``: tens of thousands per request, so a child making a handful of tool
    calls would spend an ``agent`` level's default budget (80 000) while processing little new
    text. A cache read re-reads tokens already counted when they were sent (input) or written to
    the cache (cache creation). Every adapter reports its vendor's cached input as cache reads
    and only the uncached part as input, so the count means the same for each.
    """
    return usage.input_tokens + usage.output_tokens + usage.cache_creation_input_tokens
