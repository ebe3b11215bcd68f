"""The flow guard's classification tables: credential paths, tool and connector names, commands.

Data only, read by :mod:`octipusd.policy.flowguard` (which holds the logic and documents the
contracts; FACTS.md §9 "Flow guard" and seed 003). Each table says where it comes from: FACTS.md
§9 where it names the case, a heuristic otherwise. The two enums the tables are written in,
:class:`FlowFlag` and :class:`Egress`, live here and are re-exported by ``flowguard``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from octipusd.policy.shellwords import wordset

__all__ = [
    "CATEGORIES",
    "CLOUD_CLIS",
    "CLOUD_COPY",
    "CLOUD_SEND",
    "COPY_OPTIONS",
    "CREDENTIAL_COMMANDS",
    "CREDENTIAL_COMMAND_OPTIONS",
    "CREDENTIAL_DIRS",
    "CREDENTIAL_EXTENSIONS",
    "CREDENTIAL_FILES",
    "CREDENTIAL_SAMPLES",
    "CREDENTIAL_TAILS",
    "CURL_LONG_DATA",
    "CURL_SHORT_WITH_VALUE",
    "ENV_LISTERS",
    "ENV_TEMPLATE_SUFFIXES",
    "GH_FIELDS",
    "GH_WRITE_ACTIONS",
    "GIT_GLOBAL_WITH_VALUE",
    "HTTPIE",
    "INFO_ONLY",
    "KUBECTL_WRITE",
    "NATIVE_NOT_SHELL",
    "NATIVE_PATH_ARGS",
    "NATIVE_WEB",
    "NETWORK_FETCHERS",
    "NETWORK_SENDERS",
    "OCTIPUS_SERVER",
    "PATH_ARGS",
    "PATTERN_OPTIONS",
    "POWERSHELL_WEB",
    "READERS",
    "READ_VERBS",
    "REMOTE",
    "SECRET_NAME",
    "SHELL_FAMILIES",
    "SSH_KEY_NAME",
    "SSH_PUBLIC_FILES",
    "SUBCOMMANDS",
    "URL_ARGS",
    "WEB",
    "WRITE_METHODS",
    "WRITE_VERBS",
    "Category",
    "Egress",
    "EgressTable",
    "FlowFlag",
    "Reader",
]


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


# ------------------------------------------------------------------------ credential paths

#: ``.env.<suffix>`` files that are templates, not secrets (FACTS.md §9: ``.env.example``).
ENV_TEMPLATE_SUFFIXES: Final = wordset("example sample template dist")
#: Files under ``.ssh/`` that hold no secret (any other file there is treated as a key).
SSH_PUBLIC_FILES: Final = wordset("known_hosts known_hosts.old authorized_keys authorized_keys2 config")
#: Private key file names (``id_rsa``, ``id_ed25519_sk``).
SSH_KEY_NAME: Final = re.compile(r"^id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?$")
#: Credential files by name, anywhere (``.credentials.json``: ``~/.claude/.credentials.json``).
CREDENTIAL_FILES: Final = wordset(
    ".netrc _netrc .npmrc .pypirc .git-credentials .pgpass .vault-token credentials.json"
    " .credentials.json .claude.json kubeconfig"
)
#: Key and certificate-bundle extensions.
CREDENTIAL_EXTENSIONS: Final = (".pem", ".key", ".p12", ".pfx")
#: Directories whose every file is credential material (consecutive path segments).
CREDENTIAL_DIRS: Final[tuple[tuple[str, ...], ...]] = (
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
CREDENTIAL_TAILS: Final[tuple[tuple[str, ...], ...]] = ((".docker", "config.json"), (".codex", "auth.json"))
#: Names a wildcard pattern is tried against (``*.pem``, ``.env*``, ``id_*``).
CREDENTIAL_SAMPLES: Final = (
    ".env",
    ".env.local",
    ".env.production",
    "id_rsa",
    "id_ed25519",
    "server.pem",
    "server.key",
    "client.p12",
    "client.pfx",
    *sorted(CREDENTIAL_FILES),
)


# ------------------------------------------------------------------------ tool names

#: Vendor-native web tools: untrusted content, and the URL or query leaves (FACTS.md §9).
NATIVE_WEB: Final = wordset("WebFetch WebSearch web_search web_fetch")
#: Vendor-native readers and the arguments that name what they read.
NATIVE_PATH_ARGS: Final[Mapping[str, tuple[str, ...]]] = {
    "Read": ("file_path", "path"),
    "NotebookRead": ("notebook_path", "file_path", "path"),
    "Grep": ("path", "glob"),
    "Glob": ("pattern", "path"),
}
#: Vendor-native tools whose ``command`` argument is not a shell command.
NATIVE_NOT_SHELL: Final = wordset("SlashCommand Skill Task Agent")
#: The MCP server name of Octipus's own bridge (``mcp__octipus__<tool>``).
OCTIPUS_SERVER: Final = "octipus"
#: Octipus tool families whose ``command`` argument is a shell command.
SHELL_FAMILIES: Final = wordset("shell docker")
#: Argument names that hold a path a reading connector tool reads.
PATH_ARGS: Final = ("path", "file_path", "filePath", "paths", "file", "filename")
#: Argument names that hold a URL (an ``http(s)`` one makes an unknown tool a web tool).
URL_ARGS: Final = ("url", "uri", "href")


# -------------------------------------------------------------- connectors (by name)


@dataclass(frozen=True)
class Category:
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
CATEGORIES: Final[tuple[Category, ...]] = (
    Category(
        wordset("mail email emails gmail outlook inbox imap smtp mailbox"),
        "mail",
        frozenset({FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    Category(
        wordset("slack discord telegram whatsapp mattermost messaging chat sms message messages"),
        "chat messages",
        frozenset({FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    Category(
        wordset(
            "drive gdrive googledrive onedrive dropbox sharepoint gdocs sheets calendar gcal contacts notion"
        ),
        "the user's documents",
        frozenset({FlowFlag.PRIVATE}),
        Egress.NONE,
        private_store=True,
        namespace_words=wordset("docs data"),
    ),
    Category(
        wordset("github gitlab bitbucket atlassian jira confluence linear"),
        "issue and review text",
        frozenset({FlowFlag.SUSPICIOUS}),
        Egress.NONE,
    ),
    Category(
        wordset("web websearch webfetch browser browse navigate scrape crawl http url"),
        "web content",
        frozenset({FlowFlag.SUSPICIOUS}),
        Egress.READ,
        write_flags=frozenset({FlowFlag.SUSPICIOUS}),
    ),
)
#: The web category (also used for a tool with a web URL argument).
WEB: Final = CATEGORIES[-1]

#: Name words that make a tool a read (FACTS.md §9 names ``email_read`` and ``drive_read``).
READ_VERBS: Final = wordset(
    "get list search read fetch query find describe lookup view show count retrieve history"
    " browse navigate extract scrape crawl"
)
#: Name words that make a tool act; they win over read verbs (``fetch_and_send``).
WRITE_VERBS: Final = wordset(
    "send post reply forward create update delete remove upload share publish push write edit"
    " modify add set put patch comment invite move merge close archive label react schedule"
    " submit execute run call trigger click type fill press evaluate insert append draft approve"
    " assign transfer"
)


# ------------------------------------------------------------------------ shell commands

# --- commands that print credentials (heuristic: FLOW-GUARD.md lists credential files; these
# commands print the same material). Judged on that alone: printing a token is not an egress.

#: command -> the subcommand words (a prefix of its positionals) that print credentials.
CREDENTIAL_COMMANDS: Final[Mapping[str, tuple[tuple[str, ...], ...]]] = {
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
CREDENTIAL_COMMAND_OPTIONS: Final = wordset("-C -c --git-dir -n --namespace -R --repo")


# --- readers


@dataclass(frozen=True)
class Reader:
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
PATTERN_OPTIONS: Final = wordset("-e --regexp --expression")
#: Readers whose every positional is a file.
_PLAIN_READERS: Final = wordset(
    "cat tac head tail less more bat batcat nl od xxd hexdump hd strings base64 base32 basenc"
    " cut sort uniq paste column fold fmt pr diff sdiff comm view openssl iconv rev expand"
    " unexpand source ."
)
_GREP: Final = Reader(
    True,
    wordset("-e -f --regexp --file"),
    wordset("-e -f -m -A -B -C -d -D --regexp --file --max-count --context"),
)
#: Commands that print the files they are given (a credential file among them sets ``secret``).
READERS: Final[Mapping[str, Reader]] = {
    **dict.fromkeys(_PLAIN_READERS, Reader()),
    **dict.fromkeys(wordset("grep egrep fgrep zgrep ag ack"), _GREP),
    "rg": Reader(
        True,
        wordset("-e -f --regexp --file"),
        wordset(
            "-e -f -g -m -A -B -C -t -T -M -j -r -E --glob --iglob --type --type-not --replace"
            " --regexp --file --max-count"
        ),
    ),
    "sed": Reader(True, wordset("-e -f --expression --file"), wordset("-e -f -l --expression --file")),
    **dict.fromkeys(
        wordset("awk gawk mawk nawk"),
        Reader(True, wordset("-f --file"), wordset("-F -v -f --field-separator --assign")),
    ),
    **dict.fromkeys(
        wordset("jq yq"),
        Reader(
            True,
            wordset("-f --from-file"),
            wordset("-f --from-file --indent -L"),
            wordset("--arg --argjson --slurpfile --rawfile"),
        ),
    ),
}


# --- environment dumps

#: Variable names whose value ``printenv NAME`` would print as a credential.
SECRET_NAME: Final = re.compile(
    r"SECRET|TOKEN|PASSW(?:OR)?D|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH", re.IGNORECASE
)


# --- HTTP clients

#: HTTP methods that send data.
WRITE_METHODS: Final = wordset("POST PUT PATCH DELETE")
#: Arguments that only print a tool's version or help (no network use).
INFO_ONLY: Final = wordset("--version -V --help -h --manual -M")
#: curl's short options that take a value (the rest of the cluster or the next word).
CURL_SHORT_WITH_VALUE: Final = frozenset("AbcCdDeEFHKmoPQrtTuUwxXyYz")
#: curl's long options that send data (a file with ``@`` or by name).
CURL_LONG_DATA: Final = wordset(
    "--data --data-ascii --data-binary --data-raw --data-urlencode --json --form --form-string"
    " --upload-file --mail-rcpt --mail-from"
)


# --- remote shells and copies

#: A remote operand: ``scheme://...`` or ``[user@]host:path``.
REMOTE: Final = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://|(?:[^\s/@:]+@)?(?:\[[^\]]*\]|[^\s/:]+):)", re.IGNORECASE
)
#: scp/rsync options that take a value (so it is not read as a source or destination).
COPY_OPTIONS: Final[Mapping[str, frozenset[str]]] = {
    "scp": wordset("-c -D -F -i -J -l -o -P -S -X"),
    "rsync": wordset(
        "-e -f -T -M --rsh --filter --exclude --include --exclude-from --include-from --files-from"
        " --temp-dir --port --password-file --log-file"
    ),
}


# --- git, gh, package managers, cloud CLIs

#: subcommand -> egress, or -> {sub-subcommand -> egress} (``git lfs push``, ``uv pip install``).
EgressTable: TypeAlias = Mapping[str, Egress | Mapping[str, Egress]]

#: git options before the subcommand that take a value.
GIT_GLOBAL_WITH_VALUE: Final = wordset("-C -c --git-dir --work-tree --namespace --config-env")
_GIT: Final[EgressTable] = {
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
    wordset("install download add update upgrade"), Egress.READ
)
_NODE: Final[EgressTable] = {
    **dict.fromkeys(wordset("install i ci add update upgrade up exec dlx create x"), Egress.READ),
    **dict.fromkeys(wordset("publish unpublish"), Egress.WRITE),
}
_PIP: Final[EgressTable] = dict.fromkeys(wordset("install download wheel"), Egress.READ)
_CONTAINERS: Final[EgressTable] = {"pull": Egress.READ, "push": Egress.WRITE}
#: Package managers and registries (heuristic): installs fetch (read), publishes send (write).
SUBCOMMANDS: Final[Mapping[str, EgressTable]] = {
    "git": _GIT,
    "pip": _PIP,
    "pip3": _PIP,
    "pipx": dict.fromkeys(wordset("install run upgrade"), Egress.READ),
    "uv": {
        **dict.fromkeys(wordset("add sync lock"), Egress.READ),
        "pip": {"install": Egress.READ, "download": Egress.READ},
        "tool": {"install": Egress.READ, "run": Egress.READ},
        "publish": Egress.WRITE,
    },
    "poetry": {**_INSTALL, "lock": Egress.READ, "publish": Egress.WRITE},
    **dict.fromkeys(wordset("npm pnpm yarn bun"), _NODE),
    "cargo": {**_INSTALL, "fetch": Egress.READ, "publish": Egress.WRITE},
    "go": dict.fromkeys(wordset("get install mod"), Egress.READ),
    "gem": {**_INSTALL, "fetch": Egress.READ, "push": Egress.WRITE},
    "bundle": _INSTALL,
    "composer": {**_INSTALL, "require": Egress.READ},
    **dict.fromkeys(wordset("apt apt-get dnf yum apk brew conda mamba micromamba"), _INSTALL),
    "docker": _CONTAINERS,
    "podman": _CONTAINERS,
    "twine": {"upload": Egress.WRITE},
    "huggingface-cli": {"download": Egress.READ, "upload": Egress.WRITE},
}


#: ``gh <noun> <action>`` actions that send (write egress); other ``gh`` use reads.
GH_WRITE_ACTIONS: Final = wordset(
    "create comment edit merge close reopen review upload delete fork rename set ready lock"
    " unlock transfer pin unpin develop archive sync rerun"
)
#: ``gh api`` options that send fields or a body.
GH_FIELDS: Final = wordset("-f -F --field --raw-field --input")


#: Cloud CLI words that copy (a write egress when the destination is remote).
CLOUD_COPY: Final = wordset("cp sync mv copy move copyto moveto rsync")
#: Cloud CLI words that always send.
CLOUD_SEND: Final = wordset("upload upload-batch put-object publish send-message send-email invoke")


#: kubectl subcommands that send to the cluster (write egress); the others read.
KUBECTL_WRITE: Final = wordset("apply create cp exec replace patch edit run")


# --- command names for the remaining handlers

#: Shell builtins that list variables when given no names (``export``, ``declare -p``).
ENV_LISTERS: Final = wordset("export set declare typeset")
#: HTTPie-style clients: ``http [METHOD] URL [items]``.
HTTPIE: Final = wordset("http https xh xhs")
#: PowerShell web cmdlets and their aliases.
POWERSHELL_WEB: Final = wordset("iwr irm invoke-webrequest invoke-restmethod")
#: Network tools that can send anything (netcat, telnet, ftp, sftp, mail senders): write egress.
NETWORK_SENDERS: Final = wordset(
    "sftp nc ncat netcat socat telnet ftp lftp tftp mail mailx s-nail sendmail mutt msmtp"
)
#: Tools that download or query the network (``npx``, DNS lookups, ``ping``): read egress.
NETWORK_FETCHERS: Final = wordset("npx pnpx bunx uvx ping dig nslookup host traceroute whois")
#: Cloud storage and provider CLIs.
CLOUD_CLIS: Final = wordset("aws gsutil gcloud az rclone")
