"""HTTP client of the octipusd API over its Unix socket (used by octipusctl, the TUI and tests).

It speaks only the v1 API; every failure becomes an :class:`~octipusd.errors.OctipusError`
carrying the daemon's code and message, or :class:`~octipusd.errors.DaemonUnavailableError`
when nothing answers on the socket.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from octipusd.api import API_VERSION
from octipusd.errors import ApiError, DaemonUnavailableError

#: Seconds for ordinary requests; streams have no read timeout.
TIMEOUT = 30.0


class Client:
    """A synchronous API client.

    Args:
        socket_path: The daemon's Unix socket.
        client_name: Sent as ``X-Octipus-Client`` (shown as who decided an approval).
    """

    def __init__(self, socket_path: Path, client_name: str = "octipusctl") -> None:
        self.socket_path = socket_path
        self._http = httpx.Client(
            # plain HTTP over the Unix socket: no TLS, so no CA bundle to load (that costs a
            # command some 20-30 ms)
            transport=httpx.HTTPTransport(uds=str(socket_path), verify=False),
            base_url=f"http://octipusd/{API_VERSION}",
            timeout=TIMEOUT,
            headers={"X-Octipus-Client": client_name},
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _unavailable(self) -> DaemonUnavailableError:
        return DaemonUnavailableError(
            f"octipusd is not running (nothing answers on {self.socket_path}); start it with `octipusd` "
            "(or `systemctl --user start octipusd`)"
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request and return the decoded JSON body.

        Raises:
            DaemonUnavailableError: nothing listens on the socket.
            ApiError: the daemon answered with an error.
        """
        return _decode(self._send(method, path, **kwargs))

    def request_text(self, method: str, path: str, **kwargs: Any) -> str:
        """Send a request whose answer is text (``text/plain``, e.g. a worktree's diff) and return it.

        Raises:
            DaemonUnavailableError: nothing listens on the socket.
            ApiError: the daemon answered with an error.
        """
        response = self._send(method, path, **kwargs)
        if response.status_code >= 400:
            _decode(response)
        return response.text

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise self._unavailable() from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:  # it stopped while answering
            raise DaemonUnavailableError(
                f"octipusd stopped before answering {method} {path} ({exc}); whatever the request "
                "started may or may not have happened: check it (e.g. `octipusctl actions calls`) before retrying"
            ) from exc

    def stream(self, run_id: str, after: int = 0) -> Iterator[dict[str, Any]]:
        """Yield a run's events (decoded ``EventOut`` dicts) live until the run ends.

        Raises:
            DaemonUnavailableError: nothing listens on the socket.
            ApiError: the daemon answered with an error (e.g. unknown run).
        """
        try:
            with connect_sse(
                self._http,
                "GET",
                f"/runs/{run_id}/stream",
                params={"after": after},
                timeout=httpx.Timeout(None),
            ) as source:
                if source.response.status_code >= 400:
                    source.response.read()
                    _decode(source.response)
                for sse in source.iter_sse():
                    if sse.data:
                        yield json.loads(sse.data)
        except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise self._unavailable() from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise DaemonUnavailableError(
                f"octipusd stopped while streaming run {run_id} ({exc}); `octipusctl runs` shows its status"
            ) from exc


def _decode(response: httpx.Response) -> Any:
    if response.status_code < 400:
        return response.json() if response.content else None
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ApiError("error", response.text or f"HTTP {response.status_code}", response.status_code)
    if isinstance(body.get("detail"), list):  # FastAPI request validation
        message = "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}"
            for d in body["detail"]
            if isinstance(d, dict)
        )
        raise ApiError("invalid_request", message, response.status_code)
    if isinstance(body.get("detail"), str) and "message" not in body:  # no route matched the path
        detail = body["detail"]
        if response.status_code == 404:
            detail = (
                f"{response.request.method} {response.request.url.path}: no such resource "
                "(an id holding '/', '..' or nothing matches no route); check the id"
            )
        raise ApiError("not_found" if response.status_code == 404 else "error", detail, response.status_code)
    raise ApiError(str(body.get("code", "error")), str(body.get("message", body)), response.status_code)
