"""The one error tree of Octipus.

Every error Octipus raises on purpose derives from :class:`OctipusError` and carries a
stable machine-readable ``code`` (used by the API's error bodies and by ``octipusctl`` exit
codes) plus a human message that says what was wrong and what to do::

    OctipusError                       code            exit  HTTP
    ├── ConfigError                    config_invalid    2    -
    ├── StoreError                     store_error       1   500
    │   ├── DatabaseLockedError        database_locked   1    -
    │   ├── DatabaseTimeoutError       database_timeout  1   503
    │   └── NotFoundError              not_found         1   404
    ├── ConflictError                  conflict          1   409
    │   └── KeyInUseError              key_in_use        1   409
    ├── ForbiddenError                 forbidden         1   403
    ├── InvalidRequestError            invalid_request   2   400
    ├── ExecutableNotFoundError        executable_not_found 1 422
    ├── AdapterError                   adapter_error     1   422
    ├── BridgeError                    bridge_error      1   500
    ├── ApprovalError                  approval_error    1   409
    └── DaemonUnavailableError         daemon_unavailable 3   -

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


class DaemonUnavailableError(OctipusError):
    """A client could not reach octipusd on its socket."""

    code = "daemon_unavailable"
    exit_code = 3


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
