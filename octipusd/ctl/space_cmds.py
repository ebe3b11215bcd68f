"""octipusctl commands of shared spaces: list, create, show, members, archive.

A space's members have roles (owner, editor, commenter, viewer, guest); owners and editors may
run the CLI agent in it. ``octipusctl run --space NAME --model-row ROW`` starts a session in a
space (the row must set ``metadata.cliAgent.sharedUse: true``), ``--as USER`` names the member
posting the turn.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from octipusd.ctl.common import bad_input, console, full_ids, part, print_json, request, safe

__all__ = ["ROLES", "spaces_app"]

spaces_app = typer.Typer(
    help="List, create and show shared spaces; set members' roles; archive a space.",
    invoke_without_command=True,
)

#: Member roles, most rights first.
ROLES = ("owner", "editor", "commenter", "viewer", "guest")

SpaceArg = Annotated[str, typer.Argument(help="the space's name or id")]


def _members(space: dict[str, Any]) -> str:
    return ", ".join(f"{user} ({role})" for user, role in sorted(space.get("members", {}).items()))


def _print_space(space: dict[str, Any]) -> None:
    state = f"archived {space['archived_at']}" if space.get("archived_at") else "active"
    console.print(f"[bold]space {safe(space['name'])}[/] ({space['id']}), {state}")
    console.print(f"  created {space['created_at']} by {safe(space['created_by'])}")
    table = Table("member", "role")
    for user, role in sorted(
        space.get("members", {}).items(), key=lambda m: (ROLES.index(m[1]) if m[1] in ROLES else 99, m[0])
    ):
        table.add_row(safe(user), role)
    console.print(table)


@spaces_app.callback()
def spaces_default(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """With no sub-command: list spaces."""
    if ctx.invoked_subcommand is None:
        spaces_list(as_json=as_json)


@spaces_app.command("list")
def spaces_list(as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False) -> None:
    """List shared spaces with their members."""
    items = request("GET", "/spaces")
    if as_json:
        print_json(items)
        return
    if not items:
        console.print("no spaces (create one: octipusctl spaces create NAME)")
        return
    table = Table("id", "name", "state", "members", "created by")
    full_ids(table, 0)
    for s in items:
        state = "archived" if s.get("archived_at") else "active"
        table.add_row(s["id"], safe(s["name"]), state, safe(_members(s)), safe(s["created_by"]))
    console.print(table)


@spaces_app.command("create")
def spaces_create(name: Annotated[str, typer.Argument(help="the new space's name")]) -> None:
    """Create a space; you are its first owner."""
    space = request("POST", "/spaces", json={"name": name})
    console.print(f"created space {safe(space['name'])} ({space['id']}); owner {safe(space['created_by'])}")


@spaces_app.command("show")
def spaces_show(
    space: SpaceArg, as_json: Annotated[bool, typer.Option("--json", help="print the raw JSON")] = False
) -> None:
    """Show one space and its members."""
    found = request("GET", f"/spaces/{part(space)}")
    if as_json:
        print_json(found)
    else:
        _print_space(found)


@spaces_app.command("member")
def spaces_member(
    space: SpaceArg,
    user: Annotated[str, typer.Argument(help="the member's user name")],
    role: Annotated[str, typer.Argument(help="owner, editor, commenter, viewer or guest")],
) -> None:
    """Add a member or change their role."""
    if role not in ROLES:
        bad_input(f"ROLE takes {', '.join(ROLES)}; got {role!r}")
    found = request("PUT", f"/spaces/{part(space)}/members/{part(user)}", json={"role": role})
    console.print(f"space {safe(found['name'])}: {safe(user)} is {role}; members: {safe(_members(found))}")


@spaces_app.command("remove-member")
def spaces_remove_member(
    space: SpaceArg, user: Annotated[str, typer.Argument(help="the member's user name")]
) -> None:
    """Remove a member (a space keeps at least one owner)."""
    found = request("DELETE", f"/spaces/{part(space)}/members/{part(user)}")
    console.print(f"space {safe(found['name'])}: removed {safe(user)}; members: {safe(_members(found))}")


@spaces_app.command("archive")
def spaces_archive(space: SpaceArg) -> None:
    """Archive a space: its sessions take no more turns."""
    found = request("POST", f"/spaces/{part(space)}/archive")
    console.print(f"archived space {safe(found['name'])} ({found['id']}) at {found['archived_at']}")
