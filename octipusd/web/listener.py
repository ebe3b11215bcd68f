"""The web listener: a TCP socket on loopback (or, with ``web.allowRemote``, an HTTPS address) that
serves the same application as the Unix socket behind :class:`~octipusd.web.access.AccessGuard`."""

from __future__ import annotations

import errno
import socket
import ssl
from typing import Any

import uvicorn

from octipusd.api.common import WebEndpoint
from octipusd.api.server import GRACEFUL_SHUTDOWN_SECONDS, LISTEN_BACKLOG, QuietServer
from octipusd.errors import ConfigError
from octipusd.settings_web import WebSettings
from octipusd.web.access import AccessGuard, WebAccess

__all__ = ["bind_web_socket", "endpoint_of", "make_web_server"]


def bind_web_socket(web: WebSettings) -> tuple[socket.socket, WebAccess]:
    """Bind the page's TCP socket as ``web`` says; return it (listening) and its access.

    Raises:
        ConfigError: The address cannot be bound (port in use, address not on this machine,
            a port below 1024 without the right); the message names ``web.port`` / ``web.host``.
    """
    family = socket.AF_INET6 if ":" in web.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((web.host, web.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            hint = "another program uses it: set web.port to a free port, or 0 for any free one"
        elif exc.errno == errno.EACCES:
            hint = "ports below 1024 need privileges: choose web.port 1024 or above, or 0"
        else:
            hint = "check web.host is an address of this machine"
        raise ConfigError(
            f"cannot serve the web page on {web.host} port {web.port}: {exc.strerror}; {hint}"
        ) from None
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    port = int(sock.getsockname()[1])
    access = WebAccess.for_address("https" if web.tls else "http", web.host, port, web.allowedHosts)
    return sock, access


def endpoint_of(access: WebAccess) -> WebEndpoint:
    """What the API tells of the listener (its origin, and its link for ``GET /v1/web``)."""
    return WebEndpoint(origin=access.origin, link=access.link, tls=access.secure)


def make_web_server(app: Any, access: WebAccess, web: WebSettings) -> QuietServer:
    """The uvicorn server of the web listener: ``app`` behind the access guard, HTTPS when configured."""
    config = uvicorn.Config(
        AccessGuard(app, access),
        lifespan="off",
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        ssl_certfile=str(web.tlsCertFile) if web.tlsCertFile else None,
        ssl_keyfile=str(web.tlsKeyFile) if web.tlsKeyFile else None,
    )
    try:
        config.load()  # reads the certificate now, so a bad one stops the start with its name
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load the web page's certificate {web.tlsCertFile} / key {web.tlsKeyFile}: {exc}; "
            "fix web.tlsCertFile and web.tlsKeyFile"
        ) from None
    return QuietServer(config)
