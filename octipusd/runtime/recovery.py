"""The recovery of approved hand-started calls, and the escalation of overdue actions (seeds 001, 004).

:class:`RecoveryWorker` recovers owed invocations at start-up (discovering the users that have
any) and after committed decisions (signalled per user), paging each user's approved
invocations in id order and dispatching each through the action service
(:meth:`octipusd.runtime.actions.ActionService.dispatch`); it also hands uncertain actions past
their deadline to their owners (seed 004) and expires approvals of no run left unanswered. At
start-up, before that discovery, it has the calls a stopped daemon recorded but never decided
decided again (:meth:`octipusd.runtime.actions.ActionService.recover_undecided`). Once nothing is
owed and no deadline is pending it waits for a signal: no periodic scan.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio

from octipusd.errors import OctipusError, PreparationError
from octipusd.journal.operator import RecoveryOperator
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store

__all__ = ["PAGE", "RETRY_SECONDS", "Dispatch", "RecoveryWorker"]

log = logging.getLogger("octipusd.runtime.recovery")

#: Retry delay of a user whose owed invocation failed in preparation (seconds, seed 001).
RETRY_SECONDS = 30.0
#: Page size of one user's owed invocations.
PAGE = 50
#: Seconds the worker wakes after a deadline or expiry, so the store sees it as past.
DEADLINE_MARGIN_SECONDS = 0.05

#: ``async (invocation id) -> dispatched``: claim and run one approved invocation; raises
#: :class:`~octipusd.errors.PreparationError` when a dependency failed before dispatch.
Dispatch = Callable[[str], Awaitable[bool]]
#: ``async () -> found``: decide again the invocations a stopped daemon recorded but never decided;
#: raises :class:`~octipusd.errors.OctipusError` when the store failed (tried again later).
Redecide = Callable[[], Awaitable[int]]


class RecoveryWorker:
    """Recovers owed invocations and escalates overdue actions (see the module docstring).

    Args:
        store: The store (owed invocations, deadlines, approvals of no run).
        operator: Hands overdue uncertain actions to their owners.
        dispatch: Claims and runs one owed invocation (the action service's).
        redecide: Decides again, at start-up, the invocations a stopped daemon left undecided
            (None: nothing to do).
        retry_seconds: Delay before a user's failed preparation is retried (seconds).
    """

    def __init__(
        self,
        store: Store,
        operator: RecoveryOperator,
        dispatch: Dispatch,
        *,
        redecide: Redecide | None = None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self.store = store
        self.operator = operator
        self.dispatch = dispatch
        self.redecide = redecide
        self.retry_seconds = retry_seconds
        #: When to decide again what a stopped daemon left undecided (monotonic; None: done).
        self._redecide_at: float | None = 0.0 if redecide is not None else None
        self._users: set[str] = set()
        self._sessions: set[str] = set()
        self._retry_at: dict[str, float] = {}
        self._wake = anyio.Event()
        self.passes = 0

    def signal_user(self, user: str) -> None:
        """A committed change may owe ``user`` an execution: recover that user's invocations."""
        self._users.add(user)
        self._wake.set()

    def signal_session(self, session_id: str) -> None:
        """Like :meth:`signal_user`, for the owner of invocations in ``session_id``."""
        self._sessions.add(session_id)
        self._wake.set()

    def retry_later(self, user: str) -> None:
        """Retry ``user``'s owed invocations after :attr:`retry_seconds` (a failed preparation)."""
        self._retry_at[user] = time.monotonic() + self.retry_seconds
        self._wake.set()

    def retry_at(self, user: str, moment: datetime) -> None:
        """Dispatch ``user``'s owed invocations again at ``moment`` by the store's clock (an approved
        call that waits until then), or earlier if a retry was due before."""
        delay = max(0.0, (moment - self.store.now()).total_seconds()) + DEADLINE_MARGIN_SECONDS
        at = time.monotonic() + delay
        self._retry_at[user] = min(at, self._retry_at.get(user, at))
        self._wake.set()

    def signal_deadline(self) -> None:
        """An action became uncertain: recompute the next escalation deadline."""
        self._wake.set()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled. Start-up recovery first (what a stopped daemon left undecided is
        decided again, then the users owed an execution are discovered), then signal-driven passes."""
        await self._redecide()
        for user in await in_thread(self.store.owed_invocation_users):
            self._users.add(user)
        task_status.started()
        while True:
            self._wake = anyio.Event()
            try:
                timeout = await self._round()
            except Exception:  # logged with its traceback; the worker (and daemon) go on
                log.exception("a recovery pass failed; the next one runs in %g s", self.retry_seconds)
                timeout = self.retry_seconds
            with anyio.move_on_after(timeout):
                await self._wake.wait()

    async def _round(self) -> float:
        """One pass over the users signalled and the deadlines due; returns the seconds until
        the next is needed (0 when more users were signalled meanwhile)."""
        if self._redecide_at is not None and self._redecide_at <= time.monotonic():
            await self._redecide()
        users = await self._take_users()
        for user in sorted(users):
            await self._pass(user)
        await self._escalate()
        if self._users or self._sessions:
            return 0.0
        return await self._next_wake()

    async def _redecide(self) -> None:
        """Decide again what a stopped daemon left undecided (once; after :attr:`retry_seconds`
        again when the store failed)."""
        if self.redecide is None or self._redecide_at is None:
            return
        try:
            found = await self.redecide()
        except OctipusError as exc:  # the store failed: the next round after the delay tries again
            log.warning(
                "deciding the calls the stopped daemon left undecided failed: %s; retrying in %g s",
                exc.message,
                self.retry_seconds,
            )
            self._redecide_at = time.monotonic() + self.retry_seconds
            return
        self._redecide_at = None
        if found:
            log.info("%d call(s) the stopped daemon had not decided were decided again", found)

    async def _take_users(self) -> set[str]:
        users, self._users = self._users, set()
        sessions, self._sessions = self._sessions, set()
        try:
            for session_id in sessions:
                users.update(await in_thread(self.store.owed_users_of_session, session_id))
        except Exception:
            # the signals are kept: the next round (after the retry delay) reads them again
            self._users.update(users)
            self._sessions.update(sessions)
            raise
        now = time.monotonic()
        for user, at in list(self._retry_at.items()):
            if at <= now:
                users.add(user)
                del self._retry_at[user]
        return users

    async def _pass(self, user: str) -> None:
        """Drain every page of ``user``'s owed invocations (scoped reads only)."""
        self.passes += 1
        after: str | None = None
        while True:
            try:
                page = await in_thread(self.store.owed_invocations, user, after=after, limit=PAGE)
            except OctipusError as exc:  # the store failed
                log.warning(
                    "reading owed invocations of %s failed: %s; retrying in %g s",
                    user,
                    exc.message,
                    self.retry_seconds,
                )
                self._retry_at[user] = time.monotonic() + self.retry_seconds
                return
            if not page:
                return
            for invocation in page:
                try:
                    await self.dispatch(invocation.id)
                except PreparationError as exc:
                    log.warning("%s; retrying in %g s", exc.message, self.retry_seconds)
                    self._retry_at[user] = time.monotonic() + self.retry_seconds
                except Exception:  # one invocation's failure must not starve the others
                    log.exception("dispatching invocation %s failed", invocation.id)
                    self._retry_at[user] = time.monotonic() + self.retry_seconds
            after = page[-1].id

    async def _escalate(self) -> None:
        now = datetime.now(UTC)
        try:
            await self.operator.escalate_due(now)
        except OctipusError as exc:  # the store failed; the next pass tries again
            log.warning("escalating overdue actions failed: %s", exc.message)
        try:
            for approval_id in await in_thread(self.store.expire_runless_approvals, now):
                log.info("approval %s of no run expired unanswered", approval_id)
        except OctipusError as exc:  # the store failed; the next pass tries again
            log.warning("expiring approvals failed: %s", exc.message)

    async def _next_wake(self) -> float:
        """Seconds until the next retry or escalation deadline (inf: nothing owed)."""
        wake = math.inf
        retries = [*self._retry_at.values(), *([self._redecide_at] if self._redecide_at is not None else [])]
        if retries:
            wake = max(0.0, min(retries) - time.monotonic())
        try:
            deadline = await in_thread(self.store.next_action_deadline)
        except OctipusError as exc:  # the store failed: look again after the retry delay
            log.warning("reading the next escalation deadline failed: %s", exc.message)
            deadline = None
            wake = min(wake, self.retry_seconds)
        try:
            expiry = await in_thread(self.store.next_runless_approval_expiry)
        except OctipusError as exc:  # the store failed: look again after the retry delay
            log.warning("reading the next approval expiry failed: %s", exc.message)
            expiry = None
            wake = min(wake, self.retry_seconds)
        for moment in (deadline, expiry):
            if moment is not None:
                wake = min(
                    wake, max(0.0, (moment - datetime.now(UTC)).total_seconds()) + DEADLINE_MARGIN_SECONDS
                )
        return wake
