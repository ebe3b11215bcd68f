"""octipusctl commands of model rows (named adapter launch configurations): list, show, create,
update, delete."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import (
    console,
    err,
    fail,
    key_value,
    new_client,
    print_json,
    safe,
    set_path,
    unset_path,
)
from octipusd.errors import OctipusError

__all__ = ["models_app"]

models_app = typer.Typer(
    help="List, show, create, update and delete model rows (named adapter launch configurations).",
    invoke_without_command=True,
)


def _row_table(row: dict[str, Any]) -> Table:
    table = Table("field", "value", title=f"model row {safe(row['name'])}")
    table.columns[1].overflow = "fold"
    for key in ("id", "name", "adapter", "binary", "model", "permission_mode"):
        value = row.get(key)
        table.add_row(key, safe(value))
    table.add_row("additive_flags", safe(" ".join(row.get("additive_flags") or [])))
    table.add_row("metadata", safe(json.dumps(row.get("metadata") or {})))
    table.add_row("created_at", str(row.get("created_at")))
    table.add_row("updated_at", str(row.get("updated_at")))
    return table


def _capabilities_table(row: dict[str, Any]) -> Table:
    caps = row["capabilities"]
    transport = f", transport {caps['transport']}" if caps.get("transport") else ""
    table = Table(
        "Adapter",
        "Octipus tools",
        "Vendor planning mode",
        "Activity",
        "Vendor approval relay",
        title=f"capabilities ({caps['source'].replace('_', ' ')}{transport})",
    )
    table.add_row(
        caps["adapter"],
        caps["octipus_tools"],
        caps["vendor_planning_mode"],
        caps["activity"],
        caps["vendor_approval_relay"],
    )
    return table


@models_app.callback()
def models_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list model rows."""
    if ctx.invoked_subcommand is None:
        models_list(as_json=as_json)


@models_app.command("list")
def models_list(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """List model rows, by name (``show NAME`` or ``--json`` for ids, metadata and capabilities)."""
    try:
        items = new_client().request("GET", "/models")
    except OctipusError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(items)
        return
    if not items:
        console.print("no model rows (create one: octipusctl models create NAME --adapter claude-code)")
        return
    table = Table("name", "adapter", "model", "mode", "binary", "flags")
    table.columns[0].no_wrap = True
    for r in items:
        table.add_row(
            safe(r["name"]),
            safe(r["adapter"]),
            safe(r.get("model")),
            r["permission_mode"],
            safe(r.get("binary")),
            safe(" ".join(r.get("additive_flags") or [])),
        )
    console.print(table)


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="the row's name or id")],
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """Show one model row and its adapter's capabilities (seed: permissions and limits)."""
    try:
        row = new_client().request("GET", f"/models/{name}")
    except OctipusError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(row)
        return
    console.print(_row_table(row))
    console.print(_capabilities_table(row))


FlagOption = Annotated[
    list[str] | None,
    typer.Option(
        "--flag",
        help="an additive vendor flag (repeatable), e.g. --flag=--no-chrome --flag=--effort=high; "
        "the adapter decides which are allowed",
    ),
]
MetaOption = Annotated[
    list[str] | None,
    typer.Option(
        "--meta",
        help="set metadata KEY=JSON (repeatable; KEY dotted, e.g. cliAgent.transport=exec, "
        "cliAgent.inheritApiKeys=true; a value that is not JSON is a string)",
    ),
]


@models_app.command("create")
def models_create(
    name: Annotated[str, typer.Argument(help="unique name: letters, digits, '.', '_', '-'")],
    adapter: Annotated[
        str, typer.Option(help="adapter: claude-code, claude-glm, claude-kimi, codex, vibe, ...")
    ],
    binary: Annotated[
        str | None, typer.Option(help="command name or absolute path of the vendor CLI")
    ] = None,
    model: Annotated[str | None, typer.Option(help="vendor model name")] = None,
    permission_mode: Annotated[str, typer.Option(help="workspace | full | plan | default")] = "workspace",
    flag: FlagOption = None,
    meta: MetaOption = None,
) -> None:
    """Create a model row."""
    metadata: dict[str, Any] = {}
    for item in meta or []:
        set_path(metadata, *key_value(item, "--meta"))
    body = {
        "name": name,
        "adapter": adapter,
        "binary": binary,
        "model": model,
        "permission_mode": permission_mode,
        "additive_flags": list(flag or []),
        "metadata": metadata,
    }
    try:
        row = new_client().request("POST", "/models", json=body)
    except OctipusError as exc:
        raise fail(exc) from None
    console.print(f"created model row {row['name']} ({row['id']})")


@models_app.command("update")
def models_update(
    name: Annotated[str, typer.Argument(help="the row's name or id")],
    new_name: Annotated[str | None, typer.Option("--name", help="rename the row")] = None,
    adapter: Annotated[str | None, typer.Option(help="new adapter (the flags are re-checked)")] = None,
    binary: Annotated[str | None, typer.Option(help="new binary: command name or absolute path")] = None,
    clear_binary: Annotated[bool, typer.Option(help="use the adapter's configured binary again")] = False,
    model: Annotated[str | None, typer.Option(help="new vendor model name")] = None,
    clear_model: Annotated[bool, typer.Option(help="use the vendor's default model")] = False,
    permission_mode: Annotated[str | None, typer.Option(help="workspace | full | plan | default")] = None,
    flag: FlagOption = None,
    clear_flags: Annotated[bool, typer.Option(help="remove every additive flag")] = False,
    meta: MetaOption = None,
    unset_meta: Annotated[
        list[str] | None, typer.Option(help="remove a metadata KEY (repeatable, dotted)")
    ] = None,
) -> None:
    """Change a model row: only the options given change (--flag replaces the whole flag list)."""
    if (binary is not None and clear_binary) or (model is not None and clear_model) or (flag and clear_flags):
        err.print("octipusctl: give a value or --clear-..., not both")
        raise typer.Exit(2)
    body: dict[str, Any] = {}
    for key, value in (("name", new_name), ("adapter", adapter), ("permission_mode", permission_mode)):
        if value is not None:
            body[key] = value
    if binary is not None or clear_binary:
        body["binary"] = binary
    if model is not None or clear_model:
        body["model"] = model
    if flag or clear_flags:
        body["additive_flags"] = list(flag or [])
    client = new_client()
    try:
        if meta or unset_meta:
            current = client.request("GET", f"/models/{name}")
            metadata: dict[str, Any] = json.loads(json.dumps(current.get("metadata") or {}))
            for item in unset_meta or []:
                unset_path(metadata, item.split("."))
            for item in meta or []:
                set_path(metadata, *key_value(item, "--meta"))
            body["metadata"] = metadata
            name = current["id"]
        if not body:
            err.print("octipusctl: nothing to change; see octipusctl models update --help")
            raise typer.Exit(2)
        row = client.request("PATCH", f"/models/{name}", json=body)
    except OctipusError as exc:
        raise fail(exc) from None
    console.print(f"updated model row {row['name']} ({row['id']})")


@models_app.command("delete")
def models_delete(name: Annotated[str, typer.Argument(help="the row's name or id")]) -> None:
    """Delete a model row; sessions created from it keep its adapter, model and permission mode."""
    try:
        new_client().request("DELETE", f"/models/{name}")
    except OctipusError as exc:
        raise fail(exc) from None
    console.print(f"deleted model row {name}")
