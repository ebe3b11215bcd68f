"""Vault placeholders in tool calls and the masking of injected values (octipusd.toolkit.secrets)."""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from octipusd.errors import NotExecutedError, VaultAccessError
from octipusd.toolkit import ToolOutcome
from octipusd.toolkit.secrets import (
    Masker,
    find_placeholders,
    mask_result,
    placeholder_names,
    redaction,
    run_with_secrets,
    substitute,
)

pytestmark = pytest.mark.anyio

TOKEN = "ghp_s3cr3tValue-0123456789abcdef"


def test_names_are_deduplicated_in_order() -> None:
    text = "{{secret:b}} {{secret:a-1}} {{secret:b}} {{secret:C_2}}"
    assert placeholder_names(text) == ["b", "a-1", "C_2"]
    assert redaction("github_token") == "[REDACTED:github_token]"


def test_env_values_may_carry_placeholders() -> None:
    use = find_placeholders(
        "shell__run",
        {
            "command": "gh api user",
            "env": {"GH_TOKEN": "{{secret:gh}}", "X": "pre-{{secret:o}}-{{secret:gh}}"},
        },
        env_allowed=True,
    )
    assert use.names == ("gh", "o")
    assert substitute({"A": "x{{secret:gh}}y", "B": "plain"}, {"gh": TOKEN}) == {
        "A": f"x{TOKEN}y",
        "B": "plain",
    }


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"command": "curl -H 'Authorization: {{secret:gh}}' x"}, "command"),
        ({"command": "true", "cwd": "{{secret:gh}}"}, "cwd"),
        ({"url": "https://x/?t={{secret:gh}}"}, "url"),
        ({"files": [{"path": "a", "content": "token={{secret:gh}}"}]}, "files[0].content"),
        ({"env": {"A": "{{secret:gh}}"}}, "env.A"),  # a tool that does not resolve them
    ],
)
def test_misplaced_placeholders_are_refused_saying_put_it_in_env(
    arguments: dict[str, Any], where: str
) -> None:
    env_allowed = "env" not in arguments
    with pytest.raises(NotExecutedError) as caught:
        find_placeholders("shell__run", arguments, env_allowed=env_allowed)
    assert where in caught.value.message
    assert "in env" in caught.value.message or "in the env of a tool" in caught.value.message
    assert "nothing ran" in caught.value.message


@pytest.mark.parametrize("value", ["{{secret:has space}}", "{{ secret:x }}", "{{secret:}}", "{{SECRET:x}}"])
def test_malformed_placeholders_in_env_are_refused(value: str) -> None:
    with pytest.raises(NotExecutedError, match="malformed vault placeholder"):
        find_placeholders("shell__run", {"command": "true", "env": {"A": value}}, env_allowed=True)


def test_masker_masks_the_value_and_its_common_encodings() -> None:
    masker = Masker({"gh": TOKEN})
    b64 = base64.b64encode(TOKEN.encode()).decode()
    url = urllib.parse.quote("a b/" + TOKEN, safe="")
    text = f"1 {TOKEN} 2 {TOKEN}\n3 {b64}\n4 {url}\n"
    masked = masker.mask(text)
    assert TOKEN not in masked
    assert b64.rstrip("=")[:12] not in masked
    assert masked.count("[REDACTED:gh]") == 4
    for offset in (1, 2):  # inside a longer base64 stream, at each alignment
        embedded = base64.b64encode(b"x" * offset + TOKEN.encode() + b"tail").decode()
        assert "[REDACTED:gh]" in masker.mask(embedded)
    urlsafe = base64.urlsafe_b64encode(b"\xff\xfe" + TOKEN.encode()).decode()
    assert "[REDACTED:gh]" in masker.mask(urlsafe)


def test_masker_masks_a_value_cut_by_truncation() -> None:
    masker = Masker({"gh": TOKEN})
    cut = f"ok {TOKEN[:10]}"
    assert masker.mask_cut(cut + "\n[stdout truncated: 9 bytes]", len(cut)).startswith("ok [REDACTED:gh]")
    assert masker.mask_cut("plain text", 5) == "plain text"


def test_short_values_mask_only_exactly() -> None:
    masker = Masker({"pin": "4711", "empty": ""})
    assert masker.mask("code 4711!") == "code [REDACTED:pin]!"
    assert bool(Masker({"empty": ""})) is False


async def test_run_with_secrets_injects_and_masks_everything() -> None:
    seen: dict[str, Any] = {}

    async def resolve(names: Sequence[str]) -> Mapping[str, str]:
        seen["names"] = list(names)
        return {"gh": TOKEN}

    async def handler(call: dict[str, Any]) -> ToolOutcome:
        seen["env"] = call["env"]
        out = f"Authorization: Bearer {TOKEN}\n" + "x" * 10 + TOKEN[:9] + "\n[stdout truncated: 99 bytes]"
        return ToolOutcome(
            {"stdout": out, "nested": [TOKEN]}, uncertain=f"killed while {TOKEN}", detail=TOKEN
        )

    arguments = {"command": "env", "env": {"TOKEN": "{{secret:gh}}"}}
    result = await run_with_secrets(
        "shell__run", arguments, env_allowed=True, resolve=resolve, handler=handler
    )
    assert seen == {"names": ["gh"], "env": {"TOKEN": TOKEN}}
    assert arguments["env"] == {"TOKEN": "{{secret:gh}}"}  # the caller's arguments keep the placeholder
    assert isinstance(result, ToolOutcome)
    assert TOKEN[:9] not in repr(result)
    assert result.value["stdout"].startswith("Authorization: Bearer [REDACTED:gh]\n")
    assert result.uncertain == "killed while [REDACTED:gh]"


async def test_a_refused_entry_is_not_executed_and_the_handler_never_runs() -> None:
    ran: list[bool] = []

    async def resolve(names: Sequence[str]) -> Mapping[str, str]:
        raise VaultAccessError(f"vault entry {names[0]!r} does not exist")

    async def handler(call: dict[str, Any]) -> str:
        ran.append(True)
        return "ran"

    with pytest.raises(NotExecutedError, match="shell__run was not run: vault entry 'nope' does not exist"):
        await run_with_secrets(
            "shell__run",
            {"command": "true", "env": {"A": "{{secret:nope}}"}},
            env_allowed=True,
            resolve=resolve,
            handler=handler,
        )
    assert ran == []


async def test_an_error_raised_by_the_handler_is_masked() -> None:
    async def resolve(names: Sequence[str]) -> Mapping[str, str]:
        return {"gh": TOKEN}

    async def handler(call: dict[str, Any]) -> str:
        raise NotExecutedError(f"could not start with {call['env']['A']}")

    with pytest.raises(NotExecutedError) as caught:
        await run_with_secrets(
            "shell__run",
            {"command": "true", "env": {"A": "{{secret:gh}}"}},
            env_allowed=True,
            resolve=resolve,
            handler=handler,
        )
    assert caught.value.message == "could not start with [REDACTED:gh]"


def test_a_large_value_masks_in_linear_memory() -> None:
    value = "".join(chr(0x41 + (i * 7) % 26) for i in range(64 * 1024))  # the vault's largest value
    masker = Masker({"cert": value})
    text = "head " + value + " mid " + value[:5000] + "\n[stdout truncated: 1 bytes]"
    masked = masker.mask_cut(text, text.index("\n[stdout"))
    assert masked == "head [REDACTED:cert] mid [REDACTED:cert]\n[stdout truncated: 1 bytes]"


def test_a_masked_error_keeps_its_type_and_code() -> None:
    masker = Masker({"gh": TOKEN})
    error = masker.mask_error(VaultAccessError(f"saw {TOKEN}"))
    assert isinstance(error, VaultAccessError) and error.code == "vault_access_denied"
    assert error.message == "saw [REDACTED:gh]" and str(error) == "saw [REDACTED:gh]"
    plain = masker.mask_error(TimeoutError(f"slow {TOKEN}"))
    assert isinstance(plain, TimeoutError) and str(plain) == "slow [REDACTED:gh]"
    unchanged = KeyError("x")
    assert masker.mask_error(unchanged) is unchanged


def test_a_result_keeps_its_own_field_names() -> None:
    masker = Masker({"word": "code"})
    assert mask_result(masker, {"exit_code": 0, "stdout": "the code is code"}) == {
        "exit_code": 0,
        "stdout": "the [REDACTED:word] is [REDACTED:word]",
    }
