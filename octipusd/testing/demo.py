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
import shutil
import subprocess
import sys
from pathlib import Path

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import ROOT, DaemonHarness, claude_binary

SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo.json"


def say(text: str) -> None:
    if sys.stdout.isatty():
        print(f"\n\033[1;34m== {text}\033[0m", flush=True)
    else:
        print(f"\n== {text}", flush=True)


def main() -> int:
    """Run the demo; return 0 when every check passed."""
    claude = claude_binary()
    if not claude.exists():
        print(
            f"demo: {claude} is missing; run `make demo` (it installs the pinned Claude Code)",
            file=sys.stderr,
        )
        return 2
    demo = ROOT / ".demo"
    shutil.rmtree(demo, ignore_errors=True)
    failures: list[str] = []
    with ScriptedAnthropicServer(SCRIPT) as model:
        daemon = DaemonHarness(demo, model.base_url, claude)
        env, workspace = daemon.env, daemon.workspace
        ctl = [str(daemon.bindir / "octipusctl")]
        say(f"scripted Anthropic model on {model.base_url}; starting octipusd (SQLite under {demo / 'data'})")
        daemon.start()
        try:
            subprocess.run([*ctl, "health"], env=env, check=True)

            say("turn 1: the agent updates its work plan (bridge tool) and runs Bash (relayed, approved)")
            first = subprocess.run(
                [
                    *ctl,
                    "run",
                    "Make a plan, then write hello.txt.",
                    "--workspace",
                    str(workspace),
                    "--approve",
                    "yes",
                ],
                env=env,
            )
            if first.returncode != 0:
                failures.append(f"turn 1 exited {first.returncode}")
            sessions = json.loads(
                subprocess.run(
                    [*ctl, "sessions", "list", "--json"], env=env, check=True, capture_output=True
                ).stdout
            )
            session_id = sessions[0]["id"]

            say(f"turn 2: a follow-up in session {session_id} resumes the vendor session")
            second = subprocess.run(
                [*ctl, "run", "What did you do earlier?", "--session", session_id, "--approve", "yes"],
                env=env,
            )
            if second.returncode != 0:
                failures.append(f"turn 2 exited {second.returncode}")

            say("runs of this session")
            subprocess.run([*ctl, "runs", "list", "--session", session_id], env=env, check=False)
            runs = json.loads(
                subprocess.run(
                    [*ctl, "runs", "list", "--session", session_id, "--json"],
                    env=env,
                    check=True,
                    capture_output=True,
                ).stdout
            )
            hello = workspace / "hello.txt"
            if not hello.exists() or "hello from octipus" not in hello.read_text():
                failures.append("hello.txt was not written by the approved Bash call")
            if len(runs) != 2 or not any(r["resumed"] for r in runs):
                failures.append("the second turn did not resume the vendor session")
            last = model.message_requests[-1].body if model.message_requests else {}
            if len(last.get("messages", [])) < 4:
                failures.append("the model did not receive the first turn's history on the second turn")
        finally:
            stop_daemon(daemon, failures)

    return report(
        "demo", failures, "bridge tool called, Bash relayed as cli-native:Bash and approved, turn 2 resumed"
    )


def stop_daemon(daemon: DaemonHarness, failures: list[str]) -> None:
    """Stop the demo's daemon with SIGTERM; a non-zero exit is a failure (with the log's end)."""
    say("stopping octipusd with SIGTERM")
    code = daemon.stop()
    if code != 0:
        failures.append(f"octipusd exited {code} on SIGTERM; log: {daemon.log()[-2000:]}")


def report(name: str, failures: list[str], passed: str) -> int:
    """Say how the demo ``name`` ended; its exit code (1 when anything failed)."""
    if failures:
        say(f"{name} FAILED: " + "; ".join(failures))
        return 1
    say(f"{name} passed: {passed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
