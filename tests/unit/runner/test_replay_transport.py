"""The replaying fake transport keeps the real transport's rules (it stands in for it in supervisor tests)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import anyio
import pytest

from octipusd.adapter import LaunchSpec
from octipusd.runner.process import DRAIN_GRACE
from octipusd.runner.transport import Launcher, Transport
from octipusd.testing.replay import STOP_KILL_AFTER, Recording, ReplayLauncher, ReplayTransport, Step

pytestmark = pytest.mark.anyio

SPEC = LaunchSpec(argv=("vendor",), env={}, cwd=Path("/"), initial_input=("prompt",))


async def test_replays_the_lines_with_their_delays_and_exit_code_and_records_stdin() -> None:
    recording = Recording.of([{"type": "init"}, "plain", b"raw"], delays=[0.0, 0.2, 0.0], exit_code=3)
    launcher: Launcher = ReplayLauncher([recording])
    transport: Transport = await launcher.start(SPEC, "run-1")
    started = time.monotonic()
    got = [line async for line in transport.lines()]
    assert got == [b'{"type":"init"}', b"plain", b"raw"] and time.monotonic() - started >= 0.2
    assert await transport.wait() == 3 and transport.returncode == 3
    assert not await transport.write_line("late")  # the vendor is gone
    assert isinstance(transport, ReplayTransport) and transport.written == ["prompt"]
    assert await transport.reap() == [] and transport.reaped


async def test_a_step_waits_for_stdin_writes() -> None:
    recording = Recording((Step("asked"), Step("answered", after_writes=2)))
    launcher = ReplayLauncher([recording])
    transport = await launcher.start(SPEC, "run-2")  # initial input: one write
    got: list[bytes] = []

    async def read() -> None:
        async for line in transport.lines():
            got.append(line)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.sleep(0.2)
            assert got == [b"asked"]  # "answered" waits for a second write
            await transport.write_line(json.dumps({"answer": "yes"}))
    assert got == [b"asked", b"answered"]
    assert transport.written == ["prompt", '{"answer": "yes"}']
    assert launcher.launches == [(SPEC, "run-2")]


async def test_after_begin_stop_lines_are_counted_not_yielded() -> None:
    recording = Recording.of(["a", "bb", "ccc", "dddd"], delays=[0, 0, 0.05, 0.05], ignores_stop=True)
    transport = await ReplayLauncher([recording]).start(SPEC, "run-3")
    lines = transport.lines()
    assert await lines.__anext__() == b"a"
    transport.begin_stop("user")
    assert [line async for line in lines] == []
    assert (transport.discarded_lines, transport.discarded_bytes) == (3, 9)
    assert transport.stopped_reason == "user" and not transport.accepting


async def test_an_obeyed_stop_ends_the_replay_at_once() -> None:
    transport = await ReplayLauncher([Recording.of(["a", "b"], delays=[0, 30])]).start(SPEC, "run-4")
    lines = transport.lines()
    assert await lines.__anext__() == b"a"
    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            rest: list[bytes] = []

            async def read() -> None:
                rest.extend([line async for line in lines])

            tg.start_soon(read)
            assert await transport.stop("user") == -signal.SIGTERM
    assert rest == [] and transport.stdin_closed


async def test_a_stop_nobody_reads_through_ends_it_too() -> None:
    recording = Recording.of(["a"], delays=[30], ignores_stop=True)
    transport = await ReplayLauncher([recording]).start(SPEC, "run-5")
    with anyio.fail_after(STOP_KILL_AFTER / 2):
        assert await transport.stop("shutdown") == -signal.SIGTERM


async def test_held_output_ends_after_the_drain_grace_and_reap_names_the_leftovers() -> None:
    recording = Recording.of(["result"], held_output=True, leftover_pids=(4242,))
    transport = await ReplayLauncher([recording]).start(SPEC, "run-6")
    started = time.monotonic()
    assert [line async for line in transport.lines()] == [b"result"]
    assert time.monotonic() - started >= DRAIN_GRACE and transport.output_held
    assert transport.returncode == 0 and await transport.reap() == [4242]


async def test_recordings_from_a_jsonl_file_and_from_a_function(tmp_path: Path) -> None:
    captured = tmp_path / "stream.jsonl"
    captured.write_text('{"type":"system"}\n{"type":"result"}\n')
    launcher = ReplayLauncher(lambda spec, run_id: Recording.from_jsonl(captured, stderr=f"for {run_id}"))
    first, second = await launcher.start(SPEC, "r1"), await launcher.start(SPEC, "r2")
    assert [line async for line in first.lines()] == [b'{"type":"system"}', b'{"type":"result"}']
    assert second.stderr_tail == "for r2" and first.pid != second.pid
    with pytest.raises(FileNotFoundError):
        await ReplayLauncher([]).start(SPEC, "r3")
