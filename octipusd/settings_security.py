"""``security``: the shell sandbox of Octipus's own shell commands (issue 17 item 5, FACTS.md §4).

::

    [security]
    shellSandbox = "auto"     # env OCTIPUS_SECURITY__SHELLSANDBOX: off (default) | auto | required

* ``off``: ``shell__run`` and the gate commands run as the daemon's user with nothing more confined
  than their environment (the default, as in the original);
* ``auto``: each command runs inside bubblewrap (else firejail) when one works on this machine, and
  unwrapped otherwise (the daemon logs one warning);
* ``required``: every shell command is refused while no runner works.

The original read any unknown value as ``off``; Octipus refuses it (a ConfigError naming the key and
the accepted values), since a typo such as ``requierd`` would otherwise turn the sandbox off without
a word.

This module holds only the model; :mod:`octipusd.settings` mounts it as ``Settings.security``, and
:mod:`octipusd.sandbox` finds the runners.
"""

from __future__ import annotations

import enum
from typing import Final

from pydantic import BaseModel, ConfigDict

__all__ = ["SECURITY_ACCEPTED", "SecuritySettings", "ShellSandboxMode"]


class ShellSandboxMode(enum.StrEnum):
    """``security.shellSandbox``: whether shell commands run inside a sandbox runner."""

    OFF = "off"
    AUTO = "auto"
    REQUIRED = "required"


#: What each key accepts, for error messages.
SECURITY_ACCEPTED: Final[dict[str, str]] = {
    "security.shellSandbox": "off (the default), auto or required",
}


class SecuritySettings(BaseModel):
    """``security``: how Octipus confines the shell commands it runs.

    Attributes:
        shellSandbox: ``off``, ``auto`` or ``required`` (see the module docstring).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    shellSandbox: ShellSandboxMode = ShellSandboxMode.OFF
