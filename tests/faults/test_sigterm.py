"""SIGTERM to octipusd during a run: the run is interrupted and nothing of it survives."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil

from octipusd.runner.process import run_processes
from octipusd.store.repository import Store
from octipusd.testing.harness import DaemonHarness
from tests.e2e.conftest import Env


def test_sigterm_interrupts_the_run_and_leaves_no_process(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    command = "(sleep 300 & echo $! > bg.pid); echo started > started.txt; sleep 120"
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
                {"content": [{"type": "text", "text": "never reached"}]},
            ]
        }
    )
    session = env.new_session()
    run = env.post(session, "start something long")
    approval = env.wait_approval(run)
    env.answer(approval["id"], "approve")
    workspace = env.daemon.workspace
    env.wait(
        lambda: (workspace / "bg.pid").exists() and (workspace / "started.txt").exists(), 60, "the command"
    )
    vendor_pid = env.run(run)["pid"]
    background = int((workspace / "bg.pid").read_text().strip())
    assert psutil.pid_exists(background) and psutil.pid_exists(vendor_pid)

    assert env.daemon.stop() == 0, env.daemon.log()

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (gone(background) and gone(vendor_pid)):
        time.sleep(0.05)
    assert gone(vendor_pid), "the claude process survived SIGTERM of the daemon"
    assert gone(background), "a background grandchild started by the agent survived"
    assert [p for p in run_processes(run) if not gone(p.pid)] == []

    store = Store.open(f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}")
    try:
        stored = store.get_run(run)
        assert stored.status == "interrupted"
        assert "SIGTERM" in (stored.reason or "")
        vendor_id = stored.vendor_session_id
    finally:
        store.close()

    # the vendor confirmed its session before the interruption: the next turn continues it
    with DaemonHarness(env.daemon.root, env.model.base_url) as again:
        client = again.client()
        follow = client.request("POST", f"/sessions/{session}/turns", json={"prompt": "go on"})["id"]
        for _event in client.stream(follow):
            pass
        final = client.request("GET", f"/runs/{follow}")
        assert final["status"] == "succeeded", final
        assert final["resumed"] is True and final["vendor_session_id"] == vendor_id
