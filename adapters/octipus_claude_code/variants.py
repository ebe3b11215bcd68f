"""GLM and Kimi: the Claude Code binary against a vendor's Anthropic-compatible endpoint.

Registered as ``claude-glm`` (:class:`GlmAdapter`) and ``claude-kimi`` (:class:`KimiAdapter`). Each
is :class:`~octipus_claude_code.ClaudeCodeAdapter` (same argv, stream-json protocol, MCP bridge,
permission relay, resume) with the endpoint and credentials the operator configured explicitly on
the model row (seed 003 "Authentication and fallback": "The GLM/Kimi Claude adapters continue to
use their explicitly configured vendor credentials/endpoints").

Model row options (``LaunchRequest.options``, the row's ``metadata.cliAgent``):

* ``baseUrl``: the vendor's Anthropic-compatible base URL (Claude appends ``/v1/messages``).
  Default: :data:`GLM_BASE_URL` (Z.ai) or :data:`KIMI_BASE_URL` (Moonshot).
* ``authTokenEnv`` (required): the NAME of an environment variable, in the daemon's environment
  for vendors (``LaunchRequest.env``), that holds the vendor API key. The key itself is never in
  options or argv.
* ``model``: the vendor model name (``glm-4.7``, ``kimi-k2.5``...), used when the session sets no
  model; without either, Claude's default model name is sent and the vendor maps it.

The child gets ``ANTHROPIC_BASE_URL=<baseUrl>`` and ``ANTHROPIC_AUTH_TOKEN=<key>`` (sent as
``Authorization: Bearer``, sources.md §1.10), and loses any inherited ``ANTHROPIC_API_KEY`` (in
``-p`` mode it would be sent as ``X-Api-Key`` and always wins, sources.md §1.10) and
``CLAUDE_CODE_OAUTH_TOKEN`` (a claude.ai credential that must never reach another vendor). The key
is added to ``LaunchSpec.secrets``.

The environment alone is not enough: Claude applies the ``env`` block of the user's
``~/.claude/settings.json`` over its process environment, and runs a user-level ``apiKeyHelper``.
Checked with Claude Code 2.1.197 against the scripted server: a user settings ``env`` with
``ANTHROPIC_API_KEY`` (or an ``apiKeyHelper``) made Claude send ``X-Api-Key`` beside our bearer
token, i.e. the user's Anthropic credential to the other vendor, and a user ``ANTHROPIC_BASE_URL``
there would redirect the run. So the variants also pass a flag-settings file
(``--settings=<run_dir>/claude-vendor-settings.json``, the layer that overrides the same keys of
the settings files, sources.md §1.2) holding::

    {"env": {"ANTHROPIC_BASE_URL": <baseUrl>, "ANTHROPIC_AUTH_TOKEN": <key>,
             "ANTHROPIC_API_KEY": "", "CLAUDE_CODE_OAUTH_TOKEN": ""},
     "apiKeyHelper": ""}

With it the same run sent only ``Authorization`` to ``baseUrl`` and never started the helper. The
file holds the key: the runner writes it 0600 in the private run folder (like the MCP config
holding the bridge capability), and the runtime removes the run folder's ``*.json`` at the end.

In a shared space (``LaunchRequest.space``) the variants run in Claude Code's space mode
(:mod:`octipus_claude_code.launch`): ``--setting-sources=`` reads no settings file at all, and the
same ``env`` and ``apiKeyHelper`` keys go into the one locked flag-settings file
(``claude-space-settings.json``) instead of a second ``--settings`` flag, next to the space keys,
which win. The process environment carries the endpoint as outside a space.

Default endpoints (documented by the vendors; read through third-party copies in the search
corpus, e.g. the Z.ai Claude Code guide ``docs.z.ai/devpack/tool/claude`` quoted as
"ANTHROPIC_BASE_URL = https://api.z.ai/api/anthropic", and Moonshot's Claude Code setup using
``ANTHROPIC_BASE_URL=https://api.moonshot.ai/anthropic`` with ``ANTHROPIC_AUTH_TOKEN``): the
international hosts. Mainland-China accounts set ``baseUrl`` to ``https://open.bigmodel.cn/api/anthropic``
or ``https://api.moonshot.cn/anthropic``.

The runtime (``octipusd.environment.vendor_environment``) passes the vendors' key variables
(``ZAI_API_KEY``, ``MOONSHOT_API_KEY``..., :attr:`VendorEndpointAdapter.api_key_env`) only with
``inheritApiKeys``, but always the variable named by ``authTokenEnv``; an ``OCTIPUS_*`` name is
refused there, since the daemon's own settings never reach a vendor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Final

from octipusd.adapter import LaunchRequest, LaunchSpec
from octipusd.environment import is_reserved
from octipusd.errors import AdapterError

from . import launch
from .adapter import ClaudeCodeAdapter

#: Z.ai's Anthropic-compatible endpoint (international).
GLM_BASE_URL: Final = "https://api.z.ai/api/anthropic"
#: Moonshot's Anthropic-compatible endpoint (international).
KIMI_BASE_URL: Final = "https://api.moonshot.ai/anthropic"

#: Variables the variants set for the child (sources.md §1.10).
BASE_URL_ENV: Final = "ANTHROPIC_BASE_URL"
AUTH_TOKEN_ENV: Final = "ANTHROPIC_AUTH_TOKEN"
#: Inherited credentials removed from the child's environment.
STRIPPED_CREDENTIALS: Final[frozenset[str]] = frozenset({"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"})

#: Flag-settings file written in the run folder (holds the key; 0600).
SETTINGS_FILE_NAME: Final = "claude-vendor-settings.json"

#: Option keys that would put a key itself on the model row; refused with a pointer to ``authTokenEnv``.
KEY_OPTIONS: Final[frozenset[str]] = frozenset(
    {"authToken", "apiKey", "token", "key", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"}
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _option_str(options: Mapping[str, Any], key: str, adapter: str) -> str | None:
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise AdapterError(f"{adapter}: metadata.cliAgent.{key} must be a non-empty string, got {value!r}")
    return value.strip()


def vendor_settings(base_url: str, key: str) -> dict[str, Any]:
    """Return the flag-settings keys that pin the endpoint and the key (see the module docstring).

    Args:
        base_url: The vendor's Anthropic-compatible base URL.
        key: The vendor API key (a file holding it must be written 0600 and never logged).

    Returns:
        ``{"env": {...}, "apiKeyHelper": ""}``: ``env`` with the base URL and bearer token and with
        ``ANTHROPIC_API_KEY`` and ``CLAUDE_CODE_OAUTH_TOKEN`` blanked.
    """
    return {
        "env": {
            BASE_URL_ENV: base_url,
            AUTH_TOKEN_ENV: key,
            **dict.fromkeys(sorted(STRIPPED_CREDENTIALS), ""),
        },
        "apiKeyHelper": "",
    }


def settings_json(base_url: str, key: str) -> str:
    """Return the flag-settings file that pins the endpoint and the key (see the module docstring).

    Args:
        base_url: The vendor's Anthropic-compatible base URL.
        key: The vendor API key (the file must be written 0600 and never logged).

    Returns:
        JSON text of :func:`vendor_settings`.
    """
    return json.dumps(vendor_settings(base_url, key), indent=2) + "\n"


class VendorEndpointAdapter(ClaudeCodeAdapter):
    """Claude Code against a configured Anthropic-compatible vendor endpoint (base of GLM and Kimi).

    Subclasses set the class attributes below. Everything except :meth:`build_launch` is inherited
    from :class:`ClaudeCodeAdapter`.

    Attributes:
        name: Registry name.
        display_name: Human name.
        setting_key: ``claudeCode``: the variants run the same ``claude`` binary setting.
        default_binary: ``claude``.
        vendor: Vendor name used in messages (``Z.ai``, ``Moonshot``).
        default_base_url: ``baseUrl`` when the row sets none.
        key_hint: Example variable name used in error messages.
    """

    name: str = "claude-vendor"
    display_name: str = "Claude Code (vendor endpoint)"
    setting_key: str = "claudeCode"
    default_binary: str = "claude"
    vendor: ClassVar[str] = "the vendor"
    default_base_url: ClassVar[str] = ""
    key_hint: ClassVar[str] = "VENDOR_API_KEY"

    def endpoint(self, request: LaunchRequest) -> tuple[str, str, str]:
        """Resolve the endpoint, the key's variable name and the key for one launch.

        Args:
            request: The launch request (``options`` and ``env`` are read).

        Returns:
            ``(base_url, variable_name, key)``.

        Raises:
            AdapterError: a key placed in options, a bad ``baseUrl``, a missing or invalid
                ``authTokenEnv``, or the named variable missing, empty or not header-safe in
                ``request.env`` (the message names the variable, never the value).
        """
        options = request.options
        placed = sorted(k for k in KEY_OPTIONS if k in options)
        if placed:
            raise AdapterError(
                f"{self.name}: metadata.cliAgent.{placed[0]} would store the {self.vendor} key on the model "
                f"row; put the key in an environment variable of the daemon and name it with authTokenEnv "
                f'(e.g. "authTokenEnv": "{self.key_hint}")'
            )
        base_url = _option_str(options, "baseUrl", self.name) or self.default_base_url
        if not base_url.startswith(("http://", "https://")) or any(
            c.isspace() or c == "\x00" for c in base_url
        ):
            raise AdapterError(
                f"{self.name}: metadata.cliAgent.baseUrl must be an http(s) URL, got {base_url!r}"
            )
        variable = _option_str(options, "authTokenEnv", self.name)
        if variable is None:
            raise AdapterError(
                f"{self.name}: metadata.cliAgent.authTokenEnv is not set: name the environment variable that "
                f'holds your {self.vendor} API key (e.g. "authTokenEnv": "{self.key_hint}")'
            )
        if not _ENV_NAME.fullmatch(variable):
            raise AdapterError(
                f"{self.name}: metadata.cliAgent.authTokenEnv must be an environment variable name "
                f"([A-Za-z_][A-Za-z0-9_]*), got {variable!r}"
            )
        if is_reserved(variable):
            raise AdapterError(
                f"{self.name}: metadata.cliAgent.authTokenEnv {variable!r} names one of the daemon's own "
                f"settings (OCTIPUS_*), which never reach a vendor; keep the key in another variable "
                f'(e.g. "authTokenEnv": "{self.key_hint}")'
            )
        key = request.env.get(variable, "").strip()
        if not key:
            raise AdapterError(
                f"{self.name}: environment variable {variable} (metadata.cliAgent.authTokenEnv) is not set or "
                f"empty in the daemon's environment for vendors; set it to your {self.vendor} API key"
            )
        if not all(c.isascii() and c.isprintable() and not c.isspace() for c in key):
            raise AdapterError(
                f"{self.name}: environment variable {variable} does not hold a usable key (it must be printable "
                "ASCII without spaces)"
            )
        return base_url, variable, key

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build a Claude Code invocation pointed at the vendor endpoint.

        The argv is :meth:`ClaudeCodeAdapter.build_launch`'s, with ``--model=<model>`` taken from the
        session's model or else ``options["model"]``. The environment is Claude's, without
        :data:`STRIPPED_CREDENTIALS`, plus ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_AUTH_TOKEN``; argv
        ends with ``--settings=<run_dir>/claude-vendor-settings.json`` (:func:`settings_json`, in
        ``files``); the key joins ``secrets`` and is never on argv.

        In a shared space the argv is Claude's space-mode argv (``--setting-sources=`` and the
        locked ``--settings=<run_dir>/claude-space-settings.json``), and the :func:`vendor_settings`
        keys go into that locked file: there is no second ``--settings`` flag.

        Args:
            request: The launch request.

        Returns:
            The launch spec.

        Raises:
            AdapterError: see :meth:`endpoint`, plus every error of :meth:`ClaudeCodeAdapter.build_launch`.
        """
        base_url, _variable, key = self.endpoint(request)
        model = request.model or _option_str(request.options, "model", self.name)
        if request.space:
            spec = launch.build_launch(
                replace(request, model=model),
                running_as_root=self.running_as_root,
                guard_command=self.shell_guard_command,
                space_extra_settings=vendor_settings(base_url, key),
            )
        else:
            spec = super().build_launch(replace(request, model=model))
        env = {k: v for k, v in spec.env.items() if k not in STRIPPED_CREDENTIALS}
        env[BASE_URL_ENV] = base_url
        env[AUTH_TOKEN_ENV] = key
        if request.space:
            return replace(spec, env=env, secrets=(*spec.secrets, key))
        settings_path = request.run_dir / SETTINGS_FILE_NAME
        argv = (*spec.argv, f"--settings={settings_path}")
        files = {**spec.files, settings_path: settings_json(base_url, key)}
        return replace(spec, argv=argv, env=env, files=files, secrets=(*spec.secrets, key))


class GlmAdapter(VendorEndpointAdapter):
    """Z.ai GLM through Claude Code (registered as ``claude-glm``).

    Attributes:
        name: ``claude-glm``.
        display_name: ``Claude Code (GLM)``.
        default_base_url: :data:`GLM_BASE_URL`.
        api_key_env: Anthropic's key variables and Z.ai's (``ZAI_API_KEY``, ``ZHIPUAI_API_KEY``).
    """

    name: str = "claude-glm"
    display_name: str = "Claude Code (GLM)"
    api_key_env: frozenset[str] = launch.API_KEY_ENV | {"ZAI_API_KEY", "ZHIPUAI_API_KEY"}
    vendor: ClassVar[str] = "Z.ai"
    default_base_url: ClassVar[str] = GLM_BASE_URL
    key_hint: ClassVar[str] = "ZAI_API_KEY"


class KimiAdapter(VendorEndpointAdapter):
    """Moonshot Kimi through Claude Code (registered as ``claude-kimi``).

    Attributes:
        name: ``claude-kimi``.
        display_name: ``Claude Code (Kimi)``.
        default_base_url: :data:`KIMI_BASE_URL`.
        api_key_env: Anthropic's key variables and Moonshot's (``MOONSHOT_API_KEY``, ``KIMI_API_KEY``).
    """

    name: str = "claude-kimi"
    display_name: str = "Claude Code (Kimi)"
    api_key_env: frozenset[str] = launch.API_KEY_ENV | {"MOONSHOT_API_KEY", "KIMI_API_KEY"}
    vendor: ClassVar[str] = "Moonshot"
    default_base_url: ClassVar[str] = KIMI_BASE_URL
    key_hint: ClassVar[str] = "MOONSHOT_API_KEY"
