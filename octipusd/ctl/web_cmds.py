"""``octipusctl web``: print (or open) the ready link of the daemon's web page.

The link carries the page's token, which octipusd makes anew at each start; the daemon gives it
only on its Unix socket (``GET /v1/web``). Opening it trades the token for a session cookie.
"""

from __future__ import annotations

import webbrowser
from typing import Annotated

import typer

from octipusd.ctl.common import err, print_json, request

__all__ = ["web_command"]


def web_command(
    open_it: Annotated[bool, typer.Option("--open", help="open the link in this machine's browser")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False,
) -> None:
    """Print the web page's link (with its token: treat it as a password); --open opens it."""
    found = request("GET", "/web")
    if as_json:
        print_json(found)
    else:
        # plain print: a terminal's link detection must see the whole URL, unwrapped
        print(found["url"], flush=True)
    if open_it and not webbrowser.open(found["url"]):
        err.print("octipusctl: no browser could be started here; open the link above yourself")
        raise typer.Exit(1)
    if not as_json and not open_it:  # on stderr: $(octipusctl web) is the link alone
        err.print(
            "[dim]from another machine: ssh -N -L PORT:127.0.0.1:PORT this-host, then open the link there[/]"
        )
