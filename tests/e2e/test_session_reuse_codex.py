"""Session reuse on the real Codex CLI (0.171.0), end to end through octipusd (seed 003 "Session
reuse" .. "Resuming child sessions per role and task").

Every test drives the real ``codex`` binary (``app-server`` by default, ``exec`` where the
session's options select it) against the scripted Responses model, through a real daemon:

* a rollout file lost between turns (app-server and exec): one cold retry with the full prompt,
  the replacement thread saved and resumed next;
* answers from another provider (Claude Code, against the scripted Anthropic model in the same
  daemon) carried into a resumed Codex thread, and only those;
* compaction rotating the Codex record: the next turn starts a new thread from the checkpoint;
* a keyed child (``codex::root>coding:t1``) resumed across root turns, another role cold;
* per-turn usage after a cold fallback.

A cold launch starts a new Codex thread whose first request holds no assistant turn, so the
scripted model would replay step 0; each new thread is therefore given its own scripted
conversation, chosen by a marker only its opening prompt holds (the "[Octipus] ..." headers the
daemon renders, or a child's brief).

Run: ``scripts/netns .venv/bin/python -m pytest tests/e2e/test_session_reuse_codex.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from octipusd.ctl.client import Client
from octipusd.errors import ApiError
from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.conformance import ModelServer, Octipus, Step
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.kit_codex import CodexKit, require_codex
from octipusd.testing.responses_server import RecordedRequest, ScriptedResponsesServer
from octipusd.testing.schema_mcp import configure, lookup_tools, write_tools

#: Header of the messages a launch carries (octipusd.runtime.transcript).
UNSEEN_HEADER = "[Octipus] Messages of this conversation you have not seen yet:"
CURRENT_HEADER = "[Octipus] The current message:"
SUMMARY_HEADER = "[Octipus] Summary of the earlier conversation"


@pytest.fixture(autouse=True)
def _codex_installed() -> None:
    require_codex()


# ----------------------------------------------------------------------------- fixtures


class ScriptedCodexKit(CodexKit):
    """:class:`CodexKit` with script conversations (one per Codex thread a test starts) and a
    chosen transport."""

    def __init__(self, conversations: list[dict[str, Any]] | None = None, *, transport: str = "app-server"):
        self.conversations = conversations or []
        self.transport = transport

    def start_model(self, steps: list[Step]) -> ModelServer:
        return ScriptedResponsesServer({"steps": steps, "conversations": self.conversations}).start()

    def session_options(self) -> dict[str, Any]:
        return {"options": {"transport": "exec"}} if self.transport == "exec" else {}


class Env(Octipus):
    """A scripted Codex model plus a real daemon, with the helpers the tests share.

    With ``claude_steps`` the same daemon also serves Claude Code: its HOME holds Claude's
    ``settings.json`` pointing at a scripted Anthropic model and Codex's ``config.toml`` pointing
    at the scripted Responses model, so one session can move between the two adapters.
    """

    def __init__(
        self, kit: ScriptedCodexKit, root: Path, steps: list[Step], claude_steps: list[Step] | None = None
    ) -> None:
        self.kit = kit
        self.model = kit.start_model(steps)
        self.claude: ScriptedAnthropicServer | None = None
        try:
            if claude_steps is not None:
                self.claude = ScriptedAnthropicServer({"steps": claude_steps}).start()
            home = root / "home"
            home.mkdir(parents=True, exist_ok=True)
            extra = kit.daemon_env(home, self.model)
            self.codex_home = Path(extra["CODEX_HOME"])
            anthropic_url = self.claude.base_url if self.claude is not None else "http://127.0.0.1:9"
            self.daemon = DaemonHarness(root, anthropic_url, extra_env=extra)
        except BaseException:
            self.model.close()
            if self.claude is not None:
                self.claude.close()
            raise
        self.client: Client = self.daemon.client()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.claude is not None:
                self.claude.close()

    @property
    def responses(self) -> ScriptedResponsesServer:
        assert isinstance(self.model, ScriptedResponsesServer)
        return self.model

    def post(self, session_id: str, prompt: str) -> str:
        """Post a turn once the session's previous run has left the live set (its final status
        is stored a moment before the daemon forgets it)."""

        def attempt() -> str | None:
            try:
                return Octipus.post(self, session_id, prompt)
            except ApiError as exc:
                if "already has a live run" in str(exc):
                    return None
                raise

        return str(self.wait(attempt, 30, f"session {session_id} to take a turn"))

    def turn(self, session_id: str, prompt: str) -> dict[str, Any]:
        """Post a turn, wait for its end; it must succeed."""
        final = self.wait_final(self.post(session_id, prompt))
        assert final["status"] == "succeeded", (final, self.daemon.log()[-4000:])
        return final

    def vendor_sessions(self, session_id: str) -> dict[str, dict[str, Any]]:
        """The session's stored vendor records by key."""
        records = self.client.request("GET", f"/sessions/{session_id}/vendor-sessions")
        return {r["key"]: r for r in records}

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.client.request("GET", f"/sessions/{session_id}/messages"))

    def launches(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``run_status: running`` events (one per vendor invocation)."""
        return [d for d in self.kinds(run_id, "run_status") if d["status"] == "running"]

    def carried(self, run_id: str) -> list[dict[str, Any]]:
        """The run's notices about what its launch carries."""
        return [d for d in self.kinds(run_id, "notice") if "carried" in d]

    def fallbacks(self, run_id: str) -> list[dict[str, Any]]:
        return [d for d in self.kinds(run_id, "notice") if d.get("cold_fallback")]

    def requests_of(self, thread: str) -> list[RecordedRequest]:
        """The model requests Codex made on ``thread``."""
        return [r for r in self.responses.message_requests if _thread_of_request(r) == thread]


def _thread_of_request(request: RecordedRequest) -> str | None:
    metadata = request.headers.get("x-codex-turn-metadata")
    return str(json.loads(metadata)["thread_id"]) if metadata else None


def _texts(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def _user_prompts(request: RecordedRequest) -> list[str]:
    """The user prompt items of a Codex request (not its ``<environment_context>`` items)."""
    items = request.body.get("input") if isinstance(request.body, dict) else None
    prompts = []
    for item in items or []:
        if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "user":
            text = _texts(item)
            if not text.lstrip().startswith("<environment_context>"):
                prompts.append(text)
    return prompts


def _rollout(codex_home: Path, thread: str) -> Path:
    """The rollout file of ``thread`` (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl``)."""
    (path,) = sorted(codex_home.glob(f"sessions/*/*/*/rollout-*-{thread}.jsonl"))
    return path


def _text(text: str, usage: Mapping[str, int] | None = None) -> Step:
    step: Step = {"content": [{"type": "text", "text": text}]}
    if usage is not None:
        step["usage"] = dict(usage)
    return step


def _long(label: str, n: int = 12) -> str:
    """A message long enough that the extractive summary (280 characters per message) is shorter."""
    return " ".join(f"{label}-{i} lorem ipsum dolor sit amet consectetur" for i in range(n))


# ----------------------------------------------------------------------------- 1, 2, 6


def _lose_rollout_then_fall_back(env: Env, steps_text: tuple[str, str, str]) -> dict[str, Any]:
    """Turn 1, delete its thread's rollout file, turn 2 (cold fallback), turn 3 (resume).

    Returns the three final runs (``first``, ``second``, ``third``) and turn 2's run id (``second_run``).
    """
    first_prompt, second_prompt, third_prompt = (
        "remember the code word PAPAYA",
        "now also remember MANGO",
        "which code words do you have?",
    )
    session = env.new_session()
    first = env.turn(session, first_prompt)
    assert first["resumed"] is False
    lost_thread = first["vendor_session_id"]
    assert lost_thread and env.vendor_sessions(session)["codex"]["vendor_session_id"] == lost_thread
    rollout = _rollout(env.codex_home, lost_thread)
    rollout.unlink()

    second_run = env.post(session, second_prompt)
    second = env.wait_final(second_run)
    assert second["status"] == "succeeded", (second, env.daemon.log()[-4000:])
    assert second["result_text"] == steps_text[1], second
    new_thread = second["vendor_session_id"]
    assert second["resumed"] is False and new_thread and new_thread != lost_thread, second

    # exactly one cold retry: two launches, the first resuming the lost thread
    launches = env.launches(second_run)
    assert [(d["resumed"], d["vendor_session_id"]) for d in launches] == [
        (True, lost_thread),
        (False, None),
    ], launches
    (fallback,) = env.fallbacks(second_run)
    assert lost_thread in fallback["message"], fallback
    # the resumed attempt never reached the model; the retry made the turn's only request
    assert len(env.requests_of(lost_thread)) == 1, "the lost thread got a request in turn 2"
    (retry,) = env.requests_of(new_thread)
    prompts = _user_prompts(retry)
    assert len(prompts) == 1, prompts
    carried = prompts[0]
    assert UNSEEN_HEADER in carried and CURRENT_HEADER in carried, carried
    assert first_prompt in carried and steps_text[0] in carried, carried
    assert carried.rstrip().endswith(f"{CURRENT_HEADER}\n{second_prompt}"), carried
    (notice,) = env.carried(second_run)
    assert notice["carried"] == [1, 2] and notice["checkpoint_id"] is None, notice
    # the replacement thread is stored (cursor: turn 2's answer), never the lost one
    record = env.vendor_sessions(session)["codex"]
    assert record["vendor_session_id"] == new_thread and record["cursor"] == 4, record
    assert [e["session_id"] for e in env.kinds(second_run, "session")] == [new_thread]

    third_run = env.post(session, third_prompt)
    third = env.wait_final(third_run)
    assert third["status"] == "succeeded", (third, env.daemon.log()[-4000:])
    assert third["resumed"] is True and third["vendor_session_id"] == new_thread, third
    assert third["result_text"] == steps_text[2], third
    assert env.carried(third_run) == [] and env.fallbacks(third_run) == []
    resumed = env.requests_of(new_thread)
    assert len(resumed) == 2
    # the resumed thread holds the carried history; the new launch sends only the turn's text
    assert _user_prompts(resumed[-1]) == [carried, third_prompt], _user_prompts(resumed[-1])
    assert env.vendor_sessions(session)["codex"]["vendor_session_id"] == new_thread
    return {"first": first, "second": second, "third": third, "second_run": second_run}


#: The retry's thread opens with the carried messages: its own scripted conversation.
COLD_RETRY = UNSEEN_HEADER


@pytest.mark.parametrize("transport", ["app-server", "exec"])
def test_lost_rollout_is_retried_cold_once_and_the_new_thread_resumed(transport: str, tmp_path: Path) -> None:
    """Tests 1 and 2: the thread's rollout file is deleted between turns. Turn 2 resumes it, Codex
    says it is gone (app-server: JSON-RPC -32600; exec: rc 1, stderr, empty stdout), and the daemon
    retries once cold with turn 1's prompt and answer and turn 2's prompt; the replacement thread
    is stored, and turn 3 resumes it."""
    answers = ("PAPAYA noted", "MANGO noted too", "PAPAYA and MANGO")
    kit = ScriptedCodexKit(
        [{"match": COLD_RETRY, "steps": [_text(answers[1]), _text(answers[2])]}], transport=transport
    )
    env = Env(kit, tmp_path, [_text(answers[0])])
    try:
        env.start()
        runs = _lose_rollout_then_fall_back(env, answers)
        if transport == "exec":
            # exec's failed resume printed nothing on stdout: no vendor event of the first attempt
            events = env.events(runs["second_run"])
            kinds = [e["kind"] for e in events]
            first_launch = next(i for i, e in enumerate(events) if e["kind"] == "run_status")
            retry = next(
                i for i, e in enumerate(events) if e["kind"] == "notice" and e["data"].get("cold_fallback")
            )
            between = [k for k in kinds[first_launch + 1 : retry] if k not in ("notice", "run_status")]
            assert between == [], between
            argv = env.launches(runs["second_run"])[0]["argv"]
            assert "exec" in argv and "resume" in argv and runs["first"]["vendor_session_id"] in argv, argv
    finally:
        env.close()


@pytest.mark.parametrize("transport", ["app-server", "exec"])
def test_usage_after_a_cold_fallback_is_per_turn(transport: str, tmp_path: Path) -> None:
    """Test 6: the retried turn's usage is its own (not the failed attempt's, not turn 1's); the
    next turn on the replacement thread is not the thread's cumulative total (exec reports usage
    cumulative per thread across resumes, observed.md §2.3)."""
    answers = ("PAPAYA noted", "MANGO noted too", "PAPAYA and MANGO")
    kit = ScriptedCodexKit(
        [
            {
                "match": COLD_RETRY,
                "steps": [
                    _text(answers[1], {"input_tokens": 500, "output_tokens": 50}),
                    _text(answers[2], {"input_tokens": 700, "output_tokens": 70}),
                ],
            }
        ],
        transport=transport,
    )
    env = Env(kit, tmp_path, [_text(answers[0], {"input_tokens": 300, "output_tokens": 30})])
    try:
        env.start()
        runs = _lose_rollout_then_fall_back(env, answers)
        usage = [(runs[k]["input_tokens"], runs[k]["output_tokens"]) for k in ("first", "second", "third")]
        assert usage == [(300, 30), (500, 50), (700, 70)], usage
    finally:
        env.close()


@pytest.mark.parametrize("transport", ["app-server", "exec"])
def test_each_turns_events_carry_its_own_usage(transport: str, tmp_path: Path) -> None:
    """Three turns on one thread: exec prints the thread's cumulative totals (turn 3: the whole
    thread's tokens, observed.md §2.3), yet the stored usage and result events of each turn, like its
    stored run, carry that turn's own figures (the adapter subtracts the thread's earlier usage)."""
    figures = [(300, 30), (500, 50), (700, 70)]
    steps = [
        _text(f"answer {i}", {"input_tokens": a, "output_tokens": b}) for i, (a, b) in enumerate(figures)
    ]
    env = Env(ScriptedCodexKit(transport=transport), tmp_path, steps)
    try:
        env.start()
        session = env.new_session()
        runs = [env.turn(session, f"turn {i}") for i in range(3)]
        assert [r["resumed"] for r in runs] == [False, True, True]
        assert len({r["vendor_session_id"] for r in runs}) == 1, runs
        for run, (input_tokens, output_tokens) in zip(runs, figures, strict=True):
            assert (run["input_tokens"], run["output_tokens"]) == (input_tokens, output_tokens), run
            usage = [e["usage"] for e in env.kinds(run["id"], "usage")]
            assert sum(u["input_tokens"] + u["cache_read_input_tokens"] for u in usage) == input_tokens, usage
            assert sum(u["output_tokens"] for u in usage) == output_tokens, usage
            (result,) = env.kinds(run["id"], "result")
            reported = result["usage"]
            assert reported["input_tokens"] + reported["cache_read_input_tokens"] == input_tokens, result
            assert reported["output_tokens"] == output_tokens, result
    finally:
        env.close()


# ----------------------------------------------------------------------------- 3


def test_answers_from_another_provider_are_carried_into_the_resumed_thread(tmp_path: Path) -> None:
    """Test 3: one daemon serves Codex and Claude Code. A model row used by the session moves
    codex -> claude-code -> codex (PATCH /v1/models; linked sessions follow the row's adapter).
    Turn 2 on Claude starts cold and carries turn 1; turn 3 resumes the Codex thread of turn 1
    and carries exactly what it has not seen: turn 2's prompt and Claude's answer."""
    prompts = ("remember the code word PAPAYA", "and also KIWI, please", "which code words do you have?")
    env = Env(
        ScriptedCodexKit(),
        tmp_path,
        [_text("PAPAYA noted (codex)"), _text("PAPAYA and KIWI (codex)")],
        claude_steps=[_text("KIWI noted (claude)")],
    )
    try:
        env.start()
        row = env.client.request("POST", "/models", json={"name": "swap-row", "adapter": "codex"})
        session = env.new_session(model_row="swap-row")

        first = env.turn(session, prompts[0])
        thread = first["vendor_session_id"]
        assert first["resumed"] is False and thread

        env.client.request("PATCH", "/models/swap-row", json={"adapter": "claude-code"})
        assert env.client.request("GET", f"/sessions/{session}")["adapter"] == "claude-code"
        second_run = env.post(session, prompts[1])
        second = env.wait_final(second_run)
        assert second["status"] == "succeeded", (second, env.daemon.log()[-4000:])
        assert second["resumed"] is False and second["result_text"] == "KIWI noted (claude)", second
        assert env.claude is not None
        (claude_request,) = env.claude.message_requests
        claude_text = json.dumps(claude_request.body)
        assert prompts[0] in claude_text and "PAPAYA noted (codex)" in claude_text, claude_text[-3000:]
        (notice,) = env.carried(second_run)
        assert notice["carried"] == [1, 2], notice
        assert len(env.responses.message_requests) == 1, "turn 2 must not reach the Codex model"

        env.client.request("PATCH", f"/models/{row['id']}", json={"adapter": "codex"})
        third_run = env.post(session, prompts[2])
        third = env.wait_final(third_run)
        assert third["status"] == "succeeded", (third, env.daemon.log()[-4000:])
        assert third["resumed"] is True and third["vendor_session_id"] == thread, third
        assert third["result_text"] == "PAPAYA and KIWI (codex)", third
        (notice,) = env.carried(third_run)
        assert notice["carried"] == [3, 4], notice
        resumed = env.responses.message_requests[-1]
        assert _thread_of_request(resumed) == thread
        *earlier, launch = _user_prompts(resumed)
        assert earlier == [prompts[0]], earlier
        expected = (
            f"{UNSEEN_HEADER}\n--- user (message 3) ---\n{prompts[1]}\n"
            f"--- assistant (claude-code) (message 4) ---\nKIWI noted (claude)\n\n"
            f"{CURRENT_HEADER}\n{prompts[2]}"
        )
        assert launch == expected, launch
        assert prompts[0] not in launch and "PAPAYA noted" not in launch
        records = env.vendor_sessions(session)
        assert records["codex"]["vendor_session_id"] == thread and records["codex"]["cursor"] == 6, records
        assert records["claude-code"]["vendor_session_id"] == second["vendor_session_id"], records
        roles = [(m["seq"], m["role"], m["adapter"]) for m in env.messages(session)]
        assert roles == [
            (1, "user", None),
            (2, "assistant", "codex"),
            (3, "user", None),
            (4, "assistant", "claude-code"),
            (5, "user", None),
            (6, "assistant", "codex"),
        ], roles
    finally:
        env.close()


# ----------------------------------------------------------------------------- 4


def test_compaction_rotates_the_codex_record(tmp_path: Path) -> None:
    """Test 4: after 3 turns, compact keeping 1 turn: a checkpoint is published and the Codex
    record dropped; the next turn starts a new thread carrying the checkpoint summary and the kept
    turn; the turn after it resumes the new thread."""
    prompts = [_long(f"prompt{i}") for i in range(1, 4)]
    answers = [_long(f"answer{i}") for i in range(1, 4)]
    kit = ScriptedCodexKit([{"match": SUMMARY_HEADER, "steps": [_text("answer four"), _text("answer five")]}])
    env = Env(kit, tmp_path, [_text(a) for a in answers])
    try:
        env.start()
        session = env.new_session()
        runs = [env.turn(session, p) for p in prompts]
        thread = runs[0]["vendor_session_id"]
        assert [r["vendor_session_id"] for r in runs] == [thread] * 3
        assert [r["resumed"] for r in runs] == [False, True, True]

        report = env.client.request("POST", f"/sessions/{session}/compact", json={"keep_turns": 1})
        assert report["published"] is True, report
        assert (report["first_seq"], report["through_seq"], report["covered_messages"]) == (1, 4, 4), report
        assert "codex" in report["rotated"], report
        assert "codex" not in env.vendor_sessions(session)
        checkpoint = env.client.request("GET", f"/sessions/{session}/checkpoint")
        assert checkpoint["id"] == report["checkpoint_id"]

        fourth_run = env.post(session, "fourth question")
        fourth = env.wait_final(fourth_run)
        assert fourth["status"] == "succeeded", (fourth, env.daemon.log()[-4000:])
        new_thread = fourth["vendor_session_id"]
        assert fourth["resumed"] is False and new_thread and new_thread != thread, fourth
        assert fourth["result_text"] == "answer four"
        (notice,) = env.carried(fourth_run)
        assert notice["checkpoint_id"] == report["checkpoint_id"] and notice["carried"] == [5, 6], notice
        (request,) = env.requests_of(new_thread)
        (launch,) = _user_prompts(request)
        assert launch.startswith(f"{SUMMARY_HEADER} (messages 1-4):\n{checkpoint['summary']}"), launch
        assert prompts[2] in launch and answers[2] in launch, launch
        assert prompts[0] not in launch  # summarized, not carried verbatim
        assert launch.endswith(f"{CURRENT_HEADER}\nfourth question"), launch
        assert env.vendor_sessions(session)["codex"]["vendor_session_id"] == new_thread

        fifth_run = env.post(session, "fifth question")
        fifth = env.wait_final(fifth_run)
        assert fifth["status"] == "succeeded", (fifth, env.daemon.log()[-4000:])
        assert fifth["resumed"] is True and fifth["vendor_session_id"] == new_thread, fifth
        assert fifth["result_text"] == "answer five"
        assert env.carried(fifth_run) == []
        assert _user_prompts(env.requests_of(new_thread)[-1]) == [launch, "fifth question"]
        assert len(env.requests_of(thread)) == 3  # the old thread was never used again
    finally:
        env.close()


# ----------------------------------------------------------------------------- 5


def _spawn(role: str, brief: str, key: str) -> Step:
    return CodexKit().bridge_call("spawn_child", {"role": role, "brief": brief, "resumeKey": key})


def test_keyed_child_resumes_across_root_turns(tmp_path: Path) -> None:
    """Test 5: the root spawns a coding child with resumeKey t1 in two turns; the second child
    resumes the first one's Codex thread (key ``codex::root>coding:t1``) and gets only its new
    brief. A review child with the same task id is another key and starts cold."""
    coding_briefs = ("CODING-CHILD-T1 write the parser", "CODING-CHILD-T1 now add tests")
    review_brief = "REVIEW-CHILD-T1 review the parser"
    root_steps = [
        _spawn("coding", coding_briefs[0], "t1"),
        _text("root turn one done"),
        _spawn("coding", coding_briefs[1], "t1"),
        _spawn("review", review_brief, "t1"),
        _text("root turn two done"),
    ]
    kit = ScriptedCodexKit(
        [
            {"match": "CODING-CHILD-T1", "steps": [_text("parser written"), _text("tests added")]},
            {"match": "REVIEW-CHILD-T1", "steps": [_text("no problems found")]},
        ]
    )
    env = Env(kit, tmp_path, root_steps)
    try:
        env.start()
        # spawn_child asks by default: allow it, so the turns run unattended
        env.client.request("POST", "/rules", json={"level": "allow", "rule": "spawn_child"})
        session = env.new_session()

        def children(run_id: str) -> list[dict[str, Any]]:
            return [env.run(d["child_run_id"]) for d in env.kinds(run_id, "child_finished")]

        first = env.turn(session, "delegate the parser")
        assert first["result_text"] == "root turn one done"
        (coding_one,) = children(first["id"])
        assert coding_one["status"] == "succeeded", coding_one["reason"]
        assert coding_one["role"] == "coding" and coding_one["resume_key"] == "root>coding:t1"
        assert coding_one["resumed"] is False and coding_one["result_text"] == "parser written"
        child_thread = coding_one["vendor_session_id"]
        assert child_thread and child_thread != first["vendor_session_id"]
        records = env.vendor_sessions(session)
        assert records["codex::root>coding:t1"]["vendor_session_id"] == child_thread, records

        second = env.turn(session, "delegate the tests and a review")
        assert second["resumed"] is True and second["vendor_session_id"] == first["vendor_session_id"]
        assert second["result_text"] == "root turn two done"
        coding_two, review = children(second["id"])
        assert coding_two["status"] == "succeeded", coding_two["reason"]
        assert coding_two["resumed"] is True and coding_two["vendor_session_id"] == child_thread, coding_two
        assert coding_two["resume_key"] == "root>coding:t1" and coding_two["result_text"] == "tests added"
        # the resumed child's thread holds its first brief; the launch sends only the new one
        child_request = env.requests_of(child_thread)[-1]
        assert _user_prompts(child_request) == list(coding_briefs), _user_prompts(child_request)
        assert review["status"] == "succeeded", review["reason"]
        assert review["role"] == "review" and review["resume_key"] == "root>review:t1"
        assert review["resumed"] is False and review["result_text"] == "no problems found"
        assert review["vendor_session_id"] not in (child_thread, first["vendor_session_id"])
        assert _user_prompts(env.requests_of(review["vendor_session_id"])[0]) == [review_brief]
        records = env.vendor_sessions(session)
        assert records["codex::root>coding:t1"]["vendor_session_id"] == child_thread, records
        assert records["codex::root>review:t1"]["vendor_session_id"] == review["vendor_session_id"], records
        assert records["codex"]["vendor_session_id"] == first["vendor_session_id"], records
    finally:
        env.close()


# ----------------------------------------------------------------------------- tool schemas


@pytest.mark.parametrize("transport", ["app-server", "exec"])
def test_a_changed_tool_schema_starts_a_new_codex_thread_and_says_why(transport: str, tmp_path: Path) -> None:
    """Seed 003: a root's fingerprint covers the full tool schemas (issue 14 item 6). The same
    schemas resume the Codex thread; a changed description, then a changed input schema, of one
    connector tool start a new thread, with a notice naming the tool schemas."""
    # a new thread opens with the transcript it carries: its own scripted conversation
    kit = ScriptedCodexKit(
        [{"match": UNSEEN_HEADER, "steps": [_text("cold"), _text("resumed")]}], transport=transport
    )
    env = Env(kit, tmp_path, [_text("first"), _text("second")])
    try:
        tools_file = tmp_path / "schema-tools.json"
        configure(env.daemon.root / "config" / "octipus" / "config.toml", tools_file, lookup_tools())
        env.start()
        session = env.new_session()

        def changed(run_id: str) -> list[str]:
            return [d["message"] for d in env.kinds(run_id, "notice") if "changed" in d["message"]]

        first = env.turn(session, "SCHEMA-ONE hello")
        thread = first["vendor_session_id"]
        assert first["resumed"] is False and thread
        assert "Look a word up." in str(env.requests_of(thread)[-1].body.get("tools"))

        second = env.turn(session, "SCHEMA-TWO same tools")
        assert second["resumed"] is True and second["vendor_session_id"] == thread, second
        assert changed(second["id"]) == []

        write_tools(tools_file, lookup_tools("Look a word up in the dictionary."))
        third = env.turn(session, "SCHEMA-THREE new description")
        new_thread = third["vendor_session_id"]
        assert third["resumed"] is False and new_thread and new_thread != thread, third
        assert [(d["resumed"], d["vendor_session_id"]) for d in env.launches(third["id"])] == [(False, None)]
        assert changed(third["id"]) == ["the tool schemas changed; starting a new vendor conversation"]
        assert "Look a word up in the dictionary." in str(env.requests_of(new_thread)[-1].body.get("tools"))
        assert env.vendor_sessions(session)["codex"]["vendor_session_id"] == new_thread

        fourth = env.turn(session, "SCHEMA-FOUR same again")
        assert fourth["resumed"] is True and fourth["vendor_session_id"] == new_thread, fourth

        write_tools(tools_file, lookup_tools("Look a word up in the dictionary.", limit={"type": "integer"}))
        fifth = env.turn(session, "SCHEMA-FIVE new argument")
        assert fifth["resumed"] is False and fifth["vendor_session_id"] not in (thread, new_thread), fifth
        assert changed(fifth["id"]) == ["the tool schemas changed; starting a new vendor conversation"]
        assert '"limit"' in json.dumps(env.requests_of(fifth["vendor_session_id"])[-1].body.get("tools"))
    finally:
        env.close()
