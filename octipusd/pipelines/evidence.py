"""The evidence gates of a stage (FACTS.md §6 "Evidence gates"): a pure verdict from its counters.

A stage that claims work must show it:

* ``producesArtifacts``: 0 changed files fails the stage, unless the disk snapshot shows changes
  (a CLI worker may write files its own counters do not see);
* ``runsCommands``: 0 commands run fails it;
* ``readOnly``: a changed disk fails it, even on a CLI worker (with no snapshot, files the worker
  reports changed count);
* a counter that is missing (None) is unknown, and that gate passes.

The walker calls :func:`check_evidence` with the stage attempt's counters (``StageOutcome.counters``)
and treats a failed verdict as a contract failure of the same stage (retried with its reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from octipusd.pipelines.templates import Step

__all__ = ["EvidenceCounters", "EvidenceVerdict", "check_evidence"]


class EvidenceCounters(Protocol):
    """What a stage attempt measured (``runtime.stage_runs.StageCounters`` has these); None: unknown."""

    @property
    def changed_files(self) -> int | None: ...

    @property
    def commands_run(self) -> int | None: ...

    @property
    def disk_changed(self) -> bool | None: ...


@dataclass(frozen=True)
class EvidenceVerdict:
    """The gates' verdict.

    Attributes:
        passed: Every gate the step sets passed (or could not be checked).
        reason: Why it failed, one sentence per failed gate (None when it passed); handed to the retry.
        failed: The failed gates by their template flag (``producesArtifacts``, ...).
        unknown: The gates that passed only because their counter was missing.
    """

    passed: bool
    reason: str | None = None
    failed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


def check_evidence(step: Step, counters: EvidenceCounters) -> EvidenceVerdict:
    """The verdict of ``step``'s evidence gates on ``counters`` (see the module docstring)."""
    failed: list[tuple[str, str]] = []
    unknown: list[str] = []
    files, commands, disk = counters.changed_files, counters.commands_run, counters.disk_changed
    if step.produces_artifacts:
        if files is None:
            unknown.append("producesArtifacts")
        elif files == 0 and disk is not True:
            failed.append(("producesArtifacts", "the stage must produce artifacts but changed no files"))
    if step.runs_commands:
        if commands is None:
            unknown.append("runsCommands")
        elif commands == 0:
            failed.append(("runsCommands", "the stage must run commands but ran none"))
    if step.read_only:
        changed = disk if disk is not None else (None if files is None else files > 0)
        if changed is None:
            unknown.append("readOnly")
        elif changed:
            what = "the disk changed" if disk is not None else f"it changed {files} file(s)"
            failed.append(("readOnly", f"the stage is read-only but {what}"))
    if not failed:
        return EvidenceVerdict(True, unknown=tuple(unknown))
    reason = "; ".join(f"{text} ({flag})" for flag, text in failed)
    return EvidenceVerdict(False, reason, tuple(f for f, _ in failed), tuple(unknown))
