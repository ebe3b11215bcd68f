"""Antigravity parser: buffered text, the final events at ``finish``, estimated usage."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from octipus_antigravity import AntigravityAdapter, AntigravityTextParser, estimate_tokens
from octipus_antigravity.parser import EMPTY_RESPONSE_ERROR, MAX_TEXT_CHARS, clean_line

from octipusd.adapter import (
    BridgeEndpoint,
    EventKind,
    LaunchRequest,
    ResultEvent,
    TextEvent,
    Usage,
    UsageEvent,
)


def feed_all(parser: AntigravityTextParser, data: bytes) -> None:
    for line in data.split(b"\n"):
        assert parser.feed(line) == []


def test_buffered_text_becomes_one_text_and_a_result_at_finish() -> None:
    parser = AntigravityTextParser(input_chars=40)
    feed_all(parser, b"\nI wrote out.txt.\n\nIt holds one line.\n")
    text, usage_event, result = parser.finish(0)
    assert isinstance(text, TextEvent) and text.text == "I wrote out.txt.\n\nIt holds one line."
    assert text.raw is None and text.kind is EventKind.TEXT
    assert isinstance(usage_event, UsageEvent) and isinstance(result, ResultEvent)
    assert result.is_error is False and result.subtype == "success"
    assert result.text == text.text and result.session_id is None and result.cost_usd is None
    assert result.usage == usage_event.usage == parser.total_usage()
    assert parser.finish(0) == []
    assert parser.feed(b"late line") == []


def test_usage_is_estimated_at_four_characters_per_token() -> None:
    parser = AntigravityTextParser(input_chars=41)
    assert parser.total_usage() == Usage(input_tokens=11, output_tokens=0, estimated=True)
    parser.feed(b"abcd")
    parser.feed(b"efg")  # 4 + newline + 3 = 8 characters
    assert parser.total_usage() == Usage(input_tokens=11, output_tokens=2, estimated=True)
    (_, usage_event, result) = parser.finish(0)
    assert isinstance(usage_event, UsageEvent) and usage_event.usage.estimated
    assert isinstance(result, ResultEvent) and result.usage == Usage(11, 2, estimated=True)


@pytest.mark.parametrize(("chars", "tokens"), [(0, 0), (1, 1), (4, 1), (5, 2), (400, 100)])
def test_estimate_tokens(chars: int, tokens: int) -> None:
    assert estimate_tokens(chars) == tokens


def test_empty_answer_with_exit_0_is_an_error() -> None:
    parser = AntigravityTextParser(input_chars=10)
    parser.feed(b"")
    events = parser.finish(0)
    assert [e.kind for e in events] == [EventKind.USAGE, EventKind.RESULT]
    result = events[-1]
    assert isinstance(result, ResultEvent)
    assert result.is_error and result.subtype == "empty_response" and result.errors == (EMPTY_RESPONSE_ERROR,)
    assert "toolPermission" in EMPTY_RESPONSE_ERROR


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        (1, "exited with status 1"),
        (2, "usage error"),
        (-15, "killed by signal 15"),
        (None, "without an exit status"),
    ],
)
def test_failed_exit_is_an_error_keeping_the_text(code: int | None, needle: str) -> None:
    parser = AntigravityTextParser()
    parser.feed(b"partial answer")
    events = parser.finish(code)
    assert [e.kind for e in events] == [EventKind.TEXT, EventKind.USAGE, EventKind.RESULT]
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.is_error and result.subtype == "error"
    assert result.text == "partial answer"
    assert needle in result.errors[0]


def test_ansi_and_carriage_returns_are_cleaned() -> None:
    assert clean_line(b"\x1b[1;32mgreen\x1b[0m text\r") == "green text"
    assert clean_line(b"Working...\rDone.") == "Done."
    assert clean_line(b"\x1b]0;title\x07after") == "after"
    assert clean_line(b"caf\xc3\xa9 \xff") == "café \ufffd"


def test_undecodable_bytes_never_raise() -> None:
    parser = AntigravityTextParser()
    parser.feed(b"\xff\xfe\x00 ok")
    (text, _, result) = parser.finish(0)
    assert isinstance(text, TextEvent) and "ok" in text.text
    assert isinstance(result, ResultEvent) and not result.is_error


def test_huge_answer_is_truncated_but_counted() -> None:
    parser = AntigravityTextParser()
    line = b"y" * (1024 * 1024)
    for _ in range(6):
        parser.feed(line)
    (text, usage_event, _) = parser.finish(0)
    assert isinstance(text, TextEvent) and isinstance(usage_event, UsageEvent)
    assert len(text.text) < MAX_TEXT_CHARS + 200
    assert text.text.endswith("characters]")
    assert usage_event.usage.output_tokens == estimate_tokens(6 * 1024 * 1024 + 5)


@given(st.lists(st.binary(max_size=200), max_size=30))
def test_feed_never_raises_and_finish_always_ends_with_a_result(lines: list[bytes]) -> None:
    parser = AntigravityTextParser(input_chars=7)
    for line in lines:
        assert parser.feed(line) == []
    events = parser.finish(0)
    assert isinstance(events[-1], ResultEvent)
    assert sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage()) == parser.total_usage()


def test_adapter_parser_estimates_the_composed_prompt(tmp_path: Path) -> None:
    adapter = AntigravityAdapter(bridge_helper="/opt/bin/octipus-bridge")
    request = LaunchRequest(
        binary="/bin/agy",
        cwd=tmp_path,
        run_dir=tmp_path,
        prompt="p" * 100,
        bridge=BridgeEndpoint(url="http://127.0.0.1:1/mcp", token="tok"),
    )
    parser = adapter.new_parser(request)
    assert parser.input_chars == len(adapter.input_text(request)) > 100
    assert parser.total_usage().input_tokens == estimate_tokens(parser.input_chars)
    assert adapter.new_parser().total_usage() == Usage(estimated=True)
    bare = adapter.new_parser(replace(request, bridge=None))
    assert bare.input_chars == 100
