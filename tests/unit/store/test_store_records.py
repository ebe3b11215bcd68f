"""Records and status enums."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from octipusd.store import ApprovalStatus, RunStatus, WorkPlan


def test_terminal_statuses() -> None:
    assert {s for s in RunStatus if s.terminal} == {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.INTERRUPTED,
        RunStatus.CANCELLED,
    }
    assert not RunStatus.AWAITING_APPROVAL.terminal
    assert RunStatus("awaiting_approval") is RunStatus.AWAITING_APPROVAL
    assert str(RunStatus.QUEUED) == "queued"


def test_approval_statuses_are_the_public_names() -> None:
    assert [s.value for s in ApprovalStatus] == ["pending", "approved", "denied", "expired", "cancelled"]


def test_records_are_frozen() -> None:
    plan = WorkPlan(session_id="s", plan={"a": 1}, updated_at=datetime.now(UTC))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.session_id = "other"  # type: ignore[misc]
