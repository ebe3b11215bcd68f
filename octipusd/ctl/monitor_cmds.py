"""octipusctl commands of monitors (FACTS.md §7), registered as ``octipusctl monitors``:

- ``list [--active] [--json]``: your monitors, newest first;
- ``pause ID``, ``resume ID``, ``cancel ID``: each prints the monitor's new status.

Monitors are created by an agent (``monitor__create``). Every text an agent wrote passes through
:func:`~octipusd.ctl.output.safe`. Exit codes as every command: 0 success; 1 the request failed (a
move the monitor's status does not allow); 2 an unknown monitor; 3 octipusd is not running.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from octipusd.ctl.common import console, full_ids, part, print_json, request, safe

__all__ = ["monitors_app"]

monitors_app = typer.Typer(help="List, pause, resume and cancel monitors.", no_args_is_help=True)

IdArg = Annotated[str, typer.Argument(help="the monitor's id (octipusctl monitors list)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


@monitors_app.command("list")
def monitors_list(
    active: Annotated[bool, typer.Option("--active", help="only monitors not ended")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List your monitors, newest first."""
    found = request("GET", "/monitors", params={"activeOnly": active})
    if as_json:
        print_json(found)
        return
    table = Table("monitor", "status", "source", "deadline", "checks", "session")
    full_ids(table, 0)
    for m in found:
        source = m.get("source") or {}
        what = source.get("name") or source.get("type") or source.get("at") or ""
        table.add_row(
            m["id"],
            safe(m["status"]),
            safe(f"{source.get('kind')}: {what} {json.dumps(source.get('args') or {})}"),
            safe(m.get("deadline") or ""),
            str(m.get("checks", 0)),
            safe(m.get("sessionId") or ""),
        )
    console.print(table if found else "no monitors")


def _move(monitor_id: str, verb: str) -> None:
    moved = request("POST", f"/monitors/{part(monitor_id)}/{verb}")
    console.print(f"monitor {safe(moved['id'])}: {safe(moved['status'])}")


@monitors_app.command("pause")
def monitors_pause(monitor_id: IdArg) -> None:
    """Pause an armed monitor (its deadline does not move)."""
    _move(monitor_id, "pause")


@monitors_app.command("resume")
def monitors_resume(monitor_id: IdArg) -> None:
    """Arm a paused monitor again."""
    _move(monitor_id, "resume")


@monitors_app.command("cancel")
def monitors_cancel(monitor_id: IdArg) -> None:
    """Cancel a monitor that has not been delivered."""
    _move(monitor_id, "cancel")
