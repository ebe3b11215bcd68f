"""octipusctl commands of a session's work plan and its feedback (seed 003 "Plans, feedback and delegation").

Registered as ``octipusctl plan`` by :mod:`octipusd.ctl.main`:

- ``plan SESSION`` (also ``plan show SESSION``): the plan, its revision and its complete feedback
  history (each item's id, step, status, author, text, the agent's note and the replies).
- ``plan feedback SESSION TEXT [--step ID]``: feedback on the plan, or on one of its steps; prints
  the new item's id. The agent reads it in its run context and answers it in its next plan update.
- ``plan reply SESSION FEEDBACK_ID TEXT``: answer the agent's note (a ``needs_clarification``
  question); the item is pending again.

TEXT may be ``-`` (standard input) or replaced by ``--file PATH``. Exit codes as every command:
0 success; 1 the request failed (e.g. the session has no plan yet); 2 bad input or an unknown
session, step or feedback id; 3 octipusd is not running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperGroup

from octipusd.ctl.common import console, full_ids, part, print_json, request, safe, text_input

__all__ = ["plan_app"]


class _ShowByDefault(TyperGroup):
    """``plan SESSION`` is ``plan show SESSION``: a first word that names no sub-command is a session."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's own click Context
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


plan_app = typer.Typer(
    cls=_ShowByDefault,
    help="Show a session's work plan and its feedback; give feedback on the plan or a step; reply to the agent.",
    no_args_is_help=True,
)

SessionArg = Annotated[str, typer.Argument(help="the session's id (octipusctl sessions)")]
TextArg = Annotated[str | None, typer.Argument(help="the text, or - to read it from standard input")]
FileOpt = Annotated[Path | None, typer.Option("--file", help="read the text from this file (- for stdin)")]
AuthorOpt = Annotated[str | None, typer.Option("--as", help="the space member giving it (default: you)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]


def _print_plan(found: dict[str, Any]) -> None:
    plan = found.get("plan")
    if plan is None:
        console.print(f"session {found['session_id']} has no work plan yet (revision 0)")
    else:
        title = f" {safe(plan['title'])}" if plan.get("title") else ""
        console.print(f"[bold]plan{title}[/] (revision {found['revision']}, saved {found['updated_at']})")
        if plan.get("goal"):
            console.print(f"  goal: {safe(plan['goal'])}")
        steps = Table("step", "status", "title", "notes")
        for step in plan.get("steps") or []:
            steps.add_row(
                safe(step.get("id")),
                safe(step.get("status")),
                safe(step.get("title")),
                safe(step.get("notes")),
            )
        console.print(steps)
    feedback = found.get("feedback") or []
    if not feedback:
        console.print("no feedback")
        return
    table = Table("feedback", "step", "status", "rev", "author", "text", "agent's note / replies")
    full_ids(table, 0)
    for item in feedback:
        thread = [f"agent: {item['response']}"] if item.get("response") else []
        thread += [f"{reply['author']}: {reply['text']}" for reply in item.get("replies") or []]
        table.add_row(
            item["id"],
            safe(item.get("step_id") or "(plan)"),
            item["status"],
            str(item["plan_revision"]),
            safe(item["author"]),
            safe(item["text"]),
            safe("\n".join(thread)),
        )
    console.print(table)


@plan_app.command("show")
def plan_show(session_id: SessionArg, as_json: JsonOpt = False) -> None:
    """Show the session's work plan, its revision and its complete feedback history."""
    found = request("GET", f"/sessions/{part(session_id)}/plan")
    if as_json:
        print_json(found)
        return
    _print_plan(found)


@plan_app.command("feedback")
def plan_feedback(
    session_id: SessionArg,
    text: TextArg = None,
    step: Annotated[str | None, typer.Option("--step", help="the plan step it is about (its id)")] = None,
    file: FileOpt = None,
    author: AuthorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Give feedback on the session's work plan, or with --step on one of its steps."""
    body: dict[str, Any] = {"text": text_input(text, file, "feedback")}
    if step is not None:
        body["step_id"] = step
    if author is not None:
        body["author"] = author
    item = request("POST", f"/sessions/{part(session_id)}/plan/feedback", json=body)
    if as_json:
        print_json(item)
        return
    where = f"step {safe(item['step_id'])} of the plan" if item.get("step_id") else "the plan"
    console.print(
        f"feedback {item['id']} on {where} (revision {item['plan_revision']}): pending; the agent reads it "
        "in its run context"
    )


@plan_app.command("reply")
def plan_reply(
    session_id: SessionArg,
    feedback_id: Annotated[str, typer.Argument(help="the feedback item's id (octipusctl plan SESSION)")],
    text: TextArg = None,
    file: FileOpt = None,
    author: AuthorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer the agent's note on a feedback item (its question); the item is pending again."""
    body: dict[str, Any] = {"text": text_input(text, file, "reply")}
    if author is not None:
        body["author"] = author
    item = request("POST", f"/sessions/{part(session_id)}/plan/feedback/{part(feedback_id)}/reply", json=body)
    if as_json:
        print_json(item)
        return
    console.print(
        f"replied to feedback {item['id']}: {item['status']} again; the agent reads it in its run context"
    )
