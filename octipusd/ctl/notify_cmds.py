"""octipusctl commands of notifications (``notify``) and the notifier's line of ``health``.

``octipusctl notify test`` asks the daemon to send one test notification to every ``notify.urls``
target now and prints each target's outcome (redacted to its scheme and host); it exits 1 when any
target failed, and with the daemon's message when no target is configured.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import typer
from rich.table import Table

from octipusd.ctl.common import EXIT_FAILED, console, err, print_json, request, safe

__all__ = ["notifier_line", "notify_app"]

#: Seconds octipusctl waits for a test past the longest the daemon may take (NOTIFY_TEST_ANSWER_S).
TEST_SLACK_S: Final = 10.0

notify_app = typer.Typer(
    help="Notifications through notify.urls (Apprise URLs): send a test.", no_args_is_help=True
)


@notify_app.command("test")
def notify_test(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """Send one test notification to every notify.urls target and show what each said."""
    from octipusd.api.models import NOTIFY_TEST_ANSWER_S  # here: pydantic stays out of start-up

    data = request("POST", "/notify/test", timeout=NOTIFY_TEST_ANSWER_S + TEST_SLACK_S)
    if as_json:
        print_json(data)
    else:
        table = Table("target", "result")
        for result in data["results"]:
            table.add_row(
                safe(result["target"]),
                "[green]sent[/]" if result["ok"] else f"[red]failed[/]: {safe(result['error'])}",
            )
        console.print(table)
    if not data["ok"]:
        failed = sum(1 for r in data["results"] if not r["ok"])
        err.print(f"octipusctl: {failed} of {len(data['results'])} notification target(s) failed")
        raise typer.Exit(EXIT_FAILED)


def notifier_line(notifier: dict[str, Any] | None) -> str | None:
    """The notifier's line of ``octipusctl health`` (None: the daemon reports no notifier)."""
    if notifier is None:
        return None
    if not notifier["targets"]:
        return "notifications: off (set notify.urls)"
    targets = ", ".join(safe(t["target"]) for t in notifier["targets"])
    line = (
        f"notifications to {targets}: {notifier['sent']} sent, {notifier['failed']} failed, "
        f"{notifier['dropped']} dropped"
    )
    if notifier.get("last_error"):
        line += f"; [red]last error at {notifier['last_error_at']}: {safe(notifier['last_error'])}[/]"
    return line
