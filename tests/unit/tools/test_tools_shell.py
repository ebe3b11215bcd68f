"""``shell__run``: real subprocesses, real process groups (checked with psutil)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.toolkit import NotExecutedError, RunIdentity, ToolOutcome
from octipusd.tools import SHELL_RUN, run_shell
from octipusd.tools.shell import OUTPUT_LIMIT_BYTES

pytestmark = pytest.mark.anyio


async def shell(identity: RunIdentity, **arguments: Any) -> dict[str, Any]:
    result = await SHELL_RUN.handler(identity, FakeToolHost(), arguments)
    if isinstance(result, ToolOutcome):  # a timeout or a signal: uncertain, with the output
        assert result.uncertain
        result = result.value
    assert isinstance(result, dict)
    json.dumps(result)  # the tool result is JSON
    return result


def gone(pid: int) -> bool:
    """True when the process no longer runs (exited, or a zombie waiting for its reaper)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def wait_gone(pid: int) -> bool:
    with anyio.move_on_after(5):
        while not gone(pid):  # noqa: ASYNC110 (process state has no event)
            await anyio.sleep(0.01)
    return gone(pid)


async def test_output_and_exit_code(identity: RunIdentity) -> None:
    result = await shell(identity, command="echo out; echo err >&2; pwd")
    assert result["exit_code"] == 0
    assert result["stdout"] == f"out\n{identity.workspace.resolve()}\n"
    assert result["stderr"] == "err\n"
    assert result["timed_out"] is False
    assert result["stdout_truncated"] is False and result["stderr_truncated"] is False
    assert 0 <= result["duration_seconds"] < 30


async def test_non_zero_exit_is_a_normal_result(identity: RunIdentity) -> None:
    result = await shell(identity, command="echo partial; exit 3")
    assert result["exit_code"] == 3
    assert result["stdout"] == "partial\n"
    assert result["timed_out"] is False


async def test_timeout_kills_the_whole_group_including_background_children(identity: RunIdentity) -> None:
    result = await shell(identity, command="sleep 300 & echo $!; sleep 300", timeout=0.3)
    assert result["timed_out"] is True
    assert result["exit_code"] is not None and result["exit_code"] < 0  # killed by a signal
    grandchild = int(result["stdout"].split()[0])
    assert await wait_gone(grandchild)


async def test_term_resistant_member_gets_sigkill_after_grace(identity: RunIdentity) -> None:
    command = "(trap '' TERM; exec sleep 300) & echo $!; sleep 300"
    result = await run_shell(
        command, cwd=identity.workspace, env=dict(os.environ), timeout_seconds=0.3, kill_grace=0.2
    )
    assert result.timed_out
    stubborn = int(result.stdout.split()[0])
    assert await wait_gone(stubborn)


async def test_background_child_holding_the_pipe_is_bounded_by_the_timeout(identity: RunIdentity) -> None:
    # The shell exits at once, but its child keeps stdout open: the job is not finished.
    result = await shell(identity, command="sleep 300 & echo started", timeout=0.3)
    assert result["timed_out"] is True
    assert result["stdout"] == "started\n"
    assert result["exit_code"] == 0


async def test_cancelled_call_kills_the_group(identity: RunIdentity) -> None:
    pid_file = identity.workspace / "bg.pid"
    command = f"sleep 300 & echo $! > {pid_file}; sleep 300"
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: shell(identity, command=command, timeout=60))
            with anyio.fail_after(5):
                while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            scope.cancel()
    grandchild = int(pid_file.read_text())
    assert await wait_gone(grandchild)


async def test_output_is_truncated_at_64_kib(identity: RunIdentity) -> None:
    size = OUTPUT_LIMIT_BYTES + 5000
    result = await shell(identity, command=f"head -c {size} /dev/zero | tr '\\0' a; echo tail >&2")
    assert result["stdout_truncated"] is True
    assert result["stdout"].startswith("a" * OUTPUT_LIMIT_BYTES + "\n[stdout truncated:")
    assert f"{size} bytes written, first {OUTPUT_LIMIT_BYTES} shown" in result["stdout"]
    assert result["stderr"] == "tail\n" and result["stderr_truncated"] is False


async def test_cwd_inside_the_workspace(identity: RunIdentity) -> None:
    (identity.workspace / "sub" / "deeper").mkdir(parents=True)
    result = await shell(identity, command="pwd", cwd="sub/deeper")
    assert result["stdout"] == f"{(identity.workspace / 'sub' / 'deeper').resolve()}\n"
    inside_absolute = await shell(identity, command="pwd", cwd=str(identity.workspace / "sub"))
    assert inside_absolute["stdout"] == f"{(identity.workspace / 'sub').resolve()}\n"


@pytest.mark.parametrize("cwd", ["..", "sub/../..", "/etc", "escape"])
async def test_cwd_escape_is_refused(identity: RunIdentity, tmp_path: Path, cwd: str) -> None:
    (identity.workspace / "sub").mkdir()
    (identity.workspace / "escape").symlink_to(tmp_path)  # a symlink pointing outside
    marker = tmp_path / "ran"
    with pytest.raises(NotExecutedError, match="outside the workspace"):
        await shell(identity, command=f"touch {marker}", cwd=cwd)
    assert not marker.exists()


async def test_missing_cwd_is_refused(identity: RunIdentity) -> None:
    with pytest.raises(NotExecutedError, match="does not exist"):
        await shell(identity, command="true", cwd="nope")


async def test_env_is_added_and_bridge_credentials_are_not_inherited(
    identity: RunIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCTIPUS_BRIDGE_TOKEN", "secret-capability")
    result = await shell(
        identity, command='echo "$GREETING|${OCTIPUS_BRIDGE_TOKEN:-unset}"', env={"GREETING": "hello world"}
    )
    assert result["stdout"] == "hello world|unset\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "command: required"),
        ({"command": "   "}, "command: must not be empty"),
        ({"command": 5}, "command: must be a string"),
        ({"command": "true", "timeout": 601}, "timeout: must be > 0 and <= 600"),
        ({"command": "true", "timeout": 0}, "timeout: must be > 0"),
        ({"command": "true", "timeout": True}, "timeout: must be a number"),
        ({"command": "true", "env": {"BAD-NAME": "x"}}, "env: invalid variable name"),
        ({"command": "true", "env": {"N": 1}}, "env.N: must be a string"),
        ({"command": "true", "env": ["A=1"]}, "env: must be an object"),
        ({"command": "true", "shell": "bash"}, "unknown field(s) shell"),
    ],
)
async def test_invalid_arguments_name_the_field(
    identity: RunIdentity, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(NotExecutedError) as caught:
        await SHELL_RUN.handler(identity, FakeToolHost(), arguments)
    assert message in caught.value.message


async def test_outcomes_seed_000(identity: RunIdentity) -> None:
    """A normal exit (even non-zero) is a completed attempt; a timeout or signal is uncertain; a
    parser refusal raises the trusted not-executed error and nothing runs."""
    ledger = identity.workspace / "ledger"
    completed = await SHELL_RUN.handler(identity, FakeToolHost(), {"command": f"echo a >> {ledger}; exit 2"})
    assert isinstance(completed, dict) and completed["exit_code"] == 2
    timed = await SHELL_RUN.handler(
        identity, FakeToolHost(), {"command": f"echo b >> {ledger}; sleep 30", "timeout": 0.5}
    )
    assert isinstance(timed, ToolOutcome) and timed.uncertain and "timed out" in timed.uncertain
    killed = await SHELL_RUN.handler(identity, FakeToolHost(), {"command": "kill -TERM $$"})
    assert isinstance(killed, ToolOutcome) and killed.uncertain and "signal 15" in killed.uncertain
    with pytest.raises(NotExecutedError, match="parser refused"):
        await SHELL_RUN.handler(identity, FakeToolHost(), {"command": f'echo c >> {ledger}; echo "unclosed'})
    assert ledger.read_text().splitlines() == ["a", "b"]
