"""Vault placeholders in tool calls, and the masking of the values they inject (seed 003
"Authenticate with a vault credential"; FACTS.md §10).

A call of a tool that declares :attr:`~octipusd.toolkit.ToolSpec.secret_env` (``shell__run``)
may carry ``{{secret:NAME}}`` (NAME: letters, digits, ``_`` and ``-``) in the values of its
``env`` argument. Every other place is refused before anything runs -- the command string, a URL,
another argument, a file's content, the ``env`` of a tool that does not declare it -- with an
error saying to put the placeholder in ``env``, because those places are logged, shown and stored.

:func:`run_with_secrets` is the one path a tool body takes, whoever starts the call (the bridge,
a call started by hand): it finds the placeholders, has the host resolve them for the calling
user and the tool (:meth:`~octipusd.toolkit.ToolHost.resolve_secrets`, after the call's normal
permission checks, which saw only the placeholders), hands the handler a copy of the arguments
with the values substituted into ``env``, and masks every injected value in what the handler
returns (:class:`Masker`: ``[REDACTED:NAME]`` for the value, its base64 and URL encodings), so
the agent, the journal and the events never see it. A refusal or a failed resolution raises
:class:`~octipusd.errors.NotExecutedError`: nothing ran, and the journal records
``not_executed``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from octipusd.errors import NotExecutedError, OctipusError
from octipusd.toolkit.host import ToolHost
from octipusd.toolkit.identity import RunIdentity
from octipusd.toolkit.outcomes import ToolOutcome
from octipusd.toolkit.specs import ToolResult, ToolSpec

__all__ = [
    "ENV_ARGUMENT",
    "MIN_ENCODED_CHARS",
    "NAME_CHARS",
    "PLACEHOLDER",
    "SECRET_ENV_DESCRIPTION",
    "TRUNCATION_NOTE",
    "Masker",
    "PlaceholderUse",
    "SecretResolver",
    "call_masker",
    "find_placeholders",
    "map_strings",
    "mask_outcome",
    "mask_result",
    "masking_errors",
    "placeholder_names",
    "redaction",
    "run_spec",
    "run_with_secrets",
    "substitute",
]

#: The argument whose values may carry placeholders (an object of environment variables).
ENV_ARGUMENT = "env"
#: A character of a vault entry's name (the placeholder grammar, FACTS.md §10).
NAME_CHARS = "[A-Za-z0-9_-]"
#: ``{{secret:NAME}}``; group 1 is the entry name.
PLACEHOLDER = re.compile(r"\{\{secret:(" + NAME_CHARS + r"+)\}\}")
#: Anything that looks like an attempt at a placeholder (to refuse a malformed one by name).
_PLACEHOLDER_LIKE = re.compile(r"\{\{\s*secret\s*:", re.IGNORECASE)
#: Fewest characters of an encoded form (base64, URL-encoding) that is masked: shorter forms would
#: mask ordinary text by chance. The value itself is always masked, whatever its length.
MIN_ENCODED_CHARS = 8
#: Fewest characters of a value's beginning masked where a text was cut (a truncated output).
MIN_PARTIAL_CHARS = 4


class SecretResolver(Protocol):
    """The vault as a tool call's host sees it (implemented by :class:`octipusd.vault.Vault`)."""

    async def resolve(self, user: str, tool_id: str, names: Sequence[str]) -> Mapping[str, str]:
        """Return ``{name: value}`` for one invocation of ``tool_id`` acting for ``user``.

        Raises:
            VaultAccessError: an entry is unknown, ``user`` is not among its users, or ``tool_id``
                is outside its tool allowlist; the message names the entry.
            VaultKeyError: the vault's key cannot decrypt the entry.
        """
        ...


def redaction(name: str) -> str:
    """What replaces an injected value of the entry ``name``: ``[REDACTED:NAME]``."""
    return f"[REDACTED:{name}]"


def placeholder_names(text: str) -> list[str]:
    """The entry names of the placeholders in ``text``, de-duplicated, in order (FACTS.md §10)."""
    return list(dict.fromkeys(PLACEHOLDER.findall(text)))


@dataclass(frozen=True)
class PlaceholderUse:
    """The placeholders of one call.

    Attributes:
        names: Every entry named, de-duplicated, in order of appearance.
    """

    names: tuple[str, ...] = ()


def _strings(value: Any, path: str) -> Iterable[tuple[str, str]]:
    """Every string in a JSON value with its path (``command``, ``files[0].content``)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(str(key), f"{path} (a key)")
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _check_form(where: str, text: str) -> None:
    if _PLACEHOLDER_LIKE.search(PLACEHOLDER.sub("", text)):
        raise NotExecutedError(
            f"{where}: a malformed vault placeholder; write it exactly as {{{{secret:NAME}}}} with NAME "
            "of letters, digits, '_' or '-', as the value of a variable in env; nothing ran"
        )


def find_placeholders(tool_id: str, arguments: Mapping[str, Any], *, env_allowed: bool) -> PlaceholderUse:
    """Find the vault placeholders of a call and refuse every misplaced one.

    Args:
        tool_id: The tool (named in the errors).
        arguments: The call's arguments (identity keys already stripped).
        env_allowed: The tool declares that its ``env`` values may carry placeholders.

    Returns:
        The names used (empty when the call has none).

    Raises:
        NotExecutedError: a placeholder (or a malformed one) is outside an ``env`` value, or in
            ``env`` of a tool that does not resolve them; the message names where it is and says
            to put it in ``env``.
    """
    names: list[str] = []
    for key, value in arguments.items():
        if key == ENV_ARGUMENT and env_allowed and isinstance(value, Mapping):
            for variable, item in value.items():
                if _PLACEHOLDER_LIKE.search(str(variable)):
                    raise NotExecutedError(
                        f"{tool_id} env: a vault placeholder in a variable's name is refused; put it in the "
                        "variable's value"
                    )
                if isinstance(item, str):
                    _check_form(f"{tool_id} env.{variable}", item)
                    found = placeholder_names(item)
                    names.extend(found)
                elif any(PLACEHOLDER.search(text) for _, text in _strings(item, "")):
                    raise NotExecutedError(f"{tool_id} env.{variable}: a placeholder must be a string value")
            continue
        for where, text in _strings(value, key):
            if PLACEHOLDER.search(text) or _PLACEHOLDER_LIKE.search(text):
                allowed = "in env" if env_allowed else "in the env of a tool that resolves them (shell__run)"
                raise NotExecutedError(
                    f"{tool_id}: a vault placeholder in {where} is refused, nothing ran: a command "
                    "line, URL, argument or file is logged, shown and stored. Put the placeholder "
                    f"{allowed}, as the value of the environment variable the program reads "
                    '(e.g. "env": {"GH_TOKEN": "{{secret:github_token}}"}), and refer to that '
                    "variable in the command"
                )
    return PlaceholderUse(tuple(dict.fromkeys(names)))


def substitute(env: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    """Return ``env`` with every placeholder replaced by its value.

    Raises:
        NotExecutedError: a placeholder names an entry ``values`` lacks (never reached after a
            successful resolution).
    """

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise NotExecutedError(f"vault entry {name!r} was not resolved; nothing ran")
        return values[name]

    return {key: PLACEHOLDER.sub(one, value) for key, value in env.items()}


def _base64_cores(raw: bytes) -> set[str]:
    """The base64 characters that depend only on ``raw``, at each of the 3 byte alignments it can
    have inside a longer encoded stream, standard and URL-safe alphabets."""
    whole = base64.b64encode(raw).decode("ascii")  # the value encoded alone, its padding included
    cores: set[str] = (
        {whole, whole.replace("+", "-").replace("/", "_")} if len(whole) >= MIN_ENCODED_CHARS else set()
    )
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
        first = -(-offset * 8 // 6)  # the first character whose 6 bits are all the value's
        last = ((offset + len(raw)) * 8) // 6  # one past the last such character
        core = encoded[first:last]
        if len(core) >= MIN_ENCODED_CHARS:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def _forms(value: str) -> set[str]:
    forms = {value}
    for encoded in {urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}:
        if encoded != value and len(encoded) >= MIN_ENCODED_CHARS:
            forms.add(encoded)
    forms |= _base64_cores(value.encode("utf-8"))
    return forms


class Masker:
    """Replaces injected values (and their common encodings) with ``[REDACTED:NAME]``.

    Memory is linear in the values' length (a handful of forms each), whatever their size.

    Args:
        values: Entry name -> value injected into one invocation, or ``(name, value)`` pairs (an
            entry may then have several values: a replaced one's old value stays masked). Empty
            values are ignored.
    """

    def __init__(self, values: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        pairs = values.items() if isinstance(values, Mapping) else values
        self._pairs = tuple((name, value) for name, value in pairs if value)
        self._names: dict[str, str] = {}
        for name, value in self._pairs:
            for form in _forms(value):
                self._names.setdefault(form, name)
        ordered = sorted(self._names, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(form) for form in ordered)) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    @property
    def names(self) -> tuple[str, ...]:
        """The entries whose values this masker redacts."""
        return tuple(dict.fromkeys(name for name, _ in self._pairs))

    def mask(self, text: str) -> str:
        """Return ``text`` with every whole masked form replaced."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: redaction(self._names[match.group(0)]), text)

    def mask_settled(self, text: str) -> tuple[str, str]:
        """Mask the part of a growing output that later text cannot change; return it and the rest
        to hold back until more arrives (a value's form may still be completing in the last
        characters, fewer than its longest form's length). Without values, all of it is settled."""
        if self._pattern is None:
            return text, ""
        settled = max(len(text) - max(map(len, self._names)) + 1, 0)
        parts: list[str] = []
        pos = 0
        for match in self._pattern.finditer(text):
            if match.start() >= settled:
                break
            parts += [text[pos : match.start()], redaction(self._names[match.group(0)])]
            pos = match.end()
        end = max(settled, pos)
        parts.append(text[pos:end])
        return "".join(parts), text[end:]

    def mask_cut(self, text: str, cut: int) -> str:
        """Mask ``text``, and a value's beginning (at least :data:`MIN_PARTIAL_CHARS` characters)
        that ends exactly at ``cut``, where an output was truncated: its rest was never kept."""
        head, tail = self.mask(text[:cut]), self.mask(text[cut:])
        for name, value in self._pairs:
            start = max(len(head) - len(value) + 1, 0)  # the longest beginning first
            while (start := head.find(value[:MIN_PARTIAL_CHARS], start)) != -1:
                if value.startswith(head[start:]):
                    return head[:start] + redaction(name) + tail
                start += 1
        return head + tail

    def mask_error(self, exc: Exception) -> Exception:
        """Return ``exc``, or a copy of it (same type, code and status) with its message masked."""
        text = exc.message if isinstance(exc, OctipusError) else str(exc)
        masked = self.mask(text)
        if masked == text:
            return exc
        twin = copy.copy(exc)
        twin.args = (masked,)
        if isinstance(twin, OctipusError):
            twin.message = masked
        return twin


#: How a tool marks where it cut an output it kept only the beginning of (``shell__run``): the text
#: before the note may end with the beginning of a value whose rest was never kept.
TRUNCATION_NOTE = re.compile(r"\n\[[a-z]+ truncated: ")

#: What a tool with :attr:`~octipusd.toolkit.ToolSpec.secret_env` says of its ``env`` argument.
SECRET_ENV_DESCRIPTION = (
    "Extra environment variables for this command only. To use a credential, put the exact vault "
    'entry name as a placeholder in a value, e.g. {"GH_TOKEN": "{{secret:github_token}}"}: '
    "Octipus resolves it with your vault access after the permission check, the command receives "
    "the value, and the value is masked as [REDACTED:NAME] in what you get back. Never put a "
    "credential or a placeholder in the command line, a URL or a file. If you do not know the "
    "entry's name, ask for the name (never the token); if an entry is missing or refused, report "
    "the error instead of guessing other names."
)


def _mask_text(masker: Masker, text: str) -> str:
    cut = TRUNCATION_NOTE.search(text)
    return masker.mask_cut(text, cut.start()) if cut else masker.mask(text)


def mask_result(masker: Masker, value: ToolResult) -> ToolResult:
    """Mask every string value of a tool's result (a truncated output's cut value included); the
    result's field names are its own and are left as they are."""
    # keys are the tool's own field names (``exit_code``, ``stdout``): only values carry output
    masked: ToolResult = map_strings(value, lambda text: _mask_text(masker, text))
    return masked


def map_strings(value: Any, change: Callable[[str], str], *, keys: bool = False) -> Any:
    """A JSON value with ``change`` applied to each of its strings (and its objects' keys with
    ``keys``); other values as they are."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {
            (change(str(key)) if keys else key): map_strings(item, change, keys=keys)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [map_strings(item, change, keys=keys) for item in value]
    return value


Handler = Callable[[dict[str, Any]], Awaitable[ToolResult | ToolOutcome]]

#: The masker of the call whose handler runs now (:func:`run_with_secrets`), None outside one.
_CALL_MASKER: ContextVar[Masker | None] = ContextVar("octipus_call_masker", default=None)


def call_masker() -> Masker:
    """The vault values injected into the call whose handler runs now (empty when it has none): a
    handler whose command outlives the call (``shell__run_background``) masks its later output
    with it."""
    return _CALL_MASKER.get() or Masker(())


Resolve = Callable[[Sequence[str]], Awaitable[Mapping[str, str]]]


async def run_with_secrets(
    tool_id: str, arguments: Mapping[str, Any], *, env_allowed: bool, resolve: Resolve, handler: Handler
) -> ToolResult | ToolOutcome:
    """Run one tool body with its vault placeholders resolved, and its result masked.

    The call's permission checks are done (they saw the placeholders, never a value). Then:
    misplaced placeholders are refused; the names are resolved for the calling user and the tool
    (``resolve``); the handler gets a copy of the arguments whose ``env`` holds the values; every
    string of its result (a :class:`~octipusd.toolkit.ToolOutcome`'s value and reason included)
    and of an error it raises is masked.

    Args:
        tool_id: The tool (named in refusals; the vault's allowlist is checked against it).
        arguments: The call's arguments, with the placeholders.
        env_allowed: The tool declares that its ``env`` values may carry placeholders.
        resolve: ``names -> {name: value}`` for this call's user and tool; raises an
            :class:`~octipusd.errors.OctipusError` naming the entry it refuses.
        handler: The tool body, called with the arguments it must run with.

    Returns:
        The handler's result, masked.

    Raises:
        NotExecutedError: a placeholder is misplaced or malformed, or an entry is unknown, refused
            to this user or outside its tool allowlist; the handler did not run.
        Exception: what the handler raised, its message masked.
    """
    use = find_placeholders(tool_id, arguments, env_allowed=env_allowed)
    if not use.names:
        return await handler(dict(arguments))
    try:
        values = await resolve(use.names)
    except OctipusError as exc:
        raise NotExecutedError(f"{tool_id} was not run: {exc.message}") from None
    call = dict(arguments)
    call[ENV_ARGUMENT] = substitute(arguments[ENV_ARGUMENT], values)
    masker = Masker(values)
    token = _CALL_MASKER.set(masker)
    try:
        with masking_errors(masker):
            result = await handler(call)
    finally:
        _CALL_MASKER.reset(token)
    return mask_outcome(masker, result)


@contextlib.contextmanager
def masking_errors(masker: Masker) -> Iterator[None]:
    """Re-raise an exception of the block with its message masked (same type, code and status)."""
    try:
        yield
    except Exception as exc:
        masked = masker.mask_error(exc)
        if masked is exc:
            raise
        raise masked from None


def mask_outcome(masker: Masker, result: ToolResult | ToolOutcome) -> ToolResult | ToolOutcome:
    """Mask a tool's return: a result's strings, or an outcome's value, reason and detail."""
    if not masker:
        return result
    if isinstance(result, ToolOutcome):
        return ToolOutcome(
            mask_result(masker, result.value),
            uncertain=masker.mask(result.uncertain) if result.uncertain is not None else None,
            is_error=result.is_error,
            detail=masker.mask(result.detail) if result.detail is not None else None,
            in_flight=result.in_flight,
        )
    return mask_result(masker, result)


async def run_spec(
    spec: ToolSpec, identity: RunIdentity, host: ToolHost, arguments: Mapping[str, Any]
) -> ToolResult | ToolOutcome:
    """Run ``spec``'s handler for one call through :func:`run_with_secrets`, resolving its
    placeholders with ``host`` (:meth:`~octipusd.toolkit.ToolHost.resolve_secrets`)."""

    async def resolve(names: Sequence[str]) -> Mapping[str, str]:
        return await host.resolve_secrets(identity, spec.tool_id, names)

    async def handler(call: dict[str, Any]) -> ToolResult | ToolOutcome:
        return await spec.handler(identity, host, call)

    return await run_with_secrets(
        spec.tool_id, arguments, env_allowed=spec.secret_env, resolve=resolve, handler=handler
    )
