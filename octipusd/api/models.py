"""Request and response models of the v1 API (the only types clients share with the daemon)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

API_VERSION = "v1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AdapterHealth(_Model):
    """Executable resolution of one adapter (seed 003: path and version, or the PATH searched)."""

    adapter: str
    binary: str
    path: str | None
    version: str | None
    searched_path: str
    error: str | None


class Health(_Model):
    """``GET /v1/health``."""

    status: Literal["ok"]
    api_version: str
    daemon_version: str
    pid: int
    database: str
    live_runs: int
    adapters: list[AdapterHealth]


class SessionCreate(_Model):
    """``POST /v1/sessions``: a new Octipus session in a workspace.

    ``workspace`` must be an existing absolute directory. ``permission_mode`` is
    ``workspace`` (acceptEdits, the default), ``full`` (bypass), ``plan`` or ``default``.
    ``attended`` False makes an unattended session: ASK decisions are refused, not asked.
    """

    workspace: str
    adapter: str = "claude-code"
    title: str | None = None
    model: str | None = None
    permission_mode: Literal["workspace", "full", "plan", "default"] = "workspace"
    attended: bool = True


class SessionOut(_Model):
    """A session."""

    id: str
    title: str | None
    workspace: str
    adapter: str
    model: str | None
    permission_mode: str
    attended: bool
    created_at: datetime
    updated_at: datetime


class TurnCreate(_Model):
    """``POST /v1/sessions/{id}/turns``: the user text of the next turn."""

    prompt: str = Field(min_length=1)


class RunOut(_Model):
    """A run (one turn's vendor invocation)."""

    id: str
    session_id: str
    turn_index: int
    status: str
    prompt: str
    reason: str | None
    vendor_session_id: str | None
    resumed: bool
    pid: int | None
    exit_code: int | None
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: float | None
    usage_estimated: bool
    result_text: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None


class RunStop(_Model):
    """``POST /v1/runs/{id}/stop``."""

    reason: str = "stopped by the user"


class EventOut(_Model):
    """A stored run event."""

    run_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    created_at: datetime


class ApprovalOut(_Model):
    """An approval request."""

    id: str
    run_id: str
    session_id: str
    tool_id: str
    subject: str | None
    reason: str | None
    input: dict[str, Any]
    explanation: str | None
    status: str
    decided_by: str | None
    decision_reason: str | None
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None


class ApprovalAnswer(_Model):
    """``POST /v1/approvals/{id}``: approve or deny."""

    decision: Literal["approve", "deny"]
    reason: str | None = None


class ErrorOut(_Model):
    """Every error body: a stable code and a message saying what to do."""

    code: str
    message: str
