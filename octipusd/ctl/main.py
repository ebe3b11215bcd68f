"""octipusctl: the command-line client of octipusd (typer + rich).

This module is the typer app: the top-level options, ``health``, ``run``, ``steer``, ``runs`` and
``sessions``; the other command groups live in their own modules and are registered here
(``approvals`` and ``rules``: :mod:`octipusd.ctl.policy_cmds`; ``actions``:
:mod:`octipusd.ctl.action_cmds`; ``spaces``:
:mod:`octipusd.ctl.space_cmds`; ``models``: :mod:`octipusd.ctl.model_cmds`; ``notify``:
:mod:`octipusd.ctl.notify_cmds`; ``vault``: :mod:`octipusd.ctl.vault_cmds`; ``worktrees`` and the
receipts of ``runs show``: :mod:`octipusd.ctl.worktree_cmds`; the session-reuse
commands ``sessions clear|compact|reuse|messages|checkpoint``: :mod:`octipusd.ctl.session_cmds`).
Shared helpers are in
:mod:`octipusd.ctl.common`, questionnaire handling in :mod:`octipusd.ctl.questions`.

Exit codes: 0 success; 1 the run (or request) failed; 2 bad input (or something named was not
found); 3 octipusd is not running.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.api.request_limits import API_LIMITS
from octipusd.ctl.action_cmds import actions_app
from octipusd.ctl.client import Client
from octipusd.ctl.common import (
    State,
    bad_input,
    confirm,
    console,
    err,
    fail,
    full_ids,
    key_value,
    new_client,
    on_command_line,
    part,
    print_json,
    safe,
    set_path,
    text_input,
    usage_text,
)
from octipusd.ctl.model_cmds import models_app
from octipusd.ctl.monitor_cmds import monitors_app
from octipusd.ctl.notify_cmds import notifier_line, notify_app
from octipusd.ctl.pipeline_cmds import pipelines_app
from octipusd.ctl.plan_cmds import plan_app
from octipusd.ctl.policy_cmds import approvals_app, rules_app
from octipusd.ctl.questions import answer_questionnaire_inline
from octipusd.ctl.run_cmds import runs_app
from octipusd.ctl.schedule_cmds import schedules_app
from octipusd.ctl.session_cmds import (
    sessions_checkpoint,
    sessions_clear,
    sessions_compact,
    sessions_messages,
    sessions_reuse,
)
from octipusd.ctl.space_cmds import spaces_app
from octipusd.ctl.vault_cmds import vault_app, vault_line
from octipusd.ctl.web_cmds import web_command
from octipusd.ctl.worktree_cmds import worktrees_app
from octipusd.errors import OctipusError
from octipusd.money import format_usd, usd
from octipusd.paths import default_socket_path

__all__ = ["app", "main"]

#: What the daemon takes from ``--file`` (its request limits; no FastAPI import for them).
FILE_LIMITS = (
    f"the daemon takes at most {API_LIMITS.max_text_chars:,} characters, in a request body of at most "
    f"{API_LIMITS.max_body_bytes // 2**20} MiB"
)

app = typer.Typer(
    help="Control octipusd: sessions, runs, work plans, approvals, rules, spaces, model rows, the action "
    "journal, child worktrees, the vault, the web page.",
    no_args_is_help=True,
    add_completion=False,
)
sessions_app = typer.Typer(
    help="List, show and delete sessions; /clear and compact them, show their stored vendor "
    "conversations and messages.",
    invoke_without_command=True,
)
app.add_typer(actions_app, name="actions")
app.add_typer(approvals_app, name="approvals")
app.add_typer(models_app, name="models")
app.add_typer(notify_app, name="notify")
app.add_typer(pipelines_app, name="pipelines")
app.add_typer(monitors_app, name="monitors")
app.add_typer(schedules_app, name="schedules")
app.add_typer(plan_app, name="plan")
app.add_typer(rules_app, name="rules")
app.add_typer(runs_app, name="runs")
app.add_typer(sessions_app, name="sessions")
app.add_typer(spaces_app, name="spaces")
app.add_typer(vault_app, name="vault")
app.add_typer(worktrees_app, name="worktrees")
app.command("web")(web_command)

TERMINAL = {"succeeded", "failed", "interrupted", "cancelled"}


@app.callback()
def _main(
    socket: Annotated[
        Path | None, typer.Option(help="octipusd socket (default $XDG_RUNTIME_DIR/octipus/octipusd.sock)")
    ] = None,
) -> None:
    env = os.environ.get("OCTIPUS_DAEMON__SOCKET")
    State.socket = socket or (Path(env) if env else default_socket_path())


# ----------------------------------------------------------------------------- health


def sandbox_line(sandbox: dict[str, Any]) -> str:
    """The shell sandbox's line of ``octipusctl health``: its mode, and its runner or why none."""
    mode = f"security.shellSandbox={sandbox['mode']}"
    if sandbox["in_force"]:
        return f"shell sandbox: {mode}, in force with {safe(sandbox['runner_path'])}"
    if sandbox["runner_path"]:
        return (
            f"shell sandbox: {mode} (a runner works: {safe(sandbox['runner_path'])}; commands run unconfined)"
        )
    if sandbox["mode"] == "off":
        return f"shell sandbox: {mode}; no runner works here ({safe(sandbox['reason'] or '')})"
    verdict = "every shell command is refused" if sandbox["mode"] == "required" else "commands run unconfined"
    return f"shell sandbox: {mode}, [red]no runner[/] ({safe(sandbox['reason'] or '')}): {verdict}"


@app.command()
def health(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """Show the daemon's health and each vendor CLI's resolved path and version."""
    try:
        data = new_client().request("GET", "/health")
    except OctipusError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(data)
        return
    console.print(f"octipusd {data['daemon_version']} (pid {data['pid']}), database {data['database']}")
    console.print(f"live runs: {data['live_runs']}")
    web = data.get("web")
    console.print(
        f"web page: {safe(web['origin'])} (octipusctl web prints its link)"
        if web
        else "web page: off (web.enabled)"
    )
    if data.get("process_containment"):
        console.print(
            f"process containment: {data['process_containment']} ({data['process_containment_detail']})"
        )
    sandbox = data.get("shell_sandbox")
    if sandbox:
        console.print(sandbox_line(sandbox), soft_wrap=True)
    table = Table("adapter", "binary", "path", "version / error")
    for column in table.columns[:2]:
        column.no_wrap = True
    table.columns[
        2
    ].overflow = "fold"  # a long path wraps inside its cell; the other columns keep their width
    searched: list[str] = []
    for a in data["adapters"]:
        if not a["path"] and a["searched_path"] not in searched:
            searched.append(a["searched_path"])
        table.add_row(
            safe(a["adapter"]),
            safe(a["binary"]),
            safe(a["path"]) if a["path"] else "[red]not found[/]",
            safe(a["version"] or a["error"] or ""),  # the vendor binary's own words
        )
    console.print(table)
    for path in searched:  # the same PATH for every binary not found: said once, below the table
        console.print(f"not found on the PATH searched: {safe(path)}", soft_wrap=True)
    for warning in data.get("warnings", []):  # stored rows skipped because they cannot be loaded
        console.print(f"[yellow]warning:[/] {safe(warning)}", soft_wrap=True)
    reaper = data.get("worktree_reaper")
    if reaper:  # the orphan reaper of child worktrees (swarm.worktreeIsolation on)
        last = f"last sweep {reaper['last_ended_at']}" if reaper.get("last_ended_at") else "no sweep yet"
        counts: dict[str, int] = {}
        for report in reaper["reports"]:
            counts[report["action"]] = counts.get(report["action"], 0) + 1
        seen = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "no worktree"
        console.print(
            f"worktree reaper: every {reaper['interval_ms'] / 1000:g} s; {last}: {seen}"
            + (f"; [red]{safe(reaper['error'])}[/]" if reaper.get("error") else "")
            + " (octipusctl worktrees)"
        )
    for line in (notifier_line(data.get("notifier")), vault_line(data.get("vault"))):
        if line is not None:
            console.print(line)


# ----------------------------------------------------------------------------- run


def _render(event: dict[str, Any]) -> None:
    kind, data = event["kind"], event["data"]
    if kind == "text":
        console.print(f"[bold]assistant[/]: {safe(data.get('text', ''))}")
    elif kind == "thinking":
        console.print(f"[dim]thinking: {safe(data.get('text', '')[:300])}[/]")
    elif kind == "tool_use":
        args = json.dumps(data.get("input", {}))
        console.print(f"[cyan]tool[/] {safe(data.get('name'))} {safe(args[:300])}")
    elif kind == "tool_result":
        text = str(data.get("content", "")).strip().replace("\n", " ⏎ ")
        style = "red" if data.get("is_error") else "dim"
        console.print(f"[{style}]  result: {safe(text[:300])}[/]")
    elif kind == "permission_decision":
        mark = "[green]allowed[/]" if data.get("allowed") else "[red]denied[/]"
        console.print(
            f"[magenta]permission[/] {safe(data.get('tool_id'))}: {mark} ({safe(data.get('reason'))})"
        )
    elif kind == "policy_decision":
        subject = f" {data['subject']}" if data.get("subject") else ""
        grant = f", grant {data['grant_id']}" if data.get("grant_id") else ""
        where = f"{data['tier']}{grant}: " if data.get("tier") else ""
        console.print(
            f"[dim]policy {safe(data.get('tool_id'))}{safe(subject[:120])}: {safe(data.get('level'))} "
            f"({safe(where)}{safe(data.get('explanation'))})[/]"
        )
    elif kind == "flow_guard":
        subject = f" {data['subject']}" if data.get("subject") else ""
        console.print(
            f"[yellow]flow guard[/] {safe(data.get('tool_id'))}{safe(subject[:120])}: "
            f"[yellow]{safe(data.get('reason'))}[/]"
        )
    elif kind == "flow_label":
        added = ", ".join(data.get("added") or [])
        reasons = "; ".join(data.get("reasons") or [])
        console.print(
            f"[magenta]flow label[/] +{safe(added)} -> session {safe(data.get('label'))} "
            f"[dim](after {safe(data.get('tool_id'))}{': ' + safe(reasons) if reasons else ''})[/]"
        )
    elif kind == "approval_requested":
        approval_id = data.get("approval_id")
        if data.get("kind") == "questionnaire":
            how = (
                f"octipusctl approvals show {approval_id}; "
                f"octipusctl approvals answer {approval_id} --answer 'NUMBER=ANSWER'"
            )
            console.print(f"[yellow]questions from the agent[/] ({safe(data.get('tool_id'))}) -> {how}")
        else:
            why = data.get("explanation") or data.get("reason")
            whose = f" (child run {data['child_run_id']})" if data.get("child_run_id") else ""
            console.print(
                f"[yellow]approval needed{whose}[/] {safe(data.get('tool_id'))} {safe(data.get('subject') or '')} "
                f"-> octipusctl approvals approve {approval_id}" + (f" [dim]({safe(why)})[/]" if why else "")
            )
    elif kind == "approval_decided":
        console.print(
            f"[yellow]approval[/] {data.get('approval_id')}: {data.get('outcome')} by {safe(data.get('decided_by'))}"
            + (f", remembered as grant {data['grant_id']}" if data.get("grant_id") else "")
        )
    elif kind == "review_required":
        console.print(f"[red]{safe(data.get('reason'))}[/]")
    elif kind == "run_status":
        extra = f" ({data['reason']})" if data.get("reason") else ""
        resumed = " resumed" if data.get("resumed") else ""
        console.print(f"[blue]run {data.get('status')}{resumed}{safe(extra)}[/]")
    elif kind == "session":
        servers = ", ".join(f"{k}={v}" for k, v in (data.get("mcp_servers") or {}).items())
        model = f" model {data['model']}" if data.get("model") else ""
        console.print(
            f"[dim]vendor session {safe(data.get('session_id'))}{safe(model)} mcp: {safe(servers)}[/]"
        )
    elif kind == "result":  # its tokens are in the run's one figure, printed at the end
        cost = usd(data.get("cost_usd"))
        console.print(
            f"[dim]result {safe(data.get('subtype'))}"
            + (f" (cost {format_usd(cost)})" if cost else "")
            + "[/]"
        )
    elif kind in ("notice", "bridge_call"):
        detail = " ".join(str(x) for x in (data.get("message") or data.get("event"), data.get("tool")) if x)
        console.print(f"[dim]{kind}: {safe(detail)}[/]")
    elif kind == "compaction":
        if data.get("published"):
            console.print(
                f"[cyan]compacted[/]: checkpoint {data.get('checkpoint_id')} covers messages "
                f"{data.get('first_seq')}-{data.get('through_seq')}; the next turn starts from it"
            )
        else:
            console.print(f"[dim]compaction: nothing published ({safe(str(data.get('reason')))})[/]")
    elif kind in ("child_spawned", "child_finished"):
        child = data.get("child_run_id")
        if kind == "child_spawned":
            key = f" key {safe(str(data['resume_key']))}" if data.get("resume_key") else ""
            retry = f", contract retry of {safe(str(data['retry_of']))}" if data.get("retry_of") else ""
            console.print(f"[cyan]child {child}[/] ({safe(str(data.get('role')))}{key}{retry}) started")
        else:
            status = str(data.get("status"))
            how = (
                (" (resumed)" if data.get("resumed") else " (new conversation)")
                if status == "succeeded"
                else ""
            )
            console.print(f"[cyan]child {child}[/] {safe(status)}{how}")
            for note in data.get("notes") or []:  # merged / NOT merged, gates, a worktree left
                console.print(f"  [dim]{safe(str(note))}[/]", soft_wrap=True)
    elif kind == "error":
        label = "[red]vendor error[/]" if data.get("fatal") else "[yellow]vendor warning[/]"
        console.print(f"{label}: {safe(data.get('message', ''))}")
    elif kind in ("steering_submitted", "steering_queued", "steering_delivered"):
        how = {
            "steering_submitted": "written to the running turn",
            "steering_queued": "queued for the run context and a follow-up",
            "steering_delivered": "acknowledged by the vendor",
        }[kind]
        console.print(f"[magenta]guidance {how}[/]: {safe(data.get('text', ''))}")
    elif kind == "plan_feedback":
        step = f" on step {safe(data['step_id'])}" if data.get("step_id") else ""
        console.print(
            f"[magenta]plan feedback {safe(data.get('action'))}[/] {data.get('feedback_id')}{step} "
            f"({safe(data.get('status'))}): {safe(data.get('response') if data.get('action') == 'answered' else data.get('text'))}"
        )
    elif kind == "guidance_pending":
        console.print(f"[magenta]{safe(str(data.get('message', '')))}[/]")
    elif kind in ("unparsed", "unknown"):
        console.print(f"[dim]{kind}: {safe(json.dumps(data)[:200])}[/]")


def _answer_inline(client: Client, event: dict[str, Any], approve: str) -> None:
    data = event["data"]
    approval_id = str(data.get("approval_id"))
    if data.get("kind") == "questionnaire":
        if approve == "ask" and not sys.stdin.isatty():
            err.print(
                f"octipusctl: no terminal to ask on; waiting for another client to answer the questions "
                f"(octipusctl approvals show {approval_id}; octipusctl approvals answer {approval_id} "
                f"--answer 'NUMBER=ANSWER') until {data.get('expires_at')}"
            )
            return
        answer_questionnaire_inline(client, approval_id, approve)
        return
    decision: str | None = None
    if approve == "yes":
        decision = "approve"
    elif approve == "no":
        decision = "deny"
    elif sys.stdin.isatty():
        why = data.get("explanation") or data.get("reason")
        if why:
            console.print(f"[dim]{safe(why)}[/]")
        ok = confirm(f"Allow {data.get('tool_id')} {data.get('subject') or ''}?", default=False)
        decision = "approve" if ok else "deny"
    else:
        err.print(
            f"octipusctl: no terminal to ask on; waiting for another client to answer "
            f"(octipusctl approvals approve|deny {approval_id}) until {data.get('expires_at')}"
        )
    if decision is not None:
        console.print(f"[yellow]answering {approval_id}: {decision} (--approve {approve})[/]")
        try:
            client.request("POST", f"/approvals/{part(approval_id)}", json={"decision": decision})
        except OctipusError as exc:
            err.print(f"octipusctl: could not answer approval {approval_id}: {safe(exc.message)}")


@app.command()
def run(
    ctx: typer.Context,
    prompt: Annotated[
        str | None, typer.Argument(help="the text of the turn; - reads it from stdin (or use --file)")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help=f"read the text of the turn from this file (- for stdin); {FILE_LIMITS}"),
    ] = None,
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
    plan: Annotated[
        bool, typer.Option("--plan", help="run this turn in plan mode (the vendor plans, changes nothing)")
    ] = False,
    space: Annotated[
        str | None,
        typer.Option(
            help="create the new session in this shared space (name or id); needs --model-row of a row "
            "with metadata.cliAgent.sharedUse: true"
        ),
    ] = None,
    author: Annotated[
        str | None,
        typer.Option("--as", help="post the turn as this space member (default: the daemon's user)"),
    ] = None,
    host_services: Annotated[
        bool,
        typer.Option(
            "--host-services",
            help="share the host network and the Docker socket with this run's own shell commands under "
            "security.shellSandbox (root-equivalent: only for commands you trust; children do not inherit it)",
        ),
    ] = False,
    approve: Annotated[
        str,
        typer.Option(
            help="answer this run's approvals: ask (prompt on a terminal; without one, like wait), yes, no, "
            "or wait (for another client: octipusctl approvals approve|deny ID); yes never answers a "
            "questionnaire, it stays pending for `octipusctl approvals answer`"
        ),
    ] = "ask",
    as_json: Annotated[bool, typer.Option("--json", help="print events as JSON lines")] = False,
) -> None:
    """Post a turn (new or continued session) and stream the run live; exit 0 on success."""
    prompt = text_input(prompt, file, "prompt")
    if approve not in ("ask", "yes", "no", "wait"):
        bad_input("--approve takes ask, yes, no or wait")
    if session is not None and (model_row is not None or option):
        bad_input("--model-row and --option apply to a new session; drop them or --session")
    if session is not None and space is not None:
        bad_input("--space applies to a new session; a continued session stays in its space (drop --space)")
    if space is not None and model_row is None:
        bad_input(
            "--space needs --model-row ROW, a model row with metadata.cliAgent.sharedUse: true "
            "(octipusctl models create NAME --adapter claude-code --meta cliAgent.sharedUse=true)"
        )
    options: dict[str, Any] = {}
    for item in option or []:
        set_path(options, *key_value(item, "--option"))
    client = new_client()
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
                body.update({k: v for k, v in explicit.items() if on_command_line(ctx, k)})
                body["model_row"] = model_row
            else:
                body.update(adapter=adapter, model=model, permission_mode=permission_mode)
            if space is not None:
                body["space"] = space
            created = client.request("POST", "/sessions", json=body)
            session = str(created["id"])
        turn: dict[str, Any] = {"prompt": prompt}
        if plan:
            turn["plan"] = True
        if author is not None:
            turn["author"] = author
        if host_services:
            turn["host_services"] = True
        posted = client.request("POST", f"/sessions/{part(session)}/turns", json=turn)
        run_id = posted["id"]
        if as_json:
            print_json({"kind": "posted", "session_id": session, "run_id": run_id})
        else:
            mode = (", plan mode" if plan else "") + (", host services" if host_services else "")
            console.print(f"[dim]session {session} run {run_id} (turn {posted['turn_index']}{mode})[/]")
        for event in client.stream(run_id):
            if as_json:
                print_json(event)
            else:
                _render(event)
            if event["kind"] == "approval_requested" and approve != "wait":
                _answer_inline(client, event, approve)
        final = client.request("GET", f"/runs/{run_id}")
    except OctipusError as exc:
        raise fail(exc) from None
    if not as_json:
        console.print(
            f"[bold]{final['status']}[/] session {session} run {run_id}; {usage_text(final)}"
            + (f"; {safe(final['reason'])}" if final.get("reason") else "")
        )
    raise typer.Exit(0 if final["status"] == "succeeded" else 1)


@app.command()
def steer(
    session: Annotated[str, typer.Argument(help="the session whose live run gets the guidance")],
    text: Annotated[
        str | None, typer.Argument(help="the guidance; - reads it from stdin (or use --file)")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help=f"read the guidance from this file (- for stdin); {FILE_LIMITS}"),
    ] = None,
) -> None:
    """Send guidance to a session's live run (into the running turn where the vendor allows)."""
    text = text_input(text, file, "guidance")
    try:
        out = new_client().request("POST", f"/sessions/{part(session)}/steer", json={"text": text})
    except OctipusError as exc:
        raise fail(exc) from None
    how = (
        "written to the running turn's input (octipusctl run shows 'guidance acknowledged by the vendor' "
        "once the vendor takes it)"
        if out["delivery"] == "stdin"
        else "queued for the run's context (and a follow-up invocation, where the vendor takes one)"
    )
    console.print(f"run {out['run_id']}: guidance {how}")


# ----------------------------------------------------------------------------- runs


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
        items = new_client().request("GET", "/sessions")
    except OctipusError as exc:
        raise fail(exc) from None
    if as_json:
        print_json(items)
        return
    table = Table("id", "adapter", "mode", "workspace", "created")
    full_ids(table, 0)
    for s in items:
        table.add_row(s["id"], s["adapter"], s["permission_mode"], safe(s["workspace"]), s["created_at"])
    console.print(table)


@sessions_app.command("create")
def sessions_create(
    workspace: Annotated[Path, typer.Option(help="the session's working folder (must exist)")],
    adapter: Annotated[str, typer.Option(help="the vendor CLI adapter")] = "claude-code",
    model_row: Annotated[str | None, typer.Option(help="create it from this model row")] = None,
    permission_mode: Annotated[str | None, typer.Option(help="workspace | full | plan | default")] = None,
    unattended: Annotated[bool, typer.Option(help="nobody answers approvals: an ask is refused")] = False,
    title: Annotated[str | None, typer.Option(help="a title")] = None,
) -> None:
    """Create a session without running a turn (prints its id); `run --session ID` uses it."""
    body: dict[str, Any] = {"workspace": str(workspace.expanduser().resolve()), "attended": not unattended}
    if model_row is not None:
        body["model_row"] = model_row
    else:
        body["adapter"] = adapter
    if permission_mode is not None:
        body["permission_mode"] = permission_mode
    if title is not None:
        body["title"] = title
    try:
        created = new_client().request("POST", "/sessions", json=body)
    except OctipusError as exc:
        raise fail(exc) from None
    print(created["id"])


@sessions_app.command("show")
def sessions_show(session_id: str) -> None:
    """Show one session, what all of its runs used, and its runs."""
    client = new_client()
    try:
        print_json(client.request("GET", f"/sessions/{session_id}"))
        print_json({"usage": client.request("GET", f"/sessions/{session_id}/usage")})
        for r in client.request("GET", "/runs", params={"session_id": session_id}):
            print_json(
                {
                    "run": r["id"],
                    "turn": r["turn_index"],
                    "status": r["status"],
                    "reason": r["reason"],
                    **(
                        {"parent_run_id": r["parent_run_id"], "role": r["role"]}
                        if r.get("parent_run_id")
                        else {}
                    ),
                }
            )
    except OctipusError as exc:
        raise fail(exc) from None


@sessions_app.command("delete")
def sessions_delete(
    session_id: Annotated[str, typer.Argument(help="the session's id (octipusctl sessions)")],
    yes: Annotated[bool, typer.Option("--yes", help="really delete (required)")] = False,
) -> None:
    """Delete a session with its runs, events, approvals and action journal (needs --yes).

    Refused (exit 1) while one of its runs or a call started by hand in it is still running.
    """
    if not yes:
        unresolved = ""
        with contextlib.suppress(OctipusError):
            found = new_client().request(
                "GET", "/actions", params={"session_id": session_id, "unresolved": "true", "limit": 1000}
            )["actions"]
            if found:
                unresolved = (
                    f" It has {len(found)} action(s) whose effects are uncertain and not yet reviewed "
                    "(octipusctl actions list --unresolved --session ...): their evidence goes too."
                )
        bad_input(
            f"this deletes session {session_id} with its runs, events, approvals and action journal, and "
            f"cannot be undone; add --yes to do it.{unresolved}"
        )
    try:
        new_client().request("DELETE", f"/sessions/{part(session_id)}")
    except OctipusError as exc:
        raise fail(exc) from None
    console.print(f"deleted session {session_id} and its action journal")


sessions_app.command("clear")(sessions_clear)
sessions_app.command("compact")(sessions_compact)
sessions_app.command("reuse")(sessions_reuse)
sessions_app.command("messages")(sessions_messages)
sessions_app.command("checkpoint")(sessions_checkpoint)


def main() -> None:
    """Entry point of ``octipusctl``."""
    app()
