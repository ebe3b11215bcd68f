"""The log filter (issue 17 item 1): every value resolved in the process is replaced by
``[REDACTED:NAME]`` in a record's formatted message and arguments, its traceback and its stack,
through real handlers."""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from octipusd.runtime.events import EventHub
from octipusd.store.repository import Store
from octipusd.vault import ResolvedValues, SecretLogFilter, install_log_filter

TOKEN = "ghp_S3cretValue-0123456789abcdef"


@pytest.fixture
def values() -> ResolvedValues:
    resolved = ResolvedValues()
    resolved.remember({"gh": TOKEN})
    return resolved


@pytest.fixture
def logged(values: ResolvedValues) -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretLogFilter(values))
    logger = logging.getLogger("test.vault.masking")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def test_values_in_the_message_and_its_arguments_are_masked(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = logged
    logger.info("token %s in %d%% of %r", TOKEN, 100, {"env": {"GH_TOKEN": TOKEN}})
    logger.warning(f"inline {TOKEN} and base64 {base64.b64encode(TOKEN.encode()).decode()}")
    logger.info("nothing secret: %s", "plain")
    text = stream.getvalue()
    assert TOKEN not in text and base64.b64encode(TOKEN.encode()).decode() not in text
    assert "token [REDACTED:gh] in 100% of {'env': {'GH_TOKEN': '[REDACTED:gh]'}}" in text
    assert "inline [REDACTED:gh] and base64 [REDACTED:gh]" in text
    assert "nothing secret: plain" in text


def test_a_traceback_and_a_stack_are_masked(logged: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = logged
    try:
        raise RuntimeError(f"the server refused {TOKEN}")
    except RuntimeError:
        logger.exception("call failed")
    logger.info("here", stack_info=True)
    text = stream.getvalue()
    assert "RuntimeError: the server refused [REDACTED:gh]" in text
    assert TOKEN not in text  # the traceback's source line shows the f-string, not the value


def test_an_entry_s_old_and_new_values_are_both_masked() -> None:
    values = ResolvedValues()
    values.remember({"gh": "old-value-1234"})
    values.remember({"gh": "new-value-5678", "aws": "aws-value-999"})
    assert values.mask("old-value-1234 new-value-5678 aws-value-999") == (
        "[REDACTED:gh] [REDACTED:gh] [REDACTED:aws]"
    )


def test_with_nothing_resolved_records_are_left_as_they_are() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %s", (TOKEN,), None)
    assert SecretLogFilter(ResolvedValues()).filter(record)
    assert record.msg == "a %s" and record.args == (TOKEN,)


def test_a_record_whose_format_is_broken_is_kept_for_the_handler_to_report(values: ResolvedValues) -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %d", ("not a number",), None)
    assert SecretLogFilter(values).filter(record)
    assert record.msg == "a %d"


def test_install_reaches_every_configured_handler_once() -> None:
    root_handler = logging.StreamHandler(io.StringIO())
    own_stream = io.StringIO()
    own_handler = logging.StreamHandler(own_stream)
    root, own = logging.getLogger(), logging.getLogger("test.vault.uvicorn-like")
    root.addHandler(root_handler)
    own.addHandler(own_handler)
    own.propagate = False
    values = ResolvedValues()
    log_filter = SecretLogFilter(values)
    try:
        assert install_log_filter(log_filter) >= 2
        assert install_log_filter(log_filter) == 0
        assert log_filter in root_handler.filters and own_handler.filters == [log_filter]
        values.remember({"gh": TOKEN})
        own.error("leak %s", TOKEN)
        assert own_stream.getvalue() == "leak [REDACTED:gh]\n"
    finally:
        root.removeHandler(root_handler)
        own.removeHandler(own_handler)
        loggers = [
            root,
            *(x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)),
        ]
        for handler in (h for logger in loggers for h in logger.handlers):
            handler.removeFilter(log_filter)


def test_event_data_is_scrubbed_only_once_something_was_resolved() -> None:
    fresh = ResolvedValues()
    data = {"content": "plain"}
    assert fresh.mask_data(data) is data  # nothing resolved: not even copied
    fresh.remember({"api": "tok-0123456789abcdef"})
    scrubbed = fresh.mask_data({"content": ["read back: tok-0123456789abcdef"], "n": 1})
    assert scrubbed == {"content": ["read back: [REDACTED:api]"], "n": 1}


@pytest.mark.anyio
async def test_the_event_hub_stores_and_publishes_scrubbed_events(store: Store, tmp_path: Path) -> None:
    values = ResolvedValues()
    values.remember({"api": "tok-0123456789abcdef"})
    session = store.create_session(workspace=str(tmp_path), adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="test")
    hub = EventHub(store, scrub=values.mask_data)
    event = await hub.emit(run.id, "tool_result", {"content": "cat leak.txt: tok-0123456789abcdef"})
    assert event.data == {"content": "cat leak.txt: [REDACTED:api]"}
    assert [e.data for e in store.list_events(run.id)] == [{"content": "cat leak.txt: [REDACTED:api]"}]
