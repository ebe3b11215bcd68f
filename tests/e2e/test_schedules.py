"""Schedules through a real octipusd (issue 28 item 8, "a schedule fires once per slot across a restart").

* A two-second schedule (a 6-field cron, seconds first) of a prompt in a workspace: every slot the
  daemon is up for fires once (one new session, one run); the daemon stops for a few slots and
  restarts: exactly the latest slot missed while it was down fires, once, at start-up; stopped and
  restarted again with ``schedules.catchUpMissed`` off, no missed slot fires. The vendor is the stub
  CLI (the firing is under test, not the vendor; one stub turn per slot keeps it light). SQLite and
  PostgreSQL (the store's claim and the engine's timers on each).
* The real ``claude`` against the scripted model: a schedule added with ``octipusctl`` (a bad cron
  expression refused, naming the field) in a person's (attended) session runs an unattended turn: its
  Bash call that would ask is refused as "review required", no approval waits.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from octipusd.testing.harness import DaemonHarness
from octipusd.testing.stub_cli import CLAUDE_INIT, claude_result
from tests.e2e.conftest import Env
from tests.e2e.test_claude_run import WRITE_HELLO
from tests.e2e.test_pipelines_claude import CTL, ctl, database  # noqa: F401 - the fixture: SQLite, or PostgreSQL and its engine database
from tests.e2e.test_stream_framing import stub_binary

#: Every two seconds (seconds first).
EVERY_2_S = "*/2 * * * * *"
#: Seconds between two of its slots.
SLOT_S = 2
#: Seconds the daemon stays down (its start adds more): two slots pass unfired for certain, whatever
#: the stop and start take.
DOWN_S = 2 * SLOT_S + 0.5
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


def _restart(env: Env, place: dict[str, str], **extra: str) -> DaemonHarness:
    """A new daemon on the same folders and database (``place``) as ``env``'s first one."""
    binary = Path(env.daemon.env["OCTIPUS_CLAUDE_BINARY"])
    return DaemonHarness(env.daemon.root, env.model.base_url, binary, {**place, **extra}).start()


def test_a_schedule_fires_once_per_slot_across_a_restart(
    octipus: Callable[..., Env],
    tmp_path: Path,
    database: dict[str, str],  # noqa: F811 - the fixture imported above
) -> None:
    script = tmp_path / "stub.json"
    script.write_text(json.dumps([{"emit": CLAUDE_INIT}, {"emit": claude_result("scheduled turn done")}]))
    env = octipus({"steps": []}, extra_env=database, binary=stub_binary(tmp_path, script))
    api = Schedules(env.daemon)
    body = {"cron": EVERY_2_S, "workspace": str(env.daemon.workspace), "prompt": "the nightly check"}
    schedule = env.client.request("POST", "/schedules", json=body)["id"]
    api.wait_firings(schedule, lambda f: any(x["status"] == "started" for x in f), "a slot fired")
    stopping_at = datetime.now(UTC)
    env.daemon.stop()
    down_at = datetime.now(UTC)
    time.sleep(DOWN_S)  # slots pass while no daemon runs

    again = _restart(env, database)
    try:
        # the missed slot caught up at start-up, then two live slots
        api = Schedules(again)
        firings = api.wait_firings(
            schedule,
            lambda f: _settled(f) and sum(_slot(x) > down_at for x in f) >= 3,
            "the missed slot caught up, then live slots",
        )
    finally:
        again.stop()
    last_before = max(_slot(f) for f in firings if _slot(f) <= down_at)
    caught, *live = [f for f in firings if _slot(f) > down_at]
    assert caught["caughtUp"] and not any(f["caughtUp"] for f in firings if f is not caught), firings
    # an earlier missed slot did not fire: only the latest, once, then the live ones
    assert (_slot(caught) - last_before).total_seconds() >= 2 * SLOT_S, firings
    assert (_slot(live[0]) - _slot(caught)).total_seconds() <= 2 * SLOT_S, firings
    # every fired slot started one run, in a session of its own; a slot that fired as the daemon
    # stopped may have failed (its turn refused by the stopping daemon, or found starting at start-up:
    # never started twice)
    cut = [f for f in firings if f["status"] != "started"]
    assert all(
        f["status"] == "failed"
        and stopping_at.timestamp() - SLOT_S <= _slot(f).timestamp() <= down_at.timestamp()
        for f in cut
    ), firings
    assert len(cut) <= 1, firings
    started = [f for f in firings if f["status"] == "started"]
    sessions = {f["sessionId"] for f in started}
    assert all(f["runId"] for f in started) and len({f["runId"] for f in started}) == len(started) == len(
        sessions
    )

    # down again, back with catchUpMissed off: no slot missed while down fires
    down_at = datetime.now(UTC)
    time.sleep(DOWN_S)
    third = _restart(env, database, OCTIPUS_SCHEDULES__CATCHUPMISSED="false")
    up_at = datetime.now(UTC)  # the socket answers; the engine (and its timers) start after it
    try:
        api = Schedules(third)
        after = api.wait_firings(
            schedule, lambda f: _settled(f) and _slot(f[-1]) > up_at, "a live slot after the second restart"
        )
        client = third.client()
        client.request("POST", f"/schedules/{schedule}/pause")
        listed = client.request("GET", "/sessions", params={"limit": 1000})
    finally:
        third.stop()
    assert (up_at - down_at).total_seconds() >= 2 * SLOT_S  # two slots at least passed
    assert not [f for f in after if down_at < _slot(f) <= up_at], after
    assert not any(f["caughtUp"] for f in after if _slot(f) > down_at)
    fired = [f for f in after if f["status"] == "started"]
    sessions_made = {s["id"] for s in listed}  # a firing cut by the first stop may have made one
    assert {f["sessionId"] for f in fired} <= sessions_made, "one session (one run) per fired slot"
    assert len(sessions_made) - len({f["sessionId"] for f in fired}) <= len(cut)


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
    refused = subprocess.run(
        [CTL, "schedules", "add", "--cron", "0 7 * *", "--session", session, "--prompt", "x"],
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        refused.returncode == 2
        and "cron: '0 7 * *' is not a cron expression" in refused.stderr + refused.stdout
    )
    cron = "*/10 * * * * *"  # removed once its first slot fired
    added = ctl(
        env.daemon,
        "schedules",
        "add",
        "--cron",
        cron,
        "--session",
        session,
        "--prompt",
        "write hello.txt",
        "--json",
    )
    schedule = json.loads(added.stdout)["id"]
    api = Schedules(env.daemon)
    firing = api.wait_firings(schedule, _settled, "the slot fired")[0]
    assert schedule in ctl(env.daemon, "schedules", "list").stdout
    assert "removed" in ctl(env.daemon, "schedules", "remove", schedule).stdout
    assert (
        firing["status"] == "started" and firing["sessionId"] == session and firing["delivery"] == "turn"
    ), firing
    final = env.wait_final(firing["runId"])
    assert not (env.daemon.workspace / "hello.txt").exists()
    assert "review required" in (final["reason"] or "")
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": firing["runId"]}) == []
    assert any(e["kind"] == "review_required" for e in env.events(firing["runId"]))
    assert env.client.request("GET", f"/sessions/{session}")["attended"] is True
