"""The monitor tools on a bridge (FACTS.md §7): a root run's only, allowed by default, refused where
the daemon has no monitors' service or the caller is a stage worker or a call started by hand."""

from __future__ import annotations

import dataclasses

import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.errors import ConflictError, ForbiddenError, MonitorsUnavailableError
from octipusd.policy.rules import Level, default_level
from octipusd.runtime.manual_host import ManualCallHost
from octipusd.runtime.planning import stage_tools
from octipusd.settings_swarm import SwarmSettings
from octipusd.toolkit import RunIdentity, ShellTerms, StageTag
from octipusd.tools import MONITOR_TOOLS, child_tools, root_tools

pytestmark = pytest.mark.anyio
TOOLS = {t.name: t for t in MONITOR_TOOLS}


def test_the_monitor_tools_are_a_root_runs_and_allowed_by_default() -> None:
    names = set(TOOLS)
    assert names == {
        "monitor__create",
        "monitor__list",
        "monitor__pause",
        "monitor__resume",
        "monitor__cancel",
    }
    assert names <= {t.name for t in root_tools(True)} and names <= {t.name for t in root_tools(False)}
    assert not names & {t.name for t in (*child_tools(True), *child_tools(False))}
    everything, _ = stage_tools(("*",), SwarmSettings().levelDefaults)
    assert not names & {t.name for t in everything}
    assert {name: default_level(name) for name in names} == dict.fromkeys(names, Level.ALLOW)
    assert all(t.internal for t in MONITOR_TOOLS) and TOOLS["monitor__list"].read_only


async def test_refused_without_the_service_to_a_stage_worker_and_by_hand(identity: RunIdentity) -> None:
    create = TOOLS["monitor__create"].handler
    with pytest.raises(MonitorsUnavailableError, match="no monitors' service"):
        await create(identity, FakeToolHost(), {"source": {"kind": "time", "at": "2030-01-01T00:00:00Z"}})
    stage = dataclasses.replace(identity, stage=StageTag("p1", "n0", "work", None, "a1"))
    with pytest.raises(ForbiddenError, match="the monitor tools are a root run's"):
        await TOOLS["monitor__list"].handler(stage, FakeToolHost(), {})
    manual = ManualCallHost("shell__run", "allowed", shell=ShellTerms())
    with pytest.raises(ConflictError, match="the monitors is not available to a call started by hand"):
        await TOOLS["monitor__cancel"].handler(identity, manual, {"id": "m1"})
