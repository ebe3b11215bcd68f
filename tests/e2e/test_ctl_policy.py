"""octipusctl's policy and space commands against a real octipusd (the ``octipusctl`` console
script as a subprocess): rules, explain, grants, spaces and their exit codes, and a questionnaire
(Claude's AskUserQuestion, the real claude binary against the scripted model) shown, refused as a
bare approve, and answered, from the command line and on a terminal."""

from __future__ import annotations

import getpass
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Env

BIN = Path(sys.executable).parent
CTL = str(BIN / "octipusctl")
ME = getpass.getuser()

TEXT_ONLY = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}

DB = "Which database should the service use?"
FEATURES = "Which features do you want?"
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": DB,
        "header": "Database",
        "options": [
            {"label": "PostgreSQL", "description": "Relational, strong consistency"},
            {"label": "SQLite", "description": "Embedded single file"},
        ],
        "multiSelect": False,
    },
    {
        "question": FEATURES,
        "header": "Features",
        "options": [
            {"label": "Auth", "description": "Login and sessions"},
            {"label": "Search", "description": "Full-text search"},
            {"label": "Export", "description": "CSV export"},
        ],
        "multiSelect": True,
    },
]
QUESTIONNAIRE = {
    "steps": [
        {
            "content": [
                {"type": "text", "text": "A few questions first."},
                {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": QUESTIONS}},
            ]
        },
        {"content": [{"type": "text", "text": "Thanks, noted."}]},
    ]
}
ANSWERED = "Your questions have been answered:"


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=120)


def ok(env: Env, *args: str) -> str:
    done = ctl(env, *args)
    assert done.returncode == 0, (
        f"octipusctl {' '.join(args)} exited {done.returncode}: {done.stderr}{done.stdout}"
    )
    return done.stdout


def refused(env: Env, code: int, *args: str) -> str:
    done = ctl(env, *args)
    assert done.returncode == code, (
        f"octipusctl {' '.join(args)} exited {done.returncode}, expected {code}: {done.stderr}{done.stdout}"
    )
    assert done.stderr.startswith("octipusctl: "), done.stderr
    return " ".join(done.stderr.split())


def line_with(text: str, needle: str) -> str:
    found = [line for line in text.splitlines() if needle in line]
    assert found, f"no line with {needle!r} in:\n{text}"
    return found[0]


def tool_results(env: Env) -> list[dict[str, Any]]:
    """Every tool_result block the model received, in the last request."""
    last = env.model.message_requests[-1].body
    return [
        block
        for message in last["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


# ----------------------------------------------------------------------------- rules


def test_rules_add_list_explain_remove(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    listed = ok(env, "rules")
    assert "configured rules (built-in defaults)" in listed
    assert "cli-native:Read" in line_with(listed, "allow")
    assert "stored rules: none" in listed and "active grants: none" in listed
    assert "flow guard:" in listed

    read = ["cli-native:Read", "--arg", f"file_path={env.daemon.workspace}/notes.txt", "--action", "Read"]
    before = ok(env, "rules", "explain", *read)
    assert "cli-native:Read: ALLOW" in before
    assert "(chosen)" in line_with(before, "(built-in,")

    added = ok(env, "rules", "add", "deny", "cli-native:Read")
    rule_id = added.split()[2].rstrip(":")
    assert added.startswith(f"added rule {rule_id}: deny cli-native:Read")
    stored = json.loads(ok(env, "rules", "--json"))
    assert [(r["id"], r["level"], r["rule"]) for r in stored["stored"]] == [
        (rule_id, "deny", "cli-native:Read")
    ]
    assert stored["defaults"] is True
    assert rule_id in ok(env, "rules", "list"), "the table shows whole ids"

    after = ok(env, "rules", "explain", *read)
    assert "cli-native:Read: DENY" in after
    assert "decided by:  rule cli-native:Read" in after and "stored" in line_with(after, "decided by:")
    chosen = line_with(after, "(chosen)")
    assert "deny" in chosen and "stored" in chosen and chosen.lstrip().startswith("->")
    beaten = line_with(after, "(built-in,")
    assert "allow" in beaten and "(chosen)" not in beaten, "the default allow is listed, not chosen"
    assert "flow guard: mode" in after

    explained = json.loads(ok(env, "rules", "explain", *read, "--json"))
    assert explained["decision"]["level"] == "deny" and explained["decision"]["source"] == "stored"
    chosen_candidates = [c for tier in explained["tiers"].values() for c in tier if c["chosen"]]
    assert [(c["source"], c["level"]) for c in chosen_candidates] == [("stored", "deny")]
    assert any(c["source"] == "built-in" and c["level"] == "allow" for c in explained["tiers"]["defaults"])
    assert set(explained["flow_guard"]) >= {"mode", "session_flags", "call_sets", "egress", "escalates"}

    assert ok(env, "rules", "remove", rule_id).strip() == f"removed rule {rule_id}"
    assert json.loads(ok(env, "rules", "--json"))["stored"] == []
    assert "cli-native:Read: ALLOW" in ok(env, "rules", "explain", *read)

    assert rule_id in refused(env, 2, "rules", "remove", rule_id)
    assert "LEVEL takes" in refused(env, 2, "rules", "add", "never", "cli-native:Read")
    assert "does not parse" in refused(env, 2, "rules", "add", "deny", "cli-native:Bash(")


def test_grants_create_explain_revoke(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    git = ["cli-native:Bash", "--arg", "command=git status", "--action", "Bash"]
    assert "cli-native:Bash: ASK" in ok(env, "rules", "explain", *git)

    created = ok(
        env,
        "rules",
        "grant",
        "cli-native:Bash",
        "--matcher",
        "git:*",
        "--ttl",
        "1h",
        "--uses",
        "3",
        "--note",
        "ci",
    )
    grant_id = created.split()[2].rstrip(":")
    assert "allow cli-native:Bash(git:*) [everywhere; until" in created and "0 of 3 uses" in created
    grants = json.loads(ok(env, "rules", "--json"))["grants"]
    (grant,) = grants
    assert grant["id"] == grant_id and grant["max_uses"] == 3 and grant["note"] == "ci"
    assert grant["expires_at"] is not None
    assert grant_id in line_with(ok(env, "rules"), "cli-native:Bash(git:*)")

    explained = ok(env, "rules", "explain", *git)
    assert "cli-native:Bash: ALLOW" in explained
    assert f"grant {grant_id}" in line_with(explained, "decided by:")
    assert grant_id in line_with(explained, "(chosen)")
    other = ok(env, "rules", "explain", "cli-native:Bash", "--arg", "command=rm -rf x")
    assert "cli-native:Bash: ASK" in other and "does not apply" in line_with(other, grant_id)

    revoked = ok(env, "rules", "revoke", grant_id)
    assert revoked.startswith(f"revoked grant {grant_id}: allow cli-native:Bash(git:*)")
    assert json.loads(ok(env, "rules", "--json"))["grants"] == []
    assert "cli-native:Bash: ASK" in ok(env, "rules", "explain", *git)

    assert "nope" in refused(env, 2, "rules", "revoke", "nope")
    assert "nope" in refused(env, 2, "rules", "grant", "cli-native:Bash", "--session", "nope")
    assert "--uses must be at least 1" in refused(env, 2, "rules", "grant", "cli-native:Bash", "--uses", "0")


# ----------------------------------------------------------------------------- spaces


def test_spaces_members_runs_and_archive(octipus: Callable[..., Env]) -> None:
    env = octipus({"steps": [{"content": [{"type": "text", "text": "planned in a space"}]}]})
    assert "no spaces" in ok(env, "spaces")
    created = ok(env, "spaces", "create", "team")
    assert created.startswith("created space team (") and f"owner {ME}" in created
    assert "already exists" in refused(env, 1, "spaces", "create", "team")

    assert "alice is editor" in ok(env, "spaces", "member", "team", "alice", "editor")
    ok(env, "spaces", "member", "team", "vera", "viewer")
    shown = ok(env, "spaces", "show", "team")
    assert "space team (" in shown and "active" in shown
    assert "owner" in line_with(shown, f"│ {ME} ") and "editor" in line_with(shown, "│ alice ")
    space = json.loads(ok(env, "spaces", "show", "team", "--json"))
    assert space["members"] == {ME: "owner", "alice": "editor", "vera": "viewer"}
    assert space["id"] in ok(env, "spaces"), "the list shows whole ids"
    assert json.loads(ok(env, "spaces", "show", space["id"], "--json"))["name"] == "team"

    assert "nope" in refused(env, 2, "spaces", "show", "nope")
    assert "nope" in refused(env, 2, "spaces", "member", "nope", "alice", "editor")
    assert "last owner" in refused(env, 1, "spaces", "remove-member", "team", ME)
    assert "last owner" in refused(env, 1, "spaces", "member", "team", ME, "editor")

    # a turn in the space: plan mode, posted by the editor, through a sharedUse row
    assert "--model-row" in refused(env, 2, "run", "x", "--space", "team")
    # a space run ignores the user's Claude settings (where the harness points claude at the
    # scripted model), so the shared row carries its environment itself (seed 003)
    vendor_env = {"ANTHROPIC_BASE_URL": env.model.base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted-model"}
    ok(
        env, "models", "create", "shared", "--adapter", "claude-code",
        "--meta", "cliAgent.sharedUse=true", "--meta", f"cliAgent.env={json.dumps(vendor_env)}",
    )  # fmt: skip
    ok(env, "models", "create", "personal", "--adapter", "claude-code")
    workspace = str(env.daemon.workspace)
    assert "sharedUse" in refused(
        env, 1, "run", "x", "--space", "team", "--model-row", "personal", "--workspace", workspace
    )
    ran = ctl(env, "run", "plan it", "--space", "team", "--model-row", "shared", "--as", "alice", "--plan", "--workspace", workspace, "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    session_id, run_id = lines[0]["session_id"], lines[0]["run_id"]
    stored = env.run(run_id)
    assert stored["plan_mode"] is True and stored["author"] == "alice"
    assert env.client.request("GET", f"/sessions/{session_id}")["space_id"] == space["id"]
    assert "viewer" in refused(env, 1, "run", "again", "--session", session_id, "--as", "vera")
    assert "bob" in refused(env, 2, "run", "again", "--session", session_id, "--as", "bob")

    removed = ok(env, "spaces", "remove-member", "team", "alice")
    assert (
        "removed alice" in removed
        and "alice" not in json.loads(ok(env, "spaces", "show", "team", "--json"))["members"]
    )
    archived = ok(env, "spaces", "archive", "team")
    assert archived.startswith(f"archived space team ({space['id']})")
    (listed,) = json.loads(ok(env, "spaces", "--json"))
    assert listed["archived_at"] is not None
    assert "archived" in line_with(ok(env, "spaces", "show", "team"), "space team")
    assert "archived" in refused(env, 1, "run", "again", "--session", session_id)
    assert "nope" in refused(env, 2, "spaces", "archive", "nope")


# ----------------------------------------------------------------------------- questionnaires


def test_questionnaire_shown_refused_as_bare_approve_and_answered(octipus: Callable[..., Env]) -> None:
    env = octipus(QUESTIONNAIRE)
    # --approve yes must not answer a questionnaire: the run waits for the answers
    run_ctl = subprocess.Popen(
        [CTL, "run", "Plan the service.", "--workspace", str(env.daemon.workspace), "--approve", "yes"],
        env=env.daemon.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        runs = env.wait(lambda: env.client.request("GET", "/runs"), 60, "the run")
        run_id = runs[0]["id"]
        approval = env.wait_approval(run_id)
        approval_id = approval["id"]
        assert approval["kind"] == "questionnaire"

        listed = ok(env, "approvals")
        row = line_with(listed, approval_id)
        assert "questionnaire" in row and "cli-native:AskUserQuestion" in row

        shown = ok(env, "approvals", "show", approval_id)
        assert f"approval {approval_id}: questionnaire" in shown
        assert "cli-native:AskUserQuestion" in line_with(shown, "tool:")
        assert line_with(shown, "explanation:").split("explanation:")[1].strip()
        assert "reason:" in shown
        assert "1. [Database] Which database should the service use?" in shown
        assert "2. [Features] Which features do you want?" in shown
        assert "single selection" in shown and "multiple selection" in shown
        for question in QUESTIONS:
            for option in question["options"]:
                assert f") {option['label']} - {option['description']}" in shown
        assert f"octipusctl approvals answer {approval_id}" in shown
        shown_json = json.loads(ok(env, "approvals", "show", approval_id, "--json"))
        assert shown_json["questions"]["questions"][1]["multiSelect"] is True

        bare = refused(env, 1, "approvals", "approve", approval_id)
        assert "questionnaire" in bare and "octipusctl approvals answer" in bare
        assert "missing: 2." in refused(env, 2, "approvals", "answer", approval_id, "--answer", "1=SQLite")
        assert "single answer" in refused(
            env, 2, "approvals", "answer", approval_id, "--answer", "1=SQLite", "--answer", "1=PostgreSQL",
            "--answer", "2=Auth",
        )  # fmt: skip
        assert env.client.request("GET", f"/approvals/{approval_id}")["status"] == "pending"

        answered = ok(
            env, "approvals", "answer", approval_id,
            "--answer", "1=sqlite", "--answer", "Features=Auth", "--answer", f"{FEATURES}=Export",
        )  # fmt: skip
        assert answered.startswith(f"{approval_id}: approved")
        out, errors = run_ctl.communicate(timeout=120)
    finally:
        if run_ctl.poll() is None:
            run_ctl.kill()
    assert run_ctl.returncode == 0, out + errors
    assert (
        "stays pending" in " ".join(errors.split()) and f"octipusctl approvals answer {approval_id}" in errors
    )
    assert "questions from the agent" in out and "assistant: Thanks, noted." in out

    (result,) = [r for r in tool_results(env) if ANSWERED in result_text(r)]
    text = result_text(result)
    assert text.startswith(ANSWERED) and not result.get("is_error")
    assert f'"{DB}"="SQLite"' in text and f'"{FEATURES}"="Auth, Export"' in text
    after = ok(env, "approvals", "show", approval_id)
    assert "approved" in after and f"{FEATURES} -> Auth, Export" in after


def _read_until(fd: int, needle: str, seen: list[str], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in "".join(seen):
        left = deadline - time.monotonic()
        assert left > 0, f"timed out waiting for {needle!r}; terminal so far:\n{''.join(seen)}"
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            assert chunk, f"terminal closed before {needle!r}:\n{''.join(seen)}"
            seen.append(chunk.decode(errors="replace"))


def test_run_asks_a_questionnaire_on_the_terminal(octipus: Callable[..., Env]) -> None:
    env = octipus(QUESTIONNAIRE)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [CTL, "run", "Plan the service.", "--workspace", str(env.daemon.workspace)],
        env={**env.daemon.env, "TERM": "dumb", "COLUMNS": "200"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen: list[str] = []
    try:
        _read_until(master, "Answer 1", seen)
        assert "2) SQLite - Embedded single file" in "".join(seen)
        os.write(master, b"2\n")
        _read_until(master, "Answer 2", seen)
        assert "3) Export - CSV export" in "".join(seen)
        os.write(master, b"1, 3\n")
        _read_until(master, "Send these answers?", seen)
        os.write(master, b"y\n")
        _read_until(master, "Thanks, noted.", seen)
        assert proc.wait(timeout=120) == 0, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    (result,) = [r for r in tool_results(env) if ANSWERED in result_text(r)]
    text = result_text(result)
    assert f'"{DB}"="SQLite"' in text and f'"{FEATURES}"="Auth, Export"' in text


def test_tool_approval_shown_and_remembered_as_a_grant(octipus: Callable[..., Env]) -> None:
    command = "bash -c 'echo x > y'"
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
                {"content": [{"type": "text", "text": "ok"}]},
            ]
        }
    )
    session = env.new_session()
    run_id = env.post(session, "go")
    approval_id = env.wait_approval(run_id)["id"]
    row = line_with(ok(env, "approvals"), approval_id)
    assert "tool" in row and "cli-native:Bash" in row
    shown = ok(env, "approvals", "show", approval_id)
    assert f"approval {approval_id}: tool approval, pending" in shown
    assert (
        command in line_with(shown, "subject:") and line_with(shown, "explanation:").split(":", 1)[1].strip()
    )
    assert '"command"' in line_with(shown, "input:")
    assert "a yes/no tool approval" in refused(env, 2, "approvals", "answer", approval_id, "--answer", "1=x")

    answered = ok(
        env, "approvals", "approve", approval_id, "--remember", "session", "--ttl", "30m", "--uses", "2"
    )
    assert answered.startswith(f"{approval_id}: approved (cli-native:Bash {command})")
    grant_id = line_with(answered, "remembered as grant").split()[3]
    assert env.wait_final(run_id)["status"] == "succeeded"
    grants = {g["id"]: g for g in json.loads(ok(env, "rules", "--json"))["grants"]}
    grant = grants[grant_id]
    assert (grant["tool_id"], grant["matcher"], grant["session_id"], grant["max_uses"]) == (
        "cli-native:Bash",
        command,
        session,
        2,
    )
    assert grant["expires_at"] is not None and grant["approval_id"] == approval_id
    assert "already" in refused(env, 1, "approvals", "deny", approval_id)
