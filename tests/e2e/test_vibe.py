"""Mistral Vibe through a real octipusd: the conformance suite over both transports, plus Vibe specifics.

The real ``vibe-acp`` / ``vibe`` 3.0.2 (``.vendor/vibe-venv``, scripts/install-vibe.sh) talk to the
scripted Chat Completions server on 127.0.0.1; run under ``scripts/netns`` so nothing else is
reachable. A Vibe run takes about 8-13 s (observed.md §3.3, §3.5).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.testing.conformance import SCENARIOS, VendorKit, octipus
from octipusd.testing.kit_vibe import VibeHeadlessKit, VibeKit

KITS: dict[str, VendorKit] = {"vibe": VibeKit(), "vibe-headless": VibeHeadlessKit()}
ACP = VibeKit()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kit", list(KITS))
def test_vibe_conformance(kit: str, scenario: str, tmp_path: Path) -> None:
    SCENARIOS[scenario](KITS[kit], tmp_path)


def test_acp_permission_denied_through_octipus(tmp_path: Path) -> None:
    """Denied in Octipus, the command never runs; Vibe reports the call failed and the model goes on."""
    steps = [ACP.shell("echo nope > denied.txt"), ACP.text("could not write it")]
    with octipus(ACP, tmp_path, steps) as env:
        run = env.post(env.new_session(), "write denied.txt")
        approval = env.wait_approval(run)
        assert approval["tool_id"] == "cli-native:bash"
        assert approval["subject"] == "echo nope > denied.txt"
        env.answer(approval["id"], "deny")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert not (env.daemon.workspace / "denied.txt").exists()
        decisions = env.kinds(run, "permission_decision")
        assert [d["allowed"] for d in decisions] == [False]
        results = env.kinds(run, "tool_result")
        assert results and results[0]["is_error"] is True, results
        assert final["result_text"] == "could not write it"
