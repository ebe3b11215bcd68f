"""Shape checks of model rows and session options, shared by the store and the API.

These check what the store can know without the adapter registry: the name, the permission
mode, the binary's form, that additive flags are a list of strings, and the types of the known
``cliAgent`` keys. Whether an adapter is installed and whether it accepts a flag is checked by
the API against the adapters themselves.

Every function returns the checked (possibly normalised) value, or raises
:class:`~octipusd.errors.InvalidRequestError` (a bad value, or a value of the wrong JSON type)
whose message names the field, says what was wrong and what is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from octipusd.adapter import PermissionMode
from octipusd.environment import RESERVED_PREFIX, ROW_ONLY_OPTIONS, is_reserved
from octipusd.errors import InvalidRequestError

__all__ = [
    "CLI_AGENT_KEY",
    "CLI_AGENT_KEY_TYPES",
    "MODEL_ROW_NAME_PATTERN",
    "PERMISSION_MODES",
    "check_additive_flags_shape",
    "check_binary",
    "check_cli_agent",
    "check_metadata",
    "check_model_name",
    "check_model_row_name",
    "check_pass_env",
    "check_permission_mode",
    "check_session_options",
    "looks_like_id",
]

#: Names of model rows: 1-100 ASCII letters, digits, ``.``, ``_`` and ``-``.
MODEL_ROW_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")

#: The Octipus permission modes a model row may set (``workspace`` = Claude's acceptEdits).
PERMISSION_MODES: Final[tuple[str, ...]] = tuple(m.value for m in PermissionMode)

#: Key of the seed's ``metadata.cliAgent`` object inside a row's metadata.
CLI_AGENT_KEY: Final = "cliAgent"

#: Known ``cliAgent`` keys and their JSON types; other keys pass unchecked (adapters ignore
#: keys they do not know).
CLI_AGENT_KEY_TYPES: Final[Mapping[str, type]] = {
    "transport": str,
    "inheritApiKeys": bool,
    "sharedUse": bool,
}

_ID_PATTERN: Final = re.compile(r"[0-9a-f]{32}")
#: An environment variable name accepted in ``cliAgent.env``.
ENV_NAME_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_TYPE_NAMES: Final[Mapping[type, str]] = {str: "a string", bool: "a boolean (true or false)"}


def looks_like_id(text: str) -> bool:
    """True when ``text`` has the form of a generated id (32 lowercase hex characters)."""
    return _ID_PATTERN.fullmatch(text) is not None


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def check_model_row_name(name: object) -> str:
    """Check a model row name.

    Args:
        name: The proposed name.

    Returns:
        The name, unchanged.

    Raises:
        InvalidRequestError: ``name`` is not a string; it is empty, longer than 100 characters, has
            a character other than ASCII letters, digits, ``.``, ``_`` and ``-``, or is 32 hex
            characters (an id's form).
    """
    if not isinstance(name, str):
        raise InvalidRequestError(f"model row name must be a string, not {type(name).__name__}")
    if MODEL_ROW_NAME_PATTERN.fullmatch(name) is None:
        raise InvalidRequestError(
            f"model row name {name!r} is invalid: use 1-100 characters of ASCII letters, digits, '.', '_' and '-'"
        )
    if looks_like_id(name):
        raise InvalidRequestError(
            f"model row name {name!r} looks like an id (32 hex characters); choose another name"
        )
    return name


def check_permission_mode(mode: object) -> str:
    """Check a permission mode.

    Returns:
        The mode as a plain string.

    Raises:
        InvalidRequestError: Not one of ``workspace``, ``full``, ``plan``, ``default``.
    """
    if not isinstance(mode, str) or mode not in PERMISSION_MODES:
        raise InvalidRequestError(
            f"permission_mode {mode!r} is not one of {', '.join(PERMISSION_MODES)} "
            "(workspace = acceptEdits, the default; full = the vendor's bypass)"
        )
    return str(mode)


def check_binary(binary: object) -> str | None:
    """Check a row's binary override: a command name looked up on PATH, or an absolute path.

    Returns:
        The binary, or None.

    Raises:
        InvalidRequestError: Not a string (or None); empty, surrounded by spaces, with a control
            character, starting with ``-``, or a relative path (it contains ``/`` but does not start
            with it).
    """
    if binary is None:
        return None
    if not isinstance(binary, str):
        raise InvalidRequestError(f"binary must be a string or null, not {type(binary).__name__}")
    if not binary or binary.strip() != binary or _has_control(binary) or binary.startswith("-"):
        raise InvalidRequestError(
            f"binary {binary!r} is invalid: give a command name (e.g. 'claude') or an absolute path "
            "(e.g. '/opt/claude/bin/claude')"
        )
    if "/" in binary and not binary.startswith("/"):
        raise InvalidRequestError(
            f"binary {binary!r} is a relative path: give a command name looked up on PATH or an absolute path"
        )
    return binary


def check_model_name(model: object) -> str | None:
    """Check a vendor model name (free text, no control characters).

    Returns:
        The name, or None.

    Raises:
        InvalidRequestError: Not a string (or None); empty, or with a control character.
    """
    if model is None:
        return None
    if not isinstance(model, str):
        raise InvalidRequestError(f"model must be a string or null, not {type(model).__name__}")
    if not model.strip() or _has_control(model):
        raise InvalidRequestError(
            f"model {model!r} must be a non-empty vendor model name without control characters"
        )
    return model


def check_additive_flags_shape(flags: object) -> tuple[str, ...]:
    """Check that additive flags are a list of non-empty strings (not whether they are allowed).

    Returns:
        The flags as a tuple.

    Raises:
        InvalidRequestError: Not a list/tuple (a bare string is refused), or an item is not a
            string; an item is empty or holds a NUL character.
    """
    if isinstance(flags, str | bytes) or not isinstance(flags, Sequence):
        raise InvalidRequestError(f"additive_flags must be a list of strings, not {type(flags).__name__}")
    out: list[str] = []
    for item in flags:
        if not isinstance(item, str):
            raise InvalidRequestError(f"additive flag {item!r} is not a string")
        if not item.strip() or "\x00" in item:
            raise InvalidRequestError(f"additive flag {item!r} is empty or holds a NUL character")
        out.append(item)
    return tuple(out)


def check_pass_env(value: object, what: str = "metadata.cliAgent.passEnv") -> list[str]:
    """Check a row's ``passEnv``: the names of daemon environment variables its vendor also gets.

    Returns:
        The names, duplicates dropped, in their order.

    Raises:
        InvalidRequestError: Not a list of strings, an entry is not a variable name, or names one of the daemon's own settings
            (``OCTIPUS_*``, in any case), which never reach a vendor.
    """
    if not isinstance(value, list):
        raise InvalidRequestError(
            f'{what} must be a list of environment variable names (e.g. ["AWS_PROFILE"]), '
            f"not {json.dumps(value, default=repr)}"
        )
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise InvalidRequestError(f"{what}: entry {json.dumps(item, default=repr)} is not a string")
        if ENV_NAME_PATTERN.fullmatch(item) is None:
            raise InvalidRequestError(
                f"{what}: {item!r} is not an environment variable name (letters, digits and '_', "
                "not starting with a digit; no '*' patterns)"
            )
        if is_reserved(item):
            raise InvalidRequestError(
                f"{what}: {item!r} is one of the daemon's own settings ({RESERVED_PREFIX}*): they configure "
                f"Octipus (its database URL among them) and never reach a vendor; set the value the "
                f'vendor needs on the row with metadata.cliAgent.env (e.g. {{"{item[len(RESERVED_PREFIX) :]}": '
                '"..."}) or keep it in a variable of another name'
            )
        if item not in names:
            names.append(item)
    return names


def check_cli_agent(value: object, what: str = "metadata.cliAgent") -> dict[str, Any]:
    """Check a ``cliAgent`` object (a row's ``metadata.cliAgent`` or a session's ``options``).

    Args:
        value: The object.
        what: How to name it in messages.

    Returns:
        A shallow copy as a dict.

    ``env`` (an object of environment variable name -> string) is the vendor's environment set
    on the model (seed 003: in a space the user's settings files are not read, so "set its
    environment on the model"). ``passEnv`` (see :func:`check_pass_env`) names variables of the
    daemon's environment the vendor also gets (:mod:`octipusd.environment`).

    Raises:
        InvalidRequestError: Not a JSON object, or a known key has the wrong type
            (see :data:`CLI_AGENT_KEY_TYPES`; ``env`` must map names to strings, ``passEnv``
            a list of variable names that are not ``OCTIPUS_*``).
    """
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be an object, not {type(value).__name__}")
    env = value.get("env")
    if "env" in value and (
        not isinstance(env, dict)
        or not all(
            isinstance(k, str) and ENV_NAME_PATTERN.fullmatch(k) and isinstance(v, str)
            for k, v in env.items()
        )
    ):
        raise InvalidRequestError(
            f'{what}.env must be an object of environment variables NAME: "value" (names of letters, digits '
            f"and '_', values strings), not {json.dumps(env, default=repr)}"
        )
    for key, expected in CLI_AGENT_KEY_TYPES.items():
        if key in value and type(value[key]) is not expected:
            raise InvalidRequestError(
                f"{what}.{key} must be {_JSON_TYPE_NAMES[expected]}, not {json.dumps(value[key], default=repr)}"
            )
    checked = dict(value)
    if "passEnv" in value:
        checked["passEnv"] = check_pass_env(value["passEnv"], f"{what}.passEnv")
    return checked


def check_session_options(value: object, *, in_space: bool = False) -> dict[str, Any]:
    """Check a session's ``options`` (:func:`check_cli_agent`), which may not set ``passEnv``.

    Which of the daemon's variables a vendor gets is the model row's decision (its operator's),
    never a session's: a session in a shared space must not pull the daemon's credentials.

    Raises:
        InvalidRequestError: See :func:`check_cli_agent`; or ``passEnv`` is set.
    """
    options = check_cli_agent(value, "options")
    if "passEnv" in options:
        raise InvalidRequestError(
            "options.passEnv is not accepted on a session: list the variables on the model row "
            "(metadata.cliAgent.passEnv) and create the session from that row"
        )
    kept = sorted(ROW_ONLY_OPTIONS & options.keys()) if in_space else []
    if kept:
        raise InvalidRequestError(
            f"options.{kept[0]} is not accepted on a session in a shared space: which credentials the vendor "
            "gets and where they go is the model row's decision; set it on the row (metadata.cliAgent) "
            "and create the session from that row"
        )
    return options


def check_metadata(metadata: object) -> dict[str, Any]:
    """Check a model row's metadata: a JSON object whose ``cliAgent``, when present, is an object.

    Returns:
        A shallow copy as a dict.

    Raises:
        InvalidRequestError: Not an object, not JSON-serialisable, ``cliAgent`` not an object, or a known
            ``cliAgent`` key of the wrong type.
    """
    if not isinstance(metadata, dict):
        raise InvalidRequestError(f"metadata must be an object, not {type(metadata).__name__}")
    if CLI_AGENT_KEY in metadata:
        check_cli_agent(metadata[CLI_AGENT_KEY], f"metadata.{CLI_AGENT_KEY}")
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"metadata is not JSON-serialisable: {exc}") from exc
    return dict(metadata)
