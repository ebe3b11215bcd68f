"""The README's main job: octipusd plus a real two-turn Claude Code session against the scripted model.

``python -m octipusd.testing.demo`` (what ``make demo`` runs, inside a loopback-only network
namespace where the machine allows it):

1. starts the scripted Anthropic model (``scripts/demo.json``) on 127.0.0.1;
2. starts ``octipusd`` on the embedded SQLite default, with every XDG folder and HOME under
   ``.demo/`` so the demo is repeatable and leaves the user's own folders alone;
3. turn 1 through the real ``claude`` binary: the agent calls the Octipus bridge tool
   ``update_work_plan``, then a ``Bash`` call is relayed as ``cli-native:Bash`` and approved
   (``octipusctl run --approve yes``), writing ``hello.txt``;
4. turn 2 resumes the vendor session (``--resume``), and the model receives the history;
5. SIGTERM stops the daemon (exit 0).

Each step is shown live. The exit code is 0 only when every check passed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from octipusd.testing.anthropic_server import ScriptedAnthropicServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo.json"

#: Variables that keep Claude Code on 127.0.0.1 only (observed.md §1.1).
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}


def _say(text: str) -> None:
    print(f"\n\033[1;34m== {text}\033[0m", flush=True)


def _wait_for_socket(path: Path, daemon: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        if daemon.poll() is not None:
            raise SystemExit(f"demo: octipusd exited with {daemon.returncode} before listening")
        time.sleep(0.1)
    raise SystemExit(f"demo: octipusd did not create {path} within {timeout:g} s")


def main() -> int:
    """Run the demo; return 0 when every check passed."""
    claude = Path(os.environ.get("OCTIPUS_CLAUDE_BINARY", ROOT / ".vendor/npm/node_modules/.bin/claude"))
    if not claude.exists():
        print(f"demo: {claude} is missing; run `make demo` (it installs the pinned Claude Code)", file=sys.stderr)
        return 2
    demo = ROOT / ".demo"
    shutil.rmtree(demo, ignore_errors=True)
    home, workspace = demo / "home", demo / "workspace"
    for folder in (home, workspace, demo / "run", demo / "data", demo / "config"):
        folder.mkdir(parents=True, mode=0o700)
    bindir = Path(sys.executable).parent
    ctl = [str(bindir / "octipusctl")]
    failures: list[str] = []

    with ScriptedAnthropicServer(SCRIPT) as model:
        env = {
            **os.environ,
            **QUIET_ENV,
            "HOME": str(home),
            "XDG_RUNTIME_DIR": str(demo / "run"),
            "XDG_DATA_HOME": str(demo / "data"),
            "XDG_CONFIG_HOME": str(demo / "config"),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted-model",
            "OCTIPUS_CLAUDE_BINARY": str(claude.resolve()),
        }
        _say(f"scripted Anthropic model on {model.base_url}; starting octipusd (SQLite under {demo / 'data'})")
        daemon = subprocess.Popen([str(bindir / "octipusd")], env=env)
        try:
            _wait_for_socket(demo / "run" / "octipus" / "octipusd.sock", daemon)
            subprocess.run([*ctl, "health"], env=env, check=True)

            _say("turn 1: the agent updates its work plan (bridge tool) and runs Bash (relayed, approved)")
            first = subprocess.run(
                [*ctl, "run", "Make a plan, then write hello.txt.", "--workspace", str(workspace), "--approve", "yes"],
                env=env,
            )
            if first.returncode != 0:
                failures.append(f"turn 1 exited {first.returncode}")
            sessions = json.loads(
                subprocess.run([*ctl, "sessions", "list", "--json"], env=env, check=True, capture_output=True).stdout
            )
            session_id = sessions[0]["id"]

            _say(f"turn 2: a follow-up in session {session_id} resumes the vendor session")
            second = subprocess.run(
                [*ctl, "run", "What did you do earlier?", "--session", session_id, "--approve", "yes"], env=env
            )
            if second.returncode != 0:
                failures.append(f"turn 2 exited {second.returncode}")

            _say("runs of this session")
            subprocess.run([*ctl, "runs", "list", "--session", session_id], env=env, check=False)
            runs = json.loads(
                subprocess.run(
                    [*ctl, "runs", "list", "--session", session_id, "--json"], env=env, check=True, capture_output=True
                ).stdout
            )
            hello = workspace / "hello.txt"
            if not hello.exists() or "hello from octipus" not in hello.read_text():
                failures.append("hello.txt was not written by the approved Bash call")
            if len(runs) != 2 or not any(r["resumed"] for r in runs):
                failures.append("the second turn did not resume the vendor session")
            last = model.requests[-1].body if model.requests else {}
            if len(last.get("messages", [])) < 4:
                failures.append("the model did not receive the first turn's history on the second turn")
        finally:
            _say("stopping octipusd with SIGTERM")
            daemon.send_signal(signal.SIGTERM)
            try:
                code = daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                code = daemon.wait()
            if code != 0:
                failures.append(f"octipusd exited {code} on SIGTERM")

    if failures:
        _say("demo FAILED: " + "; ".join(failures))
        return 1
    _say("demo passed: bridge tool called, Bash relayed as cli-native:Bash and approved, turn 2 resumed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
