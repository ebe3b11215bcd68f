"""Schedules through a real octipusd (issue 28 item 8, "a schedule fires once per slot across a restart").

* A two-second schedule (a 6-field cron, seconds first) of a prompt in a workspace: every slot the
  daemon is up for fires once (one new session, one run); the daemon stops for a few slots and
  restarts: exactly the latest slot missed while it was down fires, once, at start-up; stopped and
  restarted again with ``schedules.catchUpMissed`` off, no missed slot fires. The vendor is the stub
  CLI (the firing is under test, not the vendor; one stub turn per slot keeps it light).
* The real ``claude`` against the scripted model: a schedule's turn in a person's (attended) session
  is unattended: its Bash call that would ask is refused as "review required", no approval waits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from octipusd.testing.harness import DaemonHarness
from octipusd.testing.stub_cli import CLAUDE_INIT, claude_result
from tests.e2e.conftest import Env
from tests.e2e.test_claude_run import WRITE_HELLO
from tests.e2e.test_stream_framing import stub_binary

#: Every two seconds (seconds first).
EVERY_2_S = "*/2 * * * * *"
#: Seconds the daemon stays down: at least two slots pass unfired.
DOWN_S = 5
#: Seconds to wait for the slots under test.
WAIT_S = 60


def _slot(firing: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(firing["slotAt"])


def _settled(firings: list[dict[str, Any]]) -> bool:
    """Every firing has started its work (or failed to, or was skipped)."""
    return all(f["status"] not in ("claimed", "starting") for f in firings)


class Schedules:
    """One daemon's schedules, through its API."""

    def __init__(self, daemon: DaemonHarness) -> None:
        self.daemon = daemon
        self.client = daemon.client()

    def firings(self, schedule_id: str) -> list[dict[str, Any]]:
        doc = self.client.request("GET", f"/schedules/{schedule_id}")
        return sorted(doc["firings"], key=_slot)

    def wait_firings(
        self, schedule_id: str, check: Callable[[list[dict[str, Any]]], bool], what: str
    ) -> list[dict[str, Any]]:
        return list(
            self.daemon.wait_until(lambda: (f := self.firings(schedule_id)) and check(f) and f, WAIT_S, what)
        )


def _restart(env: Env, **extra: str) -> DaemonHarness:
    """A new daemon on the same folders (database, workspace) as ``env``'s first one."""
    binary = Path(env.daemon.env["OCTIPUS_CLAUDE_BINARY"])
    return DaemonHarness(env.daemon.root, env.model.base_url, binary, extra).start()


def test_a_schedule_fires_once_per_slot_across_a_restart(octipus: Callable[..., Env], tmp_path: Path) -> None:
    script = tmp_path / "stub.json"
    script.write_text(json.dumps([{"emit": CLAUDE_INIT}, {"emit": claude_result("scheduled turn done")}]))
    env = octipus({"steps": []}, binary=stub_binary(tmp_path, script))
    api = Schedules(env.daemon)
    body = {"cron": EVERY_2_S, "workspace": str(env.daemon.workspace), "prompt": "the nightly check"}
    schedule = env.client.request("POST", "/schedules", json=body)["id"]
    api.wait_firings(schedule, lambda f: sum(x["status"] == "started" for x in f) >= 2, "two slots fired")
    env.daemon.stop()
    time.sleep(DOWN_S)  # slots pass while no daemon runs

    again = _restart(env)
    try:
        api = Schedules(again)
        before = [f for f in api.firings(schedule) if not f["caughtUp"]]
        # wait for the caught-up slot and a live slot after it
        api_firings = api.wait_firings(
            schedule,
            lambda f: (
                _settled(f)
                and any(x["caughtUp"] for x in f)
                and _slot(f[-1]) > max(_slot(x) for x in f if x["caughtUp"])
            ),
            "the missed slot caught up, then a live slot",
        )
    finally:
        again.stop()
    caught = [f for f in api_firings if f["caughtUp"]]
    assert len(caught) == 1, api_firings
    last_before_stop = max(_slot(f) for f in before if _slot(f) < _slot(caught[0]))
    first_live_after = min(_slot(f) for f in api_firings if _slot(f) > _slot(caught[0]))
    missed = [f for f in api_firings if last_before_stop < _slot(f) < first_live_after]
    assert missed == caught, "only the latest missed slot fires, once"
    assert (first_live_after - last_before_stop).total_seconds() >= DOWN_S  # slots were missed
    # every fired slot started one run, in a session of its own
    assert all(f["status"] == "started" and f["runId"] for f in api_firings), api_firings
    sessions = {f["sessionId"] for f in api_firings}
    assert len({f["runId"] for f in api_firings}) == len(api_firings) == len(sessions)

    # down again, back with catchUpMissed off: no missed slot fires
    stopped_at = max(_slot(f) for f in api_firings)
    time.sleep(DOWN_S)
    third = _restart(env, OCTIPUS_SCHEDULES__CATCHUPMISSED="false")
    try:
        api = Schedules(third)
        after = api.wait_firings(
            schedule,
            lambda f: _settled(f) and _slot(f[-1]) > stopped_at,
            "a live slot after the second restart",
        )
        client = third.client()
        client.request("POST", f"/schedules/{schedule}/pause")
        listed = client.request("GET", "/sessions", params={"limit": 1000})
    finally:
        third.stop()
    newer = [f for f in after if _slot(f) > stopped_at]
    assert not any(f["caughtUp"] for f in newer), newer
    fired = [f for f in after if f["status"] == "started"]
    assert {s["id"] for s in listed} == {f["sessionId"] for f in fired}, (
        "one session (one run) per fired slot"
    )


def test_a_scheduled_turn_in_an_attended_session_is_unattended(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
                {"content": [{"type": "text", "text": "could not write"}]},
            ]
        }
    )
    session = env.new_session(permission_mode="default")  # a person's: attended
    second = (datetime.now().second + 3) % 60
    body = {"cron": f"{second} * * * * *", "session_id": session, "prompt": "write hello.txt"}
    schedule = env.client.request("POST", "/schedules", json=body)["id"]
    api = Schedules(env.daemon)
    (firing,) = api.wait_firings(schedule, _settled, "the slot fired")
    env.client.request("DELETE", f"/schedules/{schedule}")
    assert (
        firing["status"] == "started" and firing["sessionId"] == session and firing["delivery"] == "turn"
    ), firing
    final = env.wait_final(firing["runId"])
    assert not (env.daemon.workspace / "hello.txt").exists()
    assert "review required" in (final["reason"] or "")
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": firing["runId"]}) == []
    assert any(e["kind"] == "review_required" for e in env.events(firing["runId"]))
    assert env.client.request("GET", f"/sessions/{session}")["attended"] is True
