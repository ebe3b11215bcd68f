"""The environment of the processes Octipus starts for a user, built from an allowlist.

Like sudo's ``env_reset``, nothing of the daemon's own environment passes unless it is named
here or by the adapter: the daemon is configured through its environment (``OCTIPUS_*``, the
database URL with its password, tokens of other services...), and none of that is the vendor's
business. Three kinds of process start from :func:`login_environment`:

* **vendor CLIs** (:func:`vendor_environment`): the login set with ``PATH`` set to the resolved
  search PATH (``cliModels.path`` or the login PATH), plus the vendor's own configuration
  variables the adapter declares (:attr:`VendorVariables.config_env`), plus its API-key variables
  (:attr:`VendorVariables.api_key_env`) only with the row's ``metadata.cliAgent.inheritApiKeys:
  true``, plus the variable a GLM/Kimi row names in ``authTokenEnv``, plus the names the row lists
  in ``metadata.cliAgent.passEnv``; the row's ``metadata.cliAgent.env`` is set last;
* **``shell__run`` commands**: the login set of the daemon's environment (its ``PATH`` as the
  daemon was started with) plus the call's own ``env``; no vendor configuration and no API key
  (credentials reach a command only through ``env``, e.g. a ``{{secret:NAME}}`` placeholder);
* **stdio MCP connector servers** (``mcpServers``): the login set of the daemon's environment plus
  the server's configured ``env``, like ``shell__run``.

A name (or, ending in ``*``, a prefix) matches case-sensitively, as the C library reads the
environment. ``OCTIPUS_*`` never passes from the daemon's environment by any of these routes,
compared without case because the daemon's settings read their variables without case.
``PYTHONPATH`` and ``VIRTUAL_ENV`` are the daemon's own interpreter settings, not the user's
login, so they are not in the login set (a vendor written in Python, like Vibe, would import the
daemon's packages); a row that needs them lists them in ``passEnv``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

__all__ = [
    "LOGIN_VARIABLES",
    "RESERVED_PREFIX",
    "ROW_ONLY_OPTIONS",
    "VendorVariables",
    "is_reserved",
    "login_environment",
    "matches",
    "vendor_environment",
]

#: The login environment every started process keeps from the daemon's (names, or prefixes
#: ending in ``*``): who and where the user is, their locale and terminal, temporary and XDG
#: folders, and how they reach the network (proxies and CA bundles, both spellings).
LOGIN_VARIABLES: Final[frozenset[str]] = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "LC_*",
        "TERM",
        "TZ",
        "TMPDIR",
        "XDG_*",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE",
    }
)

#: The daemon's own settings (compared without case): never passed from its environment.
RESERVED_PREFIX: Final = "OCTIPUS_"
#: The ``metadata.cliAgent`` options that decide which credentials a vendor gets and where they go.
#: In a shared space only the model row (its operator) sets them: a session there may not, so no
#: member can pull the daemon's variables or send the row's key to a URL of their choosing.
ROW_ONLY_OPTIONS: Final = frozenset({"env", "passEnv", "inheritApiKeys", "authTokenEnv", "baseUrl"})


class VendorVariables(Protocol):
    """The environment variables a vendor CLI reads, as its adapter declares them
    (:class:`octipusd.adapter.Adapter` satisfies it).

    Attributes:
        config_env: Names (or prefixes ending in ``*``) of the vendor's own configuration
            variables, passed from the daemon's environment: config folders, endpoints, switches.
            A name that is also an API-key variable is treated as one.
        api_key_env: Names (or prefixes) of the backend API-key variables, passed only with
            ``inheritApiKeys: true``.
    """

    @property
    def config_env(self) -> frozenset[str]: ...

    @property
    def api_key_env(self) -> frozenset[str]: ...


def is_reserved(name: str) -> bool:
    """True for a daemon setting's name (``OCTIPUS_*``, in any case), which never passes."""
    return name.upper().startswith(RESERVED_PREFIX)


def matches(name: str, patterns: Iterable[str]) -> bool:
    """True when ``name`` equals a pattern, or starts with a pattern's text before its final ``*``."""
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def _picked(source: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    chosen = frozenset(patterns)
    return {k: v for k, v in source.items() if not is_reserved(k) and matches(k, chosen)}


def login_environment(source: Mapping[str, str]) -> dict[str, str]:
    """Return the login variables of ``source`` (:data:`LOGIN_VARIABLES`), as a new dict."""
    return _picked(source, LOGIN_VARIABLES)


def vendor_environment(
    source: Mapping[str, str], vendor: VendorVariables, options: Mapping[str, Any]
) -> dict[str, str]:
    """Return the environment of one vendor CLI launch (see the module docstring).

    Args:
        source: The daemon's environment with ``PATH`` set to the search PATH
            (``octipusd.app.vendor_base_env``).
        vendor: The adapter's declared variables.
        options: The row's ``metadata.cliAgent`` merged with the session's options (checked when
            saved): ``inheritApiKeys`` (only ``True`` passes the API keys), ``authTokenEnv`` (a
            GLM/Kimi row's key variable, always passed), ``passEnv`` (names passed as they are in
            ``source``, API-key names included), ``env`` (name -> value, set last: the operator
            put it on the model on purpose, seed 003 "In shared spaces").

    Returns:
        A new dict. A ``passEnv`` or ``authTokenEnv`` name missing from ``source`` is left out
        (the vendor reports what it misses); an ``OCTIPUS_*`` one never passes.
    """
    api_keys = _picked(source, vendor.api_key_env)
    config = {k: v for k, v in _picked(source, vendor.config_env).items() if k not in api_keys}
    env = {**login_environment(source), **config}
    if options.get("inheritApiKeys") is True:
        env.update(api_keys)
    named = options.get("passEnv")
    names = [n for n in named if isinstance(n, str)] if isinstance(named, list) else []
    token = options.get("authTokenEnv")
    if isinstance(token, str):
        names.append(token.strip())
    env.update({n: source[n] for n in names if n in source and not is_reserved(n)})
    extra = options.get("env")
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    return env
