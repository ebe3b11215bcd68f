"""The stub ``agy``: command line, buffered output, scripted agent, and the adapter driving it.

The last tests run the stub the way the runner would, with the adapter's launch spec, against a
real loopback bridge (in-memory tool host): the agent reaches an Octipus tool through
``octipus-bridge`` with the capability only in its environment, and an inherited stdin pipe that
is never closed does not hold the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from octipus_antigravity import AntigravityAdapter

from octipusd.adapter import LaunchRequest, PermissionMode, ResultEvent, StdinMode, TextEvent, VendorEvent
from octipusd.adapter_launch import vendor_launch
from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.testing.kit_antigravity import AntigravityKit, group_turns, write_agy_wrapper
from octipusd.testing.stub_agy import (
    RECORD_ENV,
    SCRIPT_ENV,
    STATE_ENV,
    load_turn,
    parse_args,
    parse_go_duration,
)
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

HELPER = str(Path(sys.executable).with_name("octipus-bridge"))


class Stub:
    """A stub agy with its own HOME, script and record under one folder."""

    def __init__(self, root: Path, tool_permission: str | None = "always-proceed") -> None:
        self.root = root
        self.home = root / "home"
        self.cwd = root / "ws"
        self.home.mkdir(parents=True)
        self.cwd.mkdir()
        self.script = root / "script.json"
        self.record = root / "record.jsonl"
        if tool_permission is not None:
            settings = self.home / ".gemini" / "antigravity-cli" / "settings.json"
            settings.parent.mkdir(parents=True)
            settings.write_text(json.dumps({"toolPermission": tool_permission}))
        self.env_vars = {
            SCRIPT_ENV: str(self.script),
            RECORD_ENV: str(self.record),
            STATE_ENV: str(root / "state"),
        }
        self.binary = write_agy_wrapper(root / "bin" / "agy", self.env_vars)

    def script_turns(self, *turns: list[dict[str, Any]]) -> None:
        self.script.write_text(json.dumps({"turns": list(turns)}))

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OCTIPUS_")}
        return {**base, "HOME": str(self.home), **(extra or {})}

    def run(
        self, args: Sequence[str], extra_env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args],
            cwd=self.cwd,
            env=self.env(extra_env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        items = [json.loads(line) for line in lines]
        return [r for r in items if event is None or r["event"] == event]


@pytest.fixture
def stub(tmp_path: Path) -> Stub:
    return Stub(tmp_path)


# ------------------------------------------------------------------ command line


def test_parse_args_forms() -> None:
    args = parse_args(
        ["--mode", "plan", "--model=m", "-p", "hello", "world", "--effort", "low", "--add-dir", "/a"]
    )
    assert (args.prompt, args.mode, args.model, args.effort, args.add_dirs) == (
        "hello world",
        "plan",
        "m",
        "low",
        ["/a"],
    )
    assert parse_args(["-p=x"]).prompt == "x"
    assert parse_args(["-px"]).prompt == "x"
    assert parse_args(["--prompt", "--not-a-flag"]).prompt == "--not-a-flag"
    assert parse_args(["--print=a", "--", "-b"]).prompt == "a -b"
    resumed = parse_args(["-c", "--conversation", "abc", "-p", "x"])
    assert resumed.resume_requested and resumed.continue_ and resumed.conversation == "abc"
    assert parse_args(["--sandbox=false", "-p", "x"]).sandbox is False
    assert parse_args(["--print-timeout=1h30m", "-p", "x"]).print_timeout == 5400.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("5m", 300.0), ("1.5h", 5400.0), ("250ms", 0.25), ("0", 0.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--output-format", "json", "-p", "x"], "unknown flag: --output-format"),
        (["--approval-mode", "plan", "-p", "x"], "unknown flag: --approval-mode"),
        (["-x", "-p", "x"], "unknown shorthand flag: 'x' in -x"),
        (["-p", "x", "--model"], "flag needs an argument: --model"),
        (["-p", "x", "--mode", "yolo"], 'invalid argument "yolo" for "--mode"'),
        (["-p", "x", "--effort=max"], 'invalid argument "max" for "--effort"'),
        (["-p", "x", "--print-timeout", "60"], 'missing unit in duration "60"'),
        (["-p", "x", "--print-timeout=1x"], 'unknown unit "x"'),
        (["-p", "x", "--sandbox=maybe"], "strconv.ParseBool"),
        (["chat"], 'unknown command "chat"'),
        ([], "print mode only"),
    ],
)
def test_command_line_errors_exit_2(stub: Stub, args: list[str], message: str) -> None:
    stub.script_turns([{"say": "never"}])
    done = stub.run(args)
    assert done.returncode == 2, done
    assert message in done.stderr and done.stdout == ""


def test_help_and_version(stub: Stub) -> None:
    assert stub.run(["--version"]).stdout.startswith("agy ")
    out = stub.run(["--help"]).stdout
    assert "--prompt" in out and "--mode" in out


# ------------------------------------------------------------------ behaviour


def test_buffered_plain_text_and_record(stub: Stub) -> None:
    stub.script_turns([{"say": "first paragraph"}, {"stderr": "log line"}, {"say": "second"}])
    done = stub.run(["--print=hi there", "--model=m1", "--disable-slash-commands", "--effort=high"])
    assert done.returncode == 0
    assert done.stdout == "first paragraph\nsecond\n"  # no JSON, no conversation id
    assert done.stderr == "log line\n"
    (start,) = stub.records("start")
    assert start["argv"] == ["--print=hi there", "--model=m1", "--disable-slash-commands", "--effort=high"]
    assert start["stdin"] == "devnull" and start["cwd"] == str(stub.cwd)
    assert SCRIPT_ENV in start["env_keys"] and all(isinstance(k, str) for k in start["env_keys"])
    (turn,) = stub.records("turn")
    assert (turn["prompt"], turn["model"], turn["effort"], turn["turn"]) == ("hi there", "m1", "high", 0)
    (end,) = stub.records("end")
    assert end["exit_code"] == 0 and end["answer"] == "first paragraph\nsecond"


def test_resume_flags_start_a_new_conversation_silently(stub: Stub) -> None:
    stub.script_turns([{"say": "one"}], [{"say": "two"}])
    first = stub.run(["-p", "a"])
    second = stub.run(["--conversation", "1f6c5a52-0000-4000-8000-000000000000", "-c", "-p", "b"])
    assert (first.returncode, first.stdout, second.returncode, second.stdout) == (0, "one\n", 0, "two\n")
    t1, t2 = stub.records("turn")
    assert t1["resume_requested"] is False and t2["resume_requested"] is True
    assert t1["conversation_id"] != t2["conversation_id"] != "1f6c5a52-0000-4000-8000-000000000000"
    third = stub.run(["-p", "c"])
    assert third.returncode == 1 and "has 2 turn(s)" in third.stderr


def test_commands_run_in_the_working_directory(stub: Stub) -> None:
    stub.script_turns([{"run": "pwd; echo out; echo err >&2; exit 3"}, {"say_output": True}])
    done = stub.run(["-p", "x", "--mode", "accept-edits"])
    assert done.stdout == f"{stub.cwd}\nout\nerr\n"
    (end,) = stub.records("end")
    assert end["actions"][0]["outcome"] == "ran" and end["actions"][0]["exit_code"] == 3


def test_review_needed_ends_the_turn_with_an_empty_answer(tmp_path: Path) -> None:
    stub = Stub(tmp_path, tool_permission=None)  # agy's default: request-review
    stub.script_turns([{"say": "before"}, {"run": "touch ran.txt"}, {"say": "after"}])
    done = stub.run(["-p", "x", "--mode", "accept-edits"])
    assert (done.returncode, done.stdout) == (0, "")
    assert not (stub.cwd / "ran.txt").exists()
    assert stub.records("end")[0]["actions"][-1]["outcome"] == "waiting_review"
    # --dangerously-skip-permissions lets it through
    stub.script_turns([{"run": "touch ran.txt"}, {"say": "after"}])
    (stub.root / "state").unlink()
    done = stub.run(["-p", "x", "--dangerously-skip-permissions"])
    assert (done.returncode, done.stdout) == (0, "after\n") and (stub.cwd / "ran.txt").exists()


def test_plan_mode_refuses_writes_and_writes_need_a_grant(stub: Stub) -> None:
    write = {"write": {"path": "notes/a.txt", "content": "hello"}}
    stub.script_turns([write, {"say": "planned"}], [write, {"say": "virtual"}], [write, {"say": "real"}])
    assert stub.run(["-p", "x", "--mode", "plan"]).stdout == "planned\n"
    assert not (stub.cwd / "notes").exists()
    assert stub.run(["-p", "x", "--mode", "accept-edits"]).stdout == "virtual\n"
    assert not (stub.cwd / "notes").exists()
    brain = stub.home / ".gemini" / "antigravity-cli" / "brain"
    assert [p.read_text() for p in brain.glob("*/notes/a.txt")] == ["hello"]
    assert stub.run(["-p", "x", "--mode", "accept-edits", f"--add-dir={stub.cwd}"]).stdout == "real\n"
    assert (stub.cwd / "notes" / "a.txt").read_text() == "hello"
    outcomes = [r["actions"][0]["outcome"] for r in stub.records("end")]
    assert outcomes == ["refused_plan_mode", "virtualized", "written"]


def test_sandbox_silently_skips_terminal_commands(stub: Stub) -> None:
    stub.script_turns([{"run": "touch ran.txt"}, {"say": "I ran it"}])
    done = stub.run(["-p", "x", "--sandbox"])
    assert done.stdout == "I ran it\n" and not (stub.cwd / "ran.txt").exists()


def test_print_timeout(stub: Stub) -> None:
    stub.script_turns([{"say": "never shown"}, {"sleep": 0.3}])
    done = stub.run(["-p", "x", "--print-timeout=100ms"])
    assert done.returncode == 1 and done.stdout == ""
    assert "print timeout of 100ms exceeded" in done.stderr


def test_exit_action_prints_the_answer_so_far(stub: Stub) -> None:
    stub.script_turns([{"say": "partial"}, {"exit": 5}, {"say": "never"}])
    done = stub.run(["-p", "x"])
    assert (done.returncode, done.stdout) == (5, "partial\n")


def test_malformed_script(stub: Stub) -> None:
    stub.script.write_text(json.dumps([{"dance": 1}]))
    done = stub.run(["-p", "x"])
    assert done.returncode == 1 and "unknown action 'dance'" in done.stderr


def test_example_script_is_valid(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "octipusd/testing/scripts/agy/bridge_plan.json"
    state = str(tmp_path / "state")
    assert load_turn(str(example), state)[1][-1] == {"say": "I saved a one-step plan through octipus-bridge."}
    assert load_turn(str(example), state)[0] == 1


def test_kit_groups_steps_into_invocations() -> None:
    kit = AntigravityKit()
    steps = [
        kit.bridge_call("update_work_plan", {"plan": {"title": "it's"}}),
        kit.text("saved"),
        kit.text("again"),
    ]
    turns = group_turns(steps)
    assert len(turns) == 2 and turns[1] == [{"say": "again"}]
    command = turns[0][0]["run"]
    assert command.startswith("octipus-bridge call update_work_plan ")
    assert turns[0][1] == {"say": "saved"}


# ------------------------------------------------------------------ the adapter driving the stub


async def _run_spec(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[int, bytes, bytes]:
    """Start like the runner but with an inherited stdin pipe that is never written or closed."""
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = b"", b""
    with anyio.fail_after(60):
        async with process:
            async for chunk in process.stdout:
                out += chunk
            async for chunk in process.stderr:
                err += chunk
            code = await process.wait()
    return code, out, err


def _parse(adapter: AntigravityAdapter, request: LaunchRequest, out: bytes, code: int) -> list[VendorEvent]:
    parser = adapter.new_parser(request)
    events: list[VendorEvent] = []
    for line in out.split(b"\n"):
        events += parser.feed(line)
    return events + parser.finish(code)


@pytest.mark.anyio
async def test_adapter_drives_the_stub_through_the_bridge(stub: Stub) -> None:
    plan = {"plan": {"title": "stub plan", "steps": [{"id": "s1", "title": "check", "status": "pending"}]}}
    kit = AntigravityKit()
    stub.script_turns(
        [
            {"run": "octipus-bridge list"},
            {"say_output": True},
            kit.bridge_call("update_work_plan", plan)["actions"][0],
            {"say": "plan saved"},
        ]
    )
    identity = RunIdentity(
        run_id="run-agy",
        session_id="session-agy",
        user="alice",
        worker_id="root:agy",
        workspace=stub.cwd,
        attended=True,
    )
    host = FakeToolHost()
    adapter = AntigravityAdapter()
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        request = LaunchRequest(
            binary=str(stub.binary),
            cwd=stub.cwd,
            run_dir=stub.root,
            prompt="save a plan",
            bridge=bridge.endpoint,
            env=stub.env({"PATH": "/usr/bin:/bin"}),  # the helper is found only through the launch's PATH
            permission_mode=PermissionMode.WORKSPACE,
        )
        spec = vendor_launch(adapter, request)  # as the runtime starts it
        assert spec.stdin_mode is StdinMode.DEVNULL
        code, out, err = await _run_spec(spec.argv, spec.env, spec.cwd)
    assert code == 0, err
    events = _parse(adapter, request, out, code)
    result = events[-1]
    assert isinstance(result, ResultEvent) and not result.is_error, events
    texts = [e.text for e in events if isinstance(e, TextEvent)]
    assert "update_work_plan" in texts[0] and texts[0].endswith("plan saved")
    assert result.usage is not None and result.usage.estimated and result.usage.input_tokens > 0
    assert host.plans["session-agy"]["title"] == "stub plan"
    token = bridge.endpoint.token
    (start,) = stub.records("start")
    assert not any(token in arg for arg in start["argv"])
    assert {"OCTIPUS_BRIDGE_URL", "OCTIPUS_BRIDGE_TOKEN"} <= set(start["env_keys"])
    assert start["stdin"] == "pipe"  # the inherited open pipe did not hold the run
    (end,) = stub.records("end")
    assert [a["outcome"] for a in end["actions"] if a["action"] == "run"] == ["ran", "ran"]
    assert end["actions"][2]["exit_code"] == 0, end["actions"][2]
    assert HELPER.rsplit("/", 1)[0] in spec.env["PATH"].split(":")


@pytest.mark.anyio
async def test_open_stdin_pipe_never_hangs_a_slow_turn(stub: Stub) -> None:
    stub.script_turns([{"sleep": 0.2}, {"say": "done"}])
    adapter = AntigravityAdapter()
    request = LaunchRequest(
        binary=str(stub.binary), cwd=stub.cwd, run_dir=stub.root, prompt="x", env=stub.env()
    )
    spec = adapter.build_launch(request)
    code, out, _ = await _run_spec(spec.argv, spec.env, spec.cwd)
    assert (code, out) == (0, b"done\n")
