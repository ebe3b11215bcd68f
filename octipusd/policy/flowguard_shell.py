"""The flow guard's shell contracts: what each command a shell line runs reads and sends out.

The line is walked by :func:`octipusd.policy.shellwords.walk` (pipelines, lists, subshells,
substitutions, wrappers, ``bash -c``, ``eval``, shell heredocs, up to :data:`MAX_SHELL_NESTING`
levels); each command is judged by its redirections and then by its name, through
:data:`_HANDLERS`. Pure; see :mod:`octipusd.policy.flowguard` for what is tracked and the limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from octipusd.policy import flowguard_tables as tables, shellwords
from octipusd.policy.flowguard_evidence import Findings, is_credential_path
from octipusd.policy.flowguard_tables import Egress, FlowFlag
from octipusd.policy.shellwords import wordset

__all__ = ["MAX_SHELL_NESTING", "analyze_shell"]

#: How deep ``bash -c``, ``eval``, ``$(...)`` and shell heredocs are parsed into (levels).
MAX_SHELL_NESTING: Final = 3


_NETWORK_DEVICES: Final = ("/dev/tcp/", "/dev/udp/")


@dataclass(frozen=True)
class _Invocation:
    """One command to judge: its name (:func:`shellwords.command_name`), arguments and findings."""

    name: str
    args: tuple[str, ...]
    found: Findings

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


def analyze_shell(command: str, found: Findings) -> None:
    """Judge every command ``command`` runs (:func:`shellwords.walk`: pipelines, lists, subshells,
    substitutions, wrappers, ``bash -c``, ``eval``, shell heredocs) by its redirections and name."""
    for ran in shellwords.walk(command, max_depth=MAX_SHELL_NESTING):
        for path in ran.inputs:
            if path.startswith(_NETWORK_DEVICES):
                found.send(Egress.READ, f"reading {path} fetches from the network")
            elif is_credential_path(path):
                found.taint(FlowFlag.SECRET, path, f"< {path} reads credentials")
        for path in ran.outputs:
            if path.startswith(_NETWORK_DEVICES):
                found.send(Egress.WRITE, f"redirecting to {path} sends data out")
        invocation = _Invocation(ran.name, ran.args, found)
        if _credential_command(invocation):
            continue
        handler = _HANDLERS.get(ran.name)
        if handler is not None:
            handler(invocation)


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


def _credential_command(inv: _Invocation) -> bool:
    """Flag a command that prints credentials; return whether it was one."""
    words = _positionals(inv.args, tables.CREDENTIAL_COMMAND_OPTIONS)
    for pattern in tables.CREDENTIAL_COMMANDS.get(inv.name, ()):
        if len(words) >= len(pattern) and all(
            word == part or word.startswith(part + "/") for word, part in zip(words, pattern, strict=False)
        ):
            what = " ".join((inv.name, *pattern))
            inv.secret(what, f"{what} prints credentials")
            return True
    return False


# --- readers


def _reader(inv: _Invocation) -> None:
    spec = tables.READERS[inv.name]
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
            if option not in tables.PATTERN_OPTIONS:  # `-e PATTERN` names no file; `-f FILE` does
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


def _printenv(inv: _Invocation) -> None:
    names = _positionals(inv.args)
    if not names:
        inv.secret("printenv", "printenv dumps the environment (credentials)")
    elif any(tables.SECRET_NAME.search(name) for name in names):
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


def _env_dump(inv: _Invocation) -> None:
    """``env`` running no command (:func:`shellwords.walk` names it ``env`` then) prints the environment."""
    inv.secret("env", "env dumps the environment (credentials)")


# --- HTTP clients


def _info_only(inv: _Invocation) -> bool:
    return bool(inv.args) and set(inv.args) <= tables.INFO_ONLY


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
            if option not in tables.CURL_LONG_DATA and option != "--request":
                i += 1
                continue
            value, i = _option_value(args, i, inline, bool(has_inline))
            if option == "--request":
                sends = sends or (
                    f"curl -X {value.upper()}" if value.upper() in tables.WRITE_METHODS else None
                )
            else:
                sends = sends or f"curl {option}"
                _curl_data_file(inv, "F" if option.startswith("--form") else option, value)
            continue
        i += 1
        if not arg.startswith("-") or len(arg) < 2:
            continue
        for position, letter in enumerate(arg[1:], start=1):
            if letter not in tables.CURL_SHORT_WITH_VALUE:
                continue
            value = arg[position + 1 :]
            if not value:
                value = args[i] if i < len(args) else ""
                i += 1
            if letter in "dFT":
                sends = sends or f"curl -{letter}"
                _curl_data_file(inv, letter, value)
            elif letter == "X" and value.upper() in tables.WRITE_METHODS:
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
            sends = sends or (
                f"wget --method={value.upper()}" if value.upper() in tables.WRITE_METHODS else None
            )
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
    words = _positionals(inv.args, wordset("-a --auth -o --output --session -A --auth-type"))
    if not words:
        return
    method = words[0] if words[0].isalpha() and words[0].isupper() else None
    sends = method in tables.WRITE_METHODS
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
        if arg == "-method" and lowered[i + 1].upper() in tables.WRITE_METHODS:
            sends = True
        elif arg == "-infile":
            inv.secret_path(inv.args[i + 1])
    if sends:
        inv.write(inv.name)
    else:
        inv.read(inv.name)


# --- remote shells and copies


def _remote_copy(inv: _Invocation) -> None:
    """``scp``/``rsync``: to a remote host is a write egress, from one a read egress."""
    words = _positionals(inv.args, tables.COPY_OPTIONS[inv.name])
    if not words:
        return
    *sources, destination = words
    if tables.REMOTE.match(destination):
        for source in sources:
            inv.secret_path(source)
        inv.write(f"{inv.name} to a remote host")
    elif any(tables.REMOTE.match(source) for source in sources):
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


def _subcommand(inv: _Invocation) -> None:
    table = tables.SUBCOMMANDS[inv.name]
    words = _positionals(inv.args, tables.GIT_GLOBAL_WITH_VALUE if inv.name == "git" else ())
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


def _gh(inv: _Invocation) -> None:
    """GitHub CLI: everything talks to GitHub (read egress); creating, commenting, editing,
    ``gh api`` with fields or a non-GET method send (write egress)."""
    words = _positionals(inv.args, wordset("-R --repo -X --method -H --header") | tables.GH_FIELDS)
    if not words or words[0] == "auth":
        return
    if words[0] == "api":
        options = {arg.partition("=")[0] for arg in inv.args}
        method = "GET"
        for i, arg in enumerate(inv.args[:-1]):
            if arg in ("-X", "--method"):
                method = inv.args[i + 1].upper()
        if options & tables.GH_FIELDS or method != "GET":
            inv.write("gh api")
        else:
            inv.read("gh api")
    elif len(words) > 1 and words[1] in tables.GH_WRITE_ACTIONS:
        inv.write(f"gh {words[0]} {words[1]}")
    else:
        inv.read(f"gh {words[0]}")


def _cloud(inv: _Invocation) -> None:
    """aws/gsutil/gcloud/az/rclone: a copy to a bucket or remote, or an upload, sends (write
    egress); anything else talks to the provider (read egress)."""
    words = _positionals(inv.args)
    if not words:
        return
    spelled = " ".join((inv.name, *words[:2]))
    if set(words) & tables.CLOUD_SEND or (set(words) & tables.CLOUD_COPY and tables.REMOTE.match(words[-1])):
        for word in words[:-1]:
            inv.secret_path(word)
        inv.write(spelled)
    else:
        inv.read(spelled)


def _kubectl(inv: _Invocation) -> None:
    words = _positionals(inv.args, wordset("-n --namespace -o --output --context -f -c"))
    if words:
        if words[0] in tables.KUBECTL_WRITE:
            inv.write(f"kubectl {words[0]}")
        else:
            inv.read(f"kubectl {words[0]}")


_HANDLERS: Final[Mapping[str, Callable[[_Invocation], None]]] = {
    **dict.fromkeys(tables.READERS, _reader),
    "dd": _dd,
    "printenv": _printenv,
    **dict.fromkeys(tables.ENV_LISTERS, _env_listing),
    "curl": _curl,
    "wget": _wget,
    **dict.fromkeys(tables.HTTPIE, _httpie),
    **dict.fromkeys(tables.POWERSHELL_WEB, _powershell_web),
    "scp": _remote_copy,
    "rsync": _remote_copy,
    "ssh": _ssh,
    **dict.fromkeys(tables.NETWORK_SENDERS, _always_write),
    **dict.fromkeys(tables.NETWORK_FETCHERS, _always_read),
    **dict.fromkeys(tables.SUBCOMMANDS, _subcommand),
    "gh": _gh,
    **dict.fromkeys(tables.CLOUD_CLIS, _cloud),
    "kubectl": _kubectl,
    "env": _env_dump,
}
