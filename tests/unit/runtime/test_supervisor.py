"""The run supervisor's logic on a fake transport replaying recorded Claude streams.

Real store (SQLite and PostgreSQL), real event hub, gate, journal and bridge; only the vendor
process is a replay (:mod:`octipusd.testing.replay`), so each rule is shown without a binary:
the final status, a stop that drops what comes after it, the cold fallback, a held pipe.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from octipusd.adapter import LaunchSpec, ResultEvent, load_adapters
from octipusd.app import build_runs
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.runner.executables import Resolution
from octipusd.runtime.events import EventHub
from octipusd.runtime.manager import RunManager
from octipusd.runtime.outcome import Happened, final_status
from octipusd.runtime.services import RunLimits
from octipusd.runtime.supervisor import RunSupervisor
from octipusd.settings import Settings
from octipusd.store.records import Run, RunStatus
from octipusd.store.repository import Store
from octipusd.testing.replay import Recording, ReplayLauncher
from octipusd.testing.stub_cli import session_id_from_argv

pytestmark = pytest.mark.anyio

ADAPTER = "claude-code"


def _session_id(spec: LaunchSpec) -> str:
    sid = session_id_from_argv(list(spec.argv))
    assert sid is not None, f"no session id in {spec.argv}"
    return sid


def _init(sid: str) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "init",
        "session_id": sid,
        "tools": ["Bash"],
        "mcp_servers": [{"name": "octipus", "status": "connected"}],
    }


def _text(sid: str, text: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]},
        "session_id": sid,
    }


def _result(sid: str, text: str, *, error: str | None = None, tokens: int = 4) -> dict[str, Any]:
    if error is not None:
        return {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "errors": [error],
            "session_id": sid,
        }
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": text,
        "session_id": sid,
        "usage": {"input_tokens": tokens, "output_tokens": tokens},
    }


Script = Callable[[str], Recording]


@asynccontextmanager
async def _daemon(
    store: Store,
    tmp_path: Path,
    scripts: Sequence[Script],
    limits: RunLimits | None = None,
    rules: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[RunManager, ReplayLauncher]]:
    def recording(spec: LaunchSpec, run_id: str) -> Recording:
        return scripts[len(launcher.transports)](_session_id(spec))

    launcher = ReplayLauncher(recording)
    hub = EventHub(store)
    adapters = {ADAPTER: load_adapters()[ADAPTER]}
    runs, _gate = build_runs(
        Settings(),
        store=store,
        hub=hub,
        broker=ApprovalBroker(store, 300),
        policy=Policy.from_setting(rules),
        adapters=adapters,
        resolutions={ADAPTER: Resolution(ADAPTER, "claude", "/bin/true", None, "/usr/bin:/bin")},
        data_dir=tmp_path / "data",
        owner="test-owner",
        base_env={"PATH": "/usr/bin:/bin"},
        journal=ActionJournal(store, "test-owner"),
        operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
        connectors=None,
        config_notices=None,
        launcher=launcher,
    )
    if limits is not None:
        runs.services = dataclasses.replace(runs.services, limits=limits)
    async with anyio.create_task_group() as tg:
        runs.bind(tg)
        yield runs, launcher
        tg.cancel_scope.cancel()


async def _turn(
    runs: RunManager, session_id: str, prompt: str = "go", *, stop_at_text: str | None = None
) -> Run:
    """Post a turn and wait for its end; with ``stop_at_text``, stop it once that text is stored."""
    run = await runs.post_turn(session_id, prompt)
    live = runs.registry.get(run.id)
    assert live is not None
    if stop_at_text is not None:
        with anyio.fail_after(30):
            while not any(d.get("text") == stop_at_text for k, d in _kinds(runs.services.store, run.id)):  # noqa: ASYNC110 - polls the store, which signals nothing
                await anyio.sleep(0.02)
        await runs.stop(run.id, "stopped by the test")
    with anyio.fail_after(30):
        await live.done.wait()
    return runs.services.store.get_run(run.id)


async def _started(runs: RunManager, session_id: str) -> tuple[Run, RunSupervisor]:
    """Post a turn; the run and its live supervisor."""
    run = await runs.post_turn(session_id, "go")
    live = runs.registry.get(run.id)
    assert live is not None
    return run, live


def _new_session(store: Store, tmp_path: Path) -> str:
    return store.create_session(workspace=str(tmp_path), adapter=ADAPTER).id


def _kinds(store: Store, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in store.list_events(run_id, after_seq=0, limit=10_000)]


async def test_a_recorded_turn_succeeds_with_its_result_usage_and_transcript(
    store: Store, tmp_path: Path
) -> None:
    def script(sid):
        return Recording.of([_init(sid), _text(sid, "hello"), _result(sid, "hello", tokens=7)])

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        final = await _turn(runs, session)
    assert final.status == RunStatus.SUCCEEDED, final.reason
    assert final.result_text == "hello" and final.input_tokens == 7 and final.output_tokens == 7
    assert launcher.transports[0].stdin_closed and launcher.transports[0].reaped
    messages = store.list_messages(session, generation=0)
    assert [m.role for m in messages] == ["user", "assistant"]
    record = store.get_vendor_session(session, ADAPTER)  # kept with the answer, which it has seen
    assert record is not None and record.cursor == messages[-1].seq
    assert not [d for k, d in _kinds(store, final.id) if k == "notice" and "not kept" in d["message"]]


async def test_after_a_stop_nothing_the_vendor_prints_is_accepted(store: Store, tmp_path: Path) -> None:
    def script(sid: str) -> Recording:
        late = [_text(sid, "late text"), _result(sid, "late answer", tokens=999)]
        return Recording.of(
            [_init(sid), _text(sid, "working"), *late], delays=[0, 0, 3.0, 0], ignores_stop=True
        )

    async with _daemon(store, tmp_path, [script]) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        final = await _turn(runs, session, stop_at_text="working")
    assert final.status == RunStatus.CANCELLED and final.reason == "stopped by the test"
    assert final.result_text is None and not final.input_tokens and not final.output_tokens
    events = _kinds(store, final.id)
    assert not [d for _k, d in events if "late" in str(d)]
    assert [d["discarded"] for k, d in events if k == "notice" and "discarded" in d] == [2]
    assert [m.role for m in store.list_messages(session, generation=0)] == ["user"]


async def test_a_resumed_session_the_vendor_lost_is_retried_once_cold(store: Store, tmp_path: Path) -> None:
    def first(sid):
        return Recording.of([_init(sid), _result(sid, "one")])

    def gone(sid):
        return Recording.of([_result(sid, "", error=f"No conversation found with session ID: {sid}")])

    def cold(sid):
        return Recording.of([_init(sid), _result(sid, "two", tokens=9)])

    async with _daemon(store, tmp_path, [first, gone, cold]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        assert (await _turn(runs, session)).status == RunStatus.SUCCEEDED
        final = await _turn(runs, session, "again")
    assert final.status == RunStatus.SUCCEEDED and final.result_text == "two"
    assert final.input_tokens == 9 and final.output_tokens == 9  # the cold attempt's usage, not the first's
    resumed = [any(a.startswith("--resume") for a in spec.argv) for spec, _ in launcher.launches]
    assert resumed == [False, True, False]
    assert [d for k, d in _kinds(store, final.id) if k == "notice" and d.get("cold_fallback")]


async def test_a_vendor_whose_output_is_held_after_its_exit_still_ends_its_run(
    store: Store, tmp_path: Path
) -> None:
    def script(sid):
        return Recording.of([_init(sid), _result(sid, "done")], held_output=True, leftover_pids=(7,))

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        final = await _turn(runs, _new_session(store, tmp_path))
    assert final.status == RunStatus.SUCCEEDED and final.result_text == "done"
    assert launcher.transports[0].reaped
    assert [d for k, d in _kinds(store, final.id) if k == "notice" and "held its output" in d["message"]]


def test_the_final_status_is_a_function_of_what_happened() -> None:
    ok = ResultEvent(raw=None, is_error=False, subtype="success", text="fine")
    turns = ResultEvent(raw=None, is_error=False, subtype="error_max_turns")
    assert final_status(Happened(result=ok)).status == RunStatus.SUCCEEDED
    assert final_status(Happened(result=ok, review_required=("a", "b"))).reason == "a; b"
    assert final_status(Happened(result=ok, failure="bridge")).status == RunStatus.FAILED
    stopped = final_status(
        Happened(result=ok, failure="x", stop_status=RunStatus.CANCELLED, stop_reason="user")
    )
    assert (stopped.status, stopped.reason) == (RunStatus.CANCELLED, "user")
    assert (
        final_status(Happened(result=turns)).reason
        == "the vendor stopped at its turn limit (error_max_turns)"
    )
    silent = final_status(Happened(exit_code=3, stderr_tail="boom\n"))
    assert (silent.status, silent.reason) == (
        RunStatus.FAILED,
        "the vendor CLI exited (3) without a result; stderr: boom",
    )


def _pending_init(sid: str) -> dict[str, Any]:
    return {**_init(sid), "mcp_servers": [{"name": "octipus", "status": "pending"}]}


def _list_bridge_tools(spec: LaunchSpec) -> None:
    """Do what a vendor's MCP client does at start-up: initialize, then list the bridge's tools."""
    config_path = next(a.split("=", 1)[1] for a in spec.argv if a.startswith("--mcp-config="))
    server = json.loads(spec.files[Path(config_path)])["mcpServers"]["octipus"]  # a replay writes no files
    headers = {
        **server["headers"],
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    with httpx.Client(timeout=10) as client:
        answer = client.post(
            server["url"],
            headers=headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        )
        session = (
            {"mcp-session-id": answer.headers["mcp-session-id"]} if "mcp-session-id" in answer.headers else {}
        )
        client.post(
            server["url"],
            headers={**headers, **session},
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        client.post(
            server["url"],
            headers={**headers, **session},
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )


async def test_a_bridge_the_vendor_never_finished_connecting_to_fails_the_run(
    store: Store, tmp_path: Path
) -> None:
    """Claude's ``pending`` and no handshake on the bridge: the vendor could not use Octipus tools."""

    def script(sid: str) -> Recording:
        return Recording.of([_pending_init(sid), _result(sid, "done without tools")])

    async with _daemon(store, tmp_path, [script]) as (runs, _launcher):
        final = await _turn(runs, _new_session(store, tmp_path))
    assert final.status == RunStatus.FAILED
    assert final.reason is not None and "'pending'" in final.reason and "handshake" in final.reason


async def test_a_bridge_still_connecting_at_init_that_then_answers_does_not_fail_the_run(
    store: Store, tmp_path: Path
) -> None:
    """On a loaded machine Claude may announce ``pending`` and finish its handshake just after."""
    specs: list[LaunchSpec] = []

    def script(sid: str) -> Recording:
        return Recording.of([_pending_init(sid), _result(sid, "done")], delays=[0, 2.0])

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        run, live = await _started(runs, session)
        with anyio.fail_after(10):
            while not launcher.launches:  # noqa: ASYNC110 - the replay signals no launch
                await anyio.sleep(0.05)
        specs.append(launcher.launches[0][0])
        await anyio.to_thread.run_sync(_list_bridge_tools, specs[0])
        with anyio.fail_after(30):
            await live.done.wait()
    final = store.get_run(run.id)
    assert final.status == RunStatus.SUCCEEDED, final.reason


def _bridge_answers(spec: LaunchSpec) -> bool:
    """Whether the run's bridge still accepts its capability (an ``initialize`` answered 200)."""
    config_path = next(a.split("=", 1)[1] for a in spec.argv if a.startswith("--mcp-config="))
    server = json.loads(spec.files[Path(config_path)])["mcpServers"]["octipus"]
    headers = {**server["headers"], "Accept": "application/json, text/event-stream"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    try:
        with httpx.Client(timeout=10) as client:
            answer = client.post(
                server["url"],
                headers=headers,
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
            )
    except httpx.ConnectError:  # the port is closed
        return False
    return answer.status_code == 200


async def test_the_bridge_of_an_ended_run_refuses_its_capability(store: Store, tmp_path: Path) -> None:
    """The bridge dies with the run: once the run is final its capability is no longer accepted."""

    def script(sid: str) -> Recording:
        return Recording.of([_init(sid), _result(sid, "done")], delays=[0, 1.0])

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        run = await runs.post_turn(_new_session(store, tmp_path), "go")
        live = runs.registry.get(run.id)
        assert live is not None
        with anyio.fail_after(10):
            while not launcher.launches:  # noqa: ASYNC110 - the replay signals no launch
                await anyio.sleep(0.05)
        spec = launcher.launches[0][0]
        assert await anyio.to_thread.run_sync(_bridge_answers, spec)  # while the run lives
        with anyio.fail_after(30):
            await live.done.wait()
        assert store.get_run(run.id).status == RunStatus.SUCCEEDED
        with anyio.fail_after(10):  # bounded, not timed: the close may finish after the final status
            while await anyio.to_thread.run_sync(_bridge_answers, spec):  # noqa: ASYNC110 - polls a port
                await anyio.sleep(0.05)


async def _live_until(runs: RunManager, run: Run, predicate: Callable[[], bool], what: str) -> None:
    """Poll the store until ``predicate`` holds, while ``run`` is still live."""
    with anyio.fail_after(30):
        while not predicate():
            assert runs.registry.get(run.id) is not None, f"run {run.id} ended before {what}"
            await anyio.sleep(0.02)


async def test_the_vendor_session_is_saved_as_soon_as_the_vendor_answers_in_it(
    store: Store, tmp_path: Path
) -> None:
    """Seed 003, issue 14 item 12: the first assistant message confirms the session; it is stored
    then, while the turn still runs (a daemon killed afterwards leaves it to the next turn)."""

    def script(sid: str) -> Recording:
        return Recording.of([_init(sid), _text(sid, "working"), _result(sid, "done")], delays=[0, 0, 3.0])

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        run, live = await _started(runs, session)
        await _live_until(
            runs,
            run,
            lambda: store.get_vendor_session(session, ADAPTER) is not None,
            "the vendor session was saved",
        )
        early = store.get_vendor_session(session, ADAPTER)
        assert not [k for k, _d in _kinds(store, run.id) if k == "result"], "saved only with the result"
        sid = _session_id(launcher.launches[0][0])
        assert early is not None and early.vendor_session_id == sid
        [user] = store.list_messages(session, generation=0)
        assert early.cursor == user.seq  # the vendor has seen the prompt; no answer is stored yet
        with anyio.fail_after(30):
            await live.done.wait()
    final = store.get_run(run.id)
    assert final.status == RunStatus.SUCCEEDED, final.reason
    record = store.get_vendor_session(session, ADAPTER)
    messages = store.list_messages(session, generation=0)
    assert record is not None and record.vendor_session_id == sid and record.cursor == messages[-1].seq
    assert record.id == early.id  # the same record, its cursor moved on to the answer


async def test_an_init_alone_stores_no_vendor_session(store: Store, tmp_path: Path) -> None:
    """The vendor announced its session but has not answered in it yet: nothing is stored."""

    def script(sid: str) -> Recording:
        return Recording.of([_init(sid), _result(sid, "done")], delays=[0, 3.0])

    async with _daemon(store, tmp_path, [script]) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        run, live = await _started(runs, session)
        await _live_until(
            runs, run, lambda: any(k == "session" for k, _d in _kinds(store, run.id)), "the init was stored"
        )
        await anyio.sleep(0.3)  # what the init could have led to has been done
        assert not [k for k, _d in _kinds(store, run.id) if k == "result"], "the result came too early"
        assert store.get_vendor_session(session, ADAPTER) is None
        with anyio.fail_after(30):
            await live.done.wait()
    assert store.get_run(run.id).status == RunStatus.SUCCEEDED
    assert store.get_vendor_session(session, ADAPTER) is not None  # the result confirmed it
