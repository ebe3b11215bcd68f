"""A child's command scorer gates: what ``spawn_child``'s ``gates`` argument asks to verify.

Seed 003 ("Permissions and limits", the "Command scorers" paragraph; ``swarm.contractRetries``):
after a child finishes, each gate command runs in the child's own tree (its worktree or captured
project) through the shell tool's path, and a fixable failure retries the child with the failure
as its reason. The tool validates the argument (:mod:`octipusd.tools.gate_args`); the runtime runs
the gates (:mod:`octipusd.runtime.gates`). This module only holds the validated value, so every
layer can pass it on.
"""

from __future__ import annotations

from dataclasses import dataclass

from octipusd.errors import InvalidRequestError

__all__ = ["GateSpec"]


@dataclass(frozen=True)
class GateSpec:
    """One validated command scorer gate of a child.

    Attributes:
        name: The gate's name in receipts and retry reasons (unique among the child's gates).
        commands: The shell command line of the gate, or, with :attr:`any_of`, its alternatives in
            the order they are tried (each run with ``/bin/sh -c`` in the child's tree).
        any_of: The gate passes when any one alternative passes; an alternative that cannot run in
            this environment (an unavailable directory or program, a policy refusal) does not fail
            the gate while another one is viable.
        required: A required gate must pass for the child to pass verification; a non-required
            gate's failure is reported only.
        retryable: A failing required gate retries the child (``swarm.contractRetries``); a
            failing required gate that is not retryable stops the retries, even when another gate
            has a fixable failure.
        timeout_seconds: The deadline of each of its commands (seconds), or None for the runtime's
            default.

    Raises:
        InvalidRequestError: on construction, when ``commands`` is empty, or holds more than one
            command without ``any_of``.
    """

    name: str
    commands: tuple[str, ...]
    any_of: bool = False
    required: bool = True
    retryable: bool = True
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        if not self.commands:
            raise InvalidRequestError(f"gate {self.name!r}: has no command")
        if len(self.commands) > 1 and not self.any_of:
            raise InvalidRequestError(
                f"gate {self.name!r}: several commands are alternatives; mark the gate any_of"
            )
