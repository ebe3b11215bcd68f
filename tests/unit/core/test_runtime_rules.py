"""Runtime rules that need no process: result outcomes, resume decisions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from octipusd.adapter import ResultEvent
from octipusd.runtime.outcome import result_failure
from octipusd.runtime.sessions import fingerprint, plan_resume
from octipusd.store.records import VendorSession


def test_result_subtypes_map_to_clear_reasons() -> None:
    turns = ResultEvent(raw=None, is_error=False, subtype="error_max_turns")
    assert result_failure(turns) == "the vendor stopped at its turn limit (error_max_turns)"
    missing = ResultEvent(
        raw=None,
        is_error=True,
        subtype="error_during_execution",
        errors=("No conversation found with session ID: x",),
    )
    assert (
        result_failure(missing)
        == "the vendor failed during execution: No conversation found with session ID: x"
    )
    api = ResultEvent(raw=None, is_error=True, subtype="success", text="API Error: 400 bad")
    assert result_failure(api) == "the vendor reported an error: API Error: 400 bad"


def _stored(cwd: Path, fp: str) -> VendorSession:
    now = datetime.now(UTC)
    return VendorSession(1, "s", "claude-code", "vid", fp, str(cwd), 0, now, now)


def test_resume_only_with_the_same_fingerprint_and_workspace(tmp_path: Path) -> None:
    fp = fingerprint(
        adapter="claude-code",
        model=None,
        permission_mode="workspace",
        workspace=tmp_path,
        instructions=None,
        tool_names=["a"],
    )
    assert plan_resume(None, fp, tmp_path, "new").resume is False
    same = plan_resume(_stored(tmp_path, fp), fp, tmp_path, "new")
    assert same.resume and same.vendor_session_id == "vid"
    changed = plan_resume(_stored(tmp_path, "other"), fp, tmp_path, "new")
    assert not changed.resume and changed.vendor_session_id == "new" and "changed" in (changed.notice or "")
    moved = plan_resume(_stored(tmp_path / "gone", fp), fp, tmp_path, "new")
    assert not moved.resume and "moved" in (moved.notice or "")
