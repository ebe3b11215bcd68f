"""octipusctl commands of session reuse: clear, compact, reuse, messages, checkpoint.

Registered on ``octipusctl sessions`` by :mod:`octipusd.ctl.main` (seed 003 "Session reuse"
.. "Resuming child sessions per role and task"):

- ``clear SESSION``: the ``/clear`` command; prints the session's new clear generation. Vendor
  conversations stored before it are never resumed again, even by a turn finishing later.
- ``compact SESSION [--keep-turns N]``: summarize older messages into a checkpoint; prints
  what the checkpoint covers, or why nothing was published (exit 0 both ways).
- ``reuse SESSION``: the stored vendor conversations (root and keyed children) with their
  acknowledged cursor, checkpoint and last use.
- ``messages SESSION [--after N]``: the current generation's transcript.
- ``checkpoint SESSION``: the current generation's latest checkpoint.

Exit codes as every command: 0 success; 1 the request failed; 2 bad input or unknown session;
3 octipusd is not running.
"""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import typer
from rich.table import Table

from octipusd.ctl.client import TIMEOUT
from octipusd.ctl.common import bad_input, console, err, part, print_json, request, safe

__all__ = [
    "sessions_checkpoint",
    "sessions_clear",
    "sessions_compact",
    "sessions_messages",
    "sessions_reuse",
]

#: Bounds of ``--keep-turns`` (the API's ``keep_turns``).
MAX_KEEP_TURNS = 100

SessionArg = Annotated[str, typer.Argument(help="the session's id (octipusctl sessions)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


def sessions_clear(session_id: SessionArg, as_json: JsonOpt = False) -> None:
    """/clear a session: start a new clear generation (prints it).

    The next turn starts a new vendor conversation; stored ones of earlier generations are never
    resumed, even when an old turn finishes afterwards.
    """
    cleared = request("POST", f"/sessions/{part(session_id)}/clear")
    if as_json:
        print_json(cleared)
        return
    console.print(
        f"cleared session {cleared['id']}: clear generation {cleared['clear_generation']}"
        + (f" (at {cleared['cleared_at']})" if cleared.get("cleared_at") else "")
        + "; the next turn starts a new vendor conversation"
    )


def sessions_compact(
    session_id: SessionArg,
    keep_turns: Annotated[
        int, typer.Option("--keep-turns", help="recent turns kept verbatim after the checkpoint (0-100)")
    ] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Compact a session: summarize its older messages into a checkpoint.

    Waits for a running turn of the session to end first. Prints what the new checkpoint covers
    and which vendor conversations rotated, or why nothing was published (then nothing rotated).
    Exit 0 both ways.
    """
    if not 0 <= keep_turns <= MAX_KEEP_TURNS:
        bad_input(f"--keep-turns must be between 0 and {MAX_KEEP_TURNS}; got {keep_turns}")
    # no read deadline: the daemon first waits for a running turn of the session to end (turns
    # and maintenance are serialized), and the run's own limits bound that
    if not as_json:
        err.print(f"compacting session {safe(session_id)} (after its running turn, if any, ends)...")
    report = request(
        "POST",
        f"/sessions/{part(session_id)}/compact",
        json={"keep_turns": keep_turns},
        timeout=httpx.Timeout(TIMEOUT, read=None),
    )
    if as_json:
        print_json(report)
        return
    if not report["published"]:
        console.print(
            f"nothing published for session {safe(session_id)}: {safe(report.get('reason') or 'no reason given')}"
        )
        return
    console.print(
        f"published checkpoint {report['checkpoint_id']} for session {safe(session_id)}: messages "
        f"{report['first_seq']}..{report['through_seq']} ({report['covered_messages']} messages, "
        f"{report['covered_chars']} characters) summarized in {report['summary_chars']} characters"
    )
    rotated = report.get("rotated") or []
    if rotated:
        console.print(
            f"rotated vendor conversations: {safe(', '.join(rotated))} (their next launch starts from the checkpoint)"
        )
    else:
        console.print("no root vendor conversation to rotate")


def _when(value: Any) -> str:
    return "" if value is None else str(value)


def sessions_reuse(session_id: SessionArg, as_json: JsonOpt = False) -> None:
    """Show a session's stored vendor conversations (what the next launches resume)."""
    records = request("GET", f"/sessions/{part(session_id)}/vendor-sessions")
    if as_json:
        print_json(records)
        return
    if not records:
        console.print(
            f"no stored vendor conversations for session {safe(session_id)} (only Claude Code and Codex CLI "
            "resume one; the first turn stores it)"
        )
        return
    table = Table("key", "vendor id", "cursor", "checkpoint", "generation", "last used")
    table.columns[0].no_wrap = True
    table.columns[1].no_wrap = True
    for r in records:
        generation = str(r["clear_generation"])
        if not r.get("current", True):
            generation += " (cleared: not resumed)"
        checkpoint = r.get("checkpoint_id")
        table.add_row(
            safe(r["key"]),
            safe(r["vendor_session_id"]),
            str(r["cursor"]),
            "none" if checkpoint is None else str(checkpoint),
            generation,
            _when(r.get("last_used_at")),
        )
    console.print(table)


def sessions_messages(
    session_id: SessionArg,
    after: Annotated[int, typer.Option(help="only messages after this sequence number")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """List the current clear generation's messages of a session."""
    if after < 0:
        bad_input(f"--after must be 0 or a message sequence number; got {after}")
    items = request("GET", f"/sessions/{part(session_id)}/messages", params={"after": after})
    if as_json:
        print_json(items)
        return
    if not items:
        console.print(f"no messages in session {safe(session_id)}'s current generation after {after}")
        return
    table = Table("seq", "role", "from", "text")
    for m in items:
        table.add_row(str(m["seq"]), safe(m["role"]), safe(m.get("adapter") or ""), safe(m["text"]))
    console.print(table)


def sessions_checkpoint(session_id: SessionArg, as_json: JsonOpt = False) -> None:
    """Show the current clear generation's latest compaction checkpoint (exit 2: none)."""
    found = request("GET", f"/sessions/{part(session_id)}/checkpoint")
    if as_json:
        print_json(found)
        return
    console.print(
        f"checkpoint {found['id']} of session {found['session_id']} (generation {found['clear_generation']}): "
        f"messages {found['first_seq']}..{found['through_seq']} ({found['covered_chars']} characters), "
        f"created {found['created_at']}"
    )
    console.print(safe(found["summary"]))
