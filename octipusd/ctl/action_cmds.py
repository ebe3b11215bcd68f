"""octipusctl commands of the action journal: ``actions`` (seed 000 records, seed 004 recovery,
seed 001 calls started by hand).

``actions list`` shows journal records (``--unresolved``: those blocking the next mutation of
their user and session); ``actions show ID`` one record, what its outcome means, and its
receipt. An uncertain action is settled by ``actions review`` (a person acknowledges the
session's next batch; the outcome stays uncertain), ``actions probe`` (the tool's verification
probe), ``actions compensate`` or ``actions contain --note``. ``actions call`` starts a tool by
hand; ``actions calls`` and ``actions call-show`` follow such calls. ``actions forget-user``
deletes a user's whole journal (``--yes`` required).

Exit codes: 0 success; 1 the request failed, or a call did not complete (``not_executed``,
``uncertain``, ``denied``, ``expired``, ``cancelled``, or still awaiting approval or running
when the wait ended: the output says which and how to follow it); 2 bad input (or something
named was not found); 3 octipusd is not running.
"""

from __future__ import annotations

import contextlib
import json
from typing import Annotated, Any

import httpx
import typer
from rich.table import Table

from octipusd.ctl.client import TIMEOUT
from octipusd.ctl.common import (
    EXIT_FAILED,
    bad_input,
    console,
    full_ids,
    part,
    print_json,
    request,
    safe,
)

__all__ = ["MAX_WAIT_SECONDS", "OUTCOMES", "actions_app", "call_exit_code"]

actions_app = typer.Typer(
    help="The action journal: list and explain records, review, probe, compensate or contain uncertain "
    "actions, start a tool by hand, forget a user's journal.",
    invoke_without_command=True,
)

#: Journal outcomes (seed 000).
OUTCOMES = ("started", "completed", "not_executed", "uncertain")
#: Longest ``--wait`` (seconds), as the daemon accepts.
MAX_WAIT_SECONDS = 300.0
#: Most records one listing asks for, as the daemon accepts.
MAX_LIST = 1000
#: Longest ``--request-id`` (characters), as the daemon accepts.
REQUEST_ID_MAX_CHARS = 200
#: Invocation statuses that will not change any more.
TERMINAL = frozenset({"completed", "not_executed", "uncertain", "denied", "expired", "cancelled"})

IdArg = Annotated[str, typer.Argument(help="the action's id (octipusctl actions list)")]
JsonOption = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


def call_exit_code(status: str) -> int:
    """The exit code of ``actions call`` / ``call-show`` for an invocation status.

    Args:
        status: The invocation's status.

    Returns:
        0 for ``completed``; 1 for every other status (it did not run, may have partly run, was
        refused, or has not finished yet).
    """
    return 0 if status == "completed" else EXIT_FAILED


def _short(value: Any, limit: int = 60) -> str:
    text = "" if value is None else str(value)
    return safe(text if len(text) <= limit else text[: limit - 1] + "…")


def _state(a: dict[str, Any]) -> str:
    if a.get("review_id"):
        return f"{a.get('recovery_state') or ''} reviewed".strip()
    return a.get("recovery_state") or ""


def _actions_table(items: list[dict[str, Any]]) -> Table:
    table = Table("id", "tool", "outcome", "recovery", "blocks", "started", "detail")
    full_ids(table, 0)
    for a in items:
        outcome = a["outcome"]
        style = {"uncertain": "red", "started": "yellow"}.get(outcome)
        table.add_row(
            a["id"],
            safe(a["tool"]),
            f"[{style}]{outcome}[/]" if style else outcome,
            safe(_state(a)),
            "[red]yes[/]" if a.get("blocking") else "no",
            safe(a.get("started_at")),
            _short(a.get("detail")),
        )
    return table


@actions_app.callback()
def actions_default(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """With no sub-command: list the most recent journal records."""
    if ctx.invoked_subcommand is None:
        actions_list(as_json=as_json)


@actions_app.command("list")
def actions_list(
    session: Annotated[str | None, typer.Option(help="only this session's records")] = None,
    unresolved: Annotated[
        bool, typer.Option("--unresolved", help="only records blocking the next mutation (need a review)")
    ] = False,
    outcome: Annotated[
        str | None, typer.Option(help="only this outcome: started, completed, not_executed or uncertain")
    ] = None,
    run: Annotated[str | None, typer.Option(help="only this run's records")] = None,
    limit: Annotated[int, typer.Option(help="at most N records (1-1000)")] = 200,
    as_json: JsonOption = False,
) -> None:
    """List action journal records, oldest first."""
    if outcome is not None and outcome not in OUTCOMES:
        bad_input(f"--outcome takes {', '.join(OUTCOMES)}; got {outcome!r}")
    if not 1 <= limit <= MAX_LIST:
        bad_input(f"--limit must be between 1 and {MAX_LIST}; got {limit}")
    params: dict[str, Any] = {"limit": limit}
    if session is not None:
        params["session_id"] = session
    if run is not None:
        params["run_id"] = run
    if outcome is not None:
        params["outcome"] = outcome
    if unresolved:
        params["unresolved"] = "true"
    items = request("GET", "/actions", params=params)["actions"]
    if as_json:
        print_json(items)
    elif not items:
        console.print("no unresolved actions" if unresolved else "no actions recorded")
    else:
        console.print(_actions_table(items))
        blocking = [a for a in items if a.get("blocking")]
        if blocking:
            sessions = sorted({str(a.get("session_id")) for a in blocking})
            console.print(
                f"{len(blocking)} action(s) block further mutations until reviewed: "
                + "; ".join(f"octipusctl actions review --session {s} --approve" for s in sessions)
            )


@actions_app.command("show")
def actions_show(action_id: IdArg, as_json: JsonOption = False) -> None:
    """Show one record, what its outcome means, and its receipt entries in order."""
    data = request("GET", f"/actions/{part(action_id)}")
    if as_json:
        print_json(data)
        return
    a = data["action"]
    console.print(f"[bold]action {a['id']}[/]: {safe(a['tool'])}, {a['outcome']}")
    rows = [
        ("user", a.get("user")),
        ("session", a.get("session_id")),
        ("run", a.get("run_id") or ("none (started by hand)" if a.get("origin") == "manual" else None)),
        ("invocation", a.get("invocation_id")),
        ("agent", a.get("agent")),
        ("pipeline", " / ".join(x for x in (a.get("pipeline_id"), a.get("node_id")) if x) or None),
        ("risk class", a.get("risk_class")),
        ("idempotency key", a.get("idempotency_key")),
        ("arguments hash", a.get("args_hash")),
        ("detail", a.get("detail")),
        ("recovery state", a.get("recovery_state")),
        ("blocks", "yes: review it before further mutations" if a.get("blocking") else "no"),
        ("reviewed", f"{a['review_id']} by {a.get('reviewed_by')} at {a.get('reviewed_at')}" if a.get("review_id") else None),
        ("owner", a.get("recovery_owner") or f"{a.get('user')} (the user it ran for)"),
        ("deadline", a.get("deadline_at")),
        ("in flight until", a.get("in_flight_until") if a.get("outcome") in ("uncertain", "started") else None),
        ("request went to", _dispatch_text(a.get("dispatch"))),
        ("request over", a.get("dispatch_ended_at")),
        ("started", a.get("started_at")),
        ("finished", a.get("finished_at")),
        ("daemon", a.get("owner")),
    ]  # fmt: skip
    for label, value in rows:
        if value:
            console.print(f"  {label + ':':<17}{safe(value)}")
    console.print(f"\n{safe(data.get('explanation'))}\n")
    receipts = data.get("receipts") or []
    table = Table("#", "kind", "state", "evidence", "at", title="receipt")
    for n, r in enumerate(receipts, 1):
        table.add_row(
            str(n),
            safe(r["kind"]),
            safe(r.get("state") or ""),
            safe(json.dumps(r.get("data") or {}, ensure_ascii=False)),
            safe(r.get("created_at")),
        )
    console.print(table if receipts else "receipt: no entries")


def _dispatch_text(dispatch: Any) -> str | None:
    """Where a call's request went, in words (None when not recorded)."""
    if not isinstance(dispatch, dict):
        return None
    server = dispatch.get("server")
    if dispatch.get("kind") == "mcp_http":
        return f"MCP server {server} over HTTP, session {dispatch.get('session_id') or '(none)'}"
    if dispatch.get("kind") == "mcp_stdio":
        return f"stdio MCP server {server} (processes marked {dispatch.get('marker')})"
    return json.dumps(dispatch)


@actions_app.command("review")
def actions_review(
    session: Annotated[str, typer.Option(help="the session whose unresolved actions you review")],
    approve: Annotated[
        bool, typer.Option("--approve", help="acknowledge them: further mutations may run (a retry too)")
    ] = False,
    deny: Annotated[
        bool, typer.Option("--deny", help="refuse: they stay unresolved and keep blocking")
    ] = False,
    reason: Annotated[str | None, typer.Option(help="why (kept with the decision)")] = None,
    as_json: JsonOption = False,
) -> None:
    """Review the session's next batch (up to 20) of unresolved actions without a pending call.

    Approving does not prove the earlier actions failed and does not relabel them; it is never a
    permanent permission.
    """
    if approve == deny:
        bad_input("say --approve or --deny (exactly one)")
    body = {"session_id": session, "decision": "approve" if approve else "deny", "reason": reason}
    a = request("POST", "/actions/review", json=body)
    if as_json:
        print_json(a)
        return
    ids = a.get("action_ids") or []
    console.print(f"recovery review {a['id']}: {a['status']} by {safe(a.get('decided_by'))}")
    if a["status"] == "approved":
        console.print(
            f"acknowledged {len(ids)} action(s): {', '.join(ids)}; their outcome is unchanged "
            "(octipusctl actions list --session SESSION --unresolved shows what is left)"
        )
    else:
        console.print(f"{len(ids)} action(s) stay unresolved and keep blocking mutations: {', '.join(ids)}")


@actions_app.command("probe")
def actions_probe(action_id: IdArg, as_json: JsonOption = False) -> None:
    """Run the tool's verification probe once on an uncertain action and record what it saw."""
    r = request("POST", f"/actions/{part(action_id)}/probe")
    if as_json:
        print_json(r)
        return
    state = r["action"].get("recovery_state")
    console.print(
        f"action {r['action_id']}: the probe says {r['status']}"
        + (f" ({safe(r['detail'])})" if r.get("detail") else "")
        + f"; recovery state {safe(state)}"
    )
    if r.get("correction"):
        console.print(
            "[red]the effect appeared after the action was verified as not applied[/]: it is reopened and "
            f"blocks mutations again; octipusctl actions show {r['action_id']}"
        )
    elif r["status"] == "not_applied" and not r.get("settled"):
        until = r.get("in_flight_until")
        console.print(
            "[yellow]not settled[/]: a request of it may still land"
            + (f" until {safe(until)}" if until else " (no bound is known)")
            + "; probe again after that, or review it"
        )


@actions_app.command("compensate")
def actions_compensate(action_id: IdArg, as_json: JsonOption = False) -> None:
    """Run the tool's declared compensation on an uncertain action."""
    r = request("POST", f"/actions/{part(action_id)}/compensate")
    if as_json:
        print_json(r)
        return
    console.print(
        f"action {r['action_id']}: compensated ({safe(r.get('detail'))}); "
        f"recovery state {safe(r['action'].get('recovery_state'))}"
    )


@actions_app.command("contain")
def actions_contain(
    action_id: IdArg,
    note: Annotated[str, typer.Option(help="how the effect was contained (kept in the receipt)")],
    as_json: JsonOption = False,
) -> None:
    """Record that you contained an uncertain action's effect; it then no longer blocks mutations."""
    if not note.strip():
        bad_input("--note must say how the effect was contained (e.g. --note 'reverted the commit by hand')")
    r = request("POST", f"/actions/{part(action_id)}/contain", json={"note": note})
    if as_json:
        print_json(r)
        return
    console.print(f"action {r['action']['id']}: {safe(r['action'].get('recovery_state'))}")


# ----------------------------------------------------------------------------- calls by hand


def _print_call(data: dict[str, Any]) -> None:
    inv = data["invocation"]
    status = inv["status"]
    style = {"completed": "green", "uncertain": "red", "denied": "red"}.get(status, "yellow")
    console.print(f"invocation {inv['id']}: [{style} bold]{status}[/] ({safe(inv['tool'])})")
    if data.get("replayed"):
        console.print(
            f"  replayed: request id {safe(inv.get('request_id'))} was used before; this is the stored "
            "invocation and nothing ran again"
        )
    for label, value in (
        ("session", inv.get("session_id")),
        ("request id", inv.get("request_id")),
        ("action", inv.get("action_id")),
        ("error", inv.get("error")),
    ):
        if value:
            console.print(f"  {label + ':':<12}{safe(value)}")
    if inv.get("result") is not None:
        text = inv["result"]
        with contextlib.suppress(TypeError, ValueError):
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        console.print("  result:" + (" [red](error result)[/]" if inv.get("is_error") else ""))
        console.print(safe(text))
    approval = data.get("approval")
    follow = f"octipusctl actions call-show {inv['id']} --wait 60"
    if status == "awaiting_approval" and approval:
        if approval.get("kind") == "action_recovery":
            ids = approval.get("action_ids") or []
            console.print(
                f"[yellow]awaiting a recovery review[/] {approval['id']}: {len(ids)} earlier action(s) of this "
                f"session have uncertain effects ({', '.join(ids)}); check them, then "
                f"octipusctl approvals approve|deny {approval['id']} (approving does not prove they failed); "
                f"follow: {follow}"
            )
        else:
            console.print(
                f"[yellow]awaiting approval[/] {approval['id']} ({safe(approval.get('explanation'))}): "
                f"octipusctl approvals approve|deny {approval['id']}; follow: {follow}"
            )
    elif status not in TERMINAL:
        console.print(f"[yellow]not finished yet ({status})[/]; follow: {follow}")
    elif status == "uncertain" and data.get("action_blocking") is False:
        console.print(
            "[red]it may have partly run[/]; it is not repeated; its record was reviewed or settled and no "
            f"longer blocks changes: octipusctl actions show {inv.get('action_id') or 'ID'}"
        )
    elif status == "uncertain":
        console.print(
            "[red]it may have partly run[/]; it is not repeated, and it blocks further mutations of this "
            f"session until reviewed: octipusctl actions show {inv.get('action_id') or 'ID'}; "
            f"octipusctl actions review --session {inv['session_id']} --approve"
        )


def _check_wait(wait: float) -> None:
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        bad_input(f"--wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds; got {wait:g}")


def _long_timeout() -> httpx.Timeout:
    """No read deadline: the daemon bounds the call (the tool's own timeout, the wait)."""
    return httpx.Timeout(TIMEOUT, read=None)


@actions_app.command("call")
def actions_call(
    tool: Annotated[str, typer.Argument(help="shell__run or an MCP connector tool server.tool")],
    session: Annotated[str, typer.Option(help="the session whose workspace and journal the call uses")],
    args: Annotated[
        str, typer.Option("--args", help='the tool\'s arguments, a JSON object, e.g. \'{"command": "make"}\'')
    ] = "{}",
    request_id: Annotated[
        str | None,
        typer.Option(
            help="an idempotency key (1-200 characters): repeating it returns the first call, runs nothing"
        ),
    ] = None,
    wait: Annotated[
        float, typer.Option(help="wait up to this many seconds (0-300) for the call to end if it must wait")
    ] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Start a mutating tool by hand; print the invocation (status, result).

    The permission rules decide it: allowed calls run at once; a call that needs an approval (or a
    recovery review of earlier uncertain actions) waits for it and runs once approved. Exit 0 when
    it completed (a finished attempt, e.g. a shell exit of any code); 1 when it did not complete
    (not_executed, uncertain, denied, expired, cancelled, or still awaiting approval or running
    when the wait ended); 2 for bad input (``--args`` not a JSON object, ``--wait`` out of range).
    """
    try:
        arguments = json.loads(args)
    except ValueError as exc:
        bad_input(f'--args is not valid JSON ({exc}); pass an object, e.g. --args \'{{"command": "ls"}}\'')
    if not isinstance(arguments, dict):
        bad_input(f"--args must be a JSON object of the tool's arguments, got {type(arguments).__name__}")
    if request_id is not None and not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
        bad_input(f"--request-id must be 1 to {REQUEST_ID_MAX_CHARS} characters")
    _check_wait(wait)
    body: dict[str, Any] = {"session_id": session, "tool": tool, "arguments": arguments, "wait_seconds": wait}
    if request_id is not None:
        body["request_id"] = request_id
    data = request("POST", "/actions/calls", json=body, timeout=_long_timeout())
    if as_json:
        print_json(data)
    else:
        _print_call(data)
    raise typer.Exit(call_exit_code(data["invocation"]["status"]))


@actions_app.command("call-show")
def actions_call_show(
    invocation_id: Annotated[str, typer.Argument(help="the invocation's id (octipusctl actions calls)")],
    wait: Annotated[float, typer.Option(help="wait up to this many seconds (0-300) for it to end")] = 0.0,
    as_json: JsonOption = False,
) -> None:
    """Show a call started by hand (exit codes as for ``actions call``)."""
    _check_wait(wait)
    params = {"wait_seconds": wait} if wait else {}
    data = request("GET", f"/actions/calls/{part(invocation_id)}", params=params, timeout=_long_timeout())
    if as_json:
        print_json(data)
    else:
        _print_call(data)
    raise typer.Exit(call_exit_code(data["invocation"]["status"]))


@actions_app.command("cancel")
def actions_cancel(
    invocation_id: Annotated[str, typer.Argument(help="the invocation's id (octipusctl actions calls)")],
    as_json: JsonOption = False,
) -> None:
    """Withdraw a call started by hand that has not started yet (awaiting approval or approved)."""
    data = request("POST", f"/actions/calls/{part(invocation_id)}/cancel")
    if as_json:
        print_json(data)
    else:
        _print_call(data)


@actions_app.command("calls")
def actions_calls(
    session: Annotated[str | None, typer.Option(help="only this session's calls")] = None,
    limit: Annotated[int, typer.Option(help="at most N calls (1-1000)")] = 100,
    as_json: JsonOption = False,
) -> None:
    """List calls started by hand, newest first."""
    if not 1 <= limit <= MAX_LIST:
        bad_input(f"--limit must be between 1 and {MAX_LIST}; got {limit}")
    params: dict[str, Any] = {"limit": limit}
    if session is not None:
        params["session_id"] = session
    items = request("GET", "/actions/calls", params=params)["invocations"]
    if as_json:
        print_json(items)
        return
    if not items:
        console.print("no calls started by hand")
        return
    table = Table("id", "tool", "status", "request id", "action", "created", "error")
    full_ids(table, 0)
    for i in items:
        table.add_row(
            i["id"],
            safe(i["tool"]),
            i["status"],
            _short(i.get("request_id"), 30),
            i.get("action_id") or "",
            safe(i.get("created_at")),
            _short(i.get("error")),
        )
    console.print(table)


@actions_app.command("forget-user")
def actions_forget_user(
    user: Annotated[str, typer.Argument(help="the user whose journal is deleted")],
    yes: Annotated[bool, typer.Option("--yes", help="really delete (required)")] = False,
) -> None:
    """Delete every journal record, receipt and call started by hand of USER (needs --yes)."""
    if not yes:
        bad_input(
            f"this deletes every action journal record of {user}, with its receipts and calls started by "
            "hand, and cannot be undone; add --yes to do it"
        )
    r = request("DELETE", f"/users/{part(user)}/journal")
    console.print(f"deleted {r['deleted']} journal record(s) of {safe(user)}")
