"""Response models of the daemon's state: ``GET /v1/health`` (adapters, notifier, web page, worktree
reaper, vault), ``GET /v1/web`` and ``POST /v1/notify/test``; re-exported by :mod:`octipusd.api.models`."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from octipusd.settings_notify import MAX_SEND_TIMEOUT_S, SEND_GRACE_S

__all__ = [
    "NOTIFY_TEST_ANSWER_S",
    "AdapterHealth",
    "ApiModel",
    "Health",
    "NotifierHealth",
    "NotifierTargetHealth",
    "NotifyTestOut",
    "NotifyTestTarget",
    "ReapActionName",
    "ReapReportOut",
    "ShellSandboxHealth",
    "VaultHealth",
    "WebHealth",
    "WebOut",
    "WorktreeReaperOut",
]


class ApiModel(BaseModel):
    """The base of these models (as ``models._Model``): unknown fields refused, no ``NaN`` or infinity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: What the orphan reaper did or would do with a worktree.
ReapActionName = Literal["removed", "kept", "dropped", "skipped_live", "skipped_young"]


class AdapterHealth(ApiModel):
    """Executable resolution of one adapter (seed 003: path and version, or the PATH searched)."""

    adapter: str
    binary: str
    path: str | None
    version: str | None
    searched_path: str
    error: str | None


class NotifierTargetHealth(ApiModel):
    """One notification target (``notify.urls``), redacted to its scheme and host."""

    target: str = Field(description="the URL's scheme and host only (the URL itself carries tokens)")
    sent: int
    failed: int = Field(description="notifications given up after every attempt")
    dropped: int = Field(description="notifications dropped because the target's queue was full")
    retries: int
    queued: int
    last_sent_at: datetime | None
    last_error: str | None = Field(description="why the last failed send failed (secrets masked)")
    last_error_at: datetime | None


class NotifierHealth(ApiModel):
    """The notifier (``GET /v1/health``): its targets (none: notifications are off) and figures."""

    running: bool
    targets: list[NotifierTargetHealth]
    sent: int
    failed: int = Field(
        description="notifications given up on any target, and events that could not be composed"
    )
    dropped: int = Field(description="events and notifications dropped because a queue was full")
    last_error: str | None
    last_error_at: datetime | None


class NotifyTestTarget(ApiModel):
    """``POST /v1/notify/test``: the outcome of the test notification at one target."""

    target: str = Field(description="the URL's scheme and host only")
    ok: bool
    error: str | None


#: Seconds ``POST /v1/notify/test`` takes at most: one send bound for a test already running, one for its own.
NOTIFY_TEST_ANSWER_S: Final = 2 * (MAX_SEND_TIMEOUT_S + SEND_GRACE_S)


class NotifyTestOut(ApiModel):
    """``POST /v1/notify/test``: one outcome per configured target."""

    ok: bool = Field(description="every target got the test notification")
    results: list[NotifyTestTarget]


class ShellSandboxHealth(ApiModel):
    """The shell sandbox (``security.shellSandbox``) as the daemon found it at start-up."""

    mode: Literal["off", "auto", "required"]
    in_force: bool = Field(description="shell commands run inside the runner")
    runner: str | None = Field(description="bwrap or firejail; null when none works here")
    runner_path: str | None
    reason: str | None = Field(description="why no runner works here (null when one does)")


class Health(ApiModel):
    """``GET /v1/health``."""

    status: Literal["ok"]
    api_version: str
    daemon_version: str
    pid: int
    database: str
    live_runs: int
    adapters: list[AdapterHealth]
    process_containment: Literal["cgroup", "subreaper"] | None = Field(
        default=None, description="how each run's processes are kept together and stopped"
    )
    process_containment_detail: str | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="stored rows that could not be loaded and are skipped (each named, with why)",
    )
    worktree_reaper: WorktreeReaperOut | None = Field(
        default=None, description="the orphan reaper of child worktrees (null: swarm.worktreeIsolation off)"
    )
    web: WebHealth | None = Field(default=None, description="the page's listener (null: web.enabled off)")
    notifier: NotifierHealth | None = Field(
        default=None, description="notifications through notify.urls (null: no notifier in this daemon)"
    )
    vault: VaultHealth | None = Field(default=None, description="the vault (null: no vault in this daemon)")
    shell_sandbox: ShellSandboxHealth | None = Field(
        default=None, description="the shell sandbox of shell__run and gate commands (security.shellSandbox)"
    )


class VaultHealth(ApiModel):
    """The vault: where its key is read from and how many entries it holds (never a value)."""

    key_source: str = Field(description="the key file, or the systemd credential octipus-vault-key")
    systemd_credential: bool
    key_present: bool = Field(description="false until the first entry is added (the key is made then)")
    rotation_pending: bool = Field(description="a key rotation was begun and is finished at the next start")
    entries: int
    problem: str | None = Field(
        default=None,
        description="entries the key cannot decrypt (the key is missing or not theirs) and what to do; "
        "null when it decrypts every entry",
    )


class WebHealth(ApiModel):
    """Where the page is served (never its token)."""

    origin: str = Field(description="http(s)://ADDRESS:PORT; octipusctl web prints the link with its token")
    tls: bool


class WebOut(ApiModel):
    """``GET /v1/web`` (Unix socket only): the ready link that opens the page."""

    url: str = Field(description="the page's link with its token: give it only to the person")
    origin: str
    tls: bool


class ReapReportOut(ApiModel):
    """One worktree the orphan reaper looked at: ``removed`` (clean and merged), ``kept`` (reported:
    dirty, unmerged, a kept branch...), ``dropped`` (a kept branch's record, once git proved it
    merged or gone), ``skipped_live`` (its owner is alive) or ``skipped_young``; ``reason`` says why."""

    id: str
    path: str
    action: ReapActionName
    reason: str


class WorktreeReaperOut(ApiModel):
    """The orphan reaper of child worktrees (``GET /v1/health``; null there while
    ``swarm.worktreeIsolation`` is off): its period, how many sweeps ended, and the last one."""

    interval_ms: int
    sweeps: int
    last_started_at: datetime | None
    last_ended_at: datetime | None
    error: str | None = Field(description="why the last sweep stopped early, if it did")
    reports: list[ReapReportOut]
