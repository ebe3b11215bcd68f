"""Session reuse end to end on the real claude binary (seed 003 "Session reuse" to "Cold fallback").

Each turn goes through octipusd and the real ``claude`` against the scripted Anthropic model. The
scripted model picks its step by the number of assistant turns in a request, so a resumed turn
plays the next step and a cold one (a new vendor conversation) plays step 0 again; what a launch
carried is read from the model requests themselves, from the run's events and from the session
API (``vendor-sessions``, ``messages``, ``checkpoint``, ``clear``, ``compact``).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from octipusd.errors import ApiError
from octipusd.store.repository import Store
from octipusd.testing.anthropic_server import RecordedRequest
from octipusd.testing.schema_mcp import configure, lookup_tools, write_tools
from octipusd.toolkit import RUN_MARKER
from tests.e2e.conftest import Env

ROOT_KEY = "claude-code"
CARRIED_HEADER = "[Octipus] Messages of this conversation you have not seen yet:"
SUMMARY_HEADER = "[Octipus] Summary of the earlier conversation"


def _answer(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _answers(count: int) -> dict[str, Any]:
    """``count`` plain text steps: step ``i`` answers ``answer at step i``."""
    return {"steps": [_answer(f"answer at step {i}") for i in range(count)]}


def _long(marker: str, size: int = 1200) -> str:
    """A prompt of about ``size`` characters that starts with ``marker`` (no other marker inside)."""
    filler = " ".join(f"{marker.lower()}-filler-{i}" for i in range(size // 16))
    return f"{marker} {filler}"[:size]


def _data(env: Env, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == kind]


def _launches(env: Env, run_id: str) -> list[dict[str, Any]]:
    """The run's vendor launches: its ``run_status`` events with status ``running``."""
    return [d for d in _data(env, run_id, "run_status") if d["status"] == "running"]


def _carried(env: Env, run_id: str) -> list[dict[str, Any]]:
    """The run's notices that say what a launch carried."""
    return [d for d in _data(env, run_id, "notice") if "carried" in d]


def _text(request: RecordedRequest) -> str:
    """Every text of a model request's messages (prompt, history, tool results), in order."""
    parts: list[str] = []

    def walk(content: Any) -> None:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    if isinstance(block.get("text"), str):
                        parts.append(block["text"])
                    walk(block.get("content"))

    for message in request.body.get("messages", []):
        walk(message.get("content"))
    return "\n".join(parts)


def _records(env: Env, session: str) -> list[dict[str, Any]]:
    return list(env.client.request("GET", f"/sessions/{session}/vendor-sessions"))


def _root(env: Env, session: str) -> dict[str, Any] | None:
    return next((r for r in _records(env, session) if r["key"] == ROOT_KEY), None)


def _messages(env: Env, session: str, after: int = 0) -> list[dict[str, Any]]:
    return list(env.client.request("GET", f"/sessions/{session}/messages", params={"after": after}))


def _turn(env: Env, session: str, prompt: str) -> tuple[str, dict[str, Any], list[RecordedRequest]]:
    """Post a turn and wait for its end: (run id, final run, the model requests it made)."""
    before = len(env.model.message_requests)
    run_id = env.post(session, prompt)
    final = env.wait_final(run_id)
    return run_id, final, list(env.model.message_requests[before:])


def _ok(final: dict[str, Any]) -> None:
    assert final["status"] == "succeeded", final


def _resumed_once(env: Env, run_id: str, vendor_id: str) -> None:
    """The run made exactly one launch, a resume of ``vendor_id``."""
    [launch] = _launches(env, run_id)
    assert launch["resumed"] is True and f"--resume={vendor_id}" in launch["argv"], launch
    assert not any(a.startswith("--session-id=") for a in launch["argv"]), launch["argv"]


def _cold_once(env: Env, run_id: str) -> str:
    """The run made exactly one launch, cold with a new id; returns that id."""
    [launch] = _launches(env, run_id)
    vendor_id = str(launch["vendor_session_id"])
    assert launch["resumed"] is False and f"--session-id={vendor_id}" in launch["argv"], launch
    assert not any(a.startswith("--resume") for a in launch["argv"]), launch["argv"]
    return vendor_id


def _open_store(env: Env) -> Store:
    return Store.open(f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}")


# ---------------------------------------------------------------------------------- cold fallback


def test_a_really_lost_vendor_session_is_retried_once_cold_and_the_replacement_is_resumed(
    octipus: Callable[..., Env],
) -> None:
    env = octipus(_answers(3))
    session = env.new_session()
    first, second, third = "LOST-ONE what is two plus two?", "LOST-TWO and times three?", "LOST-THREE thanks"
    run1, final1, _ = _turn(env, session, first)
    _ok(final1)
    lost = str(final1["vendor_session_id"])
    # Claude's own transcript of the conversation goes away: `claude --resume` really fails now
    stored = list((env.daemon.home / ".claude" / "projects").glob(f"*/{lost}.jsonl"))
    assert len(stored) == 1, stored
    stored[0].unlink()

    run2, final2, requests2 = _turn(env, session, second)
    _ok(final2)
    launches = _launches(env, run2)
    assert [launch["resumed"] for launch in launches] == [True, False], launches
    assert f"--resume={lost}" in launches[0]["argv"]
    fresh = str(launches[1]["vendor_session_id"])
    assert fresh != lost and f"--session-id={fresh}" in launches[1]["argv"]
    fallbacks = [n for n in _data(env, run2, "notice") if n.get("cold_fallback")]
    assert len(fallbacks) == 1, fallbacks
    assert lost in fallbacks[0]["message"] and "No conversation found" in fallbacks[0]["message"]
    # the failed resume never reached the model; the retry carried turn 1 and turn 2
    assert len(requests2) == 1, [r.body for r in requests2]
    retry = _text(requests2[0])
    assert first in retry and second in retry and "answer at step 0" in retry
    [carried] = _carried(env, run2)
    messages = _messages(env, session)
    assert carried["carried"] == [m["seq"] for m in messages if m["run_id"] == run1]
    assert final2["vendor_session_id"] == fresh and final2["resumed"] is False
    record = _root(env, session)
    assert record is not None and record["vendor_session_id"] == fresh, record

    run3, final3, requests3 = _turn(env, session, third)
    _ok(final3)
    _resumed_once(env, run3, fresh)
    assert final3["vendor_session_id"] == fresh and final3["resumed"] is True
    assert not _carried(env, run3)  # the retry's conversation saw everything
    history = _text(requests3[-1])
    assert first in history and second in history and third in history
    assert final3["result_text"] == "answer at step 1"


# ---------------------------------------------------------------------------------- vendor-assigned id


def _forking_wrapper(tmp_path: Path, claude: Path) -> Path:
    """A claude that forks every resumed conversation into a new session id."""
    wrapper = tmp_path / "claude-fork"
    real = claude.resolve()
    wrapper.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        '  case "$arg" in --resume=*) exec "' + str(real) + '" --fork-session "$@";; esac\n'
        "done\n"
        'exec "' + str(real) + '" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_a_resumed_turn_adopts_the_new_session_id_the_vendor_reports(
    octipus: Callable[..., Env], tmp_path: Path, claude: Path
) -> None:
    env = octipus(_answers(3))
    wrapper = _forking_wrapper(tmp_path, claude)
    env.client.request(
        "POST", "/models", json={"name": "forking", "adapter": ROOT_KEY, "binary": str(wrapper)}
    )
    session = env.new_session(model_row="forking")
    _run1, final1, _ = _turn(env, session, "FORK-ONE hello")
    _ok(final1)
    original = str(final1["vendor_session_id"])
    assert _root(env, session)["vendor_session_id"] == original  # type: ignore[index]

    run2, final2, _ = _turn(env, session, "FORK-TWO again")
    _ok(final2)
    _resumed_once(env, run2, original)
    assert _launches(env, run2)[0]["argv"][0] == str(wrapper)  # the row's binary ran
    forked = str(final2["vendor_session_id"])
    assert forked != original, "the wrapper's --fork-session did not give a new id"
    session_ids = {d.get("session_id") for d in _data(env, run2, "session") if d.get("session_id")}
    assert session_ids == {forked}, session_ids
    assert final2["result_text"] == "answer at step 1"  # the fork holds turn 1
    record = _root(env, session)
    assert record is not None and record["vendor_session_id"] == forked, record

    run3, final3, requests3 = _turn(env, session, "FORK-THREE once more")
    _ok(final3)
    _resumed_once(env, run3, forked)
    history = _text(requests3[-1])
    assert "FORK-ONE" in history and "FORK-TWO" in history
    assert final3["result_text"] == "answer at step 2"


# ---------------------------------------------------------------------------------- moved workspace


def test_a_moved_workspace_starts_cold_before_spawning_and_carries_the_transcript(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    env = octipus(_answers(2))
    workspace, elsewhere = tmp_path / "project", tmp_path / "moved-project"
    workspace.mkdir()
    link = tmp_path / "project-link"
    link.symlink_to(workspace)
    # a session opened through a symlink lives in the real directory
    session = env.new_session(workspace=str(link))
    assert env.client.request("GET", f"/sessions/{session}")["workspace"] == str(workspace.resolve())
    run1, final1, _ = _turn(env, session, "MOVED-ONE remember the number 41")
    _ok(final1)
    old_id = str(final1["vendor_session_id"])
    record = _root(env, session)
    assert record is not None and record["cwd"] == str(workspace.resolve()), record
    old_cwd = record["cwd"]

    # the project moves and leaves a symlink behind: the session's path now resolves elsewhere
    workspace.rename(elsewhere)
    workspace.symlink_to(elsewhere)

    run2, final2, requests2 = _turn(env, session, "MOVED-TWO which number?")
    _ok(final2)
    moved = [n for n in _data(env, run2, "notice") if "workspace moved" in n["message"]]
    assert len(moved) == 1, _data(env, run2, "notice")
    assert f"({old_cwd} -> {elsewhere.resolve()})" in moved[0]["message"], moved
    new_id = _cold_once(env, run2)  # no resume attempt in the old scope first
    assert new_id != old_id and final2["resumed"] is False
    assert not [n for n in _data(env, run2, "notice") if n.get("cold_fallback")]
    assert len(requests2) == 1
    carried = _text(requests2[0])
    assert CARRIED_HEADER in carried
    assert "MOVED-ONE remember the number 41" in carried and "answer at step 0" in carried
    [notice] = _carried(env, run2)
    assert notice["carried"] == [m["seq"] for m in _messages(env, session) if m["run_id"] == run1]
    record = _root(env, session)
    assert record is not None and record["vendor_session_id"] == new_id, record
    assert record["cwd"] == str(elsewhere.resolve())


# ---------------------------------------------------------------------------------- /clear


def test_the_clear_turn_starts_the_next_turn_cold_without_earlier_messages(
    octipus: Callable[..., Env],
) -> None:
    env = octipus(_answers(2))
    session = env.new_session()
    _run1, final1, _ = _turn(env, session, "CLEARED-ONE secret word is marmalade")
    _ok(final1)
    old_id = str(final1["vendor_session_id"])
    assert _root(env, session) is not None

    before = len(env.model.message_requests)
    clear_run, clear_final, clear_requests = _turn(env, session, "/clear")
    _ok(clear_final)
    assert not _launches(env, clear_run) and clear_final["pid"] is None  # claude was not spawned
    assert clear_requests == [] and len(env.model.message_requests) == before
    assert _records(env, session) == []
    assert _messages(env, session) == []

    run2, final2, requests2 = _turn(env, session, "CLEARED-TWO what was the secret word?")
    _ok(final2)
    new_id = _cold_once(env, run2)
    assert new_id != old_id
    assert not _carried(env, run2)
    text = _text(requests2[-1])
    assert "CLEARED-TWO" in text
    assert "CLEARED-ONE" not in text and "marmalade" not in text and "answer at step 0" not in text
    assert [m["run_id"] for m in _messages(env, session)] == [run2, run2]


def test_a_turn_finishing_after_clear_saves_nothing(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [_answer("a fresh answer")],
            "conversations": [{"match": "SLOW-ONE", "steps": [_answer("the slow answer", delay_seconds=4)]}],
        }
    )
    session = env.new_session()
    run1 = env.post(session, "SLOW-ONE take your time")
    env.wait(lambda: len(env.model.message_requests) >= 1, 30, "turn 1's model request")
    cleared = env.client.request("POST", f"/sessions/{session}/clear")
    assert cleared["clear_generation"] == 1
    assert env.run(run1)["status"] == "running"  # the clear did not wait for the turn
    final1 = env.wait_final(run1)
    _ok(final1)
    assert final1["result_text"] == "the slow answer"
    assert _records(env, session) == []
    assert _messages(env, session) == []
    assert any("not kept" in n["message"] for n in _data(env, run1, "notice"))
    store = _open_store(env)
    try:  # nor was the late answer written under the old generation
        old = store.list_messages(session, generation=0)
    finally:
        store.close()
    assert [(m.role, m.run_id) for m in old] == [("user", run1)]

    run2, final2, requests2 = _turn(env, session, "FRESH-TWO hello")
    _ok(final2)
    assert _cold_once(env, run2) != final1["vendor_session_id"]
    assert not _carried(env, run2)
    text = _text(requests2[-1])
    assert "SLOW-ONE" not in text and "the slow answer" not in text
    assert final2["result_text"] == "a fresh answer"


# ---------------------------------------------------------------------------------- unseen messages


def test_a_resume_carries_exactly_the_messages_after_the_cursor(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    script = {
        "steps": [
            _answer("answer at step 0"),
            # the first request at step 1 fails (no retries): turn 2 fails after the vendor saw it
            _answer("answer at step 1", error={"status": 500, "times": 1}),
            _answer("answer at step 2"),
            _answer("answer at step 3"),
        ]
    }
    env = octipus(script)
    workspace = tmp_path / "unseen"
    workspace.mkdir()
    session = env.new_session(workspace=str(workspace))
    _run1, final1, _ = _turn(env, session, "UNSEEN-ONE start")
    _ok(final1)
    vendor_id = str(final1["vendor_session_id"])

    # turn 2: the vendor took the prompt, then its API call failed
    run2, final2, requests2 = _turn(env, session, "UNSEEN-TWO the vendor saw this")
    assert final2["status"] == "failed", final2
    assert len(requests2) == 1 and "UNSEEN-TWO" in _text(requests2[0])
    seq2 = next(m["seq"] for m in _messages(env, session) if m["run_id"] == run2)
    record = _root(env, session)
    assert record is not None and record["vendor_session_id"] == vendor_id
    assert record["cursor"] == seq2, record  # seen, though not answered

    run3, final3, requests3 = _turn(env, session, "UNSEEN-THREE go on")
    _ok(final3)
    _resumed_once(env, run3, vendor_id)
    assert not _carried(env, run3)  # nothing after the cursor: turn 2 is in the vendor's own history
    assert _text(requests3[-1]).count("UNSEEN-TWO") == 1

    # turn 4 fails before anything is spawned: the vendor never sees its prompt
    hidden = tmp_path / "unseen.away"
    workspace.rename(hidden)
    run4, final4, requests4 = _turn(env, session, "UNSEEN-FOUR the vendor never saw this")
    hidden.rename(workspace)
    assert final4["status"] == "failed" and "does not exist" in (final4["reason"] or ""), final4
    assert not _launches(env, run4) and requests4 == []
    cursor = _root(env, session)["cursor"]  # type: ignore[index]

    run5, final5, requests5 = _turn(env, session, "UNSEEN-FIVE and now?")
    _ok(final5)
    _resumed_once(env, run5, vendor_id)
    seq5 = next(m["seq"] for m in _messages(env, session) if m["run_id"] == run5 and m["role"] == "user")
    expected = [m["seq"] for m in _messages(env, session, after=cursor) if m["seq"] < seq5]
    seq4 = next(m["seq"] for m in _messages(env, session) if m["run_id"] == run4)
    assert expected == [seq4]
    [carried] = _carried(env, run5)
    assert carried["carried"] == expected and carried["checkpoint_id"] is None
    text = _text(requests5[-1])
    assert text.count("UNSEEN-FOUR the vendor never saw this") == 1
    assert text.index(CARRIED_HEADER) < text.index("UNSEEN-FOUR") < text.index("UNSEEN-FIVE")
    assert text.count("UNSEEN-TWO") == 1 and text.count("UNSEEN-ONE") == 1
    assert _root(env, session)["cursor"] == seq5 + 1  # type: ignore[index]


# ---------------------------------------------------------------------------------- compaction


def test_compaction_publishes_a_checkpoint_and_the_next_turn_starts_cold_with_it(
    octipus: Callable[..., Env],
) -> None:
    env = octipus(_answers(4))
    session = env.new_session()
    prompts = [_long(f"COMPACT-{n}") for n in ("ONE", "TWO", "THREE")]
    ids = []
    for prompt in prompts:
        _run, final, _ = _turn(env, session, prompt)
        _ok(final)
        ids.append(final["vendor_session_id"])
    assert len(set(ids)) == 1  # one resumed conversation so far
    seqs = [m["seq"] for m in _messages(env, session)]
    assert len(seqs) == 6

    report = env.client.request("POST", f"/sessions/{session}/compact", json={"keep_turns": 1})
    assert report["published"] is True and report["reason"] is None, report
    assert (report["first_seq"], report["through_seq"], report["covered_messages"]) == (seqs[0], seqs[3], 4)
    assert report["summary_chars"] < report["covered_chars"]
    assert ROOT_KEY in report["rotated"]
    assert _root(env, session) is None
    checkpoint = env.client.request("GET", f"/sessions/{session}/checkpoint")
    assert checkpoint["id"] == report["checkpoint_id"] and checkpoint["through_seq"] == seqs[3]

    run4, final4, requests4 = _turn(env, session, "COMPACT-FOUR what now?")
    _ok(final4)
    new_id = _cold_once(env, run4)
    assert new_id != ids[0]
    [carried] = _carried(env, run4)
    assert carried["checkpoint_id"] == report["checkpoint_id"] and carried["carried"] == seqs[4:]
    assert len(requests4) == 1
    text = _text(requests4[0])
    assert SUMMARY_HEADER in text and prompts[2] in text
    summary = text[text.index(SUMMARY_HEADER) : text.index(CARRIED_HEADER)]
    for early in prompts[:2]:  # turns 1 and 2 only inside the summary, shortened
        assert early not in text
        assert text.count(early.split()[0]) == 1 and early.split()[0] in summary
    record = _root(env, session)
    assert record is not None and record["vendor_session_id"] == new_id
    assert record["checkpoint_id"] == report["checkpoint_id"]

    run5, final5, _ = _turn(env, session, "COMPACT-FIVE and then?")
    _ok(final5)
    _resumed_once(env, run5, new_id)
    assert not _carried(env, run5)


def test_the_compact_turn_is_octipus_compaction_not_the_vendors(octipus: Callable[..., Env]) -> None:
    """``/compact`` as a turn compacts through Octipus (the vendor's own /compact would rewrite a
    conversation whose transcript Octipus keeps): no vendor process, a checkpoint, a cold next turn."""
    env = octipus(_answers(3), extra_env={"OCTIPUS_AGENT__COMPACTIONKEEPTURNS": "1"})
    session = env.new_session()
    for marker in ("SLASH-ONE", "SLASH-TWO"):
        _run, final, _ = _turn(env, session, _long(marker))
        _ok(final)
    before = len(env.model.message_requests)
    command, final, _ = _turn(env, session, "/compact")
    _ok(final)
    assert len(env.model.message_requests) == before, "/compact reached the vendor"
    assert _launches(env, command) == [] and final["pid"] is None
    assert final["result_text"].startswith("checkpoint "), final["result_text"]
    checkpoint = env.client.request("GET", f"/sessions/{session}/checkpoint")
    assert final["result_text"].startswith(f"checkpoint {checkpoint['id']} published")
    assert _root(env, session) is None  # rotated
    assert "/compact" not in [m["text"] for m in _messages(env, session)]
    # with words after it, /compact is still Octipus's (the vendor never sees it) and says so
    before = len(env.model.message_requests)
    _cmd, worded, _ = _turn(env, session, "/compact keep the story details")
    _ok(worded)
    assert len(env.model.message_requests) == before
    assert "were not used" in worded["result_text"], worded["result_text"]
    run3, final3, requests3 = _turn(env, session, "SLASH-THREE next")
    _ok(final3)
    _cold_once(env, run3)
    assert SUMMARY_HEADER in _text(requests3[-1])


def test_an_ineffective_compaction_publishes_nothing_and_keeps_the_vendor_session(
    octipus: Callable[..., Env],
) -> None:
    env = octipus({"steps": [_answer("ok"), _answer("ok again")]})
    session = env.new_session()
    _run1, final1, _ = _turn(env, session, "hi")
    _ok(final1)
    vendor_id = str(final1["vendor_session_id"])
    before = _root(env, session)
    report = env.client.request("POST", f"/sessions/{session}/compact", json={"keep_turns": 0})
    assert report["published"] is False and report["checkpoint_id"] is None, report
    assert "not be shorter" in report["reason"] and report["rotated"] == []
    assert _root(env, session) == before
    with pytest.raises(ApiError) as missing:
        env.client.request("GET", f"/sessions/{session}/checkpoint")
    assert missing.value.http_status == 404

    run2, final2, _ = _turn(env, session, "yo")
    _ok(final2)
    _resumed_once(env, run2, vendor_id)
    assert final2["result_text"] == "ok again"


AUTO_COMPACT = {"OCTIPUS_AGENT__COMPACTIONTHRESHOLDCHARS": "200", "OCTIPUS_AGENT__COMPACTIONKEEPTURNS": "1"}


def _compaction_of(env: Env, run_id: str) -> list[dict[str, Any]]:
    """The run's ``compaction`` events; the daemon compacts after the run's final status is stored."""
    return list(env.wait(lambda: _data(env, run_id, "compaction"), 10, f"run {run_id}'s compaction event"))


def test_automatic_compaction_after_the_turn_that_crossed_the_threshold(
    octipus: Callable[..., Env],
) -> None:
    env = octipus(_answers(3), extra_env=AUTO_COMPACT)
    session = env.new_session()
    first, second = _long("AUTO-ONE"), _long("AUTO-TWO")
    run1, final1, _ = _turn(env, session, first)
    _ok(final1)
    # over the threshold, but keeping one turn leaves nothing to summarize: nothing rotates
    [early] = _compaction_of(env, run1)
    assert early["published"] is False and "nothing to compact" in early["reason"], early
    vendor_id = str(final1["vendor_session_id"])
    assert _root(env, session)["vendor_session_id"] == vendor_id  # type: ignore[index]

    run2, final2, _ = _turn(env, session, second)
    _ok(final2)
    _resumed_once(env, run2, vendor_id)
    [compaction] = _compaction_of(env, run2)
    seqs = [m["seq"] for m in _messages(env, session)]
    assert compaction["published"] is True, compaction
    assert (compaction["first_seq"], compaction["through_seq"]) == (seqs[0], seqs[1])
    assert ROOT_KEY in compaction["rotated"] and _root(env, session) is None

    run3, final3, requests3 = _turn(env, session, "AUTO-THREE short")
    _ok(final3)
    assert _cold_once(env, run3) != vendor_id
    [carried] = _carried(env, run3)
    assert carried["checkpoint_id"] == compaction["checkpoint_id"] and carried["carried"] == seqs[2:]
    text = _text(requests3[-1])
    assert f"{SUMMARY_HEADER} (messages {seqs[0]}-{seqs[1]})" in text
    assert second in text and first not in text and "AUTO-ONE" in text


def test_the_compaction_event_reaches_a_client_following_the_turn(octipus: Callable[..., Env]) -> None:
    env = octipus(_answers(1), extra_env=AUTO_COMPACT)
    session = env.new_session()
    run_id = env.post(session, _long("STREAMED-ONE"))
    streamed = [event["kind"] for event in env.client.stream(run_id)]
    assert _compaction_of(env, run_id)  # it is stored on the run ...
    assert "compaction" in streamed, streamed  # ... and reaches the live stream before the final status


# ---------------------------------------------------------------------------------- one live run


def _claude_processes(run_ids: set[str]) -> list[psutil.Process]:
    """Live vendor processes started for one of ``run_ids`` (their environment's run marker)."""
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if proc.environ().get(RUN_MARKER) not in run_ids or proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.Error, OSError):
            continue
        cmdline = proc.info["cmdline"] or []
        if cmdline and "claude" in Path(cmdline[0]).name:
            found.append(proc)
    return found


def test_two_concurrent_follow_ups_never_share_a_vendor_process(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [],
            "conversations": [
                {
                    "match": "BUSY-ONE",
                    "steps": [_answer("slow first answer", delay_seconds=3), _answer("second answer")],
                }
            ],
        }
    )
    session = env.new_session()
    run1 = env.post(session, "BUSY-ONE take a while")
    with pytest.raises(ApiError) as refused:
        env.post(session, "BUSY-TWO right away")
    assert refused.value.http_status == 409 and run1 in refused.value.message
    env.wait(lambda: len(env.model.message_requests) >= 1, 30, "turn 1's model request")
    runs = env.client.request("GET", "/runs", params={"session_id": session})
    assert [r["id"] for r in runs] == [run1]  # the refused turn created no run
    vendors = _claude_processes({run1})
    assert len(vendors) == 1, [p.info for p in vendors]
    assert vendors[0].pid == env.run(run1)["pid"]
    final1 = env.wait_final(run1)
    _ok(final1)
    env.wait(lambda: not _claude_processes({run1}), 10, "turn 1's vendor process to exit")

    run2, final2, _ = _turn(env, session, "BUSY-TWO now")
    _ok(final2)
    _resumed_once(env, run2, str(final1["vendor_session_id"]))
    assert final2["result_text"] == "second answer"


# ---------------------------------------------------------------------------------- usage


def test_usage_of_a_resumed_turn_is_its_own(octipus: Callable[..., Env]) -> None:
    first = {
        "input_tokens": 1100,
        "output_tokens": 220,
        "cache_creation_input_tokens": 33,
        "cache_read_input_tokens": 44,
    }
    second = {
        "input_tokens": 305,
        "output_tokens": 17,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 900,
    }
    env = octipus({"steps": [_answer("first", usage=first), _answer("second", usage=second)]})
    session = env.new_session()
    _run1, final1, _ = _turn(env, session, "USAGE-ONE")
    _ok(final1)
    run2, final2, requests2 = _turn(env, session, "USAGE-TWO")
    _ok(final2)
    _resumed_once(env, run2, str(final1["vendor_session_id"]))
    assert len(requests2) == 1
    for name, value in first.items():
        assert final1[name] == value, (name, final1)
    for name, value in second.items():
        assert final2[name] == value, (name, final2)
    assert final2["usage_estimated"] is False


# ---------------------------------------------------------------------------------- tool schemas


SCHEMA_TOOL = "mcp__octipus__schema__lookup"


def _offered(request: RecordedRequest, name: str) -> dict[str, Any]:
    """The tool ``name`` as a model request offered it to the model."""
    return next(t for t in request.body["tools"] if t.get("name") == name)


def test_a_changed_tool_schema_starts_a_new_vendor_conversation_and_says_why(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """Seed 003: a root's fingerprint covers the full tool schemas (issue 14 item 6). The same
    schemas resume; a changed description, then a changed input schema, of one connector tool
    start a new Claude conversation, with a notice naming the tool schemas."""
    env = octipus(_answers(3))
    tools_file = tmp_path / "schema-tools.json"
    configure(env.daemon.root / "config" / "octipus" / "config.toml", tools_file, lookup_tools())
    session = env.new_session()
    _run1, final1, requests1 = _turn(env, session, "SCHEMA-ONE hello")
    _ok(final1)
    first = str(final1["vendor_session_id"])
    assert _offered(requests1[-1], SCHEMA_TOOL)["description"] == "Look a word up."

    run2, final2, _ = _turn(env, session, "SCHEMA-TWO same tools")
    _ok(final2)
    _resumed_once(env, run2, first)
    assert not [n for n in _data(env, run2, "notice") if "changed" in n["message"]]

    write_tools(tools_file, lookup_tools("Look a word up in the dictionary."))
    run3, final3, requests3 = _turn(env, session, "SCHEMA-THREE new description")
    _ok(final3)
    second = _cold_once(env, run3)
    assert second != first
    changed = [n["message"] for n in _data(env, run3, "notice") if "changed" in n["message"]]
    assert changed == ["the tool schemas changed; starting a new vendor conversation"], changed
    assert _offered(requests3[-1], SCHEMA_TOOL)["description"] == "Look a word up in the dictionary."
    assert "SCHEMA-ONE hello" in _text(requests3[-1])  # the new conversation carries the transcript
    assert _root(env, session)["vendor_session_id"] == second  # type: ignore[index]

    run4, final4, _ = _turn(env, session, "SCHEMA-FOUR same again")
    _ok(final4)
    _resumed_once(env, run4, second)

    write_tools(tools_file, lookup_tools("Look a word up in the dictionary.", limit={"type": "integer"}))
    run5, final5, requests5 = _turn(env, session, "SCHEMA-FIVE new argument")
    _ok(final5)
    third = _cold_once(env, run5)
    assert third not in (first, second)
    changed = [n["message"] for n in _data(env, run5, "notice") if "changed" in n["message"]]
    assert changed == ["the tool schemas changed; starting a new vendor conversation"], changed
    assert "limit" in _offered(requests5[-1], SCHEMA_TOOL)["input_schema"]["properties"]
