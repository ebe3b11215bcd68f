"""The evidence gates of a stage (FACTS.md §6 "Evidence gates"): a verdict from the attempt's counters."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from octipusd.pipelines.evidence import EvidenceVerdict, check_evidence
from octipusd.pipelines.templates import Step


@dataclass(frozen=True)
class Counters:
    changed_files: int | None = None
    commands_run: int | None = None
    disk_changed: bool | None = None


ARTIFACTS = Step("build", "coding", produces_artifacts=True)
COMMANDS = Step("test", "coding", runs_commands=True)
READ_ONLY = Step("review", "review", read_only=True)


@pytest.mark.parametrize(
    ("step", "counters", "verdict"),
    [
        (ARTIFACTS, Counters(changed_files=2), EvidenceVerdict(True)),
        (
            ARTIFACTS,
            Counters(changed_files=0),
            EvidenceVerdict(
                False,
                "the stage must produce artifacts but changed no files (producesArtifacts)",
                ("producesArtifacts",),
            ),
        ),
        (
            ARTIFACTS,
            Counters(changed_files=0, disk_changed=False),
            EvidenceVerdict(
                False,
                "the stage must produce artifacts but changed no files (producesArtifacts)",
                ("producesArtifacts",),
            ),
        ),
        (ARTIFACTS, Counters(changed_files=0, disk_changed=True), EvidenceVerdict(True)),
        (ARTIFACTS, Counters(disk_changed=False), EvidenceVerdict(True, unknown=("producesArtifacts",))),
        (COMMANDS, Counters(commands_run=1), EvidenceVerdict(True)),
        (
            COMMANDS,
            Counters(commands_run=0, changed_files=3),
            EvidenceVerdict(
                False, "the stage must run commands but ran none (runsCommands)", ("runsCommands",)
            ),
        ),
        (COMMANDS, Counters(), EvidenceVerdict(True, unknown=("runsCommands",))),
        (READ_ONLY, Counters(disk_changed=False, changed_files=0), EvidenceVerdict(True)),
        (
            READ_ONLY,
            Counters(disk_changed=True, changed_files=0),
            EvidenceVerdict(False, "the stage is read-only but the disk changed (readOnly)", ("readOnly",)),
        ),
        (READ_ONLY, Counters(disk_changed=False, changed_files=4), EvidenceVerdict(True)),
        (
            READ_ONLY,
            Counters(changed_files=4),
            EvidenceVerdict(
                False, "the stage is read-only but it changed 4 file(s) (readOnly)", ("readOnly",)
            ),
        ),
        (READ_ONLY, Counters(), EvidenceVerdict(True, unknown=("readOnly",))),
        (
            Step("plain", "x"),
            Counters(changed_files=0, commands_run=0, disk_changed=True),
            EvidenceVerdict(True),
        ),
    ],
)
def test_each_gate(step: Step, counters: Counters, verdict: EvidenceVerdict) -> None:
    assert check_evidence(step, counters) == verdict


def test_every_failed_gate_is_named_and_unknown_ones_are_listed() -> None:
    step = Step("all", "x", produces_artifacts=True, runs_commands=True, read_only=True)
    assert check_evidence(
        step, Counters(changed_files=0, commands_run=0, disk_changed=True)
    ) == EvidenceVerdict(
        False,
        "the stage must run commands but ran none (runsCommands); the stage is read-only but the disk changed (readOnly)",
        ("runsCommands", "readOnly"),
    )
    assert check_evidence(step, Counters(commands_run=0)) == EvidenceVerdict(
        False,
        "the stage must run commands but ran none (runsCommands)",
        ("runsCommands",),
        ("producesArtifacts", "readOnly"),
    )
