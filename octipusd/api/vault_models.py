"""Request and response models of the vault's routes (``octipusd.api.vault_routes``).

A value travels in one request only (:class:`VaultEntryCreate`, as a :class:`~pydantic.SecretStr`:
its ``repr`` never shows it) and in no response.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, SecretStr

from octipusd.api.health_models import ApiModel
from octipusd.api.limits import API_LIMITS
from octipusd.vault import MIN_VALUE_CHARS

__all__ = [
    "VaultAccessChange",
    "VaultAddOut",
    "VaultEntryCreate",
    "VaultEntryOut",
    "VaultListOut",
    "VaultRotateOut",
]

#: A user or a tool id (pattern) of an allowlist in a request.
AccessName = Annotated[str, Field(min_length=1, max_length=API_LIMITS.max_name_chars)]


class VaultEntryCreate(ApiModel):
    """``POST /v1/vault/entries``: a new entry (or a new value for one, with ``replace``).

    ``users`` and ``tools`` left out: a new entry is for the daemon's user and ``shell__run`` (the
    answer's ``defaulted`` says so); a replaced one keeps its own.
    """

    name: str = Field(description="1 to 128 letters, digits, '_' or '-'")
    value: SecretStr = Field(
        description="the credential (write-only: never in a response, an error or a log)",
        # documented here, checked by the vault (whose refusal names the limit and why it exists)
        json_schema_extra={"minLength": MIN_VALUE_CHARS},
    )
    users: list[AccessName] | None = None
    tools: list[AccessName] | None = Field(
        default=None, description="tool ids, or fnmatch patterns such as github.* for an MCP server's tools"
    )
    replace: bool = False


class VaultAccessChange(ApiModel):
    """``POST /v1/vault/entries/{name}/allow`` and ``/revoke``: users and tools to add or remove."""

    users: list[AccessName] = Field(default_factory=list)
    tools: list[AccessName] = Field(default_factory=list)


class VaultEntryOut(ApiModel):
    """One entry as listed: never its value."""

    name: str
    users: list[str]
    tools: list[str]
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    last_used_tool: str | None


class VaultAddOut(ApiModel):
    """The answer to ``POST /v1/vault/entries``."""

    entry: VaultEntryOut
    created: bool = Field(description="false: an existing entry's value was replaced")
    defaulted: list[Literal["users", "tools"]] = Field(
        description="the allowlists a new entry took by default (the daemon's user; shell__run)"
    )


class VaultListOut(ApiModel):
    """``GET /v1/vault/entries``."""

    entries: list[VaultEntryOut]
    key_source: str = Field(description="the key file, or the systemd credential")


class VaultRotateOut(ApiModel):
    """``POST /v1/vault/rotate-key``."""

    reencrypted: int = Field(description="entries re-encrypted with the new key")
    key_source: str
