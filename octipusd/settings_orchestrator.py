"""``orchestrator``: the limits of pipelines (FACTS.md §6, issue 27).

::

    [orchestrator]
    maxPipelineStages = 10          # steps one pipeline template may have at most
    pipelineTokenBudget = 2000000   # older key of agent.pipelineTokenBudget (that one wins when both are set)

    [agent]
    pipelineTokenBudget = 2000000   # env PIPELINE_TOKEN_BUDGET: tokens one pipeline's stage workers may
                                    # use in all (checked at node boundaries); 0 turns the budget off

This module holds only the model and the rule joining the two budget keys; :mod:`octipusd.settings`
mounts it as ``Settings.orchestrator`` and ``agent.pipelineTokenBudget``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_MAX_PIPELINE_STAGES",
    "DEFAULT_PIPELINE_TOKEN_BUDGET",
    "ORCHESTRATOR_ACCEPTED",
    "ORCHESTRATOR_FIRST_BOOT_ENV",
    "OrchestratorSettings",
    "adopt_older_budget",
]

#: Default of ``orchestrator.maxPipelineStages``: steps one pipeline template may have at most.
DEFAULT_MAX_PIPELINE_STAGES: Final = 10
#: Most ``orchestrator.maxPipelineStages`` may be set to.
MAX_PIPELINE_STAGES_CEILING: Final = 100
#: Default of ``agent.pipelineTokenBudget``: tokens (input + output) one pipeline's stage workers may
#: use in all; 0 turns the budget off.
DEFAULT_PIPELINE_TOKEN_BUDGET: Final = 2_000_000

#: The first-boot variable of the budget (the original's name), mapped to its dotted key.
ORCHESTRATOR_FIRST_BOOT_ENV: Final[dict[str, str]] = {"PIPELINE_TOKEN_BUDGET": "agent.pipelineTokenBudget"}

#: What each key accepts, for error messages.
ORCHESTRATOR_ACCEPTED: Final[dict[str, str]] = {
    "orchestrator.maxPipelineStages": f"a whole number of stages from 1 to {MAX_PIPELINE_STAGES_CEILING} "
    f"(default {DEFAULT_MAX_PIPELINE_STAGES})",
    "orchestrator.pipelineTokenBudget": "a whole number of tokens >= 0 (0: no budget); the older key of "
    "agent.pipelineTokenBudget, which wins when both are set",
    "agent.pipelineTokenBudget": f"a whole number of tokens >= 0 (0: no budget; default {DEFAULT_PIPELINE_TOKEN_BUDGET})",
}


class OrchestratorSettings(BaseModel):
    """``orchestrator``: pipeline limits.

    Attributes:
        maxPipelineStages: Steps one pipeline template may have at most.
        pipelineTokenBudget: The older key of ``agent.pipelineTokenBudget``, read only when that one
            is not set (:func:`adopt_older_budget`); None when not given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    maxPipelineStages: int = Field(default=DEFAULT_MAX_PIPELINE_STAGES, ge=1, le=MAX_PIPELINE_STAGES_CEILING)
    pipelineTokenBudget: int | None = Field(default=None, ge=0)


def adopt_older_budget(data: Any) -> Any:
    """Before validation of all settings: an ``orchestrator.pipelineTokenBudget`` given while
    ``agent.pipelineTokenBudget`` is not becomes the agent key (the agent key wins when both are)."""
    if not isinstance(data, Mapping):
        return data
    orchestrator, agent = data.get("orchestrator"), data.get("agent")
    if not isinstance(orchestrator, Mapping) or orchestrator.get("pipelineTokenBudget") is None:
        return data
    if agent is not None and not isinstance(agent, Mapping):
        return data
    agent = dict(agent or {})
    if agent.get("pipelineTokenBudget") is None:
        agent["pipelineTokenBudget"] = orchestrator["pipelineTokenBudget"]
    return {**data, "agent": agent}
