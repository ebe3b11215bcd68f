"""The :class:`~octipusd.toolkit.ToolHost` of a call a person started by hand (seed 001).

A hand-started call (:class:`~octipusd.runtime.actions.ActionService`) runs one tool's handler
outside any run: the service has already decided it with the permission rules and runs it
inside the action journal itself. Its host therefore answers only for that one call: it
authorizes exactly the tool it was decided for, logs the events a handler records, and refuses
what needs a run (the work plan, the run context, children, a nested journaled action) with a
:class:`~octipusd.errors.ConflictError` saying so. The tools that can be started by hand
(``shell__run``, MCP connector tools) use none of those.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from octipusd.errors import ConflictError, VaultAccessError
from octipusd.toolkit import (
    AuthorizationResult,
    BackgroundJobs,
    Body,
    CallWatch,
    ChildRequest,
    Executed,
    MonitorAccess,
    PipelineAccess,
    PlanUpdate,
    RunIdentity,
    ShellTerms,
)
from octipusd.toolkit.secrets import SecretResolver

__all__ = ["ManualCallHost", "resolve_for"]

log = logging.getLogger("octipusd.runtime.actions")


def _no_run(what: str, identity: RunIdentity) -> ConflictError:
    return ConflictError(
        f"{what} is not available to a call started by hand ({identity.run_id}): it belongs to no agent run"
    )


async def resolve_for(
    vault: SecretResolver | None, identity: RunIdentity, tool_id: str, names: Sequence[str]
) -> Mapping[str, str]:
    """Resolve vault entries for one call acting for ``identity.call_author``.

    Raises:
        VaultAccessError: no vault is configured, or the vault refused an entry (named).
    """
    if vault is None:
        raise VaultAccessError(f"vault entry {names[0]!r} cannot be resolved: this daemon has no vault")
    return await vault.resolve(identity.call_author, tool_id, names)


@dataclass(frozen=True)
class ManualCallHost:
    """The host of one hand-started call.

    Attributes:
        tool_id: The tool the call was decided for (``shell__run`` or ``server.tool``).
        reason: The permission decision that allowed it (returned by :meth:`authorize`).
        vault: Resolves the call's vault placeholders for the user who started it (None: the
            daemon has no vault, so a placeholder is refused).
        shell: How its shell commands run: the daemon's sandbox, and the host services of the run a
            gate command belongs to (none for a call started by hand). Keyword only and required, so
            no caller forgets the sandbox.
    """

    tool_id: str
    reason: str
    vault: SecretResolver | None = None
    shell: ShellTerms = field(kw_only=True)

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        """Allow the decided tool (the service asked the rules before dispatch); refuse any other."""
        if tool_id == self.tool_id:
            return AuthorizationResult(True, self.reason)
        return AuthorizationResult(False, f"a call started by hand runs only {self.tool_id}, not {tool_id}")

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """Refused: a work plan belongs to an agent run."""
        raise _no_run("the work plan", identity)

    async def save_work_plan(self, identity: RunIdentity, update: PlanUpdate) -> dict[str, Any]:
        """Refused: a work plan belongs to an agent run."""
        raise _no_run("the work plan", identity)

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Refused: the run context belongs to an agent run."""
        raise _no_run("the run context", identity)

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        """Refused: only an agent run has children."""
        raise _no_run("spawn_child", identity)

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        """Refused: only an agent run has children."""
        raise _no_run("collect_children", identity)

    async def steer_child(self, identity: RunIdentity, child_run_id: str, text: str) -> dict[str, Any]:
        """Refused: only an agent run has children."""
        raise _no_run("steer_child", identity)

    def pipeline_access(self, identity: RunIdentity) -> PipelineAccess:
        """Refused: the pipeline tools belong to an agent run (its session is their owner)."""
        raise _no_run("the pipelines", identity)

    def monitor_access(self, identity: RunIdentity) -> MonitorAccess:
        """Refused: the monitor tools belong to an agent run (its session is their owner)."""
        raise _no_run("the monitors", identity)

    async def resolve_secrets(
        self, identity: RunIdentity, tool_id: str, names: Sequence[str]
    ) -> Mapping[str, str]:
        """Resolve the call's placeholders as the user who started it, for the decided tool only."""
        return await resolve_for(self.vault, identity, tool_id, names)

    def background_jobs(self, identity: RunIdentity) -> BackgroundJobs:
        """Refused: a background command belongs to a run, and this call has none."""
        raise _no_run("a background command", identity)

    def shell_terms(self, identity: RunIdentity) -> ShellTerms:
        """The terms it was built with (:attr:`shell`)."""
        return self.shell

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Log the event: a hand-started call has no run event stream (its record is the invocation)."""
        log.info("%s (%s): %s %s", identity.run_id, self.tool_id, kind, data)

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        """Refused: the service journals the call itself; a nested action would go unjournaled."""
        raise _no_run("a nested journaled action", identity)
