"""Child agents on the real claude binary: delegation and per-role, per-task session resume.

Seed 003 "Plans, feedback and delegation" and "Resuming child sessions per role and task". The
root agent (real ``claude``, scripted model) calls ``mcp__octipus__spawn_child``; each child is
another real ``claude`` process whose scripted conversation is picked by a marker in its brief
(``KID-...``). A root turn that must start a new vendor conversation gets its own marker in its
prompt (``ROOT-...``). Markers are chosen so that none is a substring of another.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from octipusd.testing.script import parse_script
from tests.e2e.conftest import Env

ADAPTER = "claude-code"
CONTEXT_SUFFIX = "\n[octipus run context]"


# ------------------------------------------------------------------ script pieces


def _spawn(**arguments: Any) -> dict[str, Any]:
    """A model turn calling ``spawn_child`` once."""
    return {"content": [{"type": "tool_use", "name": "mcp__octipus__spawn_child", "input": arguments}]}


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]}


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _conversation(match: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": match, "steps": list(steps)}


# ------------------------------------------------------------------ daemon helpers


def _start(octipus: Callable[..., Env], script: dict[str, Any]) -> Env:
    """A daemon whose policy lets agents delegate without asking (spawn_child defaults to ASK)."""
    env = octipus(script)
    for rule in ("spawn_child", "collect_children"):
        env.client.request("POST", "/rules", json={"level": "allow", "rule": rule})
    return env


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def _runs(env: Env, session: str) -> list[dict[str, Any]]:
    found = env.client.request("GET", "/runs", params={"session_id": session, "limit": 1000})
    return sorted(found, key=lambda r: r["turn_index"])


def _children(env: Env, session: str, parent: str | None = None) -> list[dict[str, Any]]:
    """Child runs of the session (of ``parent`` only, when given), oldest first."""
    return [
        r
        for r in _runs(env, session)
        if r["parent_run_id"] is not None and (parent is None or r["parent_run_id"] == parent)
    ]


def _child(env: Env, session: str, brief: str) -> dict[str, Any]:
    """The one child run spawned with ``brief``."""
    found = [r for r in _children(env, session) if r["prompt"] == brief]
    assert len(found) == 1, f"expected one child run with brief {brief!r}: {_children(env, session)}"
    return found[0]


def _argv(env: Env, run_id: str) -> list[str]:
    """The vendor argv of the run's (last) launch."""
    running = [d for d in _kinds(env.events(run_id), "run_status") if d["status"] == "running"]
    assert running, f"run {run_id} never reported running"
    return list(running[-1]["argv"])


def _notices(env: Env, run_id: str) -> list[str]:
    return [str(d.get("message", "")) for d in _kinds(env.events(run_id), "notice")]


def _records(env: Env, session: str) -> dict[str, dict[str, Any]]:
    """The session's current vendor records by key."""
    found = env.client.request("GET", f"/sessions/{session}/vendor-sessions")
    return {r["key"]: r for r in found if r["current"]}


def _tool_results(env: Env, run_id: str) -> list[dict[str, Any]]:
    return _kinds(env.events(run_id), "tool_result")


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON a ``spawn_child`` / ``collect_children`` tool result carries (run context cut off)."""
    assert not result["is_error"], result
    return dict(json.loads(str(result["content"]).split(CONTEXT_SUFFIX)[0]))


def _assert_cold(env: Env, run: dict[str, Any]) -> None:
    assert run["resumed"] is False, run
    assert f"--session-id={run['vendor_session_id']}" in _argv(env, run["id"])
    assert not any(a.startswith("--resume") for a in _argv(env, run["id"]))


def _assert_resumed(env: Env, run: dict[str, Any], vendor_session_id: str) -> None:
    assert run["resumed"] is True and run["vendor_session_id"] == vendor_session_id, run
    argv = _argv(env, run["id"])
    assert f"--resume={vendor_session_id}" in argv, argv
    assert not any(a.startswith("--session-id") for a in argv), argv


def _requests(env: Env, conversation: int, step: int | None = None) -> list[Any]:
    return [
        r
        for r in env.model.message_requests
        if r.conversation == conversation and (step is None or r.step == step)
    ]


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (e.g. a run id in the MCP config path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(
                (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")),
                "",
            )
        except OSError:
            continue
        if text in cmdline and "zombie" not in state:
            found.append(int(entry.name))
    return found


# ------------------------------------------------------------------ tests


def test_keyed_child_resumes_across_root_turns_and_role_scopes_the_key(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-A1 first brief: remember the word PELICAN."
    brief2 = "KID-A2 second brief: which word did you remember?"
    review = "KID-R1 review brief for the same task id."
    env = _start(
        octipus,
        {
            # the root is resumed in turn 2, so its steps continue where turn 1 stopped
            "steps": [
                _spawn(role="coding", brief=brief1, resumeKey="t1"),
                _text("root turn one done"),
                _spawn(role="coding", brief=brief2, resumeKey="t1"),
                _spawn(role="review", brief=review, resumeKey="t1"),
                _text("root turn two done"),
            ],
            "conversations": [
                _conversation(
                    "KID-A1", _text("alpha one: PELICAN noted"), _text("alpha two: it was PELICAN")
                ),
                _conversation("KID-A2", _text("alpha cold: no earlier context")),
                _conversation("KID-R1", _text("review done")),
            ],
        },
    )
    session = env.new_session()
    key = f"{ADAPTER}::root>coding:t1"

    root1 = env.post(session, "Delegate the first part of the task.")
    assert env.wait_final(root1)["status"] == "succeeded"
    first = _child(env, session, brief1)
    assert first["status"] == "succeeded", first
    assert first["parent_run_id"] == root1 and first["role"] == "coding"
    assert first["resume_key"] == "root>coding:t1"
    _assert_cold(env, first)
    vendor_id = first["vendor_session_id"]
    records = _records(env, session)
    assert records[key]["vendor_session_id"] == vendor_id, records
    summary = _summary(_tool_results(env, root1)[0])
    assert summary["childRunId"] == first["id"] and summary["resumed"] is False
    assert summary["result"] == "alpha one: PELICAN noted" and summary["status"] == "succeeded"
    assert summary["resumeKey"] == "root>coding:t1"

    root2 = env.post(session, "Continue the task.")
    final2 = env.wait_final(root2)
    assert final2["status"] == "succeeded", final2
    assert final2["resumed"] is True, "precondition: the root turn 2 resumes (its script continues)"

    # same role, same key, a different brief: the child continues its vendor conversation
    second = _child(env, session, brief2)
    assert second["status"] == "succeeded", second
    _assert_resumed(env, second, vendor_id)
    assert second["resume_key"] == "root>coding:t1"
    assert second["result_text"] == "alpha two: it was PELICAN"
    request = _requests(env, conversation=0, step=1)
    assert len(request) == 1, [(r.conversation, r.step) for r in env.model.message_requests]
    history = json.dumps(request[0].body["messages"])
    assert brief1 in history and "alpha one: PELICAN noted" in history and brief2 in history
    assert not _requests(env, conversation=1), "the resumed child was served as a cold one"

    # the same task id under another role is another key: cold, with a record of its own
    reviewer = _child(env, session, review)
    assert reviewer["status"] == "succeeded", reviewer
    _assert_cold(env, reviewer)
    assert reviewer["vendor_session_id"] != vendor_id
    assert reviewer["resume_key"] == "root>review:t1"
    records = _records(env, session)
    assert records[f"{ADAPTER}::root>review:t1"]["vendor_session_id"] == reviewer["vendor_session_id"]
    assert records[key]["vendor_session_id"] == vendor_id
    summaries = [_summary(r) for r in _tool_results(env, root2)]
    assert [(s["role"], s["resumed"]) for s in summaries] == [("coding", True), ("review", False)]


def test_child_without_key_is_fresh_every_time(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-B1 count the files."
    brief2 = "KID-B2 count them again."
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief=brief1),
                _text("root one done"),
                _spawn(role="coding", brief=brief2),
                _text("root two done"),
            ],
            "conversations": [
                _conversation("KID-B1", _text("b one")),
                _conversation("KID-B2", _text("b two")),
            ],
        },
    )
    session = env.new_session()
    for prompt in ("First part.", "Second part."):
        assert env.wait_final(env.post(session, prompt))["status"] == "succeeded"
    first, second = _child(env, session, brief1), _child(env, session, brief2)
    for child in (first, second):
        assert child["status"] == "succeeded", child
        assert child["resume_key"] is None
        _assert_cold(env, child)
    assert first["vendor_session_id"] != second["vendor_session_id"]
    request = _requests(env, conversation=1, step=0)
    assert len(request) == 1 and brief1 not in json.dumps(request[0].body["messages"])
    assert list(_records(env, session)) == [ADAPTER], "an unkeyed child saved a vendor record"


def test_bad_resume_key_is_refused_without_a_child_run(octipus: Callable[..., Env]) -> None:
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief="KID-C1 never runs", resumeKey="bad/key"),
                _spawn(role="coding", brief="KID-C2 never runs", resumeKey="k" * 201),
                _text("root gave up"),
            ],
            "conversations": [_conversation("KID-C", _text("a child ran"))],
        },
    )
    session = env.new_session()
    root = env.post(session, "Delegate with odd keys.")
    assert env.wait_final(root)["status"] == "succeeded"
    results = _tool_results(env, root)
    assert len(results) == 2, results
    for result in results:
        assert result["is_error"] is True, result
        content = str(result["content"])
        assert "resumeKey" in content, content
        # the rule, as seed 003 states it: 1 to 200 letters, digits, ., _, : or -
        assert "1 to 200" in content and "letters, digits" in content, content
    assert _children(env, session) == []
    assert not _kinds(env.events(root), "child_spawned")
    assert not _requests(env, conversation=0)


def test_changed_fingerprint_starts_the_keyed_child_cold(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-D1 first brief."
    brief2 = "KID-D2 second brief."
    env = _start(
        octipus,
        {
            "steps": [_spawn(role="coding", brief=brief1, resumeKey="t1"), _text("root one done")],
            "conversations": [
                # the root starts cold too after the change: its turn-2 prompt carries this marker
                _conversation(
                    "ROOT-D2", _spawn(role="coding", brief=brief2, resumeKey="t1"), _text("root two done")
                ),
                _conversation("KID-D1", _text("d one"), _text("d resumed")),
                _conversation("KID-D2", _text("d cold")),
            ],
        },
    )
    env.client.request(
        "POST", "/models", json={"name": "kids", "adapter": ADAPTER, "permission_mode": "workspace"}
    )
    session = env.new_session(model_row="kids")
    key = f"{ADAPTER}::root>coding:t1"
    assert env.wait_final(env.post(session, "First part."))["status"] == "succeeded"
    first = _child(env, session, brief1)
    assert first["status"] == "succeeded", first
    assert _records(env, session)[key]["vendor_session_id"] == first["vendor_session_id"]

    env.client.request("PATCH", "/models/kids", json={"permission_mode": "default"})
    assert env.wait_final(env.post(session, "ROOT-D2 second part."))["status"] == "succeeded"
    second = _child(env, session, brief2)
    assert second["status"] == "succeeded", second
    _assert_cold(env, second)
    assert "--permission-mode=default" in _argv(env, second["id"])
    assert second["vendor_session_id"] != first["vendor_session_id"]
    assert second["result_text"] == "d cold"
    assert not _requests(env, conversation=1, step=1), "the child resumed across a fingerprint change"
    assert any("changed" in n for n in _notices(env, second["id"])), _notices(env, second["id"])
    assert _records(env, session)[key]["vendor_session_id"] == second["vendor_session_id"]


def test_clear_drops_child_keys(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-E1 first brief."
    brief2 = "KID-E2 after the clear."
    env = _start(
        octipus,
        {
            "steps": [_spawn(role="coding", brief=brief1, resumeKey="t1"), _text("root one done")],
            "conversations": [
                _conversation(
                    "ROOT-E2", _spawn(role="coding", brief=brief2, resumeKey="t1"), _text("root two done")
                ),
                _conversation("KID-E1", _text("e one"), _text("e resumed")),
                _conversation("KID-E2", _text("e cold")),
            ],
        },
    )
    session = env.new_session()
    key = f"{ADAPTER}::root>coding:t1"
    assert env.wait_final(env.post(session, "First part."))["status"] == "succeeded"
    first = _child(env, session, brief1)
    assert _records(env, session)[key]["vendor_session_id"] == first["vendor_session_id"]

    cleared = env.wait_final(env.post(session, "/clear"))
    assert cleared["status"] == "succeeded", cleared
    assert _records(env, session) == {}, "/clear left vendor records in use"

    assert env.wait_final(env.post(session, "ROOT-E2 start over."))["status"] == "succeeded"
    second = _child(env, session, brief2)
    assert second["status"] == "succeeded", second
    _assert_cold(env, second)
    assert second["vendor_session_id"] != first["vendor_session_id"]
    assert second["result_text"] == "e cold"
    assert _records(env, session)[key]["vendor_session_id"] == second["vendor_session_id"]


def test_token_budget_failure_drops_the_key(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-F1 set the task up."
    brief2 = "KID-F2 on a tight budget."
    brief3 = "KID-F3 after the budget failure."
    big = {"input_tokens": 500, "output_tokens": 50}
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief=brief1, resumeKey="t1"),
                _spawn(role="coding", brief=brief2, resumeKey="t1", tokenBudget=100),
                _spawn(role="coding", brief=brief3, resumeKey="t1"),
                _text("root done"),
            ],
            "conversations": [
                _conversation(
                    "KID-F1", _text("f one"), _text("f spent", usage=big), _text("f resumed again")
                ),
                _conversation("KID-F3", _text("f cold")),
            ],
        },
    )
    session = env.new_session()
    key = f"{ADAPTER}::root>coding:t1"
    root = env.post(session, "Delegate three times.")
    assert env.wait_final(root)["status"] == "succeeded"
    first, spent, third = (_child(env, session, b) for b in (brief1, brief2, brief3))
    assert first["status"] == "succeeded", first

    # the budget child resumed the task session, went over budget and failed
    _assert_resumed(env, spent, first["vendor_session_id"])
    assert spent["status"] == "failed", spent
    assert "token budget" in (spent["reason"] or ""), spent
    assert any("token budget exceeded" in n and "dropped" in n for n in _notices(env, spent["id"]))
    summary = _summary(_tool_results(env, root)[1])
    assert summary["status"] == "failed" and "token budget" in (summary["reason"] or "")

    # its key was dropped: the next child on the task starts cold and saves its own session
    assert third["status"] == "succeeded", third
    _assert_cold(env, third)
    assert third["vendor_session_id"] != first["vendor_session_id"]
    assert third["result_text"] == "f cold"
    assert _records(env, session)[key]["vendor_session_id"] == third["vendor_session_id"]


def test_turn_limit_failure_still_saves_the_confirmed_session(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-G1 read the plan, then report."
    brief2 = "KID-G2 finish the report."
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief=brief1, resumeKey="t1", maxTurns=1),
                _spawn(role="coding", brief=brief2, resumeKey="t1"),
                _text("root done"),
            ],
            "conversations": [
                # on resume Claude 2.1.197 adds a synthetic "Continue from where you left off." exchange
                # after the turn-limit stop, so the resumed request may hold 1 or 2 assistant turns
                _conversation("KID-G1", _tool("get_work_plan"), *[_text("g finished after the limit")] * 2),
                _conversation("KID-G2", _text("g cold")),
            ],
        },
    )
    session = env.new_session()
    key = f"{ADAPTER}::root>coding:t1"
    root = env.post(session, "Delegate with a turn limit.")
    assert env.wait_final(root)["status"] == "succeeded"
    limited = _child(env, session, brief1)
    assert limited["status"] == "failed", limited
    assert "error_max_turns" in (limited["reason"] or ""), limited
    assert "--max-turns=1" in _argv(env, limited["id"])
    results = _kinds(env.events(limited["id"]), "result")
    assert results and results[-1]["subtype"] == "error_max_turns", results

    # the vendor confirmed the session, so the key was kept and the next child resumes it
    following = _child(env, session, brief2)
    assert following["status"] == "succeeded", following
    _assert_resumed(env, following, limited["vendor_session_id"])
    assert following["result_text"] == "g finished after the limit"
    resumed = [r for r in _requests(env, conversation=0) if r.step >= 1]
    assert len(resumed) == 1, [(r.conversation, r.step) for r in env.model.message_requests]
    history = json.dumps(resumed[0].body["messages"])
    assert "mcp__octipus__get_work_plan" in history and brief1 in history and brief2 in history
    assert _records(env, session)[key]["vendor_session_id"] == limited["vendor_session_id"]


def test_concurrent_children_with_one_key_do_not_share_a_conversation(octipus: Callable[..., Env]) -> None:
    brief1 = "KID-H1 the slow holder of the key."
    brief2 = "KID-H2 the second child on the same key."
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief=brief1, resumeKey="t1", detach=True),
                _spawn(role="coding", brief=brief2, resumeKey="t1", detach=True),
                _tool("collect_children"),
                _text("root collected both"),
            ],
            "conversations": [
                # still thinking while the second child starts, so both hold live vendor processes
                _conversation("KID-H1", _text("h one", delay_seconds=3)),
                _conversation("KID-H2", _text("h two")),
            ],
        },
    )
    session = env.new_session()
    key = f"{ADAPTER}::root>coding:t1"
    root = env.post(session, "Fan out two children on one task.")
    assert env.wait_final(root)["status"] == "succeeded"
    holder, second = _child(env, session, brief1), _child(env, session, brief2)
    for child in (holder, second):
        assert child["status"] == "succeeded", child
        _assert_cold(env, child)
    assert holder["vendor_session_id"] != second["vendor_session_id"]
    overlap = datetime.fromisoformat(second["started_at"]) < datetime.fromisoformat(holder["ended_at"])
    assert overlap, "precondition: the two children ran at the same time"
    assert any("another live agent holds resume key root>coding:t1" in n for n in _notices(env, second["id"]))
    assert not any("another live agent" in n for n in _notices(env, holder["id"]))
    # only the holder saved its session under the key
    assert _records(env, session)[key]["vendor_session_id"] == holder["vendor_session_id"]

    results = _tool_results(env, root)
    assert [_summary(r)["detached"] for r in results[:2]] == [True, True]
    collected = _summary(results[2])
    assert sorted(c["childRunId"] for c in collected["children"]) == sorted([holder["id"], second["id"]])
    assert collected["pending"] == []


def test_grandchild_keys_follow_the_parent_lineage(octipus: Callable[..., Env]) -> None:
    unkeyed_parent = "KID-IP general work without a key."
    unkeyed_grand = "KID-IG coding under an unkeyed parent."
    keyed_parent = "KID-JP general work with key p1."
    keyed_grand = "KID-JG coding under a keyed parent."
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="general", brief=unkeyed_parent),
                _spawn(role="general", brief=keyed_parent, resumeKey="p1"),
                _text("root done"),
            ],
            "conversations": [
                _conversation(
                    "KID-IP", _spawn(role="coding", brief=unkeyed_grand, resumeKey="x"), _text("ip done")
                ),
                _conversation("KID-IG", _text("ig done")),
                _conversation(
                    "KID-JP", _spawn(role="coding", brief=keyed_grand, resumeKey="x"), _text("jp done")
                ),
                _conversation("KID-JG", _text("jg done")),
            ],
        },
    )
    session = env.new_session()
    root = env.post(session, "Delegate to two generalists.")
    assert env.wait_final(root)["status"] == "succeeded"
    runs = {b: _child(env, session, b) for b in (unkeyed_parent, unkeyed_grand, keyed_parent, keyed_grand)}
    for run in runs.values():
        assert run["status"] == "succeeded", run
    assert runs[unkeyed_grand]["parent_run_id"] == runs[unkeyed_parent]["id"]
    assert runs[keyed_grand]["parent_run_id"] == runs[keyed_parent]["id"]

    # an unkeyed non-root parent has no stable identity: its child's key is ignored
    grand = runs[unkeyed_grand]
    assert runs[unkeyed_parent]["resume_key"] is None and grand["resume_key"] is None
    _assert_cold(env, grand)
    assert any("resumeKey ignored" in n for n in _notices(env, grand["id"])), _notices(env, grand["id"])

    # a keyed parent scopes its child's key by its own lineage
    assert runs[keyed_parent]["resume_key"] == "root>general:p1"
    assert runs[keyed_grand]["resume_key"] == "root>general:p1>coding:x"
    _assert_cold(env, runs[keyed_grand])
    records = _records(env, session)
    assert (
        records[f"{ADAPTER}::root>general:p1"]["vendor_session_id"] == runs[keyed_parent]["vendor_session_id"]
    )
    grand_key = f"{ADAPTER}::root>general:p1>coding:x"
    assert records[grand_key]["vendor_session_id"] == runs[keyed_grand]["vendor_session_id"]
    assert sorted(records) == sorted([ADAPTER, f"{ADAPTER}::root>general:p1", grand_key]), records


def test_stopping_the_root_cancels_its_running_child(octipus: Callable[..., Env], tmp_path: Path) -> None:
    brief = "KID-K a long task."
    # were the root to get the cancelled child's answer, it would write this file next: Claude
    # approves a Write inside the workspace itself (acceptEdits), so only a prompt stop prevents it
    after_stop = tmp_path / "d0" / "workspace" / "after-stop.txt"
    write = {"type": "tool_use", "name": "Write", "input": {"file_path": str(after_stop), "content": "late"}}
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="coding", brief=brief, resumeKey="t1"),
                {"content": [write]},
                _text("root done"),
            ],
            # the child's model answers long after the test ends (the server interrupts the wait)
            "conversations": [_conversation("KID-K", _text("k done", delay_seconds=60))],
        },
    )
    session = env.new_session()
    root = env.post(session, "Delegate a long task.")
    child = env.wait(
        lambda: next(
            (c for c in _children(env, session) if (c["status"] == "running" and c["pid"]) or c["ended_at"]),
            None,
        ),
        what="the child run to be running",
    )
    assert child["status"] == "running", child
    env.wait(lambda: _requests(env, conversation=0), what="the child's model request")
    assert _processes_mentioning(child["id"]), "precondition: the child's vendor process is alive"

    stopped = env.client.request("POST", f"/runs/{root}/stop", json={"reason": "test stop"})
    assert stopped["id"] == root
    final_root = env.wait_final(root)
    final_child = env.wait_final(child["id"])
    assert final_root["status"] == "cancelled", final_root
    assert final_child["status"] == "cancelled", final_child
    assert env.daemon.workspace / "after-stop.txt" == after_stop
    assert not after_stop.exists(), "the stopped root went on acting after the stop"
    assert not [u for u in _kinds(env.events(root), "tool_use") if u.get("name") == "Write"]
    assert final_child["result_text"] is None
    assert _processes_mentioning(child["id"]) == [], "the cancelled child left a vendor process"
    assert _processes_mentioning(root) == [], "the stopped root left a vendor process"
    assert child["pid"] is not None
    try:
        os.kill(child["pid"], 0)
    except ProcessLookupError:
        pass
    else:  # the pid may be reused, but not by a process mentioning the child's run
        assert child["id"] not in Path(f"/proc/{child['pid']}/cmdline").read_text(errors="replace")
    # a child stopped by a cancel keeps the session the vendor confirmed (seed 003)
    key = f"{ADAPTER}::root>coding:t1"
    assert _records(env, session)[key]["vendor_session_id"] == child["vendor_session_id"]


def test_a_childs_approval_reaches_whoever_follows_the_root_turn(octipus: Callable[..., Env]) -> None:
    """A child's approval is published on its root run too (with ``child_run_id``), so the person
    following the turn sees it and can answer it; answering lets the child go on."""
    bash = {
        "type": "tool_use",
        "name": "Bash",
        "input": {
            "command": 'bash -c "printf child-was-approved"',
            "description": "x",
        },  # a nested shell asks
    }
    env = _start(
        octipus,
        {
            "steps": [_spawn(role="coding", brief="KID-APPROVE run one command."), _text("root done")],
            "conversations": [_conversation("KID-APPROVE", {"content": [bash]}, _text("child done"))],
        },
    )
    session = env.new_session()
    root = env.post(session, "Delegate a command.")
    mirrored = env.wait(
        lambda: _kinds(env.events(root), "approval_requested"), what="the child's approval on the root run"
    )
    [request] = mirrored
    [child] = _children(env, session)
    assert request["child_run_id"] == child["id"] and request["tool_id"] == "cli-native:Bash"
    env.answer(request["approval_id"], "approve")
    assert env.wait_final(root)["status"] == "succeeded"
    final_child = env.wait_final(child["id"])
    assert final_child["status"] == "succeeded" and final_child["result_text"] == "child done"
    results = [r for r in _kinds(env.events(child["id"]), "tool_result") if "child-was-approved" in str(r)]
    assert results, "the approved command did not run"


def test_steer_child_reaches_the_childs_live_turn(octipus: Callable[..., Env]) -> None:
    """issue 15 item 1: a parent steers its own running child (``steer_child``): the guidance reaches
    the child's live turn (Claude takes it as one more turn of the same process); an id that is not a
    running child of this parent is refused, naming the field."""
    brief = "KID-S a child that is told more while it works."
    guidance = "also mention the pelican"
    child_steps = [_text("child first answer", stall_seconds=6), _text("child answer with the pelican")]
    first = {
        "steps": [
            _spawn(role="general", brief=brief, detach=True),
            _tool("collect_children", timeoutSeconds=3),  # the child is still thinking: pending
        ],
        "conversations": [_conversation("KID-S", *child_steps)],
    }
    env = _start(octipus, first)
    session = env.new_session()
    root = env.post(session, "Delegate, then steer the child.")
    child = env.wait(lambda: _children(env, session), 30, "the child run")[0]
    env.model.script = parse_script(
        {
            "steps": [
                *first["steps"],
                _tool("steer_child", childRunId="not-a-child", text=guidance),
                _tool("steer_child", childRunId=child["id"], text=guidance),
                _tool("collect_children"),
                _text("root done"),
            ],
            "conversations": first["conversations"],
        }
    )
    assert env.wait_final(root, timeout=90)["status"] == "succeeded"
    results = _tool_results(env, root)
    refused, steered, collected = results[2], results[3], results[4]
    assert refused["is_error"] and "childRunId: not-a-child is not a child of this run" in refused["content"]
    assert _summary(steered) == {"childRunId": child["id"], "delivery": "stdin"}
    (summary,) = _summary(collected)["children"]
    assert summary["result"] == "child first answer\n\nchild answer with the pelican", summary
    child_events = env.events(child["id"])
    assert [d["text"] for d in _kinds(child_events, "steering_delivered")] == [guidance]
    child_requests = env.model.requests_in(0)
    assert guidance in json.dumps(child_requests[-1].body["messages"])
    # the child's guidance is the child's: the session's history holds none of it
    history = env.client.request("GET", f"/sessions/{session}/messages")
    assert not any(guidance in m["text"] for m in history)


def test_a_parent_that_ends_without_collecting_gets_one_follow_up_to_merge(
    octipus: Callable[..., Env],
) -> None:
    """issue 15 item 1: a CLI that finishes without collecting its detached children gets one bounded
    follow-up turn to collect and merge their results; what it still leaves is cancelled."""
    done_brief = "KID-U1 a child that answers at once."
    slow_brief = "KID-U2 a child still thinking when its parent is done."
    script = {
        "steps": [
            _spawn(role="general", brief=done_brief, detach=True),
            _spawn(role="general", brief=slow_brief, detach=True),
            _text("root done without collecting", delay_seconds=2),
            # the follow-up: it collects only the first child; the second is then cancelled
            _tool("collect_children", childRunIds=["__FIRST__"]),
            _text("root merged the first child"),
        ],
        "conversations": [
            _conversation("KID-U1", _text("u one result")),
            _conversation("KID-U2", _text("u two never", stall_seconds=60)),
        ],
    }
    env = _start(octipus, script)
    session = env.new_session()
    root = env.post(session, "Fan out and forget.")
    first = env.wait(
        lambda: [c for c in _children(env, session) if c["prompt"] == done_brief], 30, "child 1"
    )[0]
    # put the first child's id into the follow-up's collect call (the script cannot know it before)
    env.model.script = parse_script(json.loads(json.dumps(script).replace("__FIRST__", first["id"])))
    final = env.wait_final(root, timeout=90)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "root done without collecting\n\nroot merged the first child", final
    notices = _notices(env, root)
    assert any(
        "follow-up invocation 1 of at most 2" in n and "2 uncollected children" in n for n in notices
    ), notices
    prompts = [json.dumps(r.body["messages"]) for r in env.model.requests_in(None)]
    assert "You finished without collecting 2 child agents" in prompts[-1]
    collected = _summary(_tool_results(env, root)[-1])
    assert [c["childRunId"] for c in collected["children"]] == [first["id"]]
    assert collected["children"][0]["result"] == "u one result"
    slow = _child(env, session, slow_brief)
    assert slow["status"] == "cancelled", slow
    assert len([n for n in notices if "follow-up invocation" in n]) == 1  # one bounded follow-up
