"""octipusctl commands of schedules (issue 28 item 8).

Registered as ``octipusctl schedules`` by :mod:`octipusd.ctl.main`:

- ``add --cron EXPR (--session ID | --workspace DIR) (--prompt TEXT | --pipeline TEMPLATE
  [--param KEY=VALUE]...) [--json]``: prints the new schedule's id;
- ``list [--json]``; ``show ID [--json]`` (its latest firings);
- ``pause ID``, ``resume ID``, ``remove ID``.

Every text a person or an agent wrote passes through :func:`~octipusd.ctl.output.safe`. Exit codes as
every command: 0 success; 1 the request failed; 2 bad input or an unknown schedule; 3 octipusd is not
running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import console, full_ids, part, print_json, request, safe
from octipusd.ctl.pipeline_cmds import parse_params

__all__ = ["schedules_app"]

schedules_app = typer.Typer(
    help="Run a prompt or a pipeline at the slots of a cron expression, unattended.", no_args_is_help=True
)

IdArg = Annotated[str, typer.Argument(help="the schedule's id (octipusctl schedules list)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


@schedules_app.command("add")
def schedules_add(
    cron: Annotated[
        str,
        typer.Option("--cron", help='a cron expression in UTC, e.g. "0 7 * * 1-5" (6 fields: seconds first)'),
    ],
    session: Annotated[
        str | None, typer.Option("--session", help="the session each firing continues")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="a directory: each firing makes a new session there")
    ] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="the text of each firing's turn")] = None,
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", help="a pipeline template's name or id to run at each firing")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", help="a template parameter, KEY=VALUE (repeatable)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a schedule; prints its id. Its runs are unattended: an approval is refused and notified."""
    body: dict[str, Any] = {
        "cron": cron,
        "session_id": session,
        "workspace": str(workspace.expanduser().absolute()) if workspace is not None else None,
        "prompt": prompt,
        "pipeline": pipeline,
        "params": parse_params(param or []),
    }
    created = request("POST", "/schedules", json=body)
    if as_json:
        print_json({"id": created["id"]})
        return
    console.print(created["id"])


def _target(s: dict[str, Any]) -> str:
    what = f"prompt: {s['prompt']}" if s.get("prompt") else f"pipeline: {s.get('pipeline')}"
    where = f"session {s['sessionId']}" if s.get("sessionId") else f"workspace {s.get('workspace')}"
    return f"{what} ({where})"


@schedules_app.command("list")
def schedules_list(as_json: JsonOpt = False) -> None:
    """List your schedules with their latest firing."""
    found = request("GET", "/schedules")
    if as_json:
        print_json(found)
        return
    table = Table("schedule", "cron", "status", "runs", "next slot", "last firing")
    full_ids(table, 0)
    for s in found:
        last = (s.get("firings") or [None])[0]
        fired = (
            f"{last['slotAt']} {last['status']}" + (f": {last['error']}" if last.get("error") else "")
            if last
            else ""
        )
        table.add_row(
            s["id"],
            safe(s["cron"]),
            safe(s["status"]),
            safe(_target(s)),
            safe(s.get("nextSlotAt") or ""),
            safe(fired),
        )
    console.print(table if found else "no schedules")


@schedules_app.command("show")
def schedules_show(schedule_id: IdArg, as_json: JsonOpt = False) -> None:
    """Show a schedule and its latest firings."""
    doc = request("GET", f"/schedules/{part(schedule_id)}")
    if as_json:
        print_json(doc)
        return
    console.print(f"[bold]schedule {safe(doc['id'])}[/] {safe(doc['cron'])}: [bold]{safe(doc['status'])}[/]")
    console.print(f"  {safe(_target(doc))}")
    firings = Table("slot", "status", "session", "run", "pipeline", "error")
    for f in doc.get("firings") or []:
        firings.add_row(
            safe(f["slotAt"]) + (" (caught up)" if f.get("caughtUp") else ""),
            safe(f["status"]),
            safe(f.get("sessionId") or ""),
            safe(f.get("runId") or ""),
            safe(f.get("pipelineId") or ""),
            safe(f.get("error") or ""),
        )
    console.print(firings if doc.get("firings") else "no firings yet")


@schedules_app.command("pause")
def schedules_pause(schedule_id: IdArg) -> None:
    """Pause a schedule: no slot fires until it is resumed."""
    done = request("POST", f"/schedules/{part(schedule_id)}/pause")
    console.print(f"schedule {safe(done['id'])}: {safe(done['status'])}")


@schedules_app.command("resume")
def schedules_resume(schedule_id: IdArg) -> None:
    """Resume a paused schedule from its next slot."""
    done = request("POST", f"/schedules/{part(schedule_id)}/resume")
    console.print(f"schedule {safe(done['id'])}: {safe(done['status'])}")


@schedules_app.command("remove")
def schedules_remove(schedule_id: IdArg) -> None:
    """Remove a schedule (the runs and pipelines it started stay)."""
    done = request("DELETE", f"/schedules/{part(schedule_id)}")
    console.print(f"schedule {safe(done['id'])}: {safe(done['status'])}")
