"""Antigravity adapter: identity, argv, environment, prompt composition, additive flags."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from octipus_antigravity import (
    ALLOWED_ADDITIVE_FLAGS,
    DEFAULT_PRINT_TIMEOUT_SECONDS,
    ENV_BRIDGE_TOKEN,
    ENV_BRIDGE_URL,
    QUIET_ENV,
    AntigravityAdapter,
    compose_prompt,
    default_helper,
    normalize_additive_flags,
)
from octipus_antigravity.launch import INLINE_PROMPT_MAX_BYTES, PROMPT_FILE_NAME

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, LaunchSpec, PermissionMode, StdinMode
from octipusd.adapter_launch import vendor_launch
from octipusd.bridge import helper as bridge_helper
from octipusd.errors import AdapterError

TOKEN = "cap-Zm9vYmFyYmF6cXV4LXNlY3JldC10b2tlbi12YWx1ZQ"
URL = "http://127.0.0.1:43111/mcp"
BINARY = "/opt/agy/bin/agy"
HELPER = "/opt/octipus/venv/bin/octipus-bridge"


@pytest.fixture
def request_(tmp_path: Path) -> LaunchRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    return LaunchRequest(
        binary=BINARY,
        cwd=tmp_path / "ws",
        run_dir=run_dir,
        prompt="Write out.txt",
        bridge=BridgeEndpoint(url=URL, token=TOKEN),
        env={
            "PATH": "/usr/local/bin:/usr/bin",
            "HOME": "/home/u",
            ENV_BRIDGE_URL: "http://127.0.0.1:1/stale",
            ENV_BRIDGE_TOKEN: "stale-parent-capability",
        },
    )


def adapter() -> AntigravityAdapter:
    return AntigravityAdapter(bridge_helper=HELPER)


def launch(request: LaunchRequest) -> LaunchSpec:
    """The launch as the runtime starts it (with the bridge helper's environment)."""
    return vendor_launch(adapter(), request, helper=HELPER)


def prompt_of(argv: tuple[str, ...]) -> str:
    assert argv[-1].startswith("--print=")
    return argv[-1].removeprefix("--print=")


# ------------------------------------------------------------------ identity


def test_identity_and_protocol() -> None:
    a = AntigravityAdapter()
    assert isinstance(a, Adapter)
    assert (a.name, a.display_name, a.setting_key, a.default_binary, a.supports_resume) == (
        "antigravity",
        "Antigravity CLI",
        "antigravityCli",
        "agy",
        False,
    )
    assert a.new_session_id() is None
    assert a.version_argv("/x/agy") == ("/x/agy", "--version")


def test_registered_entry_point() -> None:
    (ep,) = [ep for ep in entry_points(group="octipus.adapters") if ep.name == "antigravity"]
    assert ep.load() is AntigravityAdapter


def test_default_helper_is_next_to_the_interpreter() -> None:
    import sys

    assert default_helper() == os.path.join(
        os.path.dirname(os.path.abspath(sys.executable)), "octipus-bridge"
    )
    assert AntigravityAdapter().bridge_helper == default_helper()


def test_bridge_variable_names_match_the_helper() -> None:
    # re-declared in the adapter so it does not import the helper; they must stay equal
    assert (ENV_BRIDGE_URL, ENV_BRIDGE_TOKEN) == (bridge_helper.ENV_URL, bridge_helper.ENV_TOKEN)


def test_no_relay_and_no_control_protocol() -> None:
    from octipusd.adapter import PermissionDecision, PermissionRequestEvent, ResultEvent

    a = adapter()
    event = PermissionRequestEvent(raw=None, request_id="r", tool_name="Bash", input={})
    with pytest.raises(AdapterError, match="no permission relay"):
        a.encode_permission_response(event, PermissionDecision(allow=True))
    with pytest.raises(AdapterError, match="no control protocol"):
        a.encode_control_error("r", "nope")
    assert a.session_missing(ResultEvent(raw=None, is_error=True, errors=("No conversation found",))) is False


# ------------------------------------------------------------------ argv


def test_workspace_launch(request_: LaunchRequest) -> None:
    spec = launch(request_)
    assert spec.argv[:4] == (BINARY, "--mode", "accept-edits", f"--add-dir={request_.cwd}")
    assert spec.argv[4] == f"--print-timeout={DEFAULT_PRINT_TIMEOUT_SECONDS}s"
    assert len(spec.argv) == 6
    assert spec.cwd == request_.cwd
    assert spec.stdin_mode is StdinMode.DEVNULL
    assert spec.initial_input == ()
    assert spec.files == {}
    assert spec.secrets == (TOKEN,)
    prompt = prompt_of(spec.argv)
    assert prompt.endswith("# Task\nWrite out.txt")
    assert "octipus-bridge" in prompt and f"{HELPER} list" in prompt and f"{HELPER} call TOOL" in prompt


@pytest.mark.parametrize(
    ("mode", "head"),
    [
        (PermissionMode.PLAN, ("--mode", "plan")),
        (PermissionMode.DEFAULT, ()),
        (PermissionMode.WORKSPACE, ("--mode", "accept-edits", "--add-dir=WS")),
        (PermissionMode.FULL, ("--mode", "accept-edits", "--dangerously-skip-permissions", "--add-dir=WS")),
    ],
)
def test_permission_modes(request_: LaunchRequest, mode: PermissionMode, head: tuple[str, ...]) -> None:
    spec = launch(replace(request_, permission_mode=mode))
    expected = tuple(h.replace("WS", str(request_.cwd)) for h in head)
    assert spec.argv[1 : 1 + len(expected)] == expected
    assert spec.argv[1 + len(expected)].startswith("--print-timeout=")
    if mode is PermissionMode.PLAN:
        assert not any(a.startswith("--add-dir") for a in spec.argv)
        assert "--dangerously-skip-permissions" not in spec.argv


def test_unknown_permission_mode(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="unknown permission mode 'yolo'"):
        launch(replace(request_, permission_mode="yolo"))  # type: ignore[arg-type]


def test_capability_never_on_argv(request_: LaunchRequest) -> None:
    for mode in PermissionMode:
        spec = launch(replace(request_, permission_mode=mode, system_prompt="be brief"))
        assert not any(TOKEN in a for a in spec.argv)
        assert not any(TOKEN in text for text in spec.files.values())
        assert spec.env[ENV_BRIDGE_TOKEN] == TOKEN


def test_model_and_additive_flags(request_: LaunchRequest) -> None:
    spec = launch(
        replace(
            request_,
            model="gemini-3-pro",
            additive_flags=("--effort", "high", "--disable-slash-commands", "--effort=high"),
        )
    )
    assert spec.argv[-5:-1] == (
        "--model=gemini-3-pro",
        f"--print-timeout={DEFAULT_PRINT_TIMEOUT_SECONDS}s",
        "--effort=high",
        "--disable-slash-commands",
    )


def test_model_with_nul_is_refused(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="NUL"):
        launch(replace(request_, model="a\x00b"))


def test_value_that_looks_like_a_flag_stays_bound(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, model="--mode=full", prompt="--dangerously-skip-permissions"))
    assert "--model=--mode=full" in spec.argv
    assert "--dangerously-skip-permissions" not in spec.argv
    assert prompt_of(spec.argv).endswith("\n--dangerously-skip-permissions")


@pytest.mark.parametrize(
    "flags",
    [
        ("--dangerously-skip-permissions",),
        ("--mode", "plan"),
        ("--conversation=abc",),
        ("--output-format", "json"),
        ("--sandbox",),
        ("--no-chrome",),
    ],
)
def test_disallowed_additive_flags(flags: tuple[str, ...]) -> None:
    with pytest.raises(AdapterError) as info:
        normalize_additive_flags(flags)
    assert repr(flags[0]) in str(info.value)
    assert "--disable-slash-commands" in str(info.value) and "--effort=<low|medium|high>" in str(info.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--effort",), "needs a level"),
        (("--effort=max",), "unknown level"),
        (("--effort=low", "--effort", "high"), "two effort levels"),
        ((3,), "not a string"),
    ],
)
def test_bad_effort(flags: tuple[object, ...], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        normalize_additive_flags(flags)  # type: ignore[arg-type]


def test_check_additive_flags_and_allowed_list() -> None:
    assert adapter().check_additive_flags(["--disable-slash-commands", "--effort=low"]) == (
        "--disable-slash-commands",
        "--effort=low",
    )
    assert ALLOWED_ADDITIVE_FLAGS == ("--disable-slash-commands", "--effort=<low|medium|high>")


def test_bad_additive_flag_fails_the_launch(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="--resume"):
        launch(replace(request_, additive_flags=("--resume",)))


# ------------------------------------------------------------------ resume


def test_never_resumes(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, vendor_session_id="old-conversation"))
    assert not any("old-conversation" in a for a in spec.argv)
    assert not any(a.startswith(("--conversation", "-c", "--continue")) for a in spec.argv)
    with pytest.raises(AdapterError, match="cannot resume"):
        launch(replace(request_, vendor_session_id="old", resume=True))


# ------------------------------------------------------------------ print timeout option


def test_print_timeout_option(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, options={"printTimeoutSeconds": 90}))
    assert "--print-timeout=90s" in spec.argv
    spec = launch(replace(request_, options={"printTimeoutSeconds": 0}))
    assert not any(a.startswith("--print-timeout") for a in spec.argv)
    for bad in (-1, "60", 1.5, True, 10**9):
        with pytest.raises(AdapterError, match="printTimeoutSeconds"):
            launch(replace(request_, options={"printTimeoutSeconds": bad}))


def test_unknown_options_are_ignored(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, options={"inheritApiKeys": True, "transport": "x"}))
    assert spec.argv == launch(request_).argv


# ------------------------------------------------------------------ environment


def test_environment(request_: LaunchRequest) -> None:
    env = launch(request_).env
    assert env[ENV_BRIDGE_URL] == URL and env[ENV_BRIDGE_TOKEN] == TOKEN  # the stale parent values are gone
    assert env["HOME"] == "/home/u"
    for key, value in QUIET_ENV.items():
        assert env[key] == value
    # appended, so the daemon's venv python/pip never shadow the user's in the agent's terminal
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/opt/octipus/venv/bin"


def test_environment_helper_dir_already_on_path(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, env={"PATH": "/opt/octipus/venv/bin:/usr/bin"}))
    assert spec.env["PATH"] == "/opt/octipus/venv/bin:/usr/bin"


def test_without_bridge(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, bridge=None))
    assert ENV_BRIDGE_URL not in spec.env and ENV_BRIDGE_TOKEN not in spec.env
    assert spec.env["PATH"] == "/usr/local/bin:/usr/bin"
    assert spec.secrets == ()
    assert prompt_of(spec.argv) == "Write out.txt"


@pytest.mark.parametrize(
    ("bridge", "message"),
    [
        (BridgeEndpoint(url="ftp://127.0.0.1/mcp", token=TOKEN), "not an http"),
        (BridgeEndpoint(url=URL, token=""), "bridge token"),
        (BridgeEndpoint(url=URL, token="has space"), "bridge token"),
    ],
)
def test_invalid_bridge(request_: LaunchRequest, bridge: BridgeEndpoint, message: str) -> None:
    with pytest.raises(AdapterError, match=message) as info:
        launch(replace(request_, bridge=bridge))
    assert TOKEN not in str(info.value)


# ------------------------------------------------------------------ prompt


def test_compose_prompt_layout(request_: LaunchRequest) -> None:
    text = compose_prompt(replace(request_, system_prompt="Be brief.\n"), HELPER)
    instructions = text.index("# Instructions from Octipus\nBe brief.\n")
    tools = text.index("## Octipus tools")
    task = text.index("# Task\nWrite out.txt")
    assert instructions < tools < task
    assert "OCTIPUS_BRIDGE_TOKEN" in text and TOKEN not in text
    assert compose_prompt(replace(request_, bridge=None, system_prompt="Be brief."), HELPER) == (
        "# Instructions from Octipus\nBe brief.\n\n# Task\nWrite out.txt"
    )


def test_helper_path_with_spaces_is_quoted(request_: LaunchRequest) -> None:
    text = compose_prompt(request_, "/opt/my tools/octipus-bridge")
    assert "'/opt/my tools/octipus-bridge' list" in text


def test_long_prompt_goes_to_a_file(request_: LaunchRequest) -> None:
    big = "x" * (INLINE_PROMPT_MAX_BYTES + 1)
    spec = launch(replace(request_, prompt=big, permission_mode=PermissionMode.PLAN))
    path = request_.run_dir / PROMPT_FILE_NAME
    assert spec.files[path].endswith("# Task\n" + big)
    assert f"--add-dir={request_.run_dir}" in spec.argv
    assert str(path) in prompt_of(spec.argv)
    assert sum(len(a) for a in spec.argv) < 4096


def test_prompt_with_nul_goes_to_a_file(request_: LaunchRequest) -> None:
    spec = launch(replace(request_, prompt="a\x00b"))
    assert "\x00" not in "".join(spec.argv)
    assert spec.files[request_.run_dir / PROMPT_FILE_NAME].endswith("a\x00b")


def test_input_text_matches_the_prompt_handed_to_agy(request_: LaunchRequest) -> None:
    a = adapter()
    req = replace(request_, system_prompt="Rules.")
    assert prompt_of(a.build_launch(req).argv) == a.input_text(req)


# ------------------------------------------------------------------ space mode


@pytest.mark.parametrize("mode", list(PermissionMode))
def test_space_runs_in_plan_mode(request_: LaunchRequest, mode: PermissionMode) -> None:
    """Seed 003 "In shared spaces": Antigravity runs with --mode plan whatever the row says."""
    spec = launch(replace(request_, permission_mode=mode, space=True))
    assert spec.argv[1:3] == ("--mode", "plan")
    assert spec.argv[3].startswith("--print-timeout=")
    assert not any(a.startswith("--add-dir") for a in spec.argv)
    assert "--dangerously-skip-permissions" not in spec.argv
    assert "accept-edits" not in spec.argv
    assert spec.env[ENV_BRIDGE_TOKEN] == TOKEN  # the bridge is still reachable through the helper


def test_space_long_prompt_still_grants_the_run_folder(request_: LaunchRequest) -> None:
    spec = launch(
        replace(
            request_,
            permission_mode=PermissionMode.FULL,
            space=True,
            prompt="x" * (INLINE_PROMPT_MAX_BYTES + 1),
        )
    )
    assert spec.argv[1:3] == ("--mode", "plan")
    assert [a for a in spec.argv if a.startswith("--add-dir")] == [f"--add-dir={request_.run_dir}"]


def test_space_mode_is_declared_and_helper_shared() -> None:
    from octipusd.adapterkit import bridge_helper_path

    assert AntigravityAdapter.space_mode and "--mode plan" in AntigravityAdapter.space_mode
    assert default_helper() == bridge_helper_path()
