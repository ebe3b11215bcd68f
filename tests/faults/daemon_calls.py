"""Helpers of the fault tests that drive a real daemon: its API client, waiting on a condition,
and killing it while a call is being answered."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from octipusd.testing.harness import DaemonHarness

__all__ = ["api", "kill_while_posting", "wait"]


def api(daemon: DaemonHarness) -> httpx.Client:
    """An HTTP client on the daemon's socket, under ``/v1``."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(daemon.socket)),
        base_url="http://octipusd/v1",
        timeout=60.0,
        headers={"X-Octipus-Client": "fault-test"},
    )


def wait(predicate: Callable[[], Any], what: str, daemon: DaemonHarness, timeout: float = 30.0) -> Any:
    """Poll ``predicate`` every 50 ms until truthy; AssertionError with the daemon log on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; daemon log:\n{daemon.log()[-4000:]}")


def kill_while_posting(
    daemon: DaemonHarness, path: str, body: dict[str, Any], ready: Callable[[], bool]
) -> None:
    """POST ``body`` to ``path`` and SIGKILL the daemon once ``ready()`` holds, before it answered.

    Raises:
        AssertionError: an answer came (the daemon finished the call before the kill), or
            ``ready`` did not hold within 30 s.
    """
    answered: list[object] = []

    def post() -> None:
        with api(daemon) as http:
            try:
                answered.append(http.post(path, json=body, timeout=120.0))
            except httpx.HTTPError as exc:  # the daemon dies under the request
                answered.append(exc)

    poster = threading.Thread(target=post, daemon=True)
    poster.start()
    wait(ready, "the moment to kill the daemon", daemon)
    daemon.stop(sig=signal.SIGKILL)
    poster.join(timeout=30)
    assert not poster.is_alive()
    assert len(answered) == 1 and isinstance(answered[0], httpx.HTTPError), answered  # no answer came
