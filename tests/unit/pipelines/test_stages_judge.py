"""A stage's answer without a handoff still meets its evidence gates (a new user's pipeline completed
with every item done though two of its three files were never written)."""

from __future__ import annotations

from octipusd.pipelines.stages import StageResult, judge
from octipusd.pipelines.templates import parse_template
from octipusd.runtime.stage_runs import StageCounters

TEMPLATE = parse_template(
    {
        "name": "t",
        "steps": [
            {
                "name": "implement",
                "topic": "code",
                "toolIds": [],
                "producesArtifacts": True,
                "runsCommands": True,
            }
        ],
    }
)
STEP = TEMPLATE.steps[0]


def test_an_answer_without_a_handoff_that_changed_nothing_fails_its_evidence_gate() -> None:
    nothing = StageCounters(changed_files=0, commands_run=0, disk_changed=False)
    judged = judge(STEP, "(script exhausted)", nothing)
    assert judged.outcome is StageResult.CONTRACT_FAILURE
    assert judged.error is not None and judged.error.startswith("evidence gate failed")


def test_an_answer_without_a_handoff_that_did_the_work_passes_with_its_prose() -> None:
    worked = StageCounters(changed_files=1, commands_run=2, disk_changed=True)
    judged = judge(STEP, "wrote hello.txt", worked)
    assert judged.outcome is StageResult.OK and judged.output == "wrote hello.txt"
