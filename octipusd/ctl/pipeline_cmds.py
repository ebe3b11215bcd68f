"""octipusctl commands of pipelines (seed 003 "Executable paths and pipeline recovery").

Registered as ``octipusctl pipelines`` by :mod:`octipusd.ctl.main`:

- ``templates [list]``, ``templates show NAME``, ``templates import FILE``, ``templates export NAME``;
- ``run TEMPLATE --workspace DIR [--param KEY=VALUE]... [--description TEXT] [--json]``: TEMPLATE is a
  template's name or id, or the path of a template file (its steps and parameters as JSON, or the
  export envelope); prints the new pipeline's id (``--json``: ``{"id": ...}``);
- ``list [--json]``; ``show ID [--json]``: the status document (``--json`` prints it, ``status`` at
  its top level; otherwise the stages with their states, the items by stages, the incomplete attempt);
- ``stop ID``; ``resume ID [--from STAGE] [--skip ITEM]... [--evidence TEXT]``;
- ``items ID [--add TITLE]... [--skip ITEM]... [--order ITEM,...] [--evidence TEXT]``.

Every text an agent or a person wrote passes through :func:`~octipusd.ctl.output.safe`. Exit codes as
every command: 0 success; 1 the request failed (e.g. a resume of a running pipeline); 2 bad input or
an unknown pipeline or template; 3 octipusd is not running.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import bad_input, console, full_ids, part, print_json, request, safe

__all__ = ["parse_params", "pipelines_app"]

pipelines_app = typer.Typer(
    help="Run pipeline templates, follow pipelines, stop, resume and edit their items.", no_args_is_help=True
)
templates_app = typer.Typer(
    help="List, show, import and export pipeline templates.", invoke_without_command=True
)
pipelines_app.add_typer(templates_app, name="templates")

IdArg = Annotated[str, typer.Argument(help="the pipeline's id (octipusctl pipelines list)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        bad_input(f"cannot read the {what} {path}: {exc}")
    except ValueError as exc:
        bad_input(f"the {what} {path} is not JSON: {exc}")


# ----------------------------------------------------------------------------- templates


@templates_app.callback()
def templates_default(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the templates (own, presets and shared) when no sub-command is given."""
    if ctx.invoked_subcommand is None:
        templates_list(as_json)


@templates_app.command("list")
def templates_list(as_json: JsonOpt = False) -> None:
    """List the pipeline templates you can run: yours, the presets and the shared ones."""
    found = request("GET", "/pipelines/templates")
    if as_json:
        print_json(found)
        return
    table = Table("name", "id", "stages", "parameters", "description")
    for t in found:
        origin = " (preset)" if t.get("preset") else ""
        table.add_row(
            safe(t["name"]) + origin,
            safe(t["id"]),
            safe(", ".join(t.get("stages") or [])),
            safe(", ".join(t.get("parameters") or [])),
            safe(t.get("description")),
        )
    console.print(table if found else "no pipeline templates")


@templates_app.command("show")
def templates_show(name: Annotated[str, typer.Argument(help="the template's name or id")]) -> None:
    """Show a template: its stages and parameters, as JSON."""
    print_json(request("GET", f"/pipelines/templates/{part(name)}"))


@templates_app.command("import")
def templates_import(
    file: Annotated[Path, typer.Argument(help="a template file: steps and parameters as JSON, or an export")],
    name: Annotated[str | None, typer.Option("--name", help="its name when the file has none")] = None,
) -> None:
    """Import a template file (the export envelope, or steps and parameters)."""
    document = _read_json(file, "template file")
    if not isinstance(document, dict):
        bad_input(f"the template file {file} must hold a JSON object")
    entry = request("POST", "/pipelines/templates", json={"document": document, "name": name or file.stem})
    console.print(f"imported template {safe(entry['name'])} ({safe(entry['id'])})")


@templates_app.command("export")
def templates_export(name: Annotated[str, typer.Argument(help="the template's name or id")]) -> None:
    """Print a template's export envelope (import it elsewhere with templates import)."""
    print_json(request("GET", f"/pipelines/templates/{part(name)}/export"))


# ----------------------------------------------------------------------------- pipelines


def parse_params(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` options as given: each value is the text after the first ``=`` (the template's
    parameter types turn ``3`` into a number, ``true`` into a boolean where the parameter is one)."""
    params: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            bad_input(f"--param {item!r} is not KEY=VALUE (e.g. --param goal='add a README')")
        params[key.strip()] = value
    return params


@pipelines_app.command("run")
def pipelines_run(
    template: Annotated[str, typer.Argument(help="a template's name or id, or the path of a template file")],
    workspace: Annotated[Path, typer.Option("--workspace", help="the directory the pipeline works in")],
    param: Annotated[
        list[str] | None, typer.Option("--param", help="a parameter, KEY=VALUE (repeatable)")
    ] = None,
    description: Annotated[str | None, typer.Option("--description", help="what this run is for")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a pipeline template in a workspace; prints the new pipeline's id."""
    source = Path(template)
    chosen: Any = template
    if source.suffix == ".json" or source.is_file():
        chosen = _read_json(source, "template file")
        if not isinstance(chosen, dict):
            bad_input(f"the template file {source} must hold a JSON object")
    body = {
        "template": chosen,
        "params": parse_params(param or []),
        "workspace": str(workspace.expanduser().absolute()),
        "description": description,
    }
    created = request("POST", "/pipelines", json=body)
    if as_json:
        print_json({"id": created["id"]})
        return
    console.print(created["id"])


@pipelines_app.command("list")
def pipelines_list(as_json: JsonOpt = False) -> None:
    """List your pipelines, newest first."""
    found = request("GET", "/pipelines")
    if as_json:
        print_json(found)
        return
    table = Table("pipeline", "name", "status", "at", "workspace", "summary")
    full_ids(table, 0)
    for p in found:
        table.add_row(
            p["id"],
            safe(p["name"]),
            safe(p["status"]),
            safe(p.get("currentNode") or ""),
            safe(p.get("workspace")),
            safe(p.get("error") or p.get("summary")),
        )
    console.print(table if found else "no pipelines")


def _print_status(doc: dict[str, Any]) -> None:
    console.print(f"[bold]pipeline {safe(doc['id'])}[/] {safe(doc['name'])}: [bold]{safe(doc['status'])}[/]")
    for key, label in (("summary", "summary"), ("error", "error"), ("workspace", "workspace")):
        if doc.get(key):
            console.print(f"  {label}: {safe(doc[key])}")
    stages = Table("node", "stage", "kind", "status", "retries", "output")
    for s in doc.get("stages") or []:
        stages.add_row(
            safe(s["node"]),
            safe(s["name"]),
            safe(s["kind"]),
            safe(s["status"]),
            str(s["retries"]),
            safe(s.get("output")),
        )
    console.print(stages)
    items = Table("item", "title", "status", "stages")
    full_ids(items, 0)
    for i in doc.get("items") or []:
        by_stage = "; ".join(
            f"{s['stage']}: {s['status']} ({len(s['attempts'])} attempt(s))" for s in i.get("stages") or []
        )
        items.add_row(i["id"], safe(i["title"]), safe(i["status"]), safe(by_stage))
    console.print(items if doc.get("items") else "no plan items")
    incomplete = doc.get("incompleteAttempt")
    if incomplete:
        console.print(
            f"incomplete attempt {safe(incomplete['id'])} of stage {safe(incomplete['stage'])} "
            f"(#{incomplete['number']}, {safe(incomplete['status'])}); its text so far:"
        )
        console.print(safe(incomplete.get("text")))


@pipelines_app.command("show")
def pipelines_show(pipeline_id: IdArg, as_json: JsonOpt = False) -> None:
    """Show a pipeline's status: its stages, its items by stages, an incomplete attempt."""
    doc = request("GET", f"/pipelines/{part(pipeline_id)}")
    if as_json:
        print_json(doc)
        return
    _print_status(doc)


@pipelines_app.command("stop")
def pipelines_stop(pipeline_id: IdArg) -> None:
    """Stop a pipeline's current stage; it is left resumable (stopped)."""
    done = request("POST", f"/pipelines/{part(pipeline_id)}/stop")
    console.print(f"pipeline {safe(done['id'])}: {safe(done['status'])}")


@pipelines_app.command("resume")
def pipelines_resume(
    pipeline_id: IdArg,
    from_stage: Annotated[
        str | None, typer.Option("--from", help="a stage name or node key to rewind to")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="an item delivered already (repeatable)")
    ] = None,
    evidence: Annotated[
        str | None, typer.Option("--evidence", help="the commit and check for the skips")
    ] = None,
) -> None:
    """Resume a stopped, paused or failed pipeline (answers at once: resuming; one that ran a stage
    first awaits its replay review, named here)."""
    body = {"fromStage": from_stage, "skipItems": skip or [], "evidence": evidence}
    done = request("POST", f"/pipelines/{part(pipeline_id)}/resume", json=body)
    console.print(f"pipeline {safe(done['id'])}: {safe(done['status'])}")
    review = done.get("pendingApproval")
    if isinstance(review, dict):
        approval = safe(str(review.get("requestId")))
        console.print(
            f"awaiting its replay review (earlier work may run again): "
            f"octipusctl approvals show {approval}; octipusctl approvals approve|deny {approval}"
        )


@pipelines_app.command("items")
def pipelines_items(
    pipeline_id: IdArg,
    add: Annotated[list[str] | None, typer.Option("--add", help="a new item's title (repeatable)")] = None,
    skip: Annotated[list[str] | None, typer.Option("--skip", help="an item to skip (repeatable)")] = None,
    order: Annotated[
        str | None, typer.Option("--order", help="item ids in their new order, comma-separated")
    ] = None,
    evidence: Annotated[str | None, typer.Option("--evidence", help="the evidence for the skips")] = None,
) -> None:
    """Queue item edits for the pipeline's next item boundary."""
    ids = [i.strip() for i in (order or "").split(",") if i.strip()]
    if not (add or skip or ids):
        bad_input("give at least one of --add, --skip, --order")
    body = {"add": [{"title": t} for t in add or []], "skip": skip or [], "order": ids, "evidence": evidence}
    done = request("POST", f"/pipelines/{part(pipeline_id)}/items", json=body)
    console.print(
        f"pipeline {safe(done['id'])} ({safe(done['status'])}): {len(done['queued'])} change(s) queued"
    )
