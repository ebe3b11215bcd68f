"""Notifications end to end (issue 16, item 3): a real octipusd with notify.urls pointing at a
loopback Apprise ``json://`` receiver, the real claude binary against the scripted model, and
``octipusctl notify test`` as a subprocess.

* a relayed ``cli-native:Bash`` approval reaches the receiver with the tool and the command, and
  none of the run's secrets (the bridge capability); a run that ends notifies too;
* a dead target (a closed port, and one that never answers) does not change the run: it ends
  succeeded with its file written while the notifier is still retrying, and the failure is in health;
  the daemon then stops cleanly, abandoning the pending sends;
* ``octipusctl notify test``: 0 and delivered; 1 and a message naming the dead target; with no
  URLs, the error naming ``notify.urls``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.e2e.conftest import Env
from tests.unit.notify.receiver import Receiver, closed_port

CTL = str(Path(sys.executable).parent / "octipusctl")
COMMAND = "bash -c 'echo notified > notified.txt'"
SCRIPT = {
    "steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": COMMAND}}]},
        {"content": [{"type": "text", "text": "done"}]},
    ]
}
TEXT_ONLY = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def notify_env(*urls: str, **more: Any) -> dict[str, str]:
    env = {"OCTIPUS_NOTIFY__URLS": json.dumps(list(urls))}
    env |= {f"OCTIPUS_NOTIFY__{key.upper()}": str(value) for key, value in more.items()}
    return env


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=180)


def capabilities(env: Env, run_id: str) -> list[str]:
    """The bridge capabilities in the run's launch files (they exist while the run is live)."""
    found: list[str] = []
    for path in (env.daemon.root / "data").rglob(f"runs/{run_id}/*.json"):
        found += re.findall(r"Bearer ([A-Za-z0-9_\-]{20,})", path.read_text())
    return found


def notifier(env: Env) -> dict[str, Any]:
    return dict(env.client.request("GET", "/health")["notifier"])


def test_an_approval_notifies_with_the_tool_and_command_and_no_secret(
    octipus: Callable[..., Env], receiver: Receiver
) -> None:
    env = octipus(SCRIPT, extra_env=notify_env(receiver.url("/hook"), finishedAfterSeconds=0))
    session = env.new_session(title="notify e2e")
    run_id = env.post(session, "write the file")
    approval = env.wait_approval(run_id)
    [asked] = receiver.wait_for(1)
    secrets = capabilities(env, run_id)
    assert secrets, "the run's bridge capability should be in its launch files while it waits"
    assert asked["title"] == "Octipus: approval needed for cli-native:Bash", asked
    message = asked["message"]
    assert f"Run {run_id} in session 'notify e2e' asks to use cli-native:Bash." in message, message
    assert "echo notified > notified.txt" in message, message
    # the link: the page's own address and the approval's path, never the page's token
    origin = env.client.request("GET", "/health")["web"]["origin"]
    links = [line.removeprefix("Open: ") for line in message.splitlines() if line.startswith("Open: ")]
    assert links == [f"{origin}/approvals/{approval['id']}"], links
    page_token = parse_qs(urlsplit(env.daemon.web_url()).query)["token"][0]
    text = json.dumps(asked)
    assert page_token not in text
    assert not any(secret in text for secret in secrets)
    assert "token" not in text.lower() and "capability" not in text.lower()

    env.answer(approval["id"], "approve")
    assert env.wait_final(run_id)["status"] == "succeeded"
    assert (env.daemon.workspace / "notified.txt").exists()
    _, finished = receiver.wait_for(2)
    assert finished["title"] == "Octipus: run succeeded" and run_id in finished["message"]
    state = env.wait(lambda: (n := notifier(env))["sent"] == 2 and n, what="both sends counted")
    assert state["failed"] == 0 and state["targets"][0]["target"] == f"json://127.0.0.1:{receiver.port}"
    health = ctl(env, "health")
    assert f"notifications to json://127.0.0.1:{receiver.port}: 2 sent, 0 failed" in health.stdout, (
        health.stdout
    )


def test_a_dead_notifier_does_not_change_or_hold_up_the_run(octipus: Callable[..., Env]) -> None:
    silent = Receiver(hold=True)  # takes the connection, never answers while the run lives
    try:
        dead = f"json://127.0.0.1:{closed_port()}/hook/SECRETPATH123"
        env = octipus(
            SCRIPT,
            extra_env=notify_env(dead, silent.url(), attempts=5, backoffSeconds=600, sendTimeoutSeconds=120),
        )
        run_id = env.post(env.new_session(), "write the file")
        approval = env.wait_approval(run_id)
        # the dead target failed its first send and waits to retry; the silent one holds its send
        failing = env.wait(
            lambda: (n := notifier(env))["targets"][0]["retries"] == 1 and n,
            what="the dead target's first failure",
        )
        silent.wait_posts(1)
        assert failing["last_error"] and failing["last_error"].startswith("json://127.0.0.1:")
        assert "SECRETPATH123" not in json.dumps(failing)
        env.answer(approval["id"], "approve")
        final = env.wait_final(run_id)
        assert final["status"] == "succeeded", final
        assert (env.daemon.workspace / "notified.txt").exists()
        # the run ended while the notifier was still at its first notification on both targets
        state = notifier(env)
        dead_target, silent_target = state["targets"]
        assert (dead_target["sent"], dead_target["failed"], dead_target["retries"]) == (0, 0, 1), dead_target
        assert (silent_target["sent"], silent_target["failed"]) == (0, 0) and silent.received == []
        assert state["running"] and state["last_error"] == failing["last_error"]
        # and the daemon stops cleanly, abandoning the sends after its short grace
        assert env.daemon.stop() == 0, env.daemon.log()
        assert "Traceback" not in env.daemon.log()
    finally:
        silent.close()


def test_octipusctl_notify_test(octipus: Callable[..., Env], receiver: Receiver) -> None:
    env = octipus(TEXT_ONLY, extra_env=notify_env(receiver.url("/hook")))
    sent = ctl(env, "notify", "test")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert f"json://127.0.0.1:{receiver.port}" in sent.stdout and "sent" in sent.stdout
    [body] = receiver.wait_for(1)
    assert body["title"] == "Octipus: test notification"

    dead = f"json://127.0.0.1:{closed_port()}/hook"
    env2 = octipus(TEXT_ONLY, extra_env=notify_env(receiver.url("/hook"), dead))
    mixed = ctl(env2, "notify", "test")
    assert mixed.returncode == 1, mixed.stdout + mixed.stderr
    assert "1 of 2 notification target(s) failed" in mixed.stderr, mixed.stderr
    assert f"json://127.0.0.1:{dead.split(':')[2].split('/')[0]}" in mixed.stdout and "failed" in mixed.stdout
    receiver.wait_for(2)

    env3 = octipus(TEXT_ONLY)
    none = ctl(env3, "notify", "test")
    assert none.returncode == 1 and "set notify.urls" in none.stderr, none.stderr
    assert "notifications: off (set notify.urls)" in ctl(env3, "health").stdout
