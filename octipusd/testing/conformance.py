"""The adapter conformance suite: every vendor adapter, driven through a real octipusd.

A :class:`VendorKit` knows how to stand up one vendor offline: the scripted model server that
speaks its API, the configuration that points the real binary at it (written under the
daemon's HOME, the way a user's own login/configuration would be), and how that vendor's model
asks for a reply, an Octipus bridge tool and a native shell command. The suite functions
(:data:`SCENARIOS`) take a kit and a started :class:`Octipus` and assert what every adapter
must do: start, stream, bridge call, the bridge helper from the vendor's own shell, permission relay
(where the vendor has one), resume, the unknown-resume signal, usage, stop.

``tests/e2e/test_conformance.py`` runs every scenario for every kit against the pinned
binaries; ``scripts/conformance-latest`` runs the same against the newest published versions.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from octipusd.adapter_launch import BRIDGE_HELPER_NAME, BRIDGE_TOKEN_ENV, BRIDGE_URL_ENV
from octipusd.ctl.client import Client
from octipusd.runner.process import run_processes
from octipusd.store.repository import Store
from octipusd.testing.harness import DaemonHarness

TERMINAL = {"succeeded", "failed", "interrupted", "cancelled"}

#: A scripted model step in the kit's server format (``{"content": [...]}`` blocks).
Step = dict[str, Any]


class ModelServer(Protocol):
    """A running scripted model server."""

    @property
    def base_url(self) -> str:
        """Root URL on 127.0.0.1."""
        ...

    def conversation_texts(self) -> list[str]:
        """The whole JSON text of each model request received, in order (for history checks)."""
        ...

    def close(self) -> None:
        """Stop serving."""
        ...


class VendorKit(Protocol):
    """What the suite needs to know about one vendor.

    Attributes:
        adapter: Adapter registry name (``claude-code``, ``codex``, ``vibe``, ``antigravity``).
        relay: Whether the vendor relays its native permission requests to Octipus.
        resumes: Whether Octipus resumes the vendor's own session on a follow-up turn.
        reports_usage: Whether the vendor reports token usage (else it is estimated).
        sandbox_without_network: Whether the vendor runs its commands, approved ones included, in a
            sandbox of its own without network (Codex's ``workspace-write``).
    """

    adapter: str
    relay: bool
    resumes: bool
    reports_usage: bool
    sandbox_without_network: bool

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Start the vendor's scripted model server playing ``steps``."""
        ...

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Write the vendor's configuration under ``home``; return env for the daemon (binary path...)."""
        ...

    def text(self, text: str) -> Step:
        """A step where the model answers ``text`` and ends its turn."""
        ...

    def bridge_call(self, tool: str, arguments: Mapping[str, Any]) -> Step:
        """A step where the model calls the Octipus bridge tool ``tool``."""
        ...

    def shell(self, command: str) -> Step:
        """A step where the model runs ``command`` with the vendor's native shell tool."""
        ...

    def session_options(self) -> dict[str, Any]:
        """Extra fields for ``POST /v1/sessions`` (e.g. permission mode)."""
        ...


class Octipus:
    """A scripted model plus a real daemon, for one scenario."""

    def __init__(self, kit: VendorKit, root: Path, steps: list[Step]) -> None:
        self.kit = kit
        self.model = kit.start_model(steps)
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        extra = kit.daemon_env(home, self.model)
        self.daemon = DaemonHarness(root, self.model.base_url, extra_env=extra)
        self.client: Client = self.daemon.client()

    def start(self) -> Octipus:
        """Start the daemon."""
        self.daemon.start()
        return self

    def close(self) -> None:
        """Stop the daemon (SIGTERM) and the model."""
        self.daemon.stop()
        self.model.close()

    def new_session(self, **fields: Any) -> str:
        """Create a session for the kit's adapter in the daemon's workspace."""
        body = {
            "workspace": str(self.daemon.workspace),
            "adapter": self.kit.adapter,
            **self.kit.session_options(),
            **fields,
        }
        return str(self.client.request("POST", "/sessions", json=body)["id"])

    def post(self, session_id: str, prompt: str) -> str:
        """Post a turn; return the run id."""
        return str(
            self.client.request("POST", f"/sessions/{session_id}/turns", json={"prompt": prompt})["id"]
        )

    def run(self, run_id: str) -> dict[str, Any]:
        """The run record."""
        return dict(self.client.request("GET", f"/runs/{run_id}"))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every stored event of a run."""
        return list(self.client.request("GET", f"/runs/{run_id}/events", params={"limit": 100000}))

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll ``predicate`` every 50 ms until truthy; AssertionError with the daemon log on timeout."""
        return self.daemon.wait_until(predicate, timeout, what)

    def wait_final(self, run_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Wait for the run's terminal status and return the run."""
        return dict(
            self.wait(lambda: (r := self.run(run_id))["status"] in TERMINAL and r, timeout, f"run {run_id}")
        )

    def wait_approval(self, run_id: str, timeout: float = 90.0) -> dict[str, Any]:
        """Wait for a pending approval of the run."""

        def pending() -> Any:
            items = self.client.request("GET", "/approvals", params={"status": "pending", "run_id": run_id})
            return items[0] if items else None

        return dict(self.wait(pending, timeout, f"a pending approval of run {run_id}"))

    def answer(self, approval_id: str, decision: str) -> None:
        """Approve or deny."""
        self.client.request("POST", f"/approvals/{approval_id}", json={"decision": decision})

    def kinds(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        """The data of the run's events of one kind."""
        return [e["data"] for e in self.events(run_id) if e["kind"] == kind]


@contextlib.contextmanager
def octipus(kit: VendorKit, root: Path, steps: list[Step]) -> Iterator[Octipus]:
    """Start a scripted model and a daemon for ``kit``; stop both afterwards."""
    env = Octipus(kit, root, steps)
    try:
        yield env.start()
    finally:
        env.close()


# ------------------------------------------------------------------------------- scenarios


def start_and_stream(kit: VendorKit, root: Path) -> None:
    """A text reply streams as a text event and the run succeeds with the vendor's result."""
    with octipus(kit, root, [kit.text("conformance pong")]) as env:
        run = env.post(env.new_session(), "ping")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        texts = " ".join(str(d.get("text", "")) for d in env.kinds(run, "text"))
        assert "conformance pong" in texts or "conformance pong" in (final["result_text"] or "")


def bridge_call(kit: VendorKit, root: Path) -> None:
    """The model calls an Octipus tool through the run's bridge; it runs with the run's identity."""
    plan = {
        "plan": {"title": "conformance plan", "steps": [{"id": "s1", "title": "check", "status": "pending"}]}
    }
    with octipus(kit, root, [kit.bridge_call("update_work_plan", plan), kit.text("plan saved")]) as env:
        session = env.new_session()
        run = env.post(session, "save a plan")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        calls = env.kinds(run, "bridge_call")
        assert any(
            c.get("tool") == "update_work_plan" and c.get("event") == "tool_call_finished" for c in calls
        ), calls


def _capability(pid: int) -> str:
    """The bridge capability in a running vendor's environment (``/proc/PID/environ``), after
    checking that the helper's URL is there too and the capability is not on its command line."""
    environ = dict(
        item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item
    )
    assert environ.get(BRIDGE_URL_ENV.encode(), b"").startswith(b"http://127.0.0.1:"), sorted(environ)
    token = environ[BRIDGE_TOKEN_ENV.encode()].decode()
    assert len(token) >= 32
    return token


def _approve_all(env: Octipus, run: str, seen: list[dict[str, Any]], tokens: set[str]) -> dict[str, Any]:
    """Approve every approval the run raises until it ends; return the final run. While the vendor
    waits on an approval, its processes' command lines are checked for its capability."""

    def step() -> dict[str, Any] | None:
        record = env.run(run)
        if record["status"] in TERMINAL:
            return record
        for approval in env.client.request("GET", "/approvals", params={"status": "pending", "run_id": run}):
            if record.get("pid"):
                tokens.add(_capability(int(record["pid"])))
            for process in run_processes(run):
                argv: list[str] = []
                with contextlib.suppress(Exception):  # a process that just ended has no command line
                    argv = process.cmdline()
                assert not [t for t in tokens if t in " ".join(argv)], argv
            seen.append(approval)
            env.answer(approval["id"], "approve")
        return None

    return dict(env.wait(step, 180, f"run {run} to end, approving what it asks"))


def bridge_helper(kit: VendorKit, root: Path) -> None:
    """The vendor's own shell reaches the run's tools through ``octipus-bridge`` (seed 003: "If MCP is
    unavailable, use the run's provided bridge helper to call shell__run with the same JSON
    arguments"): it lists the tools and calls ``shell__run``, and the call goes through Octipus's
    policy (an approval), the journal and the bridge's events like an MCP call. The capability is in
    the vendor's environment only: never on a command line, in the stored events, the prompt dump or
    the daemon's log.

    The helper reaches the bridge on the loopback network. A vendor with a sandbox of its own may
    run even a command the person approved inside it, and that sandbox may hold no network at all
    (Codex's ``workspace-write``, app-server and exec alike: Octipus keeps it so), so a vendor whose
    kit says so (``sandbox_without_network``) runs its session in permission mode ``full``; the
    helper's call still goes through Octipus's own policy. A vendor without a relay runs in ``full``
    too (its own permissions would refuse the shell it runs the helper from)."""
    arguments = json.dumps({"command": "echo through-the-helper > helper.txt"})
    steps = [
        kit.shell(f"{BRIDGE_HELPER_NAME} list > tools.txt"),
        kit.shell(f"{BRIDGE_HELPER_NAME} call shell__run {shlex.quote(arguments)}"),
        kit.text("helper done"),
    ]
    with octipus(kit, root, steps) as env:
        full = kit.sandbox_without_network or not kit.relay
        session = env.new_session(**({"permission_mode": "full"} if full else {}))
        run = env.post(session, "use the bridge helper")
        approvals: list[dict[str, Any]] = []
        tokens: set[str] = set()
        final = _approve_all(env, run, approvals, tokens)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        workspace = env.daemon.workspace
        assert "shell__run" in (workspace / "tools.txt").read_text()
        assert (workspace / "helper.txt").read_text().strip() == "through-the-helper"
        # the policy asked (shell__run needs a person by default), the journal holds the call
        asked = [a for a in approvals if a["tool_id"] == "shell__run"]
        assert len(asked) == 1 and "through-the-helper" in json.dumps(asked[0]), approvals
        (action,) = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
        assert action["tool"] == "shell__run" and action["outcome"] == "completed", action
        calls = env.kinds(run, "bridge_call")
        assert any(c.get("tool") == "shell__run" and c.get("event") == "tool_call_finished" for c in calls)
        assert tokens, "no approval was raised while the vendor ran"
        dumps = list((env.daemon.home / ".octipus" / "prompts").glob(f"{run}*"))
        stored = [json.dumps(env.events(run)), env.daemon.log(), *(d.read_text() for d in dumps)]
        assert dumps and not [t for t in tokens for text in stored if t in text]


def permission_relay(kit: VendorKit, root: Path) -> None:
    """A native command needing permission becomes an Octipus approval; approved, it runs."""
    command = "bash -c 'echo relayed > relayed.txt'"
    with octipus(kit, root, [kit.shell(command), kit.text("done")]) as env:
        run = env.post(env.new_session(), "write relayed.txt")
        if kit.relay:
            approval = env.wait_approval(run)
            assert approval["tool_id"].startswith("cli-native:")
            env.answer(approval["id"], "approve")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        if kit.relay:
            assert (env.daemon.workspace / "relayed.txt").read_text().strip() == "relayed"


def resume(kit: VendorKit, root: Path) -> None:
    """A follow-up turn resumes the vendor session (where supported) and the model sees the history."""
    with octipus(kit, root, [kit.text("first answer"), kit.text("second answer")]) as env:
        session = env.new_session()
        first = env.wait_final(env.post(session, "remember the word octopus"))
        assert first["status"] == "succeeded", first
        second = env.wait_final(env.post(session, "what was the word?"))
        assert second["status"] == "succeeded", second
        if kit.resumes:
            assert second["resumed"] is True and second["vendor_session_id"] == first["vendor_session_id"]
            assert "remember the word octopus" in env.model.conversation_texts()[-1]
        else:
            assert second["resumed"] is False


def unknown_resume(kit: VendorKit, root: Path) -> None:
    """A stored vendor session the vendor no longer knows is recognised from the vendor's own
    signal: the stale id is dropped and the turn is retried exactly once, cold, with the full
    prompt; the replacement id (never the failed attempt's) is saved and the next turn resumes it
    (seed 003 "Cold fallback")."""
    if not kit.resumes:
        return
    with octipus(kit, root, [kit.text("fresh answer"), kit.text("resumed answer")]) as env:
        session = env.new_session()
        first = env.wait_final(env.post(session, "remember PAPAYA"))
        assert first["status"] == "succeeded", first
        forged = str(uuid.uuid4())
        store = Store.open(f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}")
        try:
            stored = store.get_vendor_session(session, kit.adapter)
            assert stored is not None
            store.save_vendor_session(
                session_id=session,
                key=kit.adapter,
                vendor_session_id=forged,
                fingerprint=stored.fingerprint,
                cwd=stored.cwd,
                cursor=stored.cursor,
            )
        finally:
            store.close()
        lost_run = env.post(session, "continue with MANGO")
        lost = env.wait_final(lost_run)
        assert lost["status"] == "succeeded" and lost["resumed"] is False, lost
        events = env.events(lost_run)
        launches = [
            e["data"] for e in events if e["kind"] == "run_status" and e["data"]["status"] == "running"
        ]
        assert [(d["resumed"], d["vendor_session_id"] == forged) for d in launches] == [
            (True, True),
            (False, False),
        ]
        fallback = [e["data"] for e in events if e["kind"] == "notice" and e["data"].get("cold_fallback")]
        assert len(fallback) == 1 and forged in fallback[0]["message"], fallback
        # the cold retry carried the full prompt: the earlier turn's messages and this one
        assert (
            "start" in env.model.conversation_texts()[-1] and "continue" in env.model.conversation_texts()[-1]
        )
        replacement = lost["vendor_session_id"]
        assert replacement and replacement != forged
        again = env.wait_final(env.post(session, "go on"))
        assert again["status"] == "succeeded" and again["resumed"] is True, again
        assert again["vendor_session_id"] == replacement


def usage(kit: VendorKit, root: Path) -> None:
    """Usage is recorded per run; estimated (and flagged) where the vendor reports none."""
    with octipus(kit, root, [kit.text("counted reply")]) as env:
        final = env.wait_final(env.post(env.new_session(), "count me"))
        assert final["status"] == "succeeded", final
        assert final["input_tokens"] > 0 and final["output_tokens"] > 0, final
        assert final["usage_estimated"] is (not kit.reports_usage)


def stop(kit: VendorKit, root: Path) -> None:
    """Stopping a live run cancels it and leaves none of its processes."""
    with octipus(kit, root, [kit.shell("sleep 120"), kit.text("never")]) as env:
        session = env.new_session(permission_mode="full")
        run = env.post(session, "sleep a while")
        env.wait(lambda: env.run(run)["status"] in ("running", "awaiting_approval"), 60, "the run to start")
        env.client.request("POST", f"/runs/{run}/stop", json={"reason": "conformance stop"})
        final = env.wait_final(run)
        assert final["status"] == "cancelled" and final["reason"] == "conformance stop", final
        env.wait(
            lambda: not [p for p in run_processes(run) if p.status() != "zombie"], 15, "the run's processes"
        )


#: name -> scenario, in the order the suite runs them.
SCENARIOS: dict[str, Callable[[VendorKit, Path], None]] = {
    "start_and_stream": start_and_stream,
    "bridge_call": bridge_call,
    "bridge_helper": bridge_helper,
    "permission_relay": permission_relay,
    "resume": resume,
    "unknown_resume": unknown_resume,
    "usage": usage,
    "stop": stop,
}
