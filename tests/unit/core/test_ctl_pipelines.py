"""``octipusctl pipelines run --param KEY=VALUE`` passes each value as written (a new user's
``--param verifyCommand=true`` was read as JSON and refused as "not a string")."""

from __future__ import annotations

import pytest
import typer

from octipusd.ctl.pipeline_cmds import parse_params


def test_param_values_are_the_text_after_the_first_equals_sign() -> None:
    given = ["verifyCommand=true", "goal=123", "cmd=ls *.txt", "expr=a=b", "empty="]
    assert parse_params(given) == {
        "verifyCommand": "true",
        "goal": "123",
        "cmd": "ls *.txt",
        "expr": "a=b",
        "empty": "",
    }


@pytest.mark.parametrize("bad", ["goal", "=value"])
def test_a_param_without_a_key_or_an_equals_sign_is_refused_naming_the_form(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises((SystemExit, typer.Exit)):
        parse_params([bad])
    assert "is not KEY=VALUE" in capsys.readouterr().err
