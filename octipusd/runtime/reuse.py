"""Session reuse of one run: its reuse key, what its launch carries, and what it saves.

Seed 003 "Session reuse" to "Resuming child sessions per role and task": the session's messages
are kept (``session_messages``); a resumed launch carries the messages after the vendor record's
acknowledged cursor, a cold one the latest checkpoint plus every message after it. A root run's
reuse key is its adapter's name; a keyed child's is its scoped lineage key, claimed in memory so
two live children never share a vendor conversation; a pipeline stage worker's is its attempt's
key (:func:`stage_key`), claimed the same way. ``/clear`` starts a new clear generation: nothing an
older turn saves afterwards is kept.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from octipusd.adapter import Adapter
from octipusd.errors import OctipusError
from octipusd.runtime.children import MAX_CHILD_SESSIONS, child_scope
from octipusd.runtime.outcome import result_failed
from octipusd.runtime.sessions import ResumePlan
from octipusd.runtime.steering import store_guidance
from octipusd.runtime.transcript import LaunchPrompt, render_launch_prompt
from octipusd.store.aio import in_thread
from octipusd.store.records import Checkpoint, SessionMessage, VendorSession
from octipusd.store.reuse_store import RootVendorSave

if TYPE_CHECKING:
    from octipusd.runtime.planning import TurnPlan
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = [
    "ReuseState",
    "keep_confirmed",
    "launch_prompt",
    "resumable",
    "reuse_key",
    "save_session",
    "stage_key",
    "stage_lineage",
]

log = logging.getLogger("octipusd.runtime")


@dataclass
class ReuseState:
    """What the run resumes and may save, updated by a cold retry.

    Attributes:
        plan: The turn's frozen plan (its fingerprint is what a save stores).
        key: The reuse record key, or None (the run neither resumes nor saves).
        resume: Resume or cold start, and the vendor session id to use.
        stored: The record the run started from, or None.
        launch: What the current launch sends.
        expected: The record id this run may replace (a child saves only if no retry took the key
            since), or None.
    """

    plan: TurnPlan
    key: str | None
    resume: ResumePlan
    stored: VendorSession | None
    launch: LaunchPrompt
    expected: str | None


def resumable(adapter: Adapter, options: Mapping[str, Any]) -> bool:
    """Whether this launch of ``adapter`` takes part in session reuse (seed 003): the adapter
    supports it and, where the adapter decides per transport, this one does."""
    return adapter.supports_resume and adapter.resumable(options)


def stage_lineage(attempt_id: str) -> str:
    """The resume key a pipeline stage attempt's runs show (``pipeline:<attempt_id>``)."""
    return f"pipeline:{attempt_id}"


def stage_key(adapter: str, attempt_id: str) -> str:
    """A pipeline stage attempt's reuse record key: ``<adapter>::pipeline:<attempt_id>``."""
    return f"{adapter}::{stage_lineage(attempt_id)}"


async def reuse_key(run: RunSupervisor, adapter: Adapter, options: Mapping[str, Any]) -> str | None:
    """The reuse record key of a run: the adapter name for a root, a claimed child key for a keyed
    child or a pipeline stage attempt, None when the run neither resumes nor saves (seed 003)."""
    if run.stage is not None:
        if not resumable(adapter, options):
            return None
        run.lineage = stage_lineage(run.stage.attempt_id)
        return await _claim(run, stage_key(adapter.name, run.stage.attempt_id))
    if run.parent is None:
        return adapter.name if resumable(adapter, options) else None
    parent, request = run.parent, run.child_request
    scope = child_scope(
        adapter=adapter.name,
        supports_resume=resumable(adapter, options),
        parent_is_root=parent.parent is None,
        parent_role=parent.role,
        parent_lineage=parent.lineage,
        role=run.role,
        resume_key=request.resume_key if request is not None else None,
    )
    if scope.ignored_reason is not None:
        log.info("run %s: resumeKey ignored: %s", run.run.id, scope.ignored_reason)
        await run.notice(f"resumeKey ignored: {scope.ignored_reason}")
    run.lineage = scope.lineage
    if scope.lineage is not None:
        run.run = await in_thread(run.services.store.update_run, run.run.id, resume_key=scope.lineage)
    if scope.store_key is None:
        return None
    return await _claim(run, scope.store_key)


async def _claim(run: RunSupervisor, key: str) -> str | None:
    """Claim ``key`` for ``run``; None (with a notice) when another live run holds it: two concurrent
    runs with one key never share a vendor conversation."""
    if not run.services.claims.claim(key, run.run.id):
        await run.notice(
            f"another live agent holds resume key {run.lineage}; this run starts a new vendor "
            "conversation and does not save it under the key"
        )
        return None
    return key


async def launch_prompt(
    run: RunSupervisor, resume: ResumePlan, stored: VendorSession | None, latest: Checkpoint | None
) -> LaunchPrompt:
    """What this launch sends (seed 003 "What resume actually saves").

    A child sends its brief (its role prompt is a stable instruction, in the fingerprint), a
    pipeline stage worker its stage prompt; a root
    turn carries the messages the vendor has not seen, after the checkpoint a cold start uses
    (``latest``: the latest checkpoint of the turn's clear generation, read with its basis; none is
    published while the turn holds its session). The transcript is read only when such messages
    can exist (a resumed turn right after its previous one reads nothing).
    """
    store, record = run.services.store, run.run
    if not run.is_root_turn:
        launch = LaunchPrompt(record.prompt + (run.brief_note or ""))
    else:
        checkpoint = None
        if resume.resume and stored is not None:
            after = stored.cursor
        else:
            checkpoint = latest
            after = checkpoint.through_seq if checkpoint is not None else 0
        unseen: list[SessionMessage] = []
        if run.user_seq is None:  # posted in a generation cleared meanwhile: nothing to carry
            checkpoint = None
        elif run.user_seq - 1 > after:
            through = run.user_seq - 1
            unseen = await in_thread(
                lambda: store.list_messages(
                    record.session_id, generation=run.generation, after_seq=after, through_seq=through
                )
            )
        launch = render_launch_prompt(record.prompt, unseen=unseen, checkpoint=checkpoint)
        if launch.carried or launch.checkpoint_id is not None:
            await run.notice(
                _carried_text(launch), carried=list(launch.carried), checkpoint_id=launch.checkpoint_id
            )
    return launch


async def save_session(run: RunSupervisor, plan: TurnPlan, state: ReuseState) -> None:
    """Keep the transcript and the vendor session for the next turn (seed 003).

    A root turn's accepted answer joins the transcript, after the guidance that reached the vendor and
    before the guidance that did not (so the next turn carries that); the vendor session is saved whenever the
    vendor confirmed it in this run (even when the turn then failed or was interrupted: the vendor
    holds that conversation). A child or a stage worker saves only if no other run took its key since,
    and drops its key when it exceeded its token budget.
    """
    store, session = run.services.store, plan.session
    key, confirmed = state.key, run.attempt.confirmed
    if run.is_root_turn:
        await store_guidance(run, delivered=True)
        kept = await _save_root_turn(run, plan, state)
        await store_guidance(run, delivered=False)
        if kept:
            return
    else:
        if key is None:
            return
        if run.budget_exceeded:  # the next run on the task starts cold, not from spent context
            await in_thread(store.drop_vendor_session, session.id, key)
            await run.notice(f"token budget exceeded: resume key {run.lineage} dropped")
            return
        if not confirmed:
            return
        # a child stopped by a cancel, a timeout or a turn limit still saves, but only if the vendor
        # confirmed the session in this run and no retry has taken the key since
        saved = await in_thread(_vendor_save(run, state, key, confirmed))
        if saved is not None:
            return
    await run.notice(
        "the vendor session of this run is not kept: the session was cleared (/clear) while it ran"
        if run.is_root_turn
        else f"the vendor session of this run is not kept under {run.lineage}: the session was "
        "cleared (/clear) or another run saved the key meanwhile"
    )


async def _save_root_turn(run: RunSupervisor, plan: TurnPlan, state: ReuseState) -> bool:
    """A root turn's accepted answer and confirmed vendor session, in one store transaction; False
    when the vendor session was to be saved but was not (the session was cleared meanwhile)."""
    result, key, confirmed = run.attempt.result, state.key, run.attempt.confirmed
    answer = run.attempt.answer()
    answered = result is not None and bool(answer) and not result_failed(result)
    vendor = _root_vendor(run, state, key, confirmed) if key is not None and confirmed else None
    if vendor is None and not answered:
        return True
    kept = await in_thread(
        run.services.store.save_root_turn,
        plan.session.id,
        generation=run.generation,
        run_id=run.run.id,
        adapter=plan.adapter.name,
        answer=answer if answered else None,
        vendor=vendor,
        measure=run.services.compaction_threshold > 0,
    )
    run.uncovered_chars = kept.uncovered_chars
    return vendor is None or kept.vendor_session is not None


def _root_vendor(run: RunSupervisor, state: ReuseState, key: str, confirmed: str) -> RootVendorSave:
    """The vendor record a root turn saves for ``confirmed`` (its cursor: the turn's prompt, which
    the vendor has seen; a saved answer moves it on)."""
    stored, plan = state.stored, state.plan
    return RootVendorSave(
        key=key,
        vendor_session_id=confirmed,
        fingerprint=plan.fingerprint,
        cwd=str(plan.real_workspace),
        cursor=run.user_seq or (stored.cursor if stored else 0),  # without an answer
        checkpoint_id=(
            stored.checkpoint_id if state.resume.resume and stored is not None else state.launch.checkpoint_id
        ),
    )


def _vendor_save(
    run: RunSupervisor, state: ReuseState, key: str, confirmed: str
) -> Callable[[], VendorSession | None]:
    """The store call saving ``confirmed`` under ``key`` alone (without a root turn's answer): in
    the clear generation the turn read; a child's or a stage worker's only if no other run took its
    key since."""
    store, plan = run.services.store, state.plan
    save = functools.partial(
        store.save_vendor_session,
        session_id=plan.session.id,
        key=key,
        vendor_session_id=confirmed,
        fingerprint=plan.fingerprint,
        cwd=str(plan.real_workspace),
        generation=run.generation,
    )
    if run.is_root_turn:
        vendor = _root_vendor(run, state, key, confirmed)
        return functools.partial(save, cursor=vendor.cursor, checkpoint_id=vendor.checkpoint_id)
    return functools.partial(save, expect_vendor_session_id=state.expected, max_children=MAX_CHILD_SESSIONS)


async def keep_confirmed(run: RunSupervisor, state: ReuseState) -> None:
    """Save the vendor session the vendor has just confirmed, before the run ends (seed 003), so a
    daemon killed later in the turn leaves it for the next turn to resume.

    Called once per confirmed id of an invocation, once the vendor answered in that session (an
    assistant message, or a result that is not an error; an init alone confirms nothing, and a
    resume that failed never answers). The rules of :func:`save_session` hold: the plan's
    fingerprint; the clear generation the turn read (after a ``/clear`` nothing is written); a
    child saves only if no retry took its key since, and then expects the id it saved, so its own
    save at the end still holds. A refused save is left to the one at the end, which says so; a
    store failure is logged and left to it too (the run goes on).
    """
    key, confirmed = state.key, run.attempt.confirmed
    if key is None or confirmed is None or run.budget_exceeded:
        return
    try:
        saved = await in_thread(_vendor_save(run, state, key, confirmed))
    except OctipusError as exc:
        log.warning("run %s: saving vendor session %s at once failed: %s", run.run.id, confirmed, exc.message)
        return
    if saved is not None and not run.is_root_turn:
        state.expected = confirmed


def _carried_text(launch: LaunchPrompt) -> str:
    """The notice of what a launch carries besides the turn's own text."""
    parts = []
    if launch.checkpoint_id is not None:
        parts.append(f"the summary of checkpoint {launch.checkpoint_id}")
    if launch.carried:
        count = len(launch.carried)
        parts.append(f"{count} earlier message{'s' if count != 1 else ''} the vendor has not seen")
    return "the launch carries " + " and ".join(parts)
