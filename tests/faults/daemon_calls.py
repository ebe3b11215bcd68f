"""Helpers of the fault tests that drive a real daemon: its API client, waiting on a condition,
killing it while a call is being answered, and the processes a killed daemon left in a
workspace. The ``daemons`` fixture lives in ``conftest.py``."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from octipusd.testing.harness import DaemonHarness

__all__ = ["api", "in_workspace", "kill_while_posting", "wait"]


def api(daemon: DaemonHarness) -> httpx.Client:
    """An HTTP client on the daemon's socket, under ``/v1``."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(daemon.socket)),
        base_url="http://octipusd/v1",
        timeout=60.0,
        headers={"X-Octipus-Client": "fault-test"},
    )


def wait(predicate: Callable[[], Any], what: str, daemon: DaemonHarness, timeout: float = 30.0) -> Any:
    """Poll ``predicate`` until truthy (:meth:`DaemonHarness.wait_until`)."""
    return daemon.wait_until(predicate, timeout, what)


def in_workspace(workspace: Path) -> list[psutil.Process]:
    """The live processes whose working directory is ``workspace``."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if Path(proc.cwd()) == workspace.resolve() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


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
