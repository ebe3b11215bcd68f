"""octipusctl commands of the vault (``vault``) and the vault's line of ``health``.

``octipusctl vault add NAME`` reads the value from a hidden prompt (asked twice) when standard
input is a terminal, else from standard input (one trailing newline stripped): never from an
argument or an option, which shell history, ``ps`` and logs keep. No command prints a value.
The daemon administers the vault on its Unix socket only.
"""

from __future__ import annotations

import getpass
import sys
from typing import Annotated, Any, Final

import typer
from rich.table import Table

from octipusd.ctl.common import bad_input, console, part, print_json, request, safe

__all__ = ["vault_app", "vault_line"]

#: Most bytes read from standard input for a value: more than the daemon takes (64 KiB), so an
#: oversized value is refused by the daemon with its limit named, and a runaway pipe is cut short.
MAX_STDIN_BYTES: Final = 1024 * 1024

vault_app = typer.Typer(
    help="The vault: credentials a tool call uses through {{secret:NAME}} in its env; values are never shown.",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(help="the entry's name (letters, digits, '_' or '-')")]
UsersOpt = Annotated[list[str] | None, typer.Option("--user", help="a user who may use it (repeatable)")]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option("--tool", help="a tool id, or a pattern such as github.* (repeatable)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the raw JSON")]
#: Whatever else is on the command line of ``vault add``: refused here, so that a value given as an
#: argument is never echoed back by typer's "unexpected extra argument" error.
ExtraArgs = Annotated[list[str] | None, typer.Argument(hidden=True, show_default=False)]


def _check_options(user: list[str] | None, tool: list[str] | None) -> None:
    """Exit 2 naming the option when a ``--user`` or ``--tool`` is empty."""
    for option, values, what in (
        ("--user", user, "a user name"),
        ("--tool", tool, "a tool id or a pattern such as github.*"),
    ):
        if any(not v for v in values or []):
            bad_input(f"{option} must not be empty: give {what}")


def _read_value(name: str) -> str:
    """The value: a hidden prompt asked twice on a terminal, else standard input (one trailing
    newline stripped). Exits 2 when it is empty, not UTF-8, or the two answers differ."""
    if sys.stdin.isatty():
        value = getpass.getpass(f"value of vault entry {name} (hidden): ")
        if getpass.getpass("the same value again: ") != value:
            bad_input("the two values differ; nothing was added")
    else:
        raw = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
        if len(raw) > MAX_STDIN_BYTES:
            bad_input(f"standard input holds more than {MAX_STDIN_BYTES} bytes; a vault value is far smaller")
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad_input("the value on standard input is not UTF-8 text")
        value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
    if not value:
        bad_input("the value is empty; type it at the prompt or pipe it on standard input")
    return value


def _listing(values: list[str], what: str) -> str:
    """An allowlist for a person; an empty one as ``(no users)`` or ``(no tools)``."""
    return ", ".join(safe(v) for v in values) or f"[dim](no {what})[/]"


def _entry_line(entry: dict[str, Any]) -> str:
    return f"users {_listing(entry['users'], 'users')}; tools {_listing(entry['tools'], 'tools')}"


@vault_app.command("add", context_settings={"ignore_unknown_options": True})
def vault_add(
    name: NameArg,
    extra: ExtraArgs = None,
    user: UsersOpt = None,
    tool: ToolsOpt = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="replace the value of an existing entry")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add an entry; its value is read from a hidden prompt or from standard input, never an argument."""
    if extra:
        bad_input(
            f"{len(extra)} unexpected argument(s) after the name, not shown: the value is never an "
            "argument: type it at the prompt or pipe it on stdin (options: --user, --tool, --replace, --json)"
        )
    _check_options(user, tool)
    body: dict[str, Any] = {"name": name, "value": _read_value(name), "replace": replace}
    if user:
        body["users"] = user
    if tool:
        body["tools"] = tool
    added = request("POST", "/vault/entries", json=body)
    if as_json:
        print_json(added)
        return
    entry = added["entry"]
    verb = "added" if added["created"] else "replaced the value of"
    console.print(f"{verb} vault entry {safe(entry['name'])}: {_entry_line(entry)}")
    if "users" in added["defaulted"]:
        console.print("  users: the daemon's user, by default (--user U to choose; octipusctl vault allow)")
    if "tools" in added["defaulted"]:
        console.print("  tools: shell__run, by default (--tool T to choose; octipusctl vault allow)")
    console.print(f'  use it as "env": {{"VARIABLE": "{{{{secret:{safe(entry["name"])}}}}}"}} in a tool call')


@vault_app.command("list")
def vault_list(as_json: JsonOpt = False) -> None:
    """List the entries: names, users, tools, last use; never values."""
    found = request("GET", "/vault/entries")
    if as_json:
        print_json(found)
        return
    if not found["entries"]:
        console.print(
            f"the vault is empty (key {safe(found['key_source'])}); add one: octipusctl vault add NAME"
        )
        return
    table = Table("name", "users", "tools", "updated", "last used")
    for e in found["entries"]:
        used = f"{e['last_used_at']} by {safe(e['last_used_tool'])}" if e["last_used_at"] else "never"
        table.add_row(
            safe(e["name"]),
            _listing(e["users"], "users"),
            _listing(e["tools"], "tools"),
            str(e["updated_at"]),
            used,
        )
    console.print(table)
    console.print(f"key: {safe(found['key_source'])}")


@vault_app.command("remove")
def vault_remove(name: NameArg) -> None:
    """Remove an entry."""
    request("DELETE", f"/vault/entries/{part(name)}")
    console.print(f"removed vault entry {safe(name)}")


def _change(name: str, verb: str, user: list[str] | None, tool: list[str] | None) -> None:
    if not user and not tool:
        bad_input(f"nothing to {verb}: give --user U and/or --tool T")
    _check_options(user, tool)
    entry = request(
        "POST", f"/vault/entries/{part(name)}/{verb}", json={"users": user or [], "tools": tool or []}
    )
    console.print(f"vault entry {safe(entry['name'])}: {_entry_line(entry)}")


@vault_app.command("allow")
def vault_allow(name: NameArg, user: UsersOpt = None, tool: ToolsOpt = None) -> None:
    """Let more users use an entry, or more tools receive it."""
    _change(name, "allow", user, tool)


@vault_app.command("revoke")
def vault_revoke(name: NameArg, user: UsersOpt = None, tool: ToolsOpt = None) -> None:
    """Take users or tools off an entry's allowlists."""
    _change(name, "revoke", user, tool)


@vault_app.command("rotate-key")
def vault_rotate_key() -> None:
    """Make a new key and re-encrypt every entry with it (in one transaction)."""
    done = request("POST", "/vault/rotate-key")
    console.print(
        f"vault key rotated ({safe(done['key_source'])}): {done['reencrypted']} entries re-encrypted"
    )


def vault_line(vault: dict[str, Any] | None) -> str | None:
    """The vault's line of ``octipusctl health`` (None: the daemon reports no vault)."""
    if vault is None:
        return None
    key = (
        safe(vault["key_source"])
        if vault["key_present"]
        else f"{safe(vault['key_source'])}, made at the first add"
    )
    line = f"vault: {vault['entries']} entries; key {key}"
    if vault.get("rotation_pending"):
        line += "; [yellow]a key rotation is pending (finished at the next start or rotate-key)[/]"
    if vault.get("problem"):
        line += f"\n[red]vault: {safe(vault['problem'])}[/]"
    return line
