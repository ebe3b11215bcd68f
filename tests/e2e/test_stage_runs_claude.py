"""A pipeline stage attempt on the real ``claude`` against the scripted model (issue 27 "Attempts").

The run core is composed in-process (as the daemon composes it; the pipeline API is not this
test's subject) with the real vendor launcher. The scripted model picks its step by the number of
assistant turns in a request, so a resumed attempt plays the next step and a cold one step 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from octipusd.adapter import load_adapters
from octipusd.app import build_runs
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.runner.executables import Resolution
from octipusd.runner.transport import VendorLauncher
from octipusd.runtime.events import EventHub
from octipusd.runtime.stage_runs import StageOutcome, StageRequest, StageRuns
from octipusd.settings import Settings
from octipusd.store.records import RunStatus
from octipusd.store.repository import Store
from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import QUIET_ENV

pytestmark = pytest.mark.anyio

ADAPTER = "claude-code"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    opened = Store.open(migrated_store_url)
    try:
        yield opened
    finally:
        opened.close()


def _home(root: Path, base_url: str) -> dict[str, str]:
    """The vendor's environment: a HOME whose Claude settings point at the scripted model."""
    claude_dir = root / "home" / ".claude"
    claude_dir.mkdir(parents=True)
    env = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted-model"}
    (claude_dir / "settings.json").write_text(json.dumps({"env": env}))
    return {
        **os.environ,
        **QUIET_ENV,
        "HOME": str(root / "home"),
        "CLAUDE_CONFIG_DIR": str(claude_dir),
    }


def _request(session_id: str, attempt: str, *, resume: bool) -> StageRequest:
    return StageRequest(
        pipeline_id="p" * 32,
        session_id=session_id,
        node_key="n0",
        stage="implement",
        item_id=None,
        attempt_id=attempt,
        attempt_number=1,
        prompt="do the stage",
        resume=resume,
    )


async def test_a_resumed_attempt_continues_its_claude_conversation_under_the_attempts_key(
    store: Store, tmp_path: Path, claude: Path
) -> None:
    script = {"steps": [{"content": [{"type": "text", "text": f"answer at step {i}"}]} for i in range(3)]}
    with ScriptedAnthropicServer(script) as model:
        env = _home(tmp_path, model.base_url)
        hub = EventHub(store)
        runs, _gate = build_runs(
            Settings(),
            store=store,
            hub=hub,
            broker=ApprovalBroker(store, 300),
            policy=Policy.from_setting(None),
            adapters={ADAPTER: load_adapters()[ADAPTER]},
            resolutions={ADAPTER: Resolution(ADAPTER, "claude", str(claude), None, env["PATH"])},
            data_dir=tmp_path / "data",
            owner="test-owner",
            base_env=env,
            journal=ActionJournal(store, "test-owner"),
            operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
            connectors=None,
            config_notices=None,
            launcher=VendorLauncher(),
        )
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        session = store.create_session(workspace=str(workspace), adapter=ADAPTER).id
        stages = StageRuns(runs.services, runs.registry)

        async def stage(attempt: str, *, resume: bool) -> StageOutcome:
            async def keep(_text: str) -> None:
                return None

            handle = await stages.start(_request(session, attempt, resume=resume), keep)
            with anyio.fail_after(120):
                return await handle.wait()

        async with anyio.create_task_group() as tg:
            runs.bind(tg)
            first = await stage("a" * 32, resume=False)
            resumed = await stage("a" * 32, resume=True)
            other = await stage("b" * 32, resume=True)
            tg.cancel_scope.cancel()
    assert [o.status for o in (first, resumed, other)] == [RunStatus.SUCCEEDED] * 3, [
        o.reason for o in (first, resumed, other)
    ]
    assert (first.text, resumed.text, other.text) == (
        "answer at step 0",
        "answer at step 1",
        "answer at step 0",
    )
    record = store.get_vendor_session(session, f"{ADAPTER}::pipeline:{'a' * 32}")
    assert record is not None
    run = store.get_run(resumed.run_id)
    assert (
        run.resumed
        and run.vendor_session_id == record.vendor_session_id == store.get_run(first.run_id).vendor_session_id
    )
    assert not store.get_run(other.run_id).resumed and first.tokens > 0
