"""The vault's administration (issue 17 item 1), on the daemon's Unix socket only.

Routes (under ``/v1``)::

    POST   /vault/entries                 add an entry (or replace its value)
    GET    /vault/entries                 list: names, users, tools, times, last use; never values
    DELETE /vault/entries/{name}          remove
    POST   /vault/entries/{name}/allow    add users and/or tools
    POST   /vault/entries/{name}/revoke   remove users and/or tools
    POST   /vault/rotate-key              new key, every entry re-encrypted

The web listener refuses them all (403): whoever can open the socket is the daemon's user, while
the page is reachable by whoever holds its link. No answer, error or validation message holds a
value (a body that fails its schema is a 400 naming the field, never echoing the input:
:mod:`octipusd.api.error_handlers`).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from octipusd.api import API_VERSION
from octipusd.api.common import Services, out, via_web
from octipusd.api.vault_models import (
    VaultAccessChange,
    VaultAddOut,
    VaultEntryCreate,
    VaultEntryOut,
    VaultListOut,
    VaultRotateOut,
)
from octipusd.errors import ConflictError, ForbiddenError
from octipusd.store.aio import in_thread
from octipusd.store.vault_store import VaultEntry
from octipusd.vault import Vault

__all__ = ["VAULT_PREFIX", "vault_router"]

#: The path prefix of the vault's routes.
VAULT_PREFIX = f"/{API_VERSION}/vault"


def _socket_only(request: Request) -> None:
    """Refuse a request that came through the web listener (403)."""
    if via_web(request):
        raise ForbiddenError(
            "the vault is administered only on the daemon's Unix socket: run octipusctl vault on the "
            "daemon's machine, as its user"
        )


def _entry_out(entry: VaultEntry) -> VaultEntryOut:
    return out(VaultEntryOut, entry)


def vault_router(services: Services) -> APIRouter:
    """The vault's routes over ``services.vault``."""
    router = APIRouter(prefix=VAULT_PREFIX, dependencies=[Depends(_socket_only)])

    def vault() -> Vault:
        if services.vault is None:
            raise ConflictError("this octipusd runs without a vault")
        return services.vault

    @router.post("/entries", status_code=201)
    async def add_entry(body: VaultEntryCreate) -> VaultAddOut:
        """Add an entry; the value is encrypted before it is stored and never answered."""
        put = await in_thread(
            vault().add,
            body.name,
            body.value.get_secret_value(),
            users=body.users,
            tools=body.tools,
            replace=body.replace,
        )
        return VaultAddOut(entry=_entry_out(put.entry), created=put.created, defaulted=list(put.defaulted))

    @router.get("/entries")
    async def list_entries() -> VaultListOut:
        """Every entry's name, users, tools, times and last use; never a value."""
        found = await in_thread(vault().list_entries)
        return VaultListOut(entries=[_entry_out(e) for e in found], key_source=vault().key_source.describe())

    @router.delete("/entries/{name}", status_code=204)
    async def remove_entry(name: str) -> Response:
        await in_thread(vault().remove, name)
        return Response(status_code=204)

    @router.post("/entries/{name}/allow")
    async def allow(name: str, body: VaultAccessChange) -> VaultEntryOut:
        """Add users and/or tools to an entry's allowlists."""
        return _entry_out(await in_thread(vault().allow, name, users=body.users, tools=body.tools))

    @router.post("/entries/{name}/revoke")
    async def revoke(name: str, body: VaultAccessChange) -> VaultEntryOut:
        """Remove users and/or tools from an entry's allowlists."""
        return _entry_out(await in_thread(vault().revoke, name, users=body.users, tools=body.tools))

    @router.post("/rotate-key")
    async def rotate_key() -> VaultRotateOut:
        """A new key; every entry re-encrypted in one transaction (refused for a systemd credential)."""
        count = await in_thread(vault().rotate_key)
        return VaultRotateOut(reencrypted=count, key_source=vault().key_source.describe())

    return router
