"""Shell command lines split into simple commands: the parser behind the flow guard and the shell guard.

Pure: no I/O. Both guards judge a command line without running it, so both need the same reading
of it: which words form each simple command, where its redirections go, and which text is run by a
nested shell. This module is that reading; :mod:`octipusd.policy.flowguard` and
:mod:`octipusd.policy.shellguard` decide what the commands mean.

**Layers.**

* :func:`tokens`: :mod:`shlex` with POSIX rules, the shell's operator characters
  (:data:`OPERATOR_CHARS`) as separate tokens, newlines as operators, no comment handling. A token
  made only of operator characters (:func:`is_operator`) is an operator.
* :func:`parse`: one level of a command line. It first scans the text as a POSIX shell quotes it:
  operator characters inside quotes or after a backslash are protected (so ``echo ';'`` is one
  command whose word is ``;``), line continuations are joined, ``$(...)`` and backtick bodies (not
  inside single quotes; ``$((`` arithmetic excepted) are taken out and replaced by a placeholder
  word, and, unless switched off, comments are removed and heredoc bodies taken out. The tokens are
  then split into :class:`SimpleCommand` s at ``;``, ``&``, ``|``, ``&&``, ``||``, ``;;``, newlines
  and parentheses, each redirection (:class:`Redirect`) attached to its command; the file
  descriptor number of ``2>file`` is dropped from the words.
* :func:`walk`: every command a line runs, recursively: ``$(...)`` bodies, then each simple
  command with its wrappers unwrapped (:func:`unwrap`: ``sudo``, ``env``, ``timeout 10``,
  ``xargs``, ``python -m``, ...), then the script a shell runs (``bash -c SCRIPT``, a heredoc or
  here-string fed to ``sh``) and ``eval``'s words, down to a bounded nesting depth.

**Limits.** A lexical reading, not a shell: no variable, alias, glob or brace expansion;
``$'...'`` quoting and ``case`` patterns are read as plain words, and the parentheses of
``$((...))`` arithmetic split it like a subshell's; a heredoc body is data unless a shell reads
it (its ``$(...)`` are not taken out); a number before ``>``/``<`` counts as a file descriptor
even when a blank separates them. A line :mod:`shlex` cannot split (an unclosed quote) raises
:class:`ValueError` in strict mode, and is otherwise split on blanks and operators with quote
characters dropped, so its words are still judged.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ASSIGNMENT",
    "OPERATOR_CHARS",
    "RESERVED_WORDS",
    "SHELLS",
    "SUBSTITUTION_WORD",
    "WRAPPERS",
    "Command",
    "Parsed",
    "Redirect",
    "SimpleCommand",
    "command_index",
    "command_name",
    "is_operator",
    "parse",
    "shell_script",
    "split_words",
    "tokens",
    "unwrap",
    "walk",
    "wordset",
]


def wordset(text: str) -> frozenset[str]:
    """Return the blank-separated words of ``text`` as a frozenset (``wordset("a b")`` -> ``{"a", "b"}``)."""
    return frozenset(text.split())


#: Characters shlex returns as operator tokens (newline included: it separates commands).
OPERATOR_CHARS: Final = ";&|()<>\n"
#: ``NAME=value``, ``NAME+=value`` and ``NAME[index]=value`` before a command word.
ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
#: Shell words skipped before the command word of a simple command.
RESERVED_WORDS: Final = wordset("! { } if then else elif fi do done while until coproc esac")
#: Shells whose ``-c`` script, or standard-input script, :func:`walk` parses.
SHELLS: Final = wordset("sh bash zsh dash ksh mksh ash fish")
#: Commands that run the command after them: their options that take a value, and how many
#: positional words (``timeout 10``) come before the command.
WRAPPERS: Final[Mapping[str, tuple[frozenset[str], int]]] = {
    "sudo": (wordset("-u -g -h -p -C -D -r -t -U -T --user --group"), 0),
    "doas": (wordset("-u -C"), 0),
    "env": (wordset("-u -C --unset --chdir"), 0),
    "nohup": (frozenset(), 0),
    "time": (wordset("-f -o"), 0),
    "command": (frozenset(), 0),
    "exec": (wordset("-a"), 0),
    "builtin": (frozenset(), 0),
    "nice": (wordset("-n --adjustment"), 0),
    "ionice": (wordset("-c -n -p"), 0),
    "stdbuf": (wordset("-i -o -e"), 0),
    "timeout": (wordset("-s -k --signal --kill-after"), 1),
    "xargs": (wordset("-I -d -n -P -L -s -E -a --delimiter --max-args"), 0),
    "watch": (wordset("-n --interval"), 0),
    "setsid": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "strace": (wordset("-o -e -p -s"), 0),
}
#: Stands for a ``$(...)`` or backtick substitution in the words of a parsed command.
SUBSTITUTION_WORD: Final = "\ue0f0subst"

#: Operator characters inside quotes (or escaped) are swapped for private-use characters
#: before shlex runs, so that a token made of operator characters is always an operator.
_PROTECT: Final = {ord(char): chr(0xE000 + i) for i, char in enumerate(OPERATOR_CHARS)}
_UNPROTECT: Final = {ord(chr(0xE000 + i)): char for i, char in enumerate(OPERATOR_CHARS)}
#: ``<< <this><n>`` stands for the n-th heredoc body.
_HEREDOC_WORD: Final = "\ue0f1heredoc"
_OPERATOR: Final = re.compile(r"&>>|&>|<<<|<<|>>|<>|>&|<&|>\||&&|\|\||\|&|;;|[;&|()<>\n]")
_FALLBACK_TOKEN: Final = re.compile(r"&&|\|\||[;&|()\n]|[<>]+|[^\s;&|()<>]+")
_REDIRECTS: Final = frozenset({"<", ">", ">>", "<<", "<<<", "<>", ">&", "<&", ">|", "&>", "&>>"})
_INPUT_REDIRECTS: Final = frozenset({"<", "<>", "<&"})
_OUTPUT_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_PYTHON: Final = re.compile(r"(?:python|pypy)[0-9.]*")


# ------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Redirect:
    """One redirection of a simple command.

    Attributes:
        operator: ``<``, ``>``, ``>>``, ``>|``, ``<>``, ``>&``, ``<&``, ``&>``, ``&>>``, ``<<``
            (heredoc; the target is its delimiter, or a placeholder when the body was taken out)
            or ``<<<`` (here-string).
        target: The word after the operator, unquoted (``"/dev/null"``, ``"1"`` of ``2>&1``).
    """

    operator: str
    target: str

    @property
    def is_input(self) -> bool:
        """Whether the target is read as a file (``<``, ``<>``, ``<&``)."""
        return self.operator in _INPUT_REDIRECTS

    @property
    def is_output(self) -> bool:
        """Whether the target is written (``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``<>``, ``>&``)."""
        return self.operator in _OUTPUT_REDIRECTS


@dataclass
class SimpleCommand:
    """One simple command of a line, as :func:`parse` splits it.

    Attributes:
        words: Its words, unquoted, in order (assignments and reserved words included;
            redirections and their targets removed; a substitution is :data:`SUBSTITUTION_WORD`).
        redirects: Its redirections, in order.
        stdin_scripts: Text it gets on standard input: heredoc bodies (when taken out) and
            here-strings.
    """

    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    stdin_scripts: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        """Whether it has no words, redirections or standard-input text."""
        return not (self.words or self.redirects or self.stdin_scripts)


@dataclass(frozen=True)
class Parsed:
    """One level of a command line (:func:`parse`).

    Attributes:
        commands: Its simple commands, in order (empty ones left out).
        substitutions: The bodies of its ``$(...)`` and backtick substitutions, in order, not
            parsed yet (each is a command line of its own).
    """

    commands: list[SimpleCommand]
    substitutions: list[str]


@dataclass(frozen=True)
class Command:
    """A command a line runs, as :func:`walk` finds it.

    Attributes:
        name: :func:`command_name` of its command word after unwrapping (``"curl"`` for
            ``sudo /usr/bin/curl``); a wrapper that runs nothing is named itself (``"env"``,
            ``"command"`` of ``command -v curl``); ``""`` when the simple command has only
            assignments, reserved words or redirections.
        args: The words after the command word.
        redirects: The redirections of the simple command it came from.
        stdin_scripts: Heredoc bodies and here-strings of that simple command.
        depth: How deeply nested it is: 0 on the line itself, 1 inside one ``$(...)``,
            ``bash -c`` or ``eval``, and so on.
    """

    name: str
    args: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()
    stdin_scripts: tuple[str, ...] = ()
    depth: int = 0

    @property
    def inputs(self) -> list[str]:
        """Targets of its input redirections (``< file``), in order."""
        return [redirect.target for redirect in self.redirects if redirect.is_input]

    @property
    def outputs(self) -> list[str]:
        """Targets of its output redirections (``> file``, ``2>&1``'s ``1``), in order."""
        return [redirect.target for redirect in self.redirects if redirect.is_output]


# ------------------------------------------------------------------------ tokens


def is_operator(token: str) -> bool:
    """Whether a :func:`tokens` token is a shell operator (only :data:`OPERATOR_CHARS`; not empty)."""
    return bool(token) and all(char in OPERATOR_CHARS for char in token)


def tokens(text: str, *, strict: bool = False) -> list[str]:
    """Split ``text`` with shlex: POSIX quoting, operators as tokens, newlines as operators.

    Adjacent operator characters come as one token (``";>"``, ``"2>&1"`` gives ``"2"``, ``">&"``,
    ``"1"``); ``#`` is an ordinary character.

    Args:
        text: A command line (as given, or as :func:`parse` prepared it).
        strict: Raise on a line shlex cannot split instead of falling back.

    Returns:
        The tokens. When shlex fails (an unclosed quote or a trailing backslash) and ``strict`` is
        False: the line split on blanks and operators, with quote characters removed.

    Raises:
        ValueError: Only with ``strict``, when shlex cannot split the line.
    """
    lexer = shlex.shlex(text, posix=True, punctuation_chars=OPERATOR_CHARS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it, but judge the words anyway
        if strict:
            raise
        plain = text.translate(_UNPROTECT)
        return [
            token if is_operator(token) else token.replace("'", "").replace('"', "")
            for token in _FALLBACK_TOKEN.findall(plain)
        ]


def split_words(text: str) -> list[str]:
    """Split ``text`` into words with POSIX quoting (:func:`shlex.split`), on blanks if that fails.

    Args:
        text: Words as one string (``env -S 'curl -d x'``'s argument).

    Returns:
        The words.
    """
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


# ------------------------------------------------------------------------ one level


def parse(command: str, *, comments: bool = True, heredocs: bool = True, strict: bool = False) -> Parsed:
    """Split one level of a command line into simple commands (see the module docstring).

    Args:
        command: The command line.
        comments: Remove comments (``#`` starting a word, to the end of the line). False keeps
            their text as words (the shell guard's conservative reading).
        heredocs: Take heredoc bodies out (into :attr:`SimpleCommand.stdin_scripts`). False
            leaves the body lines in the text, to be split as commands like any other line.
        strict: Raise :class:`ValueError` on a line shlex cannot split (see :func:`tokens`).

    Returns:
        The simple commands and the unparsed substitution bodies.

    Raises:
        ValueError: Only with ``strict``.
    """
    text, substitutions, bodies = _prepare(command, comments=comments, heredocs=heredocs)
    commands: list[SimpleCommand] = []
    current = SimpleCommand()
    redirect: str | None = None
    for token in tokens(text, strict=strict):
        if is_operator(token):
            for operator in _OPERATOR.findall(token):
                if operator in _REDIRECTS:
                    if current.words and current.words[-1].isdigit():
                        current.words.pop()  # the fd of `2>file`
                    redirect = operator
                else:
                    if not current.empty():
                        commands.append(current)
                    current, redirect = SimpleCommand(), None
            continue
        word = token.translate(_UNPROTECT)
        if redirect is None:
            current.words.append(word)
            continue
        current.redirects.append(Redirect(redirect, word))
        if redirect == "<<":
            index = word.removeprefix(_HEREDOC_WORD)
            if word.startswith(_HEREDOC_WORD) and index.isdigit() and int(index) < len(bodies):
                current.stdin_scripts.append(bodies[int(index)])
        elif redirect == "<<<":
            current.stdin_scripts.append(word)
        redirect = None
    if not current.empty():
        commands.append(current)
    return Parsed(commands, substitutions)


def _prepare(command: str, *, comments: bool, heredocs: bool) -> tuple[str, list[str], list[str]]:
    """Scan ``command`` once, quoting as a POSIX shell does.

    Returns:
        ``(text for shlex, substitution bodies, heredoc bodies)``: the text has line continuations
        removed, quoted or escaped operator characters protected, each substitution replaced by
        :data:`SUBSTITUTION_WORD`, and (as asked) comments removed and each heredoc's delimiter
        replaced by a numbered placeholder whose body is in the third list.
    """
    out: list[str] = []
    substitutions: list[str] = []
    bodies: list[str] = []
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
        dollar = command.startswith("$(", i) and not command.startswith("$((", i)
        if dollar or char == "`":
            start = i + 2 if dollar else i + 1
            end = _closing_paren(command, start) if dollar else _closing_backtick(command, start)
            substitutions.append(command[start:end])
            out.append(SUBSTITUTION_WORD)
            i, word_start = end + 1, False
            continue
        if quote == '"':
            quote = "" if char == '"' else quote
            out.append(char.translate(_PROTECT))
            i += 1
            continue
        if comments and char == "#" and word_start:
            newline = command.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if heredocs and command.startswith("<<<", i):
            out.append("<<<")
            i += 3
            continue
        if heredocs and command.startswith("<<", i):
            delimiter, strip_tabs, after = _heredoc_delimiter(command, i + 2)
            if delimiter:
                out.append(f"<< {_HEREDOC_WORD}{len(bodies) + len(pending)} ")
                pending.append((delimiter, strip_tabs))
                i, word_start = after, False
                continue
        if char == "\n" and pending:
            out.append("\n")
            i += 1
            for delimiter, strip_tabs in pending:
                body, i = _heredoc_body(command, i, delimiter, strip_tabs)
                bodies.append(body)
            pending.clear()
            word_start = True
            continue
        if char in "'\"":
            quote = char
        out.append(char)
        word_start = char in " \t\r" or char in OPERATOR_CHARS
        i += 1
    bodies.extend("" for _ in pending)
    return "".join(out), substitutions, bodies


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
    """Index of the backtick closing one whose body starts at ``start`` (``len(text)`` if none)."""
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
    while i < len(text) and text[i] not in " \t\r" and text[i] not in OPERATOR_CHARS:
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


# ------------------------------------------------------------------------ commands


def command_name(word: str) -> str:
    """Return the name a command word runs: its last path segment, lower case, without ``.exe``.

    Args:
        word: A command word (``"/usr/bin/curl"``, ``"CURL.EXE"``).

    Returns:
        ``"curl"`` for both examples.
    """
    return word.rsplit("/", 1)[-1].lower().removesuffix(".exe")


def command_index(words: Sequence[str], keywords: Collection[str] = RESERVED_WORDS) -> int:
    """Return the index of the command word of a simple command.

    Args:
        words: The simple command's words (:attr:`SimpleCommand.words`).
        keywords: Words skipped like assignments before the command word (``if``, ``!``, ...).

    Returns:
        The index of the first word that is neither an assignment (:data:`ASSIGNMENT`) nor one of
        ``keywords``; ``len(words)`` when there is none (``X=1``, ``then``).
    """
    index = 0
    while index < len(words) and (ASSIGNMENT.match(words[index]) or words[index] in keywords):
        index += 1
    return index


def unwrap(name: str, args: Sequence[str]) -> list[str] | None:
    """Return the command a wrapper runs.

    Wrappers are :data:`WRAPPERS` (their options, and ``timeout``'s duration, are skipped; ``env``
    also skips ``NAME=value`` words and splits ``-S``/``--split-string``) and ``python -m MODULE``
    / ``pypy -m MODULE`` (which runs ``MODULE`` as a command: ``python -m pip install x`` is
    ``pip install x``).

    Args:
        name: :func:`command_name` of the command word.
        args: The words after it.

    Returns:
        The words of the command run (``["curl", "-d", "x"]`` for ``sudo -u me curl -d x``);
        ``[]`` for a wrapper that runs nothing (``env`` alone, ``command -v curl``, which only
        looks ``curl`` up); None when ``name`` is not a wrapper (``python`` without ``-m``
        included).
    """
    if _PYTHON.fullmatch(name):
        return list(args[list(args).index("-m") + 1 :]) if "-m" in args[:-1] else None
    if name not in WRAPPERS:
        return None
    if name == "command" and {"-v", "-V"} & set(args):
        return []
    with_value, positional = WRAPPERS[name]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if name == "env" and arg in ("-S", "--split-string") and i + 1 < len(args):
            return [*split_words(args[i + 1]), *args[i + 2 :]]
        if arg.startswith("-") and len(arg) > 1:
            i += 2 if arg in with_value else 1
            continue
        if name == "env" and ASSIGNMENT.match(arg):
            i += 1
            continue
        if positional:
            positional -= 1
            i += 1
            continue
        break
    return list(args[i:])


def shell_script(args: Sequence[str]) -> tuple[str | None, bool]:
    """Find the script a shell runs from its arguments.

    Args:
        args: The words after a shell's name (``["-lc", "curl x"]``).

    Returns:
        ``(script, names_file)``: the ``-c`` script (None without ``-c``), and whether a script
        file is named instead (``bash deploy.sh``); ``(None, False)`` means the shell reads its
        standard input.
    """
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


def walk(command: str, *, max_depth: int, depth: int = 0) -> Iterator[Command]:
    """Yield every command ``command`` runs, nested ones included, in the order a reader meets them.

    For one level: first what each ``$(...)``/backtick body runs (recursively), then each simple
    command (:func:`parse` with comments and heredocs handled), unwrapped (:func:`unwrap`); right
    after a shell (:data:`SHELLS`) come the commands of its script (its ``-c`` script, else its
    heredoc or here-string unless it names a script file), and after ``eval`` those of its words
    joined by blanks. Nested text is parsed only while ``depth < max_depth``; deeper text is not
    looked at. A line shlex cannot split falls back to a split on blanks (:func:`tokens`).

    Args:
        command: The command line.
        max_depth: How many levels of ``$(...)``, ``bash -c``, ``eval`` and shell heredocs are
            parsed into (the flow guard uses 3).
        depth: The level ``command`` is at (0 for a tool call's command).

    Yields:
        One :class:`Command` per simple command, at its :attr:`Command.depth`.
    """
    parsed = parse(command)
    if depth < max_depth:
        for substitution in parsed.substitutions:
            yield from walk(substitution, max_depth=max_depth, depth=depth + 1)
    for simple in parsed.commands:
        found = _command(simple, depth)
        yield found
        if depth >= max_depth:
            continue
        if found.name in SHELLS:
            script, names_file = shell_script(found.args)
            scripts = [script] if script is not None else ([] if names_file else found.stdin_scripts)
            for text in scripts:
                yield from walk(text, max_depth=max_depth, depth=depth + 1)
        elif found.name == "eval" and found.args:
            yield from walk(" ".join(found.args), max_depth=max_depth, depth=depth + 1)


def _command(simple: SimpleCommand, depth: int) -> Command:
    """The :class:`Command` a simple command runs, wrappers unwrapped."""
    words: Sequence[str] = simple.words
    redirects, stdin_scripts = tuple(simple.redirects), tuple(simple.stdin_scripts)
    while True:
        index = command_index(words)
        if index >= len(words):
            return Command("", (), redirects, stdin_scripts, depth)
        name, args = command_name(words[index]), tuple(words[index + 1 :])
        inner = unwrap(name, args)
        if not inner:
            return Command(name, args, redirects, stdin_scripts, depth)
        words = inner
