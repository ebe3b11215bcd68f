"""Agent text cannot act on the person's terminal (issue 26 item 2): a stub vendor CLI (Claude's
stream-json) writes escape sequences (CSI, OSC 52, OSC 8, a C1 CSI, a carriage return) and rich
markup into its text, its tool input, its permission request and its result, and the real
``octipusctl`` shows all of it, piped and on a terminal, without writing one of those escapes:
each is shown visibly (``\\x1b[2J``), markup as written; ``--json`` stays exact JSON."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from octipusd.testing.stub_cli import CLAUDE_INIT, claude_result
from tests.e2e.conftest import Env
from tests.e2e.terminal import CTL, on_terminal
from tests.e2e.test_stream_framing import stub_binary

#: Seconds one octipusctl command may take here.
CTL_TIMEOUT_S = 120.0

#: Clear the screen and home the cursor; write the clipboard (OSC 52); a hidden link (OSC 8); a C1
#: CSI; a carriage return that would overwrite the line; rich markup (style, link) and an emoji code.
HOSTILE = (
    "\x1b[2J\x1b[H\x1b]52;c;b3duZWQ=\x07\x1b]8;;https://evil.example/\x1b\\HIDDEN\x1b]8;;\x1b\\"
    "\u009b31m\rapproved [red]OVERWRITE[/] [link=https://evil.example/]CLICKME[/link] :skull:"
)
#: What a person sees of the first escape sequence.
VISIBLE_CSI = "\\x1b[2J"
#: rich's own styles on a terminal (SGR): the only escape sequences octipusctl may write there.
SGR = re.compile(r"\x1b\[[0-9;]*m")
#: What octipusctl run asks on a terminal (typer.confirm), and how the question ends.
ASKED = "Allow cli-native:Bash"
CONFIRM = "[y/N]: "


def _assistant(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": "msg_1", "role": "assistant", "content": content},
        "session_id": "$SESSION_ID",
    }


ACTIONS: list[dict[str, Any]] = [
    {"read_line": True},
    {"emit": {**CLAUDE_INIT, "model": HOSTILE}},
    {
        "emit": _assistant(
            {"type": "text", "text": HOSTILE},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": HOSTILE}},
        )
    },
    {
        "emit": {
            "type": "control_request",
            "request_id": "perm-1",
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "input": {"command": HOSTILE},
                "tool_use_id": "toolu_1",
            },
        }
    },
    {"read_line": True},  # the daemon's answer
    {
        "emit": {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": HOSTILE}],
            },
            "session_id": "$SESSION_ID",
        }
    },
    {"emit": claude_result(HOSTILE)},
    {"exit": 0},
]


def assert_inert(shown: str, where: str) -> None:
    """``shown`` (one command's output, rich's SGR styles removed) holds no control character but
    newline and tab, shows the payload's escapes visibly, and its markup as written."""
    text = SGR.sub("", shown).replace("\r\n", "\n")  # a terminal writes its line ends as CRLF
    acting = sorted(
        {f"{ord(c):#x}" for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}
    )
    assert not acting, f"{where} wrote control characters {acting}:\n{text}"
    assert text.count("OVERWRITE") == text.count("[red]OVERWRITE"), f"{where} read the markup:\n{text}"
    assert text.count("CLICKME") == text.count("[link=https://evil.example/]CLICKME"), f"{where}:\n{text}"


def piped(env: Env, *args: str, code: int = 0) -> str:
    done = subprocess.run(
        [CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=CTL_TIMEOUT_S
    )
    assert done.returncode == code, (
        f"octipusctl {' '.join(args)}: {done.returncode} {done.stderr}{done.stdout}"
    )
    assert_inert(done.stdout + done.stderr, f"octipusctl {' '.join(args)} (piped)")
    return done.stdout


def shown_on_terminal(env: Env, *args: str, answers: Sequence[tuple[str, str]] = ()) -> str:
    """Run octipusctl on a pseudo-terminal that takes colours (answering ``answers``); return what it
    wrote, checked with :func:`assert_inert`."""
    terminal_env = {**env.daemon.env, "TERM": "xterm-256color", "COLUMNS": "200"}
    code, shown = on_terminal(args, terminal_env, answers)
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert SGR.search(text), "no colours: the terminal test would not tell rich's escapes from the agent's"
    assert_inert(text, f"octipusctl {' '.join(args)} (terminal)")
    return text


def test_agent_text_with_escape_sequences_and_markup_is_shown_inert(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(ACTIONS))
    env = octipus({"steps": []}, binary=stub_binary(tmp_path, script))
    workspace = str(env.daemon.workspace)

    streamed = piped(env, "run", "go", "--workspace", workspace, "--approve", "yes")
    session, run_id = re.findall(r"session (\w+) run (\w+)", streamed)[0]
    assert f"assistant: {VISIBLE_CSI}" in streamed and "\\x9b31m" in streamed and "\\x0dapproved" in streamed
    assert "\\u001b]52;c;b3duZWQ=\\u0007" in streamed  # the tool input, as JSON
    approval_id = env.client.request("GET", "/approvals", params={"status": "all", "run_id": run_id})[0]["id"]
    shows = (("runs", "show", run_id), ("sessions", "messages", session), ("approvals", "show", approval_id))
    for args in (*shows, ("approvals", "list", "--all")):
        assert VISIBLE_CSI in piped(env, *args), args

    asked = shown_on_terminal(env, "run", "go", "--workspace", workspace, answers=[(CONFIRM, "y")])
    assert f"{ASKED} {VISIBLE_CSI}" in SGR.sub("", asked)  # the question quotes the command, inert
    assert "succeeded" in asked
    for args in shows:
        assert VISIBLE_CSI in SGR.sub("", shown_on_terminal(env, *args)), args

    exact = piped(env, "runs", "show", run_id, "--json", "--events")
    events = [json.loads(line) for line in exact.splitlines()][1:]
    assert any(e["kind"] == "text" and e["data"]["text"] == HOSTILE for e in events)
