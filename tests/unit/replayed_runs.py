"""The run core of the durable-work tests (pipelines, monitors, schedules): :func:`replayed_runs`."""

from __future__ import annotations

from pathlib import Path

from octipusd.adapter import load_adapters
from octipusd.app import build_runs
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.runner.executables import Resolution
from octipusd.runtime.events import EventHub
from octipusd.runtime.manager import RunManager
from octipusd.settings import Settings
from octipusd.store.repository import Store
from octipusd.testing.replay import ReplayLauncher

#: The adapter of the tests' sessions.
ADAPTER = "claude-code"


def replayed_runs(
    settings: Settings, store: Store, tmp_path: Path, launcher: ReplayLauncher
) -> tuple[RunManager, PermissionGate, ApprovalBroker]:
    """The daemon's run core on ``store`` (default policy, approvals waiting 300 s), its vendor
    (:data:`ADAPTER`) replayed by ``launcher``: the run manager, its gate and its approvals' broker."""
    hub = EventHub(store)
    broker = ApprovalBroker(store, 300)
    runs, gate = build_runs(
        settings,
        store=store,
        hub=hub,
        broker=broker,
        policy=Policy.from_setting(None),
        adapters={ADAPTER: load_adapters()[ADAPTER]},
        resolutions={ADAPTER: Resolution(ADAPTER, "claude", "/bin/true", None, "/usr/bin:/bin")},
        data_dir=tmp_path / "data",
        owner="test-owner",
        base_env={"PATH": "/usr/bin:/bin"},
        journal=ActionJournal(store, "test-owner"),
        operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
        connectors=None,
        config_notices=None,
        launcher=launcher,
    )
    return runs, gate, broker
