"""octipusctl commands of the permission policy: ``approvals``, ``rules`` (and scoped grants).

Approvals are yes/no tool approvals or questionnaires (Claude's AskUserQuestion). A
questionnaire is answered with ``approvals answer ID --answer QUESTION=ANSWER``; QUESTION is the
question's exact text, its 1-based number or its header, ANSWER an option label or a text of your
own. For a multiple-selection question, repeat ``--answer`` for each choice
(``--answer 2=Auth --answer 2=Export``): a comma inside one ANSWER is kept as text.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import (
    EXIT_FAILED,
    bad_input,
    console,
    full_ids,
    key_value,
    parse_duration,
    part,
    print_json,
    request,
    safe,
    set_path,
)
from octipusd.ctl.questions import labels, print_questionnaire, questions_of, resolve_answers

__all__ = ["approvals_app", "rules_app"]

approvals_app = typer.Typer(
    help="List, show and answer approval requests (tool approvals and questionnaires).",
    invoke_without_command=True,
)
rules_app = typer.Typer(
    help="Show, add and remove permission rules; explain a decision; create and revoke scoped grants.",
    invoke_without_command=True,
)

SCOPES = ("session", "workspace", "everywhere")
MATCHES = ("subject", "tool")
LEVELS = ("allow", "ask", "deny")

# ----------------------------------------------------------------------------- approvals

#: How ``approvals show`` names each approval kind.
KIND_LABELS = {
    "tool": "tool approval",
    "questionnaire": "questionnaire (AskUserQuestion)",
    "action_recovery": "recovery review (Check earlier)",
    "pipeline_replay": "pipeline replay review",
    "pipeline_call": "tool approval (a pipeline stage's blocked call, asked again)",
}
#: Kinds that review journal records (seed 000): answered yes/no, never remembered.
REVIEW_KINDS = ("action_recovery", "pipeline_replay")


def _print_review(a: dict[str, Any]) -> None:
    """The body of a recovery or replay review: the proposed call, the note, the covered actions."""
    data = a.get("input") or {}
    proposed = data.get("proposed")
    if isinstance(proposed, dict) and proposed:
        shown = proposed.get("tool") or json.dumps(proposed)
        console.print(f"  {'proposed call:':<16}{safe(shown)}")
    if data.get("note"):
        console.print(f"  {'note:':<16}{safe(data['note'])}")
    if data.get("waits_until"):
        console.print(
            f"  [yellow]{'runs after:':<16}{safe(data['waits_until'])}[/] (a request of a covered action may "
            "still land until then; approve with --run-now to run the call at once)"
        )
    extra = {k: v for k, v in data.items() if k not in ("proposed", "actions", "note", "waits_until")}
    if extra:
        console.print(f"  {'input:':<16}{safe(json.dumps(extra))}")
    actions = [x for x in data.get("actions") or [] if isinstance(x, dict)]
    if actions:
        table = Table(
            "action", "tool", "outcome", "detail", "risk", "recovery", "started", title="covered actions"
        )
        full_ids(table, 0)
        for x in actions:
            table.add_row(
                safe(x.get("action_id")),
                safe(x.get("tool")),
                safe(x.get("outcome")),
                safe((x.get("detail") or "")[:60]),
                safe(x.get("risk_class")),
                safe(x.get("recovery_state") or ""),
                safe(x.get("started_at")),
            )
        console.print(table)
        for x in actions:
            if x.get("note"):  # a dispatched request of it may still land
                console.print(f"  [yellow]{safe(x.get('action_id'))}: {safe(x['note'])}[/]")
    else:
        console.print("  covered actions: none recorded")
    if a["status"] == "pending":
        console.print(
            "approving permits further mutations but does not prove these actions failed (a retry with the "
            "idempotency key of an action still in flight is refused until its time); denying refuses the "
            "proposed call and keeps the evidence. Details: octipusctl actions show ACTION_ID"
        )
        run_now = " [--run-now]" if data.get("waits_until") else ""
        console.print(
            f"answer: octipusctl approvals approve {a['id']}{run_now} | octipusctl approvals deny {a['id']} "
            "[--reason TEXT] (a recovery review is never remembered)"
        )


def _approvals_table(items: list[dict[str, Any]]) -> Table:
    table = Table("id", "status", "kind", "tool", "subject", "explanation", "run", "expires / decided")
    full_ids(table, 0, 6)
    for a in items:
        table.add_row(
            a["id"],
            a["status"],
            a.get("kind") or "tool",
            safe(a["tool_id"]),
            safe((a.get("subject") or "")[:60]),
            safe((a.get("explanation") or "")[:80]),
            a.get("run_id") or "none",
            safe(a.get("decided_by") or a.get("expires_at") or ""),
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
    """List approval requests (pending ones by default) with their kind and the rule that asked."""
    items = request("GET", "/approvals", params={"status": "all" if all_ else "pending"})
    if as_json:
        print_json(items)
    elif not items:
        console.print("no pending approvals" if not all_ else "no approvals")
    else:
        console.print(_approvals_table(items))


@approvals_app.command("show")
def approvals_show(
    approval_id: str, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """Show one approval request whole: tool, subject, reason, the matched rule, every question."""
    a = request("GET", f"/approvals/{part(approval_id)}")
    if as_json:
        print_json(a)
        return
    questionnaire = a.get("kind") == "questionnaire"
    kind = KIND_LABELS.get(a.get("kind") or "tool", str(a.get("kind")))
    console.print(f"[bold]approval {a['id']}[/]: {kind}, {a['status']}")
    run = a.get("run_id") or "none (not asked by a run)"
    rows = [
        ("tool", a.get("tool_id")),
        ("subject", a.get("subject")),
        ("reason", a.get("reason")),
        ("explanation", a.get("explanation")),
        ("run", f"{run} (session {a['session_id']})"),
        ("created", a.get("created_at")),
        ("expires", a.get("expires_at")),
    ]
    if a.get("decided_at"):
        rows.append(("decided", f"{a['decided_at']} by {a.get('decided_by')}"))
    if a.get("decision_reason"):
        rows.append(("decision reason", a["decision_reason"]))
    if a.get("grant_id"):
        rows.append(("grant", a["grant_id"]))
    for label, value in rows:
        if value:
            console.print(f"  {label + ':':<16}{safe(value)}")
    if a.get("kind") in REVIEW_KINDS:
        _print_review(a)
        return
    if not questionnaire:
        console.print(f"  {'input:':<16}{safe(json.dumps(a.get('input') or {}))}")
        if a["status"] == "pending":
            console.print(
                f"answer: octipusctl approvals approve {a['id']} | octipusctl approvals deny {a['id']} "
                "[--reason TEXT] [--remember session|workspace|everywhere]"
            )
        return
    questions = questions_of(a)
    console.print("questions:")
    print_questionnaire(questions)
    if a.get("answers"):
        console.print("answers:")
        for text, answer in a["answers"].items():
            shown = ", ".join(answer) if isinstance(answer, list) else answer
            console.print(f"  {safe(text)} -> {safe(shown)}")
    if a["status"] == "pending":
        example = " ".join(
            f"--answer '{n}={label}'"
            for n, q in enumerate(questions, 1)
            for label in (labels(q) or ["TEXT"])[: 2 if q.get("multiSelect") else 1]
        )
        console.print(
            f"answer: octipusctl approvals answer {a['id']} {safe(example)} "
            "(QUESTION: number, text or header; repeat a multiple-selection question for each choice); "
            f"cancel: octipusctl approvals deny {a['id']}"
        )


def _remember(
    scope: str | None, match: str | None, ttl: str | None, uses: int | None
) -> dict[str, Any] | None:
    if scope is None:
        if match is not None or ttl is not None or uses is not None:
            bad_input("--match, --ttl and --uses go with --remember session|workspace|everywhere")
        return None
    if scope not in SCOPES:
        bad_input(f"--remember takes {', '.join(SCOPES)}; got {scope!r}")
    if match is not None and match not in MATCHES:
        bad_input(f"--match takes {' or '.join(MATCHES)}; got {match!r}")
    if uses is not None and uses < 1:
        bad_input("--uses must be at least 1")
    body: dict[str, Any] = {"scope": scope, "match": match or "subject"}
    if ttl is not None:
        body["ttl_seconds"] = parse_duration(ttl)
    if uses is not None:
        body["max_uses"] = uses
    return body


RememberOption = Annotated[
    str | None,
    typer.Option(
        "--remember",
        help="also create a scoped grant for similar calls: session (this session), workspace "
        "(this session's folder, any session) or everywhere",
    ),
]
MatchOption = Annotated[
    str | None,
    typer.Option(
        help="with --remember: subject (this exact command or path, the default) or tool (any call)"
    ),
]
TtlOption = Annotated[str | None, typer.Option(help="with --remember: expire after e.g. 90s, 30m, 1h, 2d")]
UsesOption = Annotated[int | None, typer.Option(help="with --remember: at most N uses")]


def _answer(approval_id: str, body: dict[str, Any]) -> None:
    a = request("POST", f"/approvals/{part(approval_id)}", json=body)
    what = " ".join(x for x in (a["tool_id"], a.get("subject")) if x)
    recheck = a.get("recheck")
    if recheck is not None and not recheck["allowed"]:
        # the answer was stored, but the rules checked again deny the call: it does not run
        console.print(
            f"{a['id']}: approved, but the call was denied when the rules were checked again "
            f"({safe(what)}): {safe(recheck['reason'])}"
        )
    else:
        console.print(f"{a['id']}: {a['status']} ({safe(what)})")
    until = (a.get("input") or {}).get("waits_until") if a.get("kind") == "action_recovery" else None
    if until and a["status"] == "approved" and not (a.get("answers") or {}).get("run_now"):
        console.print(
            f"the reviewed call waits until {safe(until)}, when no request of the covered actions can land any "
            "more; check meanwhile whether the earlier request landed, and cancel the call if it did "
            f"(octipusctl actions calls --session {safe(a['session_id'])})"
        )
    if a.get("grant_id"):
        console.print(f"remembered as grant {a['grant_id']} (octipusctl rules revoke {a['grant_id']})")
    if recheck is not None and not recheck["allowed"]:
        raise typer.Exit(EXIT_FAILED)


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    reason: Annotated[str | None, typer.Option(help="why (kept with the decision)")] = None,
    remember: RememberOption = None,
    match: MatchOption = None,
    ttl: TtlOption = None,
    uses: UsesOption = None,
    run_now: Annotated[
        bool,
        typer.Option(
            "--run-now",
            help="with a recovery review: run the reviewed call at once, even while a request of a covered "
            "action may still land (it waits until then otherwise)",
        ),
    ] = False,
) -> None:
    """Approve a pending tool request (a questionnaire needs `approvals answer`)."""
    body: dict[str, Any] = {
        "decision": "approve",
        "reason": reason,
        "remember": _remember(remember, match, ttl, uses),
    }
    if run_now:
        body["run_now"] = True
    _answer(approval_id, body)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str,
    reason: Annotated[str | None, typer.Option(help="why (shown to the agent)")] = None,
    remember: RememberOption = None,
    match: MatchOption = None,
    ttl: TtlOption = None,
    uses: UsesOption = None,
) -> None:
    """Deny a pending request (cancels a questionnaire); --remember also denies similar calls."""
    body = {"decision": "deny", "reason": reason, "remember": _remember(remember, match, ttl, uses)}
    _answer(approval_id, body)


@approvals_app.command("answer")
def approvals_answer(
    approval_id: str,
    answer: Annotated[
        list[str],
        typer.Option(
            "--answer",
            help="QUESTION=ANSWER, one per question (QUESTION: its number from 1, its text or its header; "
            "ANSWER: an option label or a text of your own); repeat a multiple-selection question for each "
            "choice, e.g. --answer 2=Auth --answer 2=Export",
        ),
    ],
    reason: Annotated[str | None, typer.Option(help="a note kept with the decision")] = None,
) -> None:
    """Answer a questionnaire (AskUserQuestion) approval."""
    approval = request("GET", f"/approvals/{part(approval_id)}")
    if approval.get("kind") != "questionnaire":
        bad_input(
            f"approval {approval_id} is a yes/no tool approval, not a questionnaire; use "
            f"octipusctl approvals approve|deny {approval_id}"
        )
    answers = resolve_answers(questions_of(approval), answer)
    _answer(approval_id, {"decision": "approve", "reason": reason, "answers": answers})


# ----------------------------------------------------------------------------- rules


def _grant_scope(g: dict[str, Any]) -> str:
    parts = []
    if g.get("session_id"):
        parts.append(f"session {g['session_id']}")
    if g.get("workspace"):
        parts.append(f"in {g['workspace']}")
    return "; ".join(parts) or "everywhere"


def _grant_line(g: dict[str, Any]) -> str:
    text = g["tool_id"] + (f"({g['matcher']})" if g.get("matcher") else "")
    limits = [_grant_scope(g)]
    if g.get("expires_at"):
        limits.append(f"until {g['expires_at']}")
    if g.get("max_uses") is not None:
        limits.append(f"{g.get('uses', 0)} of {g['max_uses']} uses")
    return f"{g['level']} {text} [{'; '.join(limits)}]"


@rules_app.callback()
def rules_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list every rule, the active grants and the flow guard mode."""
    if ctx.invoked_subcommand is None:
        rules_list(as_json=as_json)


@rules_app.command("list")
def rules_list(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """List configured rules (or the built-in defaults), stored rules, active grants, flow guard."""
    data = request("GET", "/rules")
    if as_json:
        print_json(data)
        return
    source = "built-in defaults" if data["defaults"] else "permissions.rules"
    console.print(f"[bold]configured rules[/] ({source})")
    configured = data.get("configured") or {}
    for level in LEVELS:
        rules = configured.get(level) or []
        console.print(f"  {level:<6}{safe(', '.join(rules)) if rules else '[dim](none)[/]'}")
    stored = data.get("stored") or []
    if stored:
        table = Table(
            "id", "level", "rule", "by", "created", title="stored rules (octipusctl rules remove ID)"
        )
        full_ids(table, 0)
        for r in stored:
            table.add_row(r["id"], r["level"], safe(r["rule"]), safe(r["created_by"]), str(r["created_at"]))
        console.print(table)
    else:
        console.print(
            "[bold]stored rules[/]: none (add one: octipusctl rules add deny 'cli-native:Bash(rm:*)')"
        )
    grants = data.get("grants") or []
    if grants:
        table = Table(
            "id", "level", "tool(matcher)", "scope", "expires", "uses", "note",
            title="active grants (octipusctl rules revoke ID)",
        )  # fmt: skip
        full_ids(table, 0)
        for g in grants:
            uses = (
                f"{g.get('uses', 0)}/{g['max_uses']}"
                if g.get("max_uses") is not None
                else str(g.get("uses", 0))
            )
            table.add_row(
                g["id"],
                g["level"],
                safe(g["tool_id"] + (f"({g['matcher']})" if g.get("matcher") else "")),
                safe(_grant_scope(g)),
                str(g.get("expires_at") or ""),
                uses,
                safe(g.get("note") or ""),
            )
        console.print(table)
    else:
        console.print("[bold]active grants[/]: none")
    console.print(f"[bold]flow guard[/]: {safe(data.get('flow_guard'))}")


@rules_app.command("add")
def rules_add(
    level: Annotated[str, typer.Argument(help="allow, ask or deny")],
    rule: Annotated[
        str, typer.Argument(help="a tool id with an optional matcher, e.g. 'cli-native:Bash(rm:*)'")
    ],
) -> None:
    """Store a rule; it applies from the next tool call (a deny anywhere wins)."""
    if level not in LEVELS:
        bad_input(f"LEVEL takes {', '.join(LEVELS)}; got {level!r}")
    r = request("POST", "/rules", json={"level": level, "rule": rule})
    console.print(f"added rule {r['id']}: {r['level']} {safe(r['rule'])}")


@rules_app.command("remove")
def rules_remove(
    rule_id: Annotated[str, typer.Argument(help="the stored rule's id (octipusctl rules)")],
) -> None:
    """Remove a stored rule."""
    request("DELETE", f"/rules/{part(rule_id)}")
    console.print(f"removed rule {rule_id}")


def _print_explanation(result: dict[str, Any]) -> None:
    d = result["decision"]
    style = {"allow": "green", "deny": "red"}.get(d["level"], "yellow")
    console.print(f"[bold]{safe(result.get('tool_id'))}[/]: [{style} bold]{d['level'].upper()}[/]")
    deciding = (
        f"grant {d['grant_id']}" + (f" ({d['rule']})" if d.get("rule") else "")
        if d.get("grant_id")
        else f"rule {d['rule']}"
        if d.get("rule")
        else "no rule: the tool's default level"
    )
    console.print(f"  decided by:  {safe(deciding)} (tier {safe(d.get('tier'))}, {safe(d.get('source'))})")
    console.print(f"  why:         {safe(d.get('explanation'))}")
    console.print(f"  identities:  {safe(', '.join(result.get('identities') or []))}")
    if result.get("subject"):
        console.print(f"  subject:     {safe(result['subject'])}")
    if result.get("configured"):
        console.print(f"  configured:  {safe(result['configured'])}")
    console.print("candidates (tiers in precedence order; a deny in any tier wins):")
    for tier, candidates in (result.get("tiers") or {}).items():
        console.print(f"  [bold]{safe(tier)}[/]:" + ("" if candidates else " [dim](none)[/]"))
        for c in candidates:
            mark = "[bold]->[/]" if c.get("chosen") else "  "
            what = f"grant {c['grant_id']} {c['text']}" if c.get("kind") == "grant" else f"rule {c['text']}"
            status = "applies" if c.get("applies") else f"does not apply: {c.get('reason')}"
            chosen = " [bold](chosen)[/]" if c.get("chosen") else ""
            console.print(
                f"   {mark} {c['level']:<5} {safe(what)} [dim]({safe(c.get('source'))}, {safe(status)})[/]{chosen}"
            )
    if result.get("default_level"):
        chosen = " [bold](chosen)[/]" if d.get("tier") == "default-level" else ""
        console.print(f"  [bold]default-level[/]: {safe(result['default_level'])}{chosen}")
    flow = result.get("flow_guard")
    if flow:
        console.print(f"flow guard: mode {safe(flow.get('mode'))}")
        console.print(f"  session flags:   {safe(', '.join(flow.get('session_flags') or []) or 'none')}")
        console.print(f"  this call sets:  {safe(', '.join(flow.get('call_sets') or []) or 'nothing')}")
        console.print(f"  egress:          {safe(flow.get('egress'))}")
        escalates = flow.get("escalates")
        if escalates:
            console.print(f"  [yellow]escalates to ask: {safe(escalates)}[/]")
        else:
            console.print("  escalates:       no")


@rules_app.command("explain")
def rules_explain(
    tool_id: Annotated[str, typer.Argument(help="e.g. cli-native:Bash, shell__run, server.tool")],
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg",
            help="a call argument KEY=JSON (repeatable; a value that is not JSON is a string), "
            "e.g. --arg command='rm -rf build' --arg file_path=/etc/passwd",
        ),
    ] = None,
    action: Annotated[
        str | None, typer.Option(help="the action name (for cli-native: the tool name)")
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="decide as in this session (its grants, flow flags)")
    ] = None,
    workspace: Annotated[str | None, typer.Option(help="decide as in this workspace folder")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """Explain which rule or grant decides a call, every candidate per tier, and the flow guard."""
    arguments: dict[str, Any] = {}
    for item in arg or []:
        set_path(arguments, *key_value(item, "--arg"))
    body = {
        "tool_id": tool_id,
        "arguments": arguments,
        "action": action,
        "session_id": session,
        "workspace": workspace,
    }
    result = request("POST", "/rules/explain", json=body)
    if as_json:
        print_json(result)
    else:
        _print_explanation(result)


@rules_app.command("grant")
def rules_grant(
    tool_id: Annotated[str, typer.Argument(help="e.g. cli-native:Bash")],
    matcher: Annotated[str | None, typer.Option(help="only calls this matcher accepts, e.g. 'git:*'")] = None,
    level: Annotated[str, typer.Option(help="allow, ask or deny")] = "allow",
    session: Annotated[str | None, typer.Option(help="only in this session")] = None,
    workspace: Annotated[str | None, typer.Option(help="only in this folder or below")] = None,
    ttl: Annotated[str | None, typer.Option(help="expire after e.g. 90s, 30m, 1h, 2d")] = None,
    uses: Annotated[int | None, typer.Option(help="at most N uses")] = None,
    note: Annotated[str | None, typer.Option(help="a note kept with the grant")] = None,
) -> None:
    """Create a scoped grant (conditions, expiry, a usage limit)."""
    if level not in LEVELS:
        bad_input(f"--level takes {', '.join(LEVELS)}; got {level!r}")
    if uses is not None and uses < 1:
        bad_input("--uses must be at least 1")
    body: dict[str, Any] = {
        "tool_id": tool_id,
        "level": level,
        "matcher": matcher,
        "session_id": session,
        "workspace": workspace,
        "ttl_seconds": parse_duration(ttl) if ttl is not None else None,
        "max_uses": uses,
        "note": note,
    }
    g = request("POST", "/grants", json=body)
    console.print(f"created grant {g['id']}: {safe(_grant_line(g))}")


@rules_app.command("revoke")
def rules_revoke(grant_id: Annotated[str, typer.Argument(help="the grant's id (octipusctl rules)")]) -> None:
    """Revoke a scoped grant; it no longer applies from the next tool call."""
    g = request("DELETE", f"/grants/{part(grant_id)}")
    console.print(f"revoked grant {g['id']}: {safe(_grant_line(g))}")
