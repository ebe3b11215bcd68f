"""``security.shellSandbox`` as a setting, and ``network: true`` under the sandbox for the flow guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.errors import ConfigError
from octipusd.policy.flowguard import Egress, FlowFlag, FlowState, classify
from octipusd.settings import load_settings
from octipusd.settings_security import ShellSandboxMode


def test_the_setting_defaults_to_off_and_reads_file_and_environment(tmp_path: Path) -> None:
    assert load_settings(environ={}).security.shellSandbox is ShellSandboxMode.OFF
    loaded = load_settings(environ={"OCTIPUS_SECURITY__SHELLSANDBOX": "required"})
    assert loaded.security.shellSandbox is ShellSandboxMode.REQUIRED
    config = tmp_path / "config.toml"
    config.write_text('[security]\nshellSandbox = "auto"\n')
    assert load_settings(config, environ={}).security.shellSandbox is ShellSandboxMode.AUTO


@pytest.mark.parametrize("value", ["requierd", "on", "true"])
def test_an_unknown_mode_is_refused_naming_the_key_and_the_accepted_values(
    tmp_path: Path, value: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[security]\nshellSandbox = "{value}"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(config, environ={})
    message = refused.value.message
    assert "security.shellSandbox" in message and f"file {config}" in message
    assert "accepted: off (the default), auto or required" in message


def test_network_true_is_egress_only_while_the_sandbox_is_in_force() -> None:
    asked = {"command": "make test", "network": True}
    assert classify("shell__run", asked).egress is Egress.NONE  # sandbox off: the text decides
    sandboxed = classify("shell__run", asked, sandboxed_shell=True)
    assert sandboxed.egress is Egress.WRITE
    assert "network: true" in " ".join(sandboxed.reasons)
    assert classify("shell__run", {"command": "make test"}, sandboxed_shell=True).egress is Egress.NONE
    assert classify("shell__run", {**asked, "network": "yes"}, sandboxed_shell=True).egress is Egress.NONE
    # a session that read credentials then needs a person for it
    state = FlowState()
    state.observe(classify("shell__run", {"command": "cat .env"}))
    assert FlowFlag.SECRET in state.flags
    reason = state.check(sandboxed)
    assert reason is not None and "read credentials" in reason
    assert state.check(classify("shell__run", {"command": "make test"}, sandboxed_shell=True)) is None
