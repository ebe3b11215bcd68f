"""octipusctl: the command-line client of octipusd (typer + rich).

Exit codes: 0 success; 1 the run (or request) failed; 2 bad input (or something named was not
found); 3 octipusd is not running.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from octipusd.ctl.client import Client
from octipusd.errors import OctipusError
from octipusd.settings import default_socket_path

app = typer.Typer(
    help="Control octipusd: sessions, runs, approvals, model rows.",
    no_args_is_help=True,
    add_completion=False,
)
approvals_app = typer.Typer(help="List and answer approval requests.", invoke_without_command=True)
runs_app = typer.Typer(help="List, show and stop runs.", invoke_without_command=True)
sessions_app = typer.Typer(help="List and show sessions.", invoke_without_command=True)
models_app = typer.Typer(
    help="List, show, create, update and delete model rows (named adapter launch configurations).",
    invoke_without_command=True,
)
app.add_typer(approvals_app, name="approvals")
app.add_typer(models_app, name="models")
app.add_typer(runs_app, name="runs")
app.add_typer(sessions_app, name="sessions")

# not a terminal (pipes, logs): wide enough that whole ids and paths fit in tables
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)

TERMINAL = {"succeeded", "failed", "interrupted", "cancelled"}


class _State:
    socket: Path = default_socket_path()


def _client() -> Client:
    return Client(_State.socket)


@app.callback()
def _main(
    socket: Annotated[
        Path | None, typer.Option(help="octipusd socket (default $XDG_RUNTIME_DIR/octipus/octipusd.sock)")
    ] = None,
) -> None:
    env = os.environ.get("OCTIPUS_DAEMON__SOCKET")
    _State.socket = socket or (Path(env) if env else default_socket_path())


def _fail(exc: OctipusError) -> typer.Exit:
    err.print(f"octipusctl: {exc.message}")
    return typer.Exit(exc.exit_code)


def _full_ids(table: Table, *columns: int) -> None:
    """Never shorten id columns: every command takes the whole id."""
    for index in columns:
        table.columns[index].no_wrap = True
        table.columns[index].min_width = 32


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")


def _on_command_line(ctx: typer.Context, param: str) -> bool:
    """Whether the command's parameter ``param`` (Python name) was given on the command line."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name == "COMMANDLINE"


def _key_value(item: str, what: str) -> tuple[list[str], Any]:
    """Parse ``KEY=JSON`` (KEY dotted, e.g. ``cliAgent.transport``); a value that is not JSON is a string."""
    key, eq, raw = item.partition("=")
    path = key.strip().split(".")
    if not eq or not all(path):
        err.print(
            f"octipusctl: {what} {item!r} is not KEY=JSON (e.g. cliAgent.transport=exec, cliAgent.sharedUse=true)"
        )
        raise typer.Exit(2)
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def _set_path(target: dict[str, Any], path: list[str], value: Any) -> None:
    node = target
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            err.print(f"octipusctl: cannot set {'.'.join(path)}: {part} is not an object")
            raise typer.Exit(2)
        node = child
    node[path[-1]] = value


def _unset_path(target: dict[str, Any], path: list[str]) -> None:
    node: Any = target
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


# ----------------------------------------------------------------------------- health


@app.command()
def health(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """Show the daemon's health and each vendor CLI's resolved path and version."""
    try:
        data = _client().request("GET", "/health")
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(data)
        return
    console.print(f"octipusd {data['daemon_version']} (pid {data['pid']}), database {data['database']}")
    console.print(f"live runs: {data['live_runs']}")
    table = Table("adapter", "binary", "path", "version / error")
    table.columns[2].no_wrap = True
    for a in data["adapters"]:
        table.add_row(
            a["adapter"],
            a["binary"],
            a["path"] or f"[red]not found[/] (PATH searched: {a['searched_path']})",
            a["version"] or a["error"] or "",
        )
    console.print(table)


# ----------------------------------------------------------------------------- run


def _render(event: dict[str, Any]) -> None:
    kind, data = event["kind"], event["data"]
    if kind == "text":
        console.print(f"[bold]assistant[/]: {data.get('text', '')}")
    elif kind == "thinking":
        console.print(f"[dim]thinking: {data.get('text', '')[:300]}[/]")
    elif kind == "tool_use":
        args = json.dumps(data.get("input", {}))
        console.print(f"[cyan]tool[/] {data.get('name')} {args[:300]}")
    elif kind == "tool_result":
        text = str(data.get("content", "")).strip().replace("\n", " ⏎ ")
        style = "red" if data.get("is_error") else "dim"
        console.print(f"[{style}]  result: {text[:300]}[/]")
    elif kind == "permission_decision":
        mark = "[green]allowed[/]" if data.get("allowed") else "[red]denied[/]"
        console.print(f"[magenta]permission[/] {data.get('tool_id')}: {mark} ({data.get('reason')})")
    elif kind == "approval_requested":
        console.print(
            f"[yellow]approval needed[/] {data.get('tool_id')} {data.get('subject') or ''} "
            f"-> octipusctl approvals approve {data.get('approval_id')}"
        )
    elif kind == "approval_decided":
        console.print(
            f"[yellow]approval[/] {data.get('approval_id')}: {data.get('outcome')} by {data.get('decided_by')}"
        )
    elif kind == "review_required":
        console.print(f"[red]{data.get('reason')}[/]")
    elif kind == "run_status":
        extra = f" ({data['reason']})" if data.get("reason") else ""
        resumed = " resumed" if data.get("resumed") else ""
        console.print(f"[blue]run {data.get('status')}{resumed}{extra}[/]")
    elif kind == "session":
        servers = ", ".join(f"{k}={v}" for k, v in (data.get("mcp_servers") or {}).items())
        model = f" model {data['model']}" if data.get("model") else ""
        console.print(f"[dim]vendor session {data.get('session_id')}{model} mcp: {servers}[/]")
    elif kind == "result":
        usage = data.get("usage") or {}
        console.print(
            f"[dim]result {data.get('subtype')} (input {usage.get('input_tokens', 0)}, "
            f"output {usage.get('output_tokens', 0)} tokens)[/]"
        )
    elif kind in ("notice", "bridge_call"):
        detail = " ".join(str(x) for x in (data.get("message") or data.get("event"), data.get("tool")) if x)
        console.print(f"[dim]{kind}: {detail}[/]")
    elif kind == "error":
        label = "[red]vendor error[/]" if data.get("fatal") else "[yellow]vendor warning[/]"
        console.print(f"{label}: {data.get('message', '')}")
    elif kind in ("steering_submitted", "guidance_pending"):
        how = "into the running turn" if kind == "steering_submitted" else "queued for the run context"
        console.print(f"[magenta]guidance {how}[/]: {data.get('text', '')}")
    elif kind in ("unparsed", "unknown"):
        console.print(f"[dim]{kind}: {json.dumps(data)[:200]}[/]")


def _answer_inline(client: Client, event: dict[str, Any], approve: str) -> None:
    data = event["data"]
    approval_id = data.get("approval_id")
    decision: str | None = None
    if approve == "yes":
        decision = "approve"
    elif approve == "no":
        decision = "deny"
    elif sys.stdin.isatty():
        ok = typer.confirm(f"Allow {data.get('tool_id')} {data.get('subject') or ''}?", default=False)
        decision = "approve" if ok else "deny"
    else:
        err.print(
            f"octipusctl: no terminal to ask on; waiting for another client to answer "
            f"(octipusctl approvals approve|deny {approval_id}) until {data.get('expires_at')}"
        )
    if decision is not None:
        console.print(f"[yellow]answering {approval_id}: {decision} (--approve {approve})[/]")
        try:
            client.request("POST", f"/approvals/{approval_id}", json={"decision": decision})
        except OctipusError as exc:
            err.print(f"octipusctl: could not answer approval {approval_id}: {exc.message}")


@app.command()
def run(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="the text of the turn")],
    session: Annotated[str | None, typer.Option(help="continue this session (default: a new one)")] = None,
    workspace: Annotated[Path, typer.Option(help="workspace of a new session")] = Path("."),
    adapter: Annotated[str, typer.Option(help="vendor adapter of a new session")] = "claude-code",
    model: Annotated[str | None, typer.Option(help="vendor model of a new session")] = None,
    permission_mode: Annotated[str, typer.Option(help="workspace | full | plan | default")] = "workspace",
    unattended: Annotated[bool, typer.Option(help="a new session that may not ask for approvals")] = False,
    model_row: Annotated[
        str | None,
        typer.Option(
            help="create the new session from this model row (name or id): it takes the row's adapter, "
            "model and permission mode"
        ),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            help="a per-session adapter option KEY=JSON for the new session (repeatable; e.g. transport=exec), "
            "merged over the row's metadata.cliAgent"
        ),
    ] = None,
    approve: Annotated[
        str,
        typer.Option(
            help="answer this run's approvals: ask (prompt on a terminal; without one, like wait), yes, no, "
            "or wait (for another client: octipusctl approvals approve|deny ID)"
        ),
    ] = "ask",
    as_json: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
) -> None:
    """Post a turn (new or continued session) and stream the run live; exit 0 on success."""
    if approve not in ("ask", "yes", "no", "wait"):
        err.print("octipusctl: --approve takes ask, yes, no or wait")
        raise typer.Exit(2)
    if session is not None and (model_row is not None or option):
        err.print("octipusctl: --model-row and --option apply to a new session; drop them or --session")
        raise typer.Exit(2)
    options: dict[str, Any] = {}
    for item in option or []:
        _set_path(options, *_key_value(item, "--option"))
    client = _client()
    try:
        if session is None:
            body: dict[str, Any] = {
                "workspace": str(workspace.resolve()),
                "attended": not unattended,
                "options": options,
            }
            if model_row is not None:
                # the row decides adapter, model and mode; only explicit choices are sent (and
                # rejected by the daemon when they differ from the row's)
                explicit = {"adapter": adapter, "model": model, "permission_mode": permission_mode}
                body.update({k: v for k, v in explicit.items() if _on_command_line(ctx, k)})
                body["model_row"] = model_row
            else:
                body.update(adapter=adapter, model=model, permission_mode=permission_mode)
            created = client.request("POST", "/sessions", json=body)
            session = str(created["id"])
        posted = client.request("POST", f"/sessions/{session}/turns", json={"prompt": prompt})
        run_id = posted["id"]
        if as_json:
            _print_json({"kind": "posted", "session_id": session, "run_id": run_id})
        else:
            console.print(f"[dim]session {session} run {run_id} (turn {posted['turn_index']})[/]")
        for event in client.stream(run_id):
            if as_json:
                _print_json(event)
            else:
                _render(event)
            if event["kind"] == "approval_requested" and approve != "wait":
                _answer_inline(client, event, approve)
        final = client.request("GET", f"/runs/{run_id}")
    except OctipusError as exc:
        raise _fail(exc) from None
    if not as_json:
        console.print(
            f"[bold]{final['status']}[/] session {session} run {run_id}; tokens in {final['input_tokens']} "
            f"out {final['output_tokens']}" + (f"; {final['reason']}" if final.get("reason") else "")
        )
    raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def steer(
    session: Annotated[str, typer.Argument(help="the session whose live run gets the guidance")],
    text: Annotated[str, typer.Argument(help="the guidance")],
) -> None:
    """Send guidance to a session's live run (into the running turn where the vendor allows)."""
    try:
        out = _client().request("POST", f"/sessions/{session}/steer", json={"text": text})
    except OctipusError as exc:
        raise _fail(exc) from None
    how = "delivered into the running turn" if out["delivery"] == "stdin" else "queued for the run's context"
    console.print(f"run {out['run_id']}: guidance {how}")


# ----------------------------------------------------------------------------- approvals


def _approvals_table(items: list[dict[str, Any]]) -> Table:
    table = Table("id", "status", "tool", "subject", "run", "expires / decided")
    _full_ids(table, 0, 4)
    for a in items:
        table.add_row(
            a["id"],
            a["status"],
            a["tool_id"],
            (a.get("subject") or "")[:60],
            a["run_id"],
            a.get("decided_by") or a.get("expires_at") or "",
        )
    return table


@approvals_app.callback()
def approvals_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list pending approvals."""
    if ctx.invoked_subcommand is None:
        approvals_list(as_json=as_json)


@approvals_app.command("list")
def approvals_list(
    all_: Annotated[bool, typer.Option("--all", help="include answered ones")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List approval requests (pending ones by default)."""
    try:
        items = _client().request("GET", "/approvals", params={"status": "all" if all_ else "pending"})
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(items)
    elif not items:
        console.print("no pending approvals" if not all_ else "no approvals")
    else:
        console.print(_approvals_table(items))


def _answer(approval_id: str, decision: str, reason: str | None) -> None:
    try:
        a = _client().request(
            "POST", f"/approvals/{approval_id}", json={"decision": decision, "reason": reason}
        )
    except OctipusError as exc:
        raise _fail(exc) from None
    console.print(f"{a['id']}: {a['status']} ({a['tool_id']} {a.get('subject') or ''})")


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str, reason: Annotated[str | None, typer.Option(help="why (kept with the decision)")] = None
) -> None:
    """Approve a pending request."""
    _answer(approval_id, "approve", reason)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str, reason: Annotated[str | None, typer.Option(help="why (shown to the agent)")] = None
) -> None:
    """Deny a pending request."""
    _answer(approval_id, "deny", reason)


# ----------------------------------------------------------------------------- runs


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
        items = _client().request("GET", "/runs", params={"session_id": session} if session else {})
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(items)
        return
    table = Table("id", "session", "turn", "status", "tokens in/out", "reason")
    _full_ids(table, 0, 1)
    for r in items:
        table.add_row(
            r["id"],
            r["session_id"],
            str(r["turn_index"]),
            r["status"],
            f"{r['input_tokens']}/{r['output_tokens']}",
            (r.get("reason") or "")[:60],
        )
    console.print(table)


@runs_app.command("show")
def runs_show(
    run_id: str, events: Annotated[bool, typer.Option(help="also print the events")] = False
) -> None:
    """Show one run (and optionally its stored events)."""
    client = _client()
    try:
        r = client.request("GET", f"/runs/{run_id}")
        _print_json(r)
        if events:
            for e in client.request("GET", f"/runs/{run_id}/events"):
                _print_json(e)
    except OctipusError as exc:
        raise _fail(exc) from None


@runs_app.command("stop")
def runs_stop(run_id: str) -> None:
    """Stop a live run (its vendor process and everything it started)."""
    try:
        r = _client().request("POST", f"/runs/{run_id}/stop", json={"reason": "stopped with octipusctl"})
    except OctipusError as exc:
        raise _fail(exc) from None
    console.print(f"{r['id']}: {r['status']}" + (f" ({r['reason']})" if r.get("reason") else ""))


# ----------------------------------------------------------------------------- sessions


@sessions_app.callback()
def sessions_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list sessions."""
    if ctx.invoked_subcommand is None:
        sessions_list(as_json=as_json)


@sessions_app.command("list")
def sessions_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List sessions, newest first."""
    try:
        items = _client().request("GET", "/sessions")
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(items)
        return
    table = Table("id", "adapter", "mode", "workspace", "created")
    _full_ids(table, 0)
    for s in items:
        table.add_row(s["id"], s["adapter"], s["permission_mode"], s["workspace"], s["created_at"])
    console.print(table)


@sessions_app.command("show")
def sessions_show(session_id: str) -> None:
    """Show one session and its runs."""
    client = _client()
    try:
        _print_json(client.request("GET", f"/sessions/{session_id}"))
        for r in client.request("GET", "/runs", params={"session_id": session_id}):
            _print_json(
                {"run": r["id"], "turn": r["turn_index"], "status": r["status"], "reason": r["reason"]}
            )
    except OctipusError as exc:
        raise _fail(exc) from None


# ----------------------------------------------------------------------------- models


def _row_table(row: dict[str, Any]) -> Table:
    table = Table("field", "value", title=f"model row {row['name']}")
    table.columns[1].overflow = "fold"
    for key in ("id", "name", "adapter", "binary", "model", "permission_mode"):
        value = row.get(key)
        table.add_row(key, "" if value is None else str(value))
    table.add_row("additive_flags", " ".join(row.get("additive_flags") or []))
    table.add_row("metadata", json.dumps(row.get("metadata") or {}))
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
        items = _client().request("GET", "/models")
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(items)
        return
    if not items:
        console.print("no model rows (create one: octipusctl models create NAME --adapter claude-code)")
        return
    table = Table("name", "adapter", "model", "mode", "binary", "flags")
    table.columns[0].no_wrap = True
    for r in items:
        table.add_row(
            r["name"],
            r["adapter"],
            r.get("model") or "",
            r["permission_mode"],
            r.get("binary") or "",
            " ".join(r.get("additive_flags") or []),
        )
    console.print(table)


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="the row's name or id")],
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """Show one model row and its adapter's capabilities (seed: permissions and limits)."""
    try:
        row = _client().request("GET", f"/models/{name}")
    except OctipusError as exc:
        raise _fail(exc) from None
    if as_json:
        _print_json(row)
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
        _set_path(metadata, *_key_value(item, "--meta"))
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
        row = _client().request("POST", "/models", json=body)
    except OctipusError as exc:
        raise _fail(exc) from None
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
    client = _client()
    try:
        if meta or unset_meta:
            current = client.request("GET", f"/models/{name}")
            metadata: dict[str, Any] = json.loads(json.dumps(current.get("metadata") or {}))
            for item in unset_meta or []:
                _unset_path(metadata, item.split("."))
            for item in meta or []:
                _set_path(metadata, *_key_value(item, "--meta"))
            body["metadata"] = metadata
            name = current["id"]
        if not body:
            err.print("octipusctl: nothing to change; see octipusctl models update --help")
            raise typer.Exit(2)
        row = client.request("PATCH", f"/models/{name}", json=body)
    except OctipusError as exc:
        raise _fail(exc) from None
    console.print(f"updated model row {row['name']} ({row['id']})")


@models_app.command("delete")
def models_delete(name: Annotated[str, typer.Argument(help="the row's name or id")]) -> None:
    """Delete a model row; sessions created from it keep its adapter, model and permission mode."""
    try:
        _client().request("DELETE", f"/models/{name}")
    except OctipusError as exc:
        raise _fail(exc) from None
    console.print(f"deleted model row {name}")


def main() -> None:
    """Entry point of ``octipusctl``."""
    app()
