"""The bridge's embedded uvicorn server: in the daemon's event loop, quiet, and stopped at once.

:class:`EmbeddedServer` serves one run's bridge (:mod:`octipusd.bridge.server`) without taking over
the process's signals or logging configuration, and stops without uvicorn's polling sleeps.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import anyio
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "IN_BRIDGE_SERVER",
    "EmbeddedConfig",
    "EmbeddedServer",
    "QuietH11Protocol",
    "bind_loopback",
    "install_uvicorn_filter",
]

logger = logging.getLogger("octipusd.bridge.server")

#: Seconds between two looks at whether the bridge's connections closed at shutdown.
_SHUTDOWN_POLL_SECONDS = 0.001

#: True inside a bridge server's task (its uvicorn INFO lines are dropped).
IN_BRIDGE_SERVER: ContextVar[bool] = ContextVar("octipus_bridge_server", default=False)


class _QuietBridgeLogs(logging.Filter):
    """Drops uvicorn's INFO chatter (startup/shutdown lines) emitted by bridge servers only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not IN_BRIDGE_SERVER.get()


_uvicorn_filter_installed = False


def install_uvicorn_filter() -> None:
    global _uvicorn_filter_installed
    if not _uvicorn_filter_installed:
        logging.getLogger("uvicorn.error").addFilter(_QuietBridgeLogs())
        _uvicorn_filter_installed = True


class QuietH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the access log off for this server only.

    ``uvicorn.Config(access_log=False)`` would silence ``uvicorn.access`` process-wide
    (including the daemon's own API server).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.access_log = False


class EmbeddedConfig(uvicorn.Config):
    """A uvicorn config that leaves the process's logging configuration alone."""

    def configure_logging(self) -> None:
        return


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that does not take over SIGINT/SIGTERM (the daemon owns signals) and that
    stops at once when told to (:meth:`exit_now`).

    uvicorn itself looks at ``should_exit`` every 0.1 s, then sleeps another 0.1 s at shutdown and
    polls its connections every 0.1 s (about 155 ms per run, measured); here the main loop waits
    for :meth:`exit_now` and the shutdown looks every :data:`_SHUTDOWN_POLL_SECONDS`. The ``Date``
    header is off (uvicorn refreshes it from that same loop; no MCP client needs it).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit = anyio.Event()

    def exit_now(self) -> None:
        """Stop serving: close the listener, end the connections, shut the app's lifespan down."""
        self.should_exit = True
        self._exit.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        await self.on_tick(0)  # the default headers, once
        await self._exit.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown without its sleeps: stop accepting, end the (idle, as the gate cut
        every request) connections, wait for them within the graceful bound, end the lifespan."""
        for listener in self.servers:
            listener.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        state = self.server_state
        with anyio.move_on_after(self.config.timeout_graceful_shutdown or 0) as graceful:
            while state.connections or state.tasks:  # noqa: ASYNC110 - uvicorn signals neither
                await anyio.sleep(_SHUTDOWN_POLL_SECONDS)
        if graceful.cancelled_caught:
            logger.warning("bridge: cancelling %d request task(s) left at shutdown", len(state.tasks))
            for task in state.tasks:
                task.cancel(msg="the bridge shut down")
        for listener in self.servers:
            await listener.wait_closed()
        await self.lifespan.shutdown()


def bind_loopback() -> socket.socket:
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose
    # ``proto`` is IPPROTO_TCP, and ``socket.socket()`` leaves it 0. Without it every
    # keep-alive request stalls ~40 ms on delayed ACKs (measured on this machine).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
