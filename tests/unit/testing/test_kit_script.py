"""Parsing of model-turn scripts (octipusd.testing.script)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from octipusd.testing.script import (
    EXHAUSTED_STEP,
    Script,
    StepError,
    StepUsage,
    TextBlock,
    ToolUseBlock,
    count_assistant_turns,
    load_script,
    parse_script,
)

SCRIPTS_DIR = Path(__file__).resolve().parents[3] / "octipusd" / "testing" / "scripts"


def test_parse_full_step() -> None:
    script = parse_script(
        {
            "steps": [
                {
                    "content": [
                        {"type": "text", "text": "hi"},
                        {"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}},
                        {"type": "tool_use", "name": "mcp__octipus__get_work_plan"},
                    ],
                    "usage": {"input_tokens": 7, "output_tokens": 3},
                    "delay_seconds": 0.25,
                    "stall_seconds": 1,
                },
                {"error": {"status": 529}},
            ]
        }
    )
    first, second = script.steps
    assert first.content == (
        TextBlock("hi"),
        ToolUseBlock("Bash", {"command": "echo hi"}),
        ToolUseBlock("mcp__octipus__get_work_plan", {}),
    )
    assert first.usage == StepUsage(input_tokens=7, output_tokens=3)
    assert first.delay_seconds == 0.25
    assert first.stall_seconds == 1.0
    assert first.stop_reason == "tool_use"
    assert second.content == ()
    assert second.error == StepError(529, "overloaded_error", "mock: overloaded_error")


def test_text_only_step_ends_turn_and_defaults() -> None:
    step = parse_script([{"content": [{"type": "text", "text": "done"}]}]).steps[0]
    assert step.stop_reason == "end_turn"
    assert step.usage == StepUsage()
    assert step.error is None


def test_step_for_past_end_is_exhausted() -> None:
    script = parse_script({"steps": [{"content": [{"type": "text", "text": "a"}]}]})
    assert script.step_for(0).content == (TextBlock("a"),)
    assert script.step_for(1) is EXHAUSTED_STEP
    assert EXHAUSTED_STEP.content == (TextBlock("(script exhausted)"),)
    assert EXHAUSTED_STEP.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ("nope", "expected a JSON object"),
        ({"stepz": []}, "unknown top-level key"),
        ({"steps": {}}, "steps: expected a list"),
        ({"steps": [5]}, "script step 0: expected a JSON object"),
        ({"steps": [{"content": []}]}, "script step 0: content: must hold"),
        ({"steps": [{"content": [{"type": "image"}]}]}, "script step 0: content[0].type"),
        (
            {"steps": [{"content": [{"type": "text", "text": "ok"}]}, {"content": [{"type": "text"}]}]},
            "script step 1: content[0].text",
        ),
        ({"steps": [{"content": [{"type": "tool_use", "input": {}}]}]}, "script step 0: content[0].name"),
        (
            {"steps": [{"content": [{"type": "tool_use", "name": "Bash", "input": []}]}]},
            "script step 0: content[0].input: expected a JSON object, got list",
        ),
        ({"steps": [{"content": [{"type": "text", "text": "a"}], "stall_second": 1}]}, "unknown key"),
        ({"steps": [{"content": [{"type": "text", "text": "a"}], "delay_seconds": -1}]}, "delay_seconds"),
        ({"steps": [{"content": [{"type": "text", "text": "a"}], "stall_seconds": "x"}]}, "stall_seconds"),
        ({"steps": [{"content": [{"type": "text", "text": "a"}], "usage": {"input_tokens": -2}}]}, "usage"),
        ({"steps": [{"error": {"status": 200}}]}, "error.status"),
        ({"steps": [{"error": {"status": 529, "times": 1}}]}, "content: must hold"),
        (
            {"steps": [{"error": {"status": 529, "times": 0}, "content": [{"type": "text", "text": "a"}]}]},
            "times",
        ),
    ],
)
def test_malformed_scripts_name_step_and_field(data: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match="script") as info:
        parse_script(data)
    assert fragment in str(info.value)


def test_load_script_reports_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_script(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"steps": [{"content": [{"type": "text"}]}]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"wrong\.json: script step 0: content\[0\]\.text"):
        load_script(wrong)


def test_count_assistant_turns_tolerates_system_entries() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        {"role": "system", "content": "agent listing"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "system", "content": "late entry"},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},  # same turn, split
        {"role": "user", "content": "next"},
        "garbage",
    ]
    assert count_assistant_turns(messages) == 2
    assert count_assistant_turns([]) == 0
    assert count_assistant_turns(None) == 0


def test_shipped_scripts_parse() -> None:
    paths = sorted(SCRIPTS_DIR.glob("*.json"))
    assert any(p.name == "demo.json" for p in paths)
    for path in paths:
        assert isinstance(load_script(path), Script)


def test_demo_script_shape() -> None:
    script = load_script(SCRIPTS_DIR / "demo.json")
    plan, bash, wrote, earlier = script.steps
    assert plan.content == (
        ToolUseBlock(
            "mcp__octipus__update_work_plan",
            {
                "plan": {
                    "title": "Demo plan",
                    "steps": [{"id": "s1", "title": "Say hello", "status": "in_progress"}],
                }
            },
        ),
    )
    assert bash.content == (
        ToolUseBlock(
            "Bash",
            {
                "command": 'bash -c "echo hello from octipus > hello.txt" && cat hello.txt',
                "description": "write hello.txt (a nested shell, so acceptEdits asks)",
            },
        ),
    )
    assert wrote.content == (TextBlock("Wrote hello.txt."),)
    assert earlier.content == (TextBlock("Earlier I wrote hello.txt."),)
