"""``octipusctl runs``: list, show (with a child's receipt and its children) and stop runs."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import (
    console,
    fail,
    full_ids,
    new_client,
    part,
    print_json,
    safe,
    usage_text,
)
from octipusd.ctl.worktree_cmds import print_receipt
from octipusd.errors import OctipusError

__all__ = ["runs_app"]

runs_app = typer.Typer(help="List, show and stop runs.", invoke_without_command=True)


@runs_app.callback()
def runs_default(ctx: typer.Context) -> None:
    """With no sub-command: list recent runs."""
    if ctx.invoked_subcommand is None:
        runs_list()


@runs_app.command("list")
def runs_list(
    session: Annotated[str | None, typer.Option(help="only this session's runs")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recent runs."""
    try:
        items = new_client().request("GET", "/runs", params={"session_id": session} if session else {})
    except OctipusError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(items)
        return
    table = Table("id", "session", "turn", "status", "tokens in/out", "reason")
    full_ids(table, 0, 1)
    for r in items:
        table.add_row(
            r["id"],
            r["session_id"],
            str(r["turn_index"])
            if not r.get("parent_run_id")
            else f"{r['turn_index']} ({safe(r.get('role'))} child)",
            r["status"],
            f"{r['input_tokens']}/{r['output_tokens']}",
            safe((r.get("reason") or "")[:60]),
        )
    console.print(table)


@runs_app.command("show")
def runs_show(
    run_id: str,
    events: Annotated[bool, typer.Option(help="also print the events")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the run, then each child, as JSON lines")
    ] = False,
) -> None:
    """Show one run, its receipt (a child's worktree, merge, gates...) and its children with theirs."""
    client = new_client()
    try:
        r = client.request("GET", f"/runs/{part(run_id)}")
        children = client.request("GET", f"/runs/{part(run_id)}/children")
        if as_json:
            print_json(r)
            for child in children:
                print_json({"child": child})
        else:
            _print_run(r, children)
        if events:
            for e in client.request("GET", f"/runs/{part(run_id)}/events"):
                print_json(e)
    except OctipusError as exc:
        raise fail(exc) from None


def _print_run(r: dict[str, Any], children: list[dict[str, Any]]) -> None:
    """One run for a person: what it was, how it ended, its receipt, then each child's."""
    turn = f"turn {r['turn_index']}"
    kind = f"{r['role']} child of run {r['parent_run_id']}, {turn}" if r.get("parent_run_id") else turn
    console.print(f"[bold]run {r['id']}[/] ({safe(kind)}, session {r['session_id']})")
    console.print(f"  status: {safe(r['status'])}" + (f" ({safe(r['reason'])})" if r.get("reason") else ""))
    console.print(f"  {usage_text(r)}")
    if r.get("host_services"):
        console.print("  host services: its own shell commands share the host network and the Docker socket")
    if r.get("result_text"):
        console.print(f"  result: {safe(str(r['result_text']).strip()[:500])}", soft_wrap=True)
    if r.get("parent_run_id") or r.get("receipt"):
        print_receipt(r.get("receipt"))
    for child in children:
        console.print(
            f"child {child['id']} ({safe(child.get('role'))}): {safe(child['status'])}"
            + (f" ({safe(child['reason'])})" if child.get("reason") else "")
        )
        print_receipt(child.get("receipt"))


@runs_app.command("stop")
def runs_stop(run_id: str) -> None:
    """Stop a live run (its vendor process and everything it started)."""
    try:
        r = new_client().request("POST", f"/runs/{run_id}/stop", json={"reason": "stopped with octipusctl"})
    except OctipusError as exc:
        raise fail(exc) from None
    console.print(f"{r['id']}: {r['status']}" + (f" ({safe(r['reason'])})" if r.get("reason") else ""))


# ----------------------------------------------------------------------------- sessions
