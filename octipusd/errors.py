"""The one error tree of Octipus.

Every error Octipus raises on purpose derives from :class:`OctipusError` and carries a
stable machine-readable ``code`` (used by the API's error bodies and by ``octipusctl`` exit
codes) plus a human message that says what was wrong and what to do::

    OctipusError                       code                   exit  HTTP
    ├── ConfigError                    config_invalid           2    -
    ├── StoreError                     store_error              1   500
    │   ├── DatabaseLockedError        database_locked          1    -
    │   ├── DatabaseTimeoutError       database_timeout         1   503
    │   └── NotFoundError              not_found                1   404
    ├── ConflictError                  conflict                 1   409
    │   └── KeyInUseError              key_in_use               1   409
    ├── ForbiddenError                 forbidden                1   403
    ├── InvalidRequestError            invalid_request          2   400
    │   ├── QuestionnaireError         invalid_request          2   400
    │   └── RuleSyntaxError            invalid_request          2   400
    ├── ExecutableNotFoundError        executable_not_found     1   422
    ├── AdapterError                   adapter_error            1   422
    ├── BridgeError                    bridge_error             1   500
    ├── ApprovalError                  approval_error           1   409
    ├── NotExecutedError               not_executed             1   422
    ├── JournalUnavailableError        journal_unavailable      1   503
    ├── PreparationError               preparation_failed       1   503
    ├── ConnectorUnavailableError      connector_unavailable    1   503
    ├── ConnectorCompensationError     compensation_failed      1   502
    ├── ActionsUnavailableError        actions_unavailable      1   503
    ├── PipelinesUnavailableError      pipelines_unavailable    1   503
    ├── MonitorsUnavailableError       monitors_unavailable     1   503
    ├── WorktreeError                  worktree_error           1   500
    ├── VaultAccessError               vault_access_denied      1   403
    ├── VaultKeyError                  vault_key_error          1   500
    ├── SandboxUnavailableError        sandbox_unavailable      1   503
    ├── DaemonUnavailableError         daemon_unavailable       3    -
    └── ApiError                       (the daemon's code)     2|1  (the daemon's status)

``NotExecutedError`` is part of the adapter SDK (tools raise it) and is re-exported by
:mod:`octipusd.toolkit`. ``DaemonUnavailableError`` and ``ApiError`` are a client's
(``octipusctl``): ``ApiError`` carries the error body the daemon answered with.

Errors never carry secrets (capabilities, vault values): messages are shown to people and
logged.

A broad ``except Exception`` is only where a failure is deliberately recorded as evidence (a
tool body's failure as the call's outcome, a host failure as the model's tool error), with a
comment giving the reason, and logged with its traceback (``log.exception``, ``exc_info=exc``;
through a helper, :func:`traceback_of`, and then marked ``# noqa: BLE001``, as ruff cannot see
it); everywhere else the exceptions really expected are caught.
"""

from __future__ import annotations


class OctipusError(Exception):
    """Base of every deliberate Octipus error.

    Args:
        message: What went wrong and what to do about it, for a person.

    Attributes:
        code: Stable identifier (snake_case) used by the API and clients.
        exit_code: Process exit code a CLI uses when this error ends it.
        http_status: Status the API answers with when this error reaches it.
    """

    code = "octipus_error"
    exit_code = 1
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """Return the JSON error body ``{"code": ..., "message": ...}``."""
        return {"code": self.code, "message": self.message}


class ConfigError(OctipusError):
    """A setting is invalid: names the key, where it came from, and the accepted values."""

    code = "config_invalid"
    exit_code = 2
    http_status = 400


class StoreError(OctipusError):
    """The database failed or refused an operation."""

    code = "store_error"


class DatabaseLockedError(StoreError):
    """Another daemon holds the database; the message names its pid and host."""

    code = "database_locked"


class DatabaseTimeoutError(StoreError):
    """The database did not answer within its timeout (``database.connectTimeoutSeconds``,
    ``database.statementTimeoutSeconds``), typically because another transaction held a lock;
    nothing of the call was written."""

    code = "database_timeout"
    http_status = 503


class NotFoundError(StoreError):
    """A record (session, run, approval) does not exist."""

    code = "not_found"
    http_status = 404


class ConflictError(OctipusError):
    """The request conflicts with the current state (e.g. a session already has a live run)."""

    code = "conflict"
    http_status = 409


class KeyInUseError(ConflictError):
    """A call with this idempotency key is running, or an earlier one is being compensated, so
    the new call was not run (seed 004: one key, one effect at a time)."""

    code = "key_in_use"


class ForbiddenError(OctipusError):
    """The caller's role does not allow this (e.g. a space viewer running the agent)."""

    code = "forbidden"
    http_status = 403


class InvalidRequestError(OctipusError):
    """A client sent something malformed; the message says which field and what is accepted."""

    code = "invalid_request"
    exit_code = 2
    http_status = 400


class QuestionnaireError(InvalidRequestError):
    """A malformed ``AskUserQuestion`` input, or answers that do not fit the questionnaire.

    The message is meant for a person: it names the question and what is expected. At the API
    it is a 400 ``invalid_request``.
    """


class RuleSyntaxError(InvalidRequestError):
    """A permission rule that does not parse: ``rule '<text>' does not parse: <problem>``.

    Attributes:
        problem: What is wrong, quoting the rule, without the prefix.
    """

    def __init__(self, text: object, problem: str) -> None:
        super().__init__(f"rule {text!r} does not parse: {problem}")
        self.problem = problem


class ExecutableNotFoundError(OctipusError):
    """A vendor CLI binary could not be resolved; the message names the PATH searched."""

    code = "executable_not_found"
    http_status = 422


class AdapterError(OctipusError):
    """An adapter cannot build a launch for the given request."""

    code = "adapter_error"
    http_status = 422


class BridgeError(OctipusError):
    """The per-run MCP bridge failed to start or serve."""

    code = "bridge_error"


class ApprovalError(OctipusError):
    """An approval answer cannot be applied (already decided, expired, wrong kind)."""

    code = "approval_error"
    http_status = 409


class NotExecutedError(OctipusError):
    """Trusted evidence that a call stopped before its mutation boundary.

    Raised only by Octipus code that has proven nothing ran (argument validation before any
    effect, a shell parser refusal, a failed process spawn, a bridge refusal before an MCP
    ``tools/call``, a trusted server declaration). The journal records ``not_executed`` and the
    next mutation needs no recovery review.

    Args:
        message: What stopped the call and what to do, for the model and the person.
    """

    code = "not_executed"
    http_status = 422


class JournalUnavailableError(OctipusError):
    """The ``started`` record could not be written, so the tool was not run (seed 000)."""

    code = "journal_unavailable"
    http_status = 503


class PreparationError(OctipusError):
    """A dependency failed before dispatch (nothing ran): the claim is released and retried."""

    code = "preparation_failed"
    http_status = 503


class ConnectorUnavailableError(OctipusError):
    """An MCP server could not be connected (spawn failed, refused, handshake failed or timed out).

    The message names the server and the error.
    """

    code = "connector_unavailable"
    http_status = 503


class ConnectorCompensationError(OctipusError):
    """A configured compensation tool failed (``isError``, a transport error, no connection).

    The message names the server, the compensation tool and the evidence; the recovery worker
    hands the action to its owner.
    """

    code = "compensation_failed"
    http_status = 502


class ActionsUnavailableError(OctipusError):
    """The daemon has no action service (an embedding built without one)."""

    code = "actions_unavailable"
    http_status = 503


class PipelinesUnavailableError(OctipusError):
    """The daemon cannot run pipelines: it was built without the pipelines' service or engine."""

    code = "pipelines_unavailable"
    http_status = 503


class MonitorsUnavailableError(OctipusError):
    """The daemon cannot run monitors: it was built without the monitors' service."""

    code = "monitors_unavailable"
    http_status = 503


class WorktreeError(OctipusError):
    """A git operation on a child's worktree failed or timed out (creation, commit, merge,
    removal); the message names the git command, the directory and git's own words."""

    code = "worktree_error"


class VaultAccessError(OctipusError):
    """A vault entry cannot be used here: it does not exist, the calling user is not among its
    users, or the tool is outside its tool allowlist. The message names the entry (never a guess at
    another name) and the ``octipusctl vault`` command that would change it; never its value."""

    code = "vault_access_denied"
    http_status = 403


class VaultKeyError(OctipusError):
    """The vault's key is missing, unreadable, too open, or does not decrypt the entries; the
    message names the key file (or systemd credential) and what to do."""

    code = "vault_key_error"


class SandboxUnavailableError(OctipusError):
    """``security.shellSandbox`` is ``required`` and no sandbox runner (bubblewrap, firejail) was
    found in ``/usr/bin``, ``/usr/local/bin`` or ``/bin``: shell commands are refused."""

    code = "sandbox_unavailable"
    http_status = 503


class DaemonUnavailableError(OctipusError):
    """A client could not reach octipusd on its socket."""

    code = "daemon_unavailable"
    exit_code = 3


class ApiError(OctipusError):
    """An error answered by the daemon (``code`` and ``message`` from its body).

    Exit code 2 (bad input) for 400, 404 and 422: the request named something wrong; 1 otherwise.
    """

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = status
        self.exit_code = 2 if status in (400, 404, 422) else 1


def describe_error(exc: BaseException) -> str:
    """One line naming a failure for a log or a record: ``<type>: <message>`` (an Octipus
    error's own message, otherwise the exception's text)."""
    text = exc.message if isinstance(exc, OctipusError) else str(exc)
    return f"{type(exc).__name__}: {text}"


def traceback_of(exc: BaseException) -> BaseException | None:
    """What to log ``exc`` with as ``exc_info``: None for an Octipus error or a timeout, whose
    message says what happened; the exception itself otherwise (unexpected: its traceback is
    the evidence)."""
    return None if isinstance(exc, OctipusError | TimeoutError) else exc
