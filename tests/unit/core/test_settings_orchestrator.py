"""Pipeline limits: ``orchestrator.maxPipelineStages`` and ``agent.pipelineTokenBudget`` (env
``PIPELINE_TOKEN_BUDGET``, older key ``orchestrator.pipelineTokenBudget``; issue 27)."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.errors import ConfigError
from octipusd.settings import Settings, load_settings


def _load(tmp_path: Path, toml: str = "", **env: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(toml, encoding="utf-8")
    return load_settings(config, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **env})


def test_defaults(tmp_path: Path) -> None:
    s = _load(tmp_path)
    assert (s.orchestrator.maxPipelineStages, s.agent.pipelineTokenBudget) == (10, 2_000_000)


def test_keys_from_the_file_and_the_environment(tmp_path: Path) -> None:
    s = _load(tmp_path, "[orchestrator]\nmaxPipelineStages = 4\n[agent]\npipelineTokenBudget = 0\n")
    assert (s.orchestrator.maxPipelineStages, s.agent.pipelineTokenBudget) == (4, 0)
    assert _load(tmp_path, PIPELINE_TOKEN_BUDGET="500").agent.pipelineTokenBudget == 500
    assert (
        _load(
            tmp_path, OCTIPUS_AGENT__PIPELINETOKENBUDGET="7", PIPELINE_TOKEN_BUDGET="500"
        ).agent.pipelineTokenBudget
        == 7
    )
    assert _load(tmp_path, OCTIPUS_ORCHESTRATOR__MAXPIPELINESTAGES="3").orchestrator.maxPipelineStages == 3


def test_the_older_budget_key_is_read_when_the_agent_key_is_not_set(tmp_path: Path) -> None:
    assert _load(tmp_path, "[orchestrator]\npipelineTokenBudget = 1234\n").agent.pipelineTokenBudget == 1234
    both = "[orchestrator]\npipelineTokenBudget = 1234\n[agent]\npipelineTokenBudget = 99\n"
    assert _load(tmp_path, both).agent.pipelineTokenBudget == 99
    assert _load(tmp_path, OCTIPUS_ORCHESTRATOR__PIPELINETOKENBUDGET="55").agent.pipelineTokenBudget == 55


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "[orchestrator]\nmaxPipelineStages = 0\n",
            "orchestrator.maxPipelineStages: Input should be greater than or equal to 1",
        ),
        (
            "[orchestrator]\nmaxPipelineStages = 101\n",
            "orchestrator.maxPipelineStages: Input should be less than or equal to 100",
        ),
        (
            "[agent]\npipelineTokenBudget = -1\n",
            "agent.pipelineTokenBudget: Input should be greater than or equal to 0",
        ),
        ("[orchestrator]\nmaxStages = 3\n", "orchestrator.maxStages: unknown setting"),
    ],
)
def test_a_bad_value_names_the_key(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, toml)
    assert message in caught.value.message
