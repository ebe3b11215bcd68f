"""Octipus adapter for the Google Antigravity CLI (``agy``), registered as ``antigravity``.

Pure: it builds the launch (argv, environment, prompt text) and turns agy's buffered print-mode
output into :mod:`octipusd.adapter` events; it never starts a process or opens a socket.

What it rests on (``/work/shared/protocols/sources.md`` §4 and seed 003; agy is not installable
here, so everything beyond flag names in the official completions/CHANGELOG is third-party
observation of agy 1.1.18 and UNCONFIRMED by the vendor, sources.md §6):

* print mode with the prompt as one ``--print=<text>`` token; buffered plain-text answer, no
  conversation id, no usage; stdin ``/dev/null``;
* never resumed (``supports_resume`` False): a stale conversation id silently starts a new one;
* Octipus tools through the ``octipus-bridge`` terminal helper, capability in the environment
  only (``OCTIPUS_BRIDGE_URL`` / ``OCTIPUS_BRIDGE_TOKEN``), never on argv, no ``SessionEvent``;
* ``plan`` -> ``--mode plan``; additive flags ``--disable-slash-commands`` and ``--effort`` only;
* usage estimated at about four characters per token, flagged estimated; the ``--print-timeout``
  backstop defaults to two hours.

The runtime must call :meth:`StreamParser.finish` after stdout EOF and process exit (the answer
and the result are produced there), and should pass the launch request to
:meth:`AntigravityAdapter.new_parser` so the input side of the estimate is known.

Public API: :class:`AntigravityAdapter`, :class:`AntigravityTextParser`, and the helpers below.
"""

from __future__ import annotations

from .adapter import AntigravityAdapter
from .launch import (
    ADDITIVE_SWITCHES,
    ALLOWED_ADDITIVE_FLAGS,
    DEFAULT_PRINT_TIMEOUT_SECONDS,
    EFFORT_LEVELS,
    ENV_BRIDGE_TOKEN,
    ENV_BRIDGE_URL,
    HELPER_NAME,
    PERMISSION_ARGS,
    QUIET_ENV,
    bridge_guide,
    compose_prompt,
    default_helper,
    normalize_additive_flags,
)
from .parser import CHARS_PER_TOKEN, AntigravityTextParser, estimate_tokens

__all__ = [
    "ADDITIVE_SWITCHES",
    "ALLOWED_ADDITIVE_FLAGS",
    "CHARS_PER_TOKEN",
    "DEFAULT_PRINT_TIMEOUT_SECONDS",
    "EFFORT_LEVELS",
    "ENV_BRIDGE_TOKEN",
    "ENV_BRIDGE_URL",
    "HELPER_NAME",
    "PERMISSION_ARGS",
    "QUIET_ENV",
    "AntigravityAdapter",
    "AntigravityTextParser",
    "bridge_guide",
    "compose_prompt",
    "default_helper",
    "estimate_tokens",
    "normalize_additive_flags",
]
