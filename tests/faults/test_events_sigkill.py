"""SIGKILL of octipusd during a burst of events: every event a client saw is in the store afterwards.

Issue 13's guarantee for the batched event path: an event is committed before any follower sees
it, so killing the daemon in the middle of three concurrent bursts (the stub CLI printing as fast as
it can) loses nothing a client was shown. The real daemon on SQLite, restarted on the same folder.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

from octipusd.ctl.client import DaemonUnavailableError
from octipusd.testing.harness import DaemonHarness, write_python_stub
from octipusd.testing.stub_cli import CLAUDE_INIT, SCRIPT_ENV

UNUSED_MODEL = "http://127.0.0.1:9"
RUNS = 3
#: Events each stub prints; far more than are seen before the kill.
BURST = 20_000
#: Burst events each follower must have seen before the daemon is killed.
SEEN_PER_RUN = 300

INIT = CLAUDE_INIT


def _follow(daemon: DaemonHarness, run_id: str, seen: list[dict[str, Any]]) -> None:
    client = daemon.client()
    try:
        for event in client.stream(run_id):
            seen.append(event)
    except DaemonUnavailableError:
        pass  # the daemon was killed: what was seen so far stands
    finally:
        client.close()


def test_every_event_a_client_saw_before_a_sigkill_is_stored(
    tmp_path: Path, daemons: list[DaemonHarness]
) -> None:
    script = tmp_path / "burst.json"
    script.write_text(json.dumps([{"read_line": True}, {"emit": INIT}, {"emit_burst": {"count": BURST}}]))
    stub = write_python_stub(
        tmp_path / "bin" / "claude", "octipusd.testing.stub_cli", {SCRIPT_ENV: str(script)}
    )
    root = tmp_path / "octipus"
    first = DaemonHarness(root, UNUSED_MODEL, stub)
    daemons.append(first)
    first.start()
    client = first.client()
    run_ids = []
    for _ in range(RUNS):
        session = client.request("POST", "/sessions", json={"workspace": str(first.workspace)})["id"]
        run_ids.append(client.request("POST", f"/sessions/{session}/turns", json={"prompt": "go"})["id"])
    client.close()
    seen: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    followers = [threading.Thread(target=_follow, args=(first, r, seen[r]), daemon=True) for r in run_ids]
    for follower in followers:
        follower.start()
    first.wait_until(
        lambda: all(sum(1 for e in list(s) if e["kind"] == "text") >= SEEN_PER_RUN for s in seen.values()),
        120,
        "every follower to see its run's burst",
    )
    first.stop(signal.SIGKILL)
    for follower in followers:
        follower.join(timeout=30)
    assert all(not f.is_alive() for f in followers), "a follower kept streaming from a killed daemon"
    assert all(seen.values()), seen.keys()

    again = DaemonHarness(root, UNUSED_MODEL, stub)
    daemons.append(again)
    again.start()
    client = again.client()
    try:
        for run_id, events in seen.items():
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "a follower saw a gap"
            stored = {
                e["seq"]: e
                for e in client.request("GET", f"/runs/{run_id}/events", params={"limit": 100_000})
            }
            missing = [e["seq"] for e in events if stored.get(e["seq"]) != e]
            assert not missing, f"run {run_id}: {len(missing)} events a client saw are not stored as seen"
            bursts = [e for e in events if e["kind"] == "text"]
            assert bursts, "the follower saw none of the burst"
            run = client.request("GET", f"/runs/{run_id}")
            assert run["status"] == "interrupted", run  # the restarted daemon ended its predecessor's runs
    finally:
        client.close()
