"""Runtime rules that need no process: result outcomes, resume decisions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from octipusd.adapter import ResultEvent
from octipusd.runtime.outcome import result_failure
from octipusd.runtime.sessions import changed_parts, fingerprint, plan_resume
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
        tools=[{"name": "a"}],
    )
    assert plan_resume(None, fp, tmp_path, "new").resume is False
    same = plan_resume(_stored(tmp_path, fp), fp, tmp_path, "new")
    assert same.resume and same.vendor_session_id == "vid"
    changed = plan_resume(_stored(tmp_path, "other"), fp, tmp_path, "new")
    assert not changed.resume and changed.vendor_session_id == "new" and "changed" in (changed.notice or "")
    moved = plan_resume(_stored(tmp_path / "gone", fp), fp, tmp_path, "new")
    assert not moved.resume and "moved" in (moved.notice or "")


def _schema(description: str = "Read a file.", **properties: object) -> dict[str, object]:
    return {
        "name": "read_file",
        "description": description,
        "input_schema": {"type": "object", "properties": properties or {"path": {"type": "string"}}},
        "read_only": True,
    }


def _root_fp(tools: list[dict[str, object]]) -> str:
    return fingerprint(
        adapter="codex",
        model="m",
        permission_mode="workspace",
        workspace=Path("/w"),
        instructions=None,
        tools=tools,
    )


def test_a_root_fingerprint_covers_each_tool_schema_in_canonical_form(tmp_path: Path) -> None:
    other = {
        "name": "shell__run",
        "description": "Run.",
        "input_schema": {"type": "object"},
        "read_only": False,
    }
    reference = _root_fp([_schema(), other])
    # neither the order of the tools nor the order of keys inside a schema matters
    reordered = {**_schema(), "input_schema": {"properties": {"path": {"type": "string"}}, "type": "object"}}
    assert _root_fp([other, reordered]) == reference
    changes = {
        "description": _root_fp([_schema("Read a file, fast."), other]),
        "input schema": _root_fp([_schema(path={"type": "string"}, limit={"type": "integer"}), other]),
        "read-only hint": _root_fp([{**_schema(), "read_only": False}, other]),
        "a tool less": _root_fp([_schema()]),
    }
    for what, changed in changes.items():
        assert changed != reference, what
        assert changed_parts(reference, changed) == ["tools"], what
        plan = plan_resume(_stored(tmp_path, reference), changed, tmp_path, "new")
        assert not plan.resume and plan.vendor_session_id == "new", what
        assert plan.notice == "the tool schemas changed; starting a new vendor conversation", what


def test_a_changed_fingerprint_names_what_changed(tmp_path: Path) -> None:
    reference = _root_fp([_schema()])
    other = fingerprint(
        adapter="codex",
        model="other",
        permission_mode="plan",
        workspace=Path("/w"),
        instructions=None,
        tools=[_schema()],
    )
    assert changed_parts(reference, other) == ["model", "permission_mode"]
    notice = plan_resume(_stored(tmp_path, reference), other, tmp_path, "new").notice
    assert notice == "the model and the permission or plan mode changed; starting a new vendor conversation"
    # a record saved before fingerprints named their parts (one 64-hex digest) starts cold once
    assert changed_parts("f" * 64, reference) is None
    legacy = plan_resume(_stored(tmp_path, "f" * 64), reference, tmp_path, "new")
    assert not legacy.resume and "launch settings changed" in (legacy.notice or "")
