"""Admission control through the real daemon (issue 13, part 4): runs past ``agent.maxConcurrentRuns``
or under ``agent.minFreeMemoryMiB`` wait in ``queued`` with the reason shown, start in order, and a
stop or a shutdown ends a queued run without ever spawning its vendor.

The vendor is the stub CLI speaking Claude's stream-json; each run waits for a release file named
after its vendor session, so the test decides when a run ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octipusd.store.repository import Store
from tests.e2e.conftest import Env
from tests.e2e.test_run_stop import INIT, _result
from tests.e2e.test_stream_framing import stub_binary

CAP_ONE = {"OCTIPUS_AGENT__MAXCONCURRENTRUNS": "1"}


def _start(octipus: Callable[..., Env], tmp_path: Path, extra_env: dict[str, str]) -> Env:
    """A daemon whose stub vendor answers once the test creates ``release-<vendor session id>``."""
    script = tmp_path / "stub.json"
    release = tmp_path / "release-$SESSION_ID"
    actions: list[dict[str, Any]] = [
        {"read_line": True},
        {"emit": INIT},
        {"wait_for_file": str(release)},
        {"emit": _result("done")},
        {"exit": 0},
    ]
    script.write_text(json.dumps(actions))
    return octipus({"steps": []}, extra_env=extra_env, binary=stub_binary(tmp_path, script))


def _running(env: Env, run_id: str) -> dict[str, Any]:
    return dict(
        env.wait(
            lambda: (r := env.run(run_id))["status"] == "running" and r["vendor_session_id"] and r,
            what=f"run {run_id} to be running",
        )
    )


def _queued(env: Env, run_id: str, needle: str) -> dict[str, Any]:
    run = dict(
        env.wait(
            lambda: (r := env.run(run_id))["status"] == "queued" and needle in (r["reason"] or "") and r,
            what=f"run {run_id} to be queued ({needle})",
        )
    )
    assert run["pid"] is None and run["started_at"] is None, run
    return run


def _release(tmp_path: Path, run: dict[str, Any]) -> None:
    (tmp_path / f"release-{run['vendor_session_id']}").write_text("go")


def _kinds(env: Env, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["kind"], e["data"]) for e in env.events(run_id)]


def test_past_the_cap_runs_queue_with_the_reason_and_start_in_order(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    env = _start(octipus, tmp_path, CAP_ONE)
    first = env.post(env.new_session(), "one")
    running = _running(env, first)
    second = env.post(env.new_session(), "two")
    third = env.post(env.new_session(), "three")
    for run_id in (second, third):
        queued = _queued(env, run_id, "agent.maxConcurrentRuns = 1")
        assert "1 run(s) working" in queued["reason"], queued
        shown = [d for k, d in _kinds(env, run_id) if k == "run_status" and d.get("reason")]
        assert shown and shown[0]["status"] == "queued" and "maxConcurrentRuns" in shown[0]["reason"]

    # the third run's arrival made admission check the queue again: both still wait for the first
    assert [env.run(r)["status"] for r in (second, third)] == ["queued", "queued"]
    _release(tmp_path, running)
    assert env.wait_final(first)["status"] == "succeeded"
    running = _running(env, second)
    assert running["reason"] is None, running  # the queue's reason is gone once it runs
    assert env.run(third)["status"] == "queued", "the third run overtook the cap"
    _release(tmp_path, running)
    assert env.wait_final(second)["status"] == "succeeded"
    _release(tmp_path, _running(env, third))
    finals = [env.wait_final(run_id) for run_id in (first, second, third)]
    assert [f["status"] for f in finals] == ["succeeded"] * 3, finals
    starts = [f["started_at"] for f in finals]
    assert starts == sorted(starts), f"the runs did not start in the order they were posted: {starts}"
    admitted = [d for k, d in _kinds(env, second) if k == "notice" and "queued_seconds" in d]
    assert len(admitted) == 1 and "in the queue" in admitted[0]["message"], admitted


def test_a_stopped_queued_run_is_cancelled_without_a_vendor_process(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    env = _start(octipus, tmp_path, CAP_ONE)
    first = env.post(env.new_session(), "one")
    running = _running(env, first)
    session = env.new_session()
    second = env.post(session, "two")
    _queued(env, second, "maxConcurrentRuns")

    stopped = env.client.request("POST", f"/runs/{second}/stop", json={"reason": "stopped by the test"})
    assert stopped["status"] == "cancelled" and stopped["reason"] == "stopped by the test", stopped
    assert stopped["pid"] is None and stopped["started_at"] is None and stopped["exit_code"] is None
    statuses = [d["status"] for k, d in _kinds(env, second) if k == "run_status"]
    assert "running" not in statuses and statuses[-1] == "cancelled", statuses
    # the session takes its next turn, which queues behind the first run and then runs
    third = env.post(session, "three")
    _queued(env, third, "maxConcurrentRuns")
    _release(tmp_path, running)
    assert env.wait_final(first)["status"] == "succeeded"
    _release(tmp_path, _running(env, third))
    assert env.wait_final(third)["status"] == "succeeded"
    assert env.run(second)["vendor_session_id"] is None, "a vendor was started for the stopped run"


def test_a_daemon_shutdown_ends_queued_runs_cleanly(octipus: Callable[..., Env], tmp_path: Path) -> None:
    env = _start(octipus, tmp_path, CAP_ONE)
    first = env.post(env.new_session(), "one")
    _running(env, first)
    second = env.post(env.new_session(), "two")
    _queued(env, second, "maxConcurrentRuns")

    assert env.daemon.stop() == 0, env.daemon.log()
    store = Store.open(f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}")
    try:
        for run_id in (first, second):
            stored = store.get_run(run_id)
            assert stored.status == "interrupted" and "SIGTERM" in (stored.reason or ""), stored
        assert store.get_run(second).pid is None and store.get_run(second).started_at is None
    finally:
        store.close()


def test_under_the_memory_floor_a_run_queues_with_the_memory_reason(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """The real psutil reading: no machine here has 16 TiB available."""
    env = _start(octipus, tmp_path, {"OCTIPUS_AGENT__MINFREEMEMORYMIB": str(16 * 1024 * 1024)})
    run = env.post(env.new_session(), "one")
    queued = _queued(env, run, "agent.minFreeMemoryMiB = 16777216")
    assert "MiB available" in queued["reason"], queued
    stopped = env.client.request("POST", f"/runs/{run}/stop", json={"reason": "stopped by the test"})
    assert stopped["status"] == "cancelled" and stopped["pid"] is None, stopped


def test_a_run_awaiting_approval_holds_no_slot(octipus: Callable[..., Env], tmp_path: Path) -> None:
    """At a cap of 1, a run waiting for a person does not keep the next run queued; once answered
    it goes on at once (over the cap for a while), and a new run queues until fewer work."""
    script = tmp_path / "stub.json"
    ask = {
        "type": "control_request",
        "request_id": "perm-1",
        "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "make deploy"}},
    }
    actions: list[dict[str, Any]] = [
        {"read_line": True},
        {"emit": INIT},
        {"emit": ask},
        {"read_line": True},
        {"wait_for_file": str(tmp_path / "release-$SESSION_ID")},
        {"emit": _result("done")},
        {"exit": 0},
    ]
    script.write_text(json.dumps(actions))
    env = octipus({"steps": []}, extra_env=CAP_ONE, binary=stub_binary(tmp_path, script))
    first = env.post(env.new_session(), "one")
    first_approval = env.wait_approval(first)
    assert env.run(first)["status"] == "awaiting_approval"
    second = env.post(env.new_session(), "two")
    second_approval = env.wait_approval(second)  # admitted and asking: the first held no slot
    assert env.run(second)["pid"] is not None

    env.answer(first_approval["id"], "approve")
    env.answer(second_approval["id"], "approve")
    for run_id in (first, second):
        env.wait(lambda r=run_id: env.run(r)["status"] == "running", what=f"run {run_id} to go on")
    third = env.post(env.new_session(), "three")
    _queued(env, third, "2 run(s) working")
    for run_id in (first, second):
        _release(tmp_path, env.run(run_id))
        assert env.wait_final(run_id)["status"] == "succeeded"
    assert env.wait_approval(third)["run_id"] == third
