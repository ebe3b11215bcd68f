"""Fault tests drive the same real daemon as the end-to-end tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psutil
import pytest

from octipusd.testing.harness import DaemonHarness
from tests.e2e.conftest import claude, octipus  # noqa: F401 - fixtures shared with tests/e2e
from tests.faults.daemon_calls import in_workspace


@pytest.fixture
def daemons() -> Iterator[list[DaemonHarness]]:
    """Daemons started by the test (stopped at the end), and what a killed one left running."""
    started: list[DaemonHarness] = []
    try:
        yield started
    finally:
        for daemon in started:
            daemon.stop()
            # a killed daemon's command (its own process group) outlives it: stop it
            for proc in in_workspace(daemon.workspace):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
