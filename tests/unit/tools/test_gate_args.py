"""``spawn_child``'s ``gates`` argument: shapes, defaults, limits, and refusals naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from octipusd.errors import InvalidRequestError
from octipusd.toolkit import ChildRequest, GateSpec
from octipusd.tools import SPAWN_CHILD, parse_child_request
from octipusd.tools.gate_args import (
    MAX_GATE_ALTERNATIVES,
    MAX_GATE_COMMAND_CHARS,
    MAX_GATE_NAME_CHARS,
    MAX_GATE_TIMEOUT_SECONDS,
    MAX_GATES,
    parse_gates,
)

jsonschema = pytest.importorskip("jsonschema")


def _request(gates: Any) -> ChildRequest:
    return parse_child_request({"role": "coding", "brief": "b", "gates": gates})


def _refusal(gates: Any) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        _request(gates)
    return caught.value.message


def test_gates_are_parsed_with_their_defaults() -> None:
    request = _request(
        [
            {"command": "pnpm test"},
            {"name": "lint", "anyOf": ["ruff check .", "flake8"], "required": False, "timeoutSeconds": 30},
            {"name": "licence", "command": "test -f LICENSE", "retryable": False},
        ]
    )
    assert request.gates == (
        GateSpec("gates[0]", ("pnpm test",)),
        GateSpec("lint", ("ruff check .", "flake8"), any_of=True, required=False, timeout_seconds=30.0),
        GateSpec("licence", ("test -f LICENSE",), retryable=False),
    )


def test_no_gates_is_an_empty_tuple() -> None:
    assert parse_child_request({"role": "coding", "brief": "b"}).gates == ()
    assert _request(None).gates == () and _request([]).gates == ()


def test_a_gate_spec_needs_its_commands() -> None:
    with pytest.raises(InvalidRequestError, match="has no command"):
        GateSpec("x", ())
    with pytest.raises(InvalidRequestError, match="mark the gate any_of"):
        GateSpec("x", ("a", "b"))


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ("pnpm test", "gates: must be a list of gate objects, got str"),
        ([{"command": "true"}] * (MAX_GATES + 1), f"gates: at most {MAX_GATES} gates, got 9"),
        (["pnpm test"], "gates[0]: must be an object, got str"),
        ([{"command": "true"}, {"cmd": "x"}], "gates[1]: unknown field(s) cmd; accepted:"),
        ([{"name": "x"}], "gates[0]: needs a command (or anyOf"),
        ([{"command": "a", "anyOf": ["b"]}], "gates[0]: give either command or anyOf, not both"),
        ([{"command": 3}], "gates[0].command: must be a string, got int"),
        ([{"command": "  "}], "gates[0].command: must not be empty"),
        ([{"command": "x" * (MAX_GATE_COMMAND_CHARS + 1)}], "gates[0].command: at most 4000 characters"),
        ([{"command": "a\x00b"}], "gates[0].command: must not contain NUL"),
        ([{"anyOf": "pnpm test"}], "gates[0].anyOf: must be a list of commands, got str"),
        ([{"anyOf": []}], f"gates[0].anyOf: must hold 1 to {MAX_GATE_ALTERNATIVES} commands, got 0"),
        ([{"anyOf": ["a"] * (MAX_GATE_ALTERNATIVES + 1)}], "gates[0].anyOf: must hold 1 to 4 commands, got 5"),
        ([{"anyOf": ["true", 7]}], "gates[0].anyOf[1]: must be a string, got int"),
        ([{"command": "true", "name": 1}], "gates[0].name: must be a string, got int"),
        ([{"command": "true", "name": " "}], "gates[0].name: must not be empty"),
        ([{"command": "true", "name": "n" * (MAX_GATE_NAME_CHARS + 1)}], "gates[0].name: at most 80 characters"),
        ([{"command": "a", "name": "t"}, {"command": "b", "name": "t"}], "gates[1].name: 't' is already the name of gates[0]"),
        ([{"command": "true", "required": "yes"}], "gates[0].required: must be true or false, got str"),
        ([{"command": "true", "retryable": 0}], "gates[0].retryable: must be true or false, got int"),
        ([{"command": "true", "timeoutSeconds": 0.5}], "gates[0].timeoutSeconds: must be from 1 to 600 seconds"),
        ([{"command": "true", "timeoutSeconds": MAX_GATE_TIMEOUT_SECONDS + 1}], "gates[0].timeoutSeconds: must be from 1"),
        ([{"command": "true", "timeoutSeconds": float("nan")}], "gates[0].timeoutSeconds: must be from 1"),
        ([{"command": "true", "timeoutSeconds": True}], "gates[0].timeoutSeconds: must be a number of seconds"),
        # directory switches pointing outside the child's tree, refused before dispatch
        ([{"command": "true"}, {"command": "pnpm -C /host/repo test"}], "gates[1].command: 'pnpm -C /host/repo': an absolute path"),
        ([{"command": "npm --prefix ../other test"}], "gates[0].command: 'npm --prefix ../other': '..' climbs out"),
        ([{"command": "yarn --cwd ~/app test"}], "gates[0].command: 'yarn --cwd ~/app': a home directory path"),
        ([{"command": "git -C sub -C ../.. status"}], "gates[0].command: 'git -C ../..': '..' climbs out"),
        ([{"command": "make --directory=/srv all"}], "gates[0].command: 'make --directory=/srv': an absolute path"),
        ([{"anyOf": ["pnpm test", "make -C $ROOT test"]}], "gates[0].anyOf[1]: 'make -C $ROOT': the shell expands it"),
    ],
)  # fmt: skip
def test_every_refusal_names_the_field(gates: Any, message: str) -> None:
    assert _refusal(gates).startswith(message)


def test_a_switch_refusal_says_what_to_do_instead() -> None:
    assert "'pnpm test', not 'pnpm -C /host/repo test'" in _refusal([{"command": "pnpm -C /host/repo test"}])


def test_switches_inside_the_tree_are_accepted() -> None:
    gates = parse_gates([{"command": "pnpm -C web test"}, {"command": "git -C pkg status && make -C sub"}])
    assert [g.commands for g in gates] == [("pnpm -C web test",), ("git -C pkg status && make -C sub",)]


@pytest.mark.parametrize(
    "gates",
    [
        [{"command": "pnpm test"}],
        [{"name": "lint", "anyOf": ["a", "b"], "required": False, "retryable": False, "timeoutSeconds": 600}],
        [],
        "pnpm test",
        [{"command": ""}],
        [{"anyOf": []}],
        [{"command": "true", "timeoutSeconds": 601}],
        [{"command": "true", "timeoutSeconds": 0}],
        [{"command": "true", "required": "no"}],
        [{"command": "true", "extra": 1}],
        [{"command": "true"}] * 9,
        [{"anyOf": ["a"] * 5}],
        [{"command": "true", "name": "n" * 81}],
    ],
)
def test_the_schema_and_the_parser_agree(gates: Any) -> None:
    arguments = {"role": "coding", "brief": "b", "gates": gates}
    schema_ok = jsonschema.Draft202012Validator(SPAWN_CHILD.input_schema).is_valid(arguments)
    try:
        parse_child_request(arguments)
    except InvalidRequestError:
        accepted = False
    else:
        accepted = True
    assert schema_ok == accepted
