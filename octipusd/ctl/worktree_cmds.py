"""octipusctl commands of child worktrees (``worktrees``) and the rendering of a child's receipt.

``octipusctl worktrees`` lists every recorded worktree (a kept branch included) with its state
and what the orphan reaper would do with it; ``worktrees diff ID`` prints the kept branch's
diff against its base, ``worktrees merge ID`` merges it into the project's current branch,
``worktrees discard ID --yes`` deletes it even unmerged (without ``--yes`` nothing is asked of
the daemon: exit 2). :func:`print_receipt` renders a child run's receipt for ``runs show``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Annotated, Any, Final

import typer
from rich.table import Table

from octipusd.ctl.common import (
    EXIT_FAILED,
    bad_input,
    console,
    fail,
    new_client,
    part,
    print_json,
    request,
    safe,
    write_plain,
)
from octipusd.errors import OctipusError

__all__ = ["print_receipt", "worktrees_app"]

#: Seconds octipusctl waits for a merge or a discard: each git write the daemon makes may take up
#: to 15 minutes (its deadline), and a merge makes a few.
GIT_WRITE_WAIT_S: Final = 30 * 60.0
#: Seconds octipusctl waits for a diff (the daemon's git reads stop at 30 seconds).
DIFF_WAIT_S: Final = 60.0
#: Merge outcomes that leave nothing to do (exit 0); any other exits 1.
DONE_OUTCOMES: Final = frozenset({"merged", "no_changes"})
#: Characters of a commit id shown.
SHORT_SHA: Final = 12

worktrees_app = typer.Typer(
    help="List child worktrees and kept branches; show, merge or discard a kept branch.",
    invoke_without_command=True,
)

IdArg = Annotated[str, typer.Argument(help="the worktree's id (octipusctl worktrees)")]


@worktrees_app.callback()
def worktrees_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list the worktrees."""
    if ctx.invoked_subcommand is None:
        worktrees_list(as_json=as_json)


def _owner(item: dict[str, Any]) -> str:
    if item.get("owner_pid") is None:
        return "-"
    return f"pid {item['owner_pid']} ({'alive' if item.get('owner_alive') else 'gone'})"


@worktrees_app.command("list")
def worktrees_list(
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """List recorded worktrees: id, branch, state (live, left, kept), owner and the reaper's verdict."""
    items = request("GET", "/worktrees")
    if as_json:
        print_json(items)
        return
    if not items:
        console.print("no child worktrees (swarm.worktreeIsolation gives coding children one)")
        return
    table = Table("id", "branch", "state", "owner", "reaper would")
    table.columns[0].no_wrap = True
    table.columns[1].no_wrap = True
    for w in items:
        table.add_row(
            safe(w["id"]),
            safe(w.get("kept_ref") or w["branch"]),
            safe(w["state"]),
            _owner(w),
            f"{safe(w['reaper_action'])}: {safe(w['reaper_reason'])}",
        )
    console.print(table)
    if any(w["state"] == "kept" for w in items):
        console.print("[dim]a kept branch holds unmerged work: octipusctl worktrees diff|merge|discard ID[/]")


@worktrees_app.command("diff")
def worktrees_diff(
    worktree_id: IdArg,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="write the diff unchanged (for git apply): only into a pipe or a file, never a terminal",
        ),
    ] = False,
) -> None:
    """Print the kept branch's diff against the commit its worktree started from.

    Its control characters (a child's file may hold terminal escape sequences) are shown as
    escapes, and a CRLF line end as a line end; ``--raw`` writes the diff unchanged instead,
    refused (exit 2) when standard output is a terminal.
    """
    if raw and sys.stdout.isatty():
        bad_input("--raw writes the diff's control characters as they are: redirect it to a file or a pipe")
    try:
        text = new_client().request_text("GET", f"/worktrees/{part(worktree_id)}/diff", timeout=DIFF_WAIT_S)
    except OctipusError as exc:
        raise fail(exc) from None
    write_plain(text, unchanged=raw)
    if not text:
        console.print(f"[dim]worktree {safe(worktree_id)}: no difference from its base[/]")


@worktrees_app.command("merge")
def worktrees_merge(
    worktree_id: IdArg,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """Merge the kept branch into the project's current branch (exit 1 unless merged).

    The project must be on a branch, without uncommitted tracked changes, and still contain the
    commit the worktree started from; a conflict is aborted and the branch kept. Once merged, the
    branch is deleted (git branch -d).
    """
    done = request("POST", f"/worktrees/{part(worktree_id)}/merge", timeout=GIT_WRITE_WAIT_S)
    if as_json:
        print_json(done)
    else:
        console.print(f"worktree {safe(done['id'])}: {safe(done['outcome'])}: {safe(done['detail'])}")
    if done["outcome"] not in DONE_OUTCOMES:
        raise typer.Exit(EXIT_FAILED)


@worktrees_app.command("discard")
def worktrees_discard(
    worktree_id: IdArg,
    yes: Annotated[
        bool, typer.Option("--yes", help="really delete the branch and its work (required)")
    ] = False,
) -> None:
    """Delete a worktree's branch even if its work is not merged (git branch -D), and its worktree
    if clean (needs --yes). Refused while its owner is alive or it has uncommitted changes."""
    if not yes:
        what = ""
        with contextlib.suppress(OctipusError):
            for w in new_client().request("GET", "/worktrees"):
                if w["id"] == worktree_id:
                    what = f" It is {w['state']}, on {w.get('kept_ref') or w['branch']} in {w['project']}."
        bad_input(
            f"this deletes the branch of worktree {worktree_id} even if its work is not merged "
            f"(git branch -D), and its worktree if it is clean; add --yes to do it "
            f"(octipusctl worktrees diff {worktree_id} shows the work first).{what}"
        )
    done = request(
        "POST", f"/worktrees/{part(worktree_id)}/discard", json={"confirm": True}, timeout=GIT_WRITE_WAIT_S
    )
    console.print(f"worktree {safe(done['id'])} discarded: {safe(done['detail'])}")


# ----------------------------------------------------------------------------- receipts


def _worktree_lines(w: dict[str, Any]) -> list[str]:
    head = str(w.get("headSha") or "")[:SHORT_SHA]
    base = str(w.get("baseSha") or "")[:SHORT_SHA]
    lines = [f"worktree: branch {w.get('branch', '?')}, head {head or '?'} (base {base or '?'})"]
    if w.get("diffStat") or w.get("filesChanged") is not None:
        lines.append(f"  files changed: {w.get('filesChanged', '?')}; {w.get('diffStat') or 'no diff stat'}")
    merge = f"  merge: {w.get('merge', '?')}"
    if w.get("mergeDetail"):
        merge += f" ({w['mergeDetail']})"
    lines.append(merge)
    if w.get("keptRef") or w.get("branchKept"):
        ref = w.get("keptRef") or w.get("branch")
        lines.append(
            f"  kept: {ref} holds the work (octipusctl worktrees diff|merge|discard {w.get('id', 'ID')})"
        )
    if w.get("worktreePath"):
        lines.append(
            f"  path: {w['worktreePath']}" + (f" (project {w['project']})" if w.get("project") else "")
        )
    if w.get("leftInPlace"):
        lines.append("  left in place: its directory is still there (octipusctl worktrees shows why)")
    extras: list[str] = []
    if w.get("included"):
        extras.append(f"included {', '.join(map(str, w['included']))}")
    if w.get("nodeModulesLinked"):
        extras.append("node_modules linked")
    if extras:
        lines.append(f"  {'; '.join(extras)}")
    return lines


def _gate_line(g: dict[str, Any]) -> str:
    flags = [f for f, on in (("required", g.get("required")), ("retryable", g.get("retryable"))) if on]
    exit_code = f", exit {g['exitCode']}" if g.get("exitCode") is not None else ""
    flagged = f" ({', '.join(flags)})" if flags else ""
    line = f"  - {g.get('name', '?')}: {g.get('status', '?')}{exit_code}{flagged}"
    if g.get("command"):
        line += f": {g['command']}"
    return line


def receipt_lines(receipt: dict[str, Any]) -> list[str]:
    """A child's receipt as lines of text (every key optional; unknown keys shown as JSON)."""
    lines: list[str] = []
    if isinstance(receipt.get("worktree"), dict):
        lines += _worktree_lines(receipt["worktree"])
    if receipt.get("worktreeSkipped"):
        lines.append(f"no worktree: {receipt['worktreeSkipped']}")
    setup = receipt.get("setup")
    if isinstance(setup, dict):
        code = setup.get("exitCode")
        ended = f"exited {code}" if code is not None else str(setup.get("status") or "did not run")
        lines.append(f"setup: {setup.get('command', '?')} {ended}")
        if setup.get("status") != "passed" and (setup.get("reason") or setup.get("output")):
            lines.append(f"  {str(setup.get('reason') or setup['output']).strip()[-300:]}")
    gates = [g for g in receipt.get("gates") or [] if isinstance(g, dict)]
    if gates:
        lines.append("gates:")
        lines += [_gate_line(g) for g in gates]
    attempts = receipt.get("attempts") or []
    if len(attempts) > 1:
        retries = len(attempts) - 1
        lines.append(
            f"attempts: {', '.join(map(str, attempts))} (the first, then {retries} contract "
            f"retr{'y' if retries == 1 else 'ies'}; each attempt's run shows this final receipt)"
        )
    for note in receipt.get("notes") or []:
        lines.append(f"note: {note}")
    known = {"worktree", "worktreeSkipped", "setup", "gates", "attempts", "notes"}
    for key in sorted(set(receipt) - known):
        lines.append(f"{key}: {json.dumps(receipt[key], default=str)[:300]}")
    return lines


def print_receipt(receipt: dict[str, Any] | None, indent: str = "  ") -> None:
    """Print a child's receipt under a ``receipt:`` line (``none yet`` while it runs)."""
    if not receipt:
        console.print(f"{indent}receipt: none (a root turn, or a child still running)")
        return
    console.print(f"{indent}receipt:")
    for line in receipt_lines(receipt):
        console.print(f"{indent}  {safe(line)}", soft_wrap=True)
