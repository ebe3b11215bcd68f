"""The vendor gets an environment, not the daemon's (issue 12, fault 4).

The daemon runs on PostgreSQL with a password in ``OCTIPUS_DATABASE_URL`` and holds other
credentials in its environment. A stub vendor of our own writes out its whole environment; the
real ``claude`` does the same from its Bash tool, and a ``shell__run`` command through the bridge.
None of the daemon's settings or credentials reach them; the vendor's declared configuration,
the row's ``passEnv`` names and ``env`` do, and the API key only with ``inheritApiKeys``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from octipusd.adapter_launch import BRIDGE_HELPER_ENV
from octipusd.errors import ApiError
from octipusd.runner.process import RUN_MARKER
from tests.e2e.conftest import Env

PG_PASSWORD = "pg-secret-9f3a"
#: The daemon's credentials (besides its database URL); none may reach a vendor or a command.
CREDENTIALS: Mapping[str, str] = {
    "DATABASE_URL": "postgresql://app:app-secret-77c1@db.example/app",
    "PGPASSWORD": "pgpassword-secret-41d0",
    "GITHUB_TOKEN": "ghp_daemon-secret-0b5e",
    "ANTHROPIC_API_KEY": "sk-ant-daemon-secret-c2a8",
    "FOO_SECRET": "foo-secret-e61b",
}
#: A variable a row lists in passEnv.
PASSED = {"PASSED_ON_PURPOSE": "passed-value"}


def _daemon_env(postgres_database_url: str) -> dict[str, str]:
    # trust authentication: the server ignores the password, the daemon is configured with it
    url = make_url(postgres_database_url).set(password=PG_PASSWORD).render_as_string(hide_password=False)
    return {"OCTIPUS_DATABASE_URL": url, **CREDENTIALS, **PASSED}


def _read_env(path: Path) -> dict[str, str]:
    """An ``env -0`` dump as a dict."""
    entries = [e for e in path.read_bytes().decode().split("\0") if e]
    return dict(e.partition("=")[::2] for e in entries)


def _assert_nothing_of_the_daemon(
    env: Mapping[str, str], *, api_key: bool = False, vendor: bool = False
) -> None:
    """None of the daemon's settings or credentials; a vendor also has its run's bridge helper
    variables (``octipusd.adapter_launch.with_bridge_helper``), which a command never gets."""
    dump = "\n".join(f"{k}={v}" for k, v in env.items())
    assert PG_PASSWORD not in dump
    for name, value in CREDENTIALS.items():
        if not (api_key and name == "ANTHROPIC_API_KEY"):
            assert value not in dump, name
    allowed = {RUN_MARKER, *BRIDGE_HELPER_ENV} if vendor else {RUN_MARKER}
    assert {k for k in env if k.upper().startswith("OCTIPUS_")} <= allowed, sorted(env)
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env


def _env_stub(folder: Path, out: Path) -> Path:
    """A Claude-speaking vendor that writes its environment (``env -0``) to ``out`` and succeeds."""
    path = folder / f"env-stub-{out.stem}"
    path.write_text(
        "#!/bin/sh\n"
        'sid=""\n'
        'for a in "$@"; do case "$a" in --session-id=*) sid="${a#--session-id=}";; esac; done\n'
        f"env -0 > '{out}'\n"
        "IFS= read -r _line\n"
        'printf \'{"type":"system","subtype":"init","session_id":"%s",'
        '"mcp_servers":[{"name":"octipus","status":"connected"}]}\\n\' "$sid"\n'
        'printf \'{"type":"result","subtype":"success","is_error":false,"result":"ok",'
        '"session_id":"%s"}\\n\' "$sid"\n'
    )
    path.chmod(0o755)
    return path


def _row(env: Env, name: str, binary: Path | None, cli_agent: dict[str, Any]) -> None:
    body: dict[str, Any] = {
        "name": name,
        "adapter": "claude-code",
        "permission_mode": "full",
        "metadata": {"cliAgent": cli_agent},
    }
    if binary is not None:
        body["binary"] = str(binary)
    env.client.request("POST", "/models", json=body)


@pytest.mark.postgres
def test_a_stub_vendor_gets_the_login_its_config_and_the_rows_variables_only(
    octipus: Callable[..., Env], tmp_path: Path, postgres_database_url: str
) -> None:
    env = octipus({"steps": []}, extra_env=_daemon_env(postgres_database_url))
    assert env.client.request("GET", "/health")["database"].startswith("postgresql")
    plain_out, inherit_out = tmp_path / "plain.env", tmp_path / "inherit.env"
    row_options = {"passEnv": ["PASSED_ON_PURPOSE"], "env": {"ROW_VAR": "from-row"}}
    _row(env, "plain", _env_stub(tmp_path, plain_out), row_options)
    _row(env, "inherit", _env_stub(tmp_path, inherit_out), {"inheritApiKeys": True})
    for row in ("plain", "inherit"):
        final = env.wait_final(env.post(env.new_session(model_row=row), "go"))
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])

    plain = _read_env(plain_out)
    _assert_nothing_of_the_daemon(plain, vendor=True)
    assert "ANTHROPIC_API_KEY" not in plain
    assert plain["PASSED_ON_PURPOSE"] == "passed-value" and plain["ROW_VAR"] == "from-row"
    # the login and the configuration Claude Code declares (the harness's own settings)
    assert plain["HOME"] == str(env.daemon.home) and plain["PATH"]
    assert plain["XDG_CONFIG_HOME"] == env.daemon.env["XDG_CONFIG_HOME"]
    assert plain["CLAUDE_CONFIG_DIR"] == env.daemon.env["CLAUDE_CONFIG_DIR"]
    assert plain["CLAUDE_CODE_MAX_RETRIES"] == "0"

    inherit = _read_env(inherit_out)
    _assert_nothing_of_the_daemon(inherit, api_key=True, vendor=True)
    assert inherit["ANTHROPIC_API_KEY"] == CREDENTIALS["ANTHROPIC_API_KEY"]
    assert "PASSED_ON_PURPOSE" not in inherit and "ROW_VAR" not in inherit


def _refused(env: Env, path: str, body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        env.client.request("POST", path, json=body)
    assert (caught.value.http_status, caught.value.code) == (400, "invalid_request"), caught.value
    return caught.value


def test_pass_env_is_the_rows_and_never_names_a_daemon_setting(octipus: Callable[..., Env]) -> None:
    env = octipus({"steps": []})
    reserved = {
        "name": "bad",
        "adapter": "claude-code",
        "metadata": {"cliAgent": {"passEnv": ["OCTIPUS_DATABASE_URL"]}},
    }
    message = _refused(env, "/models", reserved).message
    assert "'OCTIPUS_DATABASE_URL'" in message and "never reach a vendor" in message
    pattern = {"name": "bad", "adapter": "claude-code", "metadata": {"cliAgent": {"passEnv": ["AWS_*"]}}}
    assert "'AWS_*' is not an environment variable name" in _refused(env, "/models", pattern).message
    on_session = {"workspace": str(env.daemon.workspace), "options": {"passEnv": ["AWS_PROFILE"]}}
    assert "model row" in _refused(env, "/sessions", on_session).message
    assert env.client.request("GET", "/models") == []


@pytest.mark.postgres
def test_the_real_claude_and_shell_run_see_none_of_the_daemons_secrets(
    octipus: Callable[..., Env], postgres_database_url: str
) -> None:
    vendor_out = Path("vendor.env")
    shell_out = Path("shell.env")
    script = {
        "steps": [
            {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "Bash",
                        "input": {"command": f"env -0 > {vendor_out}", "description": "dump env"},
                    }
                ]
            },
            {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "mcp__octipus__shell__run",
                        "input": {"command": f"env -0 > {shell_out}", "env": {"CALLER_VAR": "given"}},
                    }
                ]
            },
            {"content": [{"type": "text", "text": "dumped"}]},
        ]
    }
    env = octipus(script, extra_env=_daemon_env(postgres_database_url))
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    _row(env, "passing", None, {"passEnv": ["PASSED_ON_PURPOSE"]})
    session = env.new_session(model_row="passing")
    final = env.wait_final(env.post(session, "dump your environment"))
    assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])

    vendor = _read_env(env.daemon.workspace / vendor_out)
    _assert_nothing_of_the_daemon(vendor, vendor=True)
    assert vendor["PASSED_ON_PURPOSE"] == "passed-value"
    assert vendor["CLAUDE_CONFIG_DIR"] == env.daemon.env["CLAUDE_CONFIG_DIR"]

    shell = _read_env(env.daemon.workspace / shell_out)
    _assert_nothing_of_the_daemon(shell)
    assert shell["CALLER_VAR"] == "given" and shell["HOME"] == str(env.daemon.home)
    assert shell[RUN_MARKER] == final["id"]
    # a command gets neither the vendor's configuration nor the row's passEnv
    assert "CLAUDE_CONFIG_DIR" not in shell and "PASSED_ON_PURPOSE" not in shell
    assert "ANTHROPIC_API_KEY" not in shell
