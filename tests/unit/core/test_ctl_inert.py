"""Text that did not originate in Octipus is shown inert (issue 26 item 2): :func:`octipusd.inert.inert`
leaves no control character a terminal acts on, :func:`octipusd.ctl.output.safe` shows rich markup
as written, octipusctl's consoles make even an unescaped value inert, and every event kind
``octipusctl run`` prints, a questionnaire and the daemon's notifications go through them."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from rich.table import Table
from rich.text import Text

from octipusd.ctl import main as ctl
from octipusd.ctl.output import console, err, safe
from octipusd.ctl.questions import print_questionnaire
from octipusd.inert import inert

#: Clear the screen, write the clipboard (OSC 52), a hidden link (OSC 8), a C1 CSI, a carriage
#: return; rich markup (a style, a link) and an emoji code.
HOSTILE = (
    "\x1b[2J\x1b]52;c;aGk=\x07\x1b]8;;https://evil.example/\x1b\\HIDDEN\x1b]8;;\x1b\\\u009b1m\rapproved "
    "[red]OVERWRITE[/] [link=https://evil.example/]CLICKME[/link] :skull:"
)

#: Any text: every category, lone surrogates and control characters included, and markup pieces.
ANY_TEXT = st.lists(
    st.text(st.characters(exclude_categories=()))
    | st.text(st.characters(categories=["Cc", "Cs"]))
    | st.sampled_from(["[bold]", "[/]", "[link=x]", "\\", "\\[", "[", "]", "\r\n", ":skull:", "\x1b[2J"])
).map("".join)


def acting(text: str) -> list[str]:
    """The characters of ``text`` a terminal may act on: controls but newline and tab, surrogates."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cs") and c not in "\n\t"]


@settings(max_examples=500)
@given(ANY_TEXT)
def test_inert_text_holds_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = inert(text)
    assert acting(shown) == [] and "\x1b" not in shown
    assert inert(shown) == shown
    for c in set(acting(text)) - {"\r"}:  # each is shown, visibly (a CR may be a CRLF's)
        assert (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") in shown
    if not acting(text):
        assert shown == text


def test_inert_shows_each_control_as_its_escape() -> None:
    assert inert("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert inert("\x1b]52;c;aGk=\x07") == "\\x1b]52;c;aGk=\\x07"
    assert inert("\u009b31m\x7f\x00") == "\\x9b31m\\x7f\\x00"
    assert inert("one\r\ntwo\rthree\r") == "one\ntwo\\x0dthree\\x0d"
    assert inert("lone \ud800 surrogate") == "lone \\ud800 surrogate"
    kept = "tab\there\nnew line, é, 漢字, 😀, [bold], \\x1b"
    assert inert(kept) == kept


@settings(max_examples=500)
@given(
    ANY_TEXT.map(lambda text: text.replace("\t", " ")),  # rich expands tabs to spaces: not this test's
    st.sampled_from([("[dim]", "[/]"), ("a ", " b"), ("", ""), ("[red]x ", ""), ("", "[bold]y[/]")]),
)
def test_safe_text_is_shown_as_written_wherever_it_stands(text: str, around: tuple[str, str]) -> None:
    with console.capture() as captured:
        console.print(f"{around[0]}{safe(text)}{around[1]}")
    expected = Text.from_markup(f"{around[0]}\x00{around[1]}").plain.replace("\x00", inert(text))
    assert captured.get() == expected + "\n"


@settings(max_examples=300)
@given(
    st.lists(ANY_TEXT.map(lambda text: text.replace("\t", " ")), min_size=2, max_size=3),
    st.sampled_from([("", "", ""), ("[", "", "]"), ("[", " ", "]"), ("a ", "] [", " b")]),
)
def test_safe_values_side_by_side_are_shown_as_written(
    texts: list[str], joints: tuple[str, str, str]
) -> None:
    """Values side by side, or between the format's own brackets: none closes a tag another opened."""
    with console.capture() as captured:
        console.print(joints[0] + joints[1].join(safe(t) for t in texts) + joints[2], markup=True)
    assert captured.get() == joints[0] + joints[1].join(inert(t) for t in texts) + joints[2] + "\n"


def test_a_value_cannot_close_the_tag_another_value_left_open() -> None:
    for first, second in (
        ("abc[/x", "]tail"),
        ("abc[link=https://evil/", "]Approved"),
        ("cli-native:x[reverse", "] rm"),
    ):
        with console.capture() as captured:
            console.print(f"{safe(first)}{safe(second)}")
        assert captured.get() == first + second + "\n"
    with console.capture() as captured:
        console.print(f"[{safe('bold')}] x")
    assert captured.get() == "[bold] x\n"


def test_the_consoles_make_even_unescaped_text_inert(capsys: pytest.CaptureFixture[str]) -> None:
    table = Table("raw cell")
    table.add_row(HOSTILE)  # a value put in without safe(): its markup is read, its escapes are not
    console.print(f"[bold]{HOSTILE}[/]")
    console.print(table)
    err.print(HOSTILE)
    out = capsys.readouterr()
    for written in (out.out, out.err):
        assert acting(written) == [] and "\\x1b[2J" in written, written


def assert_inert(out: str) -> None:
    assert acting(out) == [], out
    assert out.count("OVERWRITE") == out.count("[red]OVERWRITE"), out
    assert out.count("CLICKME") == out.count("[link=https://evil.example/]CLICKME"), out


H = HOSTILE
EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("text", {"text": H}),
    ("thinking", {"text": H}),
    ("tool_use", {"name": H, "input": {"command": H}}),
    ("tool_result", {"content": H, "is_error": True}),
    ("permission_decision", {"tool_id": H, "allowed": False, "reason": H}),
    ("policy_decision", {"tool_id": H, "subject": H, "level": H, "explanation": H, "tier": H}),
    ("flow_guard", {"tool_id": H, "subject": H, "reason": H}),
    ("flow_label", {"tool_id": H, "added": [H], "label": H, "reasons": [H]}),
    ("approval_requested", {"approval_id": "a1", "tool_id": H, "subject": H, "explanation": H}),
    ("approval_requested", {"approval_id": "a1", "kind": "questionnaire", "tool_id": H}),
    ("approval_decided", {"approval_id": "a1", "outcome": "approved", "decided_by": H}),
    ("review_required", {"reason": H}),
    ("run_status", {"status": "failed", "reason": H}),
    ("session", {"session_id": H, "model": H, "mcp_servers": {H: H}}),
    ("result", {"subtype": H, "cost_usd": None}),
    ("notice", {"message": H, "tool": H}),
    ("bridge_call", {"event": H, "tool": H}),
    ("compaction", {"published": False, "reason": H}),
    ("child_spawned", {"child_run_id": "c1", "role": H, "resume_key": H, "retry_of": H}),
    ("child_finished", {"child_run_id": "c1", "status": H, "notes": [H]}),
    ("error", {"message": H, "fatal": True}),
    ("steering_submitted", {"text": H}),
    ("steering_queued", {"text": H}),
    ("steering_delivered", {"text": H}),
    ("plan_feedback", {"action": H, "feedback_id": "f1", "step_id": H, "status": H, "text": H}),
    ("guidance_pending", {"message": H}),
    ("unparsed", {"text": H}),
    ("unknown", {"raw": {"x": H}}),
]


@pytest.mark.parametrize(("kind", "data"), EVENTS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EVENTS)])
def test_every_event_octipusctl_run_prints_is_inert(
    capsys: pytest.CaptureFixture[str], kind: str, data: dict[str, Any]
) -> None:
    ctl._render({"kind": kind, "data": data})
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "x1b" in shown or "u001b" in shown, shown  # the agent's text, visibly (JSON: \u001b)
    assert_inert(shown)


def test_a_questionnaire_shows_the_agents_questions_and_options_inert(
    capsys: pytest.CaptureFixture[str],
) -> None:
    option = {"label": H, "description": H, "preview": f"{H}\n{H}"}
    print_questionnaire([{"question": H, "header": H, "multiSelect": True, "options": [option]}])
    shown = capsys.readouterr().out
    assert shown.count("\\x1b]52;") == 6 and shown.count(":skull:") == 6
    assert_inert(shown)
