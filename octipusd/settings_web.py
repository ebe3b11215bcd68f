"""``web``: the page's loopback listener (issue 16).

::

    [web]
    enabled = true           # env OCTIPUS_WEB__ENABLED: serve the page and the API on a TCP port
    port = 0                 # env OCTIPUS_WEB__PORT: the port; 0 takes a free one (octipusctl web tells it)
    host = "127.0.0.1"       # the address to bind; anything but loopback needs allowRemote and TLS
    allowRemote = false      # allow a non-loopback host (with tlsCertFile and tlsKeyFile)
    tlsCertFile = "/etc/octipus/web.pem"     # PEM certificate chain (HTTPS); required by allowRemote
    tlsKeyFile = "/etc/octipus/web-key.pem"  # its private key
    allowedHosts = ["octipus.example.org"]   # further Host header names accepted (DNS rebinding guard)

This module holds only the model; :mod:`octipusd.settings` mounts it as ``Settings.web``.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["LOOPBACK_HOSTS", "WEB_ACCEPTED", "WebSettings", "is_loopback", "is_unspecified"]

#: Host names that always mean this machine (besides loopback addresses).
LOOPBACK_HOSTS: Final = frozenset({"localhost"})
#: Addresses that bind every interface (no one address names the page).
UNSPECIFIED_HOSTS: Final = frozenset({"0.0.0.0", "::"})

#: What each key accepts, for error messages.
WEB_ACCEPTED: Final[dict[str, str]] = {
    "web.enabled": "true or false (default true)",
    "web.port": "a TCP port from 1 to 65535, or 0 for a free one (default 0)",
    "web.host": "an IP address to bind (default 127.0.0.1); a non-loopback one needs web.allowRemote",
    "web.allowRemote": "true or false (default false); true needs web.tlsCertFile and web.tlsKeyFile",
    "web.tlsCertFile": "an absolute path to a PEM certificate (chain)",
    "web.tlsKeyFile": "an absolute path to the certificate's PEM private key",
    "web.allowedHosts": "a list of host names the page may be reached by, besides the bound address",
}

_HOST_NAME = re.compile(r"^[A-Za-z0-9.-]{1,253}$")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name, brackets allowed) names this machine's loopback."""
    bare = host.strip("[]").lower()
    if bare in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def is_unspecified(host: str) -> bool:
    """Whether ``host`` (a bound address) listens on every interface."""
    return host in UNSPECIFIED_HOSTS


class WebSettings(BaseModel):
    """``web``: where the page is served and who may reach it.

    Attributes:
        enabled: Serve the page (and the same API) on a TCP port besides the Unix socket.
        port: The TCP port; 0 takes a free one at each start (``octipusctl web`` prints the URL).
        host: The IP address to bind; a non-loopback address is refused unless ``allowRemote``.
        allowRemote: Accept a non-loopback ``host``; requires TLS (both files) so that the token and
            the session cookie never cross a network in clear.
        tlsCertFile: PEM certificate (chain) served over HTTPS.
        tlsKeyFile: The certificate's PEM private key.
        allowedHosts: Further names the ``Host`` header may carry (the bound address and, on
            loopback, ``localhost`` always may): a guard against DNS rebinding.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    enabled: bool = True
    port: int = Field(default=0, ge=0, le=65535)
    host: str = "127.0.0.1"
    allowRemote: bool = Field(default=False, strict=False)
    tlsCertFile: Path | None = None
    tlsKeyFile: Path | None = None
    allowedHosts: list[str] = Field(default_factory=list)

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        try:
            return str(ipaddress.ip_address(v.strip("[]")))
        except ValueError:
            raise ValueError(f"{v!r} is not an IP address; bind an address such as 127.0.0.1") from None

    @field_validator("tlsCertFile", "tlsKeyFile")
    @classmethod
    def _absolute(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_absolute():
            raise ValueError(f"{str(v)!r} is not absolute")
        return v

    @field_validator("allowedHosts")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _HOST_NAME.match(name):
                raise ValueError(f"{name!r} is not a host name (letters, digits, '.' and '-')")
        return [name.lower() for name in v]

    @model_validator(mode="after")
    def _remote_needs_tls(self) -> WebSettings:
        if (self.tlsCertFile is None) != (self.tlsKeyFile is None):
            raise ValueError("web.tlsCertFile and web.tlsKeyFile go together: set both or neither")
        if not is_loopback(self.host):
            if not self.allowRemote:
                raise ValueError(
                    f"web.host {self.host} is not a loopback address: the page would be reachable from "
                    "other machines; keep 127.0.0.1 and use an SSH port forward (see the README), or set "
                    "web.allowRemote = true with web.tlsCertFile and web.tlsKeyFile"
                )
            if is_unspecified(self.host) and not self.allowedHosts:
                raise ValueError(
                    f"web.host {self.host} listens on every address: name the host names people use to "
                    "reach it in web.allowedHosts (the Host header is checked against them)"
                )
            if self.tlsCertFile is None:
                raise ValueError(
                    f"web.allowRemote binds {self.host} only over HTTPS: set web.tlsCertFile and web.tlsKeyFile"
                )
        return self

    @property
    def tls(self) -> bool:
        """Whether the page is served over HTTPS."""
        return self.tlsCertFile is not None
