"""A person running the preset pipeline ``plan-implement-verify`` end to end, offline.

``python -m octipusd.testing.demo_pipeline`` (what ``make demo-pipeline`` runs):

1. starts the scripted Anthropic model (``scripts/demo-pipeline.json``: the planner lists two
   items, each implementer writes its file with the ``shell__run`` tool, the reviewer passes it)
   and ``octipusd`` on SQLite under ``.demo-pipeline/`` (its workspace a new git work tree);
2. ``octipusctl pipelines run plan-implement-verify --workspace DIR --param goal=... --param
   verifyCommand=...`` through the real ``claude`` as every stage's worker;
3. shows the pipeline live (``octipusctl pipelines show``) and answers, as a person would with
   ``octipusctl approvals approve``, every approval a stage asks for;
4. checks it ``completed`` with both items ``done`` and both files written, then stops the daemon.

The exit code is 0 only when every check passed.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.demo import report, say, stop_daemon
from octipusd.testing.harness import ROOT, DaemonHarness, claude_binary

SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo-pipeline.json"
#: Seconds the pipeline may take at most.
TIMEOUT_S = 300.0
#: Seconds between two looks at the pipeline.
POLL_S = 0.5
GOAL = "greet in two files"
VERIFY = "ls *.txt"


def _json(ctl: list[str], env: dict[str, str], *args: str) -> Any:
    done = subprocess.run([*ctl, *args, "--json"], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def _follow(ctl: list[str], env: dict[str, str], pid: str) -> dict[str, Any]:
    """Poll the pipeline until it rests; approve what its stages ask meanwhile; its last status."""
    deadline, seen = time.monotonic() + TIMEOUT_S, ""
    while time.monotonic() < deadline:
        for approval in _json(ctl, env, "approvals", "list"):
            say(f"approving {approval['tool_id']} asked by run {approval['run_id']}")
            subprocess.run([*ctl, "approvals", "approve", approval["id"]], env=env, check=True)
        doc: dict[str, Any] = _json(ctl, env, "pipelines", "show", pid)
        node = doc.get("currentNode")
        where = f"{doc['status']}{f' at {node}' if node else ''} ({len(doc['attempts'])} attempt(s))"
        if where != seen:
            print(f"   pipeline {pid}: {where}", flush=True)
            seen = where
        if doc["status"] in ("completed", "failed", "stopped", "paused"):
            return doc
        time.sleep(POLL_S)
    return {"status": f"not done within {TIMEOUT_S:g} s"}


def main() -> int:
    """Run the pipeline demo; return 0 when every check passed."""
    claude = claude_binary()
    if not claude.exists():
        print(f"demo-pipeline: {claude} is missing; run `make demo-pipeline`", file=sys.stderr)
        return 2
    demo = ROOT / ".demo-pipeline"
    shutil.rmtree(demo, ignore_errors=True)
    failures: list[str] = []
    with ScriptedAnthropicServer(SCRIPT) as model:
        daemon = DaemonHarness(demo, model.base_url, claude)
        env, workspace = daemon.env, daemon.workspace
        ctl = [str(daemon.bindir / "octipusctl")]
        say(f"scripted Anthropic model on {model.base_url}; starting octipusd (SQLite under {demo / 'data'})")
        # a git work tree of its own: the stages' evidence gates count the files git sees changed
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        daemon.start()
        try:
            run = [*ctl, "pipelines", "run", "plan-implement-verify", "--workspace", str(workspace)]
            run += ["--param", f"goal={GOAL}", "--param", f"verifyCommand={VERIFY}"]
            say("$ " + shlex.join(["octipusctl", *run[1:]]))
            pid = subprocess.run(run, env=env, check=True, capture_output=True, text=True).stdout.strip()
            say(f"pipeline {pid}: plan, then implement and verify each item")
            doc = _follow(ctl, env, pid)
            say(f"$ octipusctl pipelines show {pid}")
            subprocess.run([*ctl, "pipelines", "show", pid], env=env, check=False)
            if doc["status"] != "completed":
                failures.append(f"the pipeline is {doc['status']}: {doc.get('error')}")
            items = [i["status"] for i in doc.get("items", [])]
            if items != ["done", "done"]:
                failures.append(f"items {items}, not two done")
            for name in ("hello.txt", "bye.txt"):
                if not (workspace / name).is_file():
                    failures.append(f"{name} was not written by its item's implementer")
        finally:
            stop_daemon(daemon, failures)
    return report("demo-pipeline", failures, "planned two items, implemented and verified each, completed")


if __name__ == "__main__":
    sys.exit(main())
