"""The adapter conformance suite against every vendor kit (real binaries, pinned versions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.testing.conformance import SCENARIOS, VendorKit
from octipusd.testing.kit_claude import ClaudeKit

KITS: dict[str, VendorKit] = {"claude-code": ClaudeKit()}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kit", list(KITS))
def test_conformance(kit: str, scenario: str, tmp_path: Path) -> None:
    SCENARIOS[scenario](KITS[kit], tmp_path)
