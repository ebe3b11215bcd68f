"""The notifier: hears every committed batch of run events and notifies a person off the hot path.

:meth:`Notifier.listen` is the :meth:`EventHub.add_listener
<octipusd.runtime.events.EventHub.add_listener>` callback: it keeps the events that may notify
(:func:`~octipusd.notify.messages.wanted`) in a bounded queue and returns at once; nothing on the
event path waits for a send. The notifier's task (:meth:`Notifier.run`, in the daemon's task group)
composes each event into a :class:`~octipusd.notify.messages.Notification` (reading its run, session
and approval from the store) and hands it to one sender per target URL, each with its own bounded
queue, so a dead target delays nobody else. A sender tries a notification up to
``notify.attempts`` times, waiting ``notify.backoffSeconds`` before the first retry and twice as long
before each next one. A full queue drops its oldest item, counted and logged.

Whatever happens to the notifier, a run neither fails nor slows: its failures are counted, logged
with the redacted target, and shown in health (:meth:`Notifier.health`).
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Generic, TypeVar

import anyio
from anyio.abc import TaskStatus

from octipusd.errors import ConflictError, OctipusError
from octipusd.notify.messages import (
    Notification,
    PageUrl,
    compose,
    compose_pipeline,
    compose_pipeline_approval,
    compose_schedule_failure,
    wanted,
)
from octipusd.notify.sender import SendOutcome, send
from octipusd.settings_notify import NotifySettings, redact_url
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import Pipeline
from octipusd.store.records import Approval, Run, RunEvent, Session
from octipusd.store.repository import Store
from octipusd.store.schedule_records import Schedule, ScheduleFiring

__all__ = ["Notifier", "NotifierLimits", "NotifierSnapshot", "TargetSnapshot"]

log = logging.getLogger("octipusd.notify")

T = TypeVar("T")

#: The title of the notification ``octipusctl notify test`` sends.
TEST_TITLE: Final = "Octipus: test notification"


@dataclass(frozen=True)
class NotifierLimits:
    """Bounds of the notifier.

    Attributes:
        incoming_events: Events waiting to be composed at most; past that the oldest is dropped.
        queued_per_target: Notifications waiting for one target at most; past that the oldest is
            dropped.
        max_backoff_s: Longest wait before a retry (seconds), however many retries came before.
        stop_grace_s: Seconds :meth:`Notifier.close` lets queued notifications go out before it
            abandons them.
        send_threads: Worker threads the notifier's sends may hold at once (its own limiter, apart
            from the one the store's calls use).
    """

    incoming_events: int = 1000
    queued_per_target: int = 100
    max_backoff_s: float = 300.0
    stop_grace_s: float = 2.0
    send_threads: int = 8


class _Queue(Generic[T]):
    """A bounded FIFO that drops its oldest item when full; :meth:`get` waits for an item."""

    def __init__(self, capacity: int) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._capacity = capacity
        self._ready = anyio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> bool:
        """Append ``item``; True when the oldest item was dropped to make room."""
        dropped = len(self._items) >= self._capacity
        if dropped:
            self._items.popleft()
        self._items.append(item)
        self._ready.set()
        return dropped

    async def get(self) -> T:
        while not self._items:
            self._ready = anyio.Event()
            await self._ready.wait()
        return self._items.popleft()


@dataclass(frozen=True)
class TargetSnapshot:
    """One target's figures (see :class:`NotifierSnapshot`); ``target`` is redacted."""

    target: str
    sent: int
    failed: int
    dropped: int
    retries: int
    queued: int
    last_sent_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None


@dataclass(frozen=True)
class NotifierSnapshot:
    """The notifier's state for health.

    Attributes:
        targets: One entry per configured URL (empty: notifications are off).
        dropped: Events dropped before they were composed (the incoming queue was full).
        failed: Events that could not be composed (a bug; logged with its traceback).
        running: Whether the notifier's task runs.
    """

    targets: tuple[TargetSnapshot, ...]
    dropped: int
    failed: int
    running: bool


@dataclass(eq=False)
class _Target:
    url: str
    queue: _Queue[Notification]
    target: str = ""
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    retries: int = 0
    last_sent_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    busy: bool = field(default=False)

    def snapshot(self) -> TargetSnapshot:
        return TargetSnapshot(
            target=self.target,
            sent=self.sent,
            failed=self.failed,
            dropped=self.dropped,
            retries=self.retries,
            queued=len(self.queue),
            last_sent_at=self.last_sent_at,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
        )


class Notifier:
    """Notifies a person through Apprise URLs when a run needs them (see the module).

    Args:
        settings: ``notify`` (URLs, the finished-run threshold, attempts, backoff, send deadline).
        store: Where the run, session and approval an event names are read.
        page_url: Builds the page's link for a path (``/runs/ID``, ``/approvals/ID``), without any
            token; None when the web page is off (notifications then carry no link).
        limits: The notifier's bounds.
    """

    def __init__(
        self, settings: NotifySettings, store: Store, page_url: PageUrl, limits: NotifierLimits | None = None
    ) -> None:
        self.settings = settings
        self.limits = limits or NotifierLimits()
        self._store = store
        self._page_url = page_url
        self._incoming: _Queue[RunEvent] = _Queue(self.limits.incoming_events)
        self._targets = tuple(
            _Target(url, _Queue(self.limits.queued_per_target), redact_url(url)) for url in settings.urls
        )
        self._dropped = 0
        self._failed = 0
        self._composing = False
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._settled = anyio.Event()  # set whenever a composition or a delivery ends
        self._threads = anyio.CapacityLimiter(self.limits.send_threads)
        self._testing = anyio.Lock()  # one test send at a time; later ones wait for it

    @property
    def configured(self) -> bool:
        """Whether any target URL is configured."""
        return bool(self._targets)

    def listen(self, events: list[RunEvent]) -> None:
        """Queue the events of a committed batch that may notify; never blocks, never raises for
        a full queue (its oldest event is dropped, counted and logged)."""
        if not self._targets or self._closing:
            return
        for event in events:
            if wanted(event) and self._incoming.put(event):
                self._dropped += 1
                log.warning(
                    "notifier: incoming queue full, dropped the oldest event (%d so far)", self._dropped
                )

    def pipeline_ended(self, pipeline: Pipeline) -> None:
        """Notify a pipeline's end like a run's (:func:`~octipusd.notify.messages.compose_pipeline`):
        the walker calls it once with the pipeline as its final status left it. Never blocks, never
        raises for a full queue (its oldest notification is dropped, counted and logged)."""
        if not self._targets or self._closing:
            return
        message = compose_pipeline(
            pipeline, page=self._page_url, finished_after_s=self.settings.finishedAfterSeconds
        )
        if message is not None:
            self._fan_out(message)

    def pipeline_approval(self, pipeline: Pipeline, approval: Approval) -> None:
        """Notify an approval ``pipeline`` asks with no run (:func:`~octipusd.notify.messages.
        compose_pipeline_approval`). Never blocks, never raises for a full queue."""
        if not self._targets or self._closing:
            return
        self._fan_out(compose_pipeline_approval(pipeline, approval, page=self._page_url))

    def schedule_failed(self, schedule: Schedule, firing: ScheduleFiring) -> None:
        """Notify that a schedule's slot did not start (:func:`~octipusd.notify.messages.
        compose_schedule_failure`). Never blocks, never raises for a full queue."""
        if not self._targets or self._closing:
            return
        self._fan_out(compose_schedule_failure(schedule, firing, page=self._page_url))

    def health(self) -> NotifierSnapshot:
        """The notifier's figures now (redacted targets)."""
        return NotifierSnapshot(
            targets=tuple(t.snapshot() for t in self._targets),
            dropped=self._dropped,
            failed=self._failed,
            running=self._scope is not None,
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Compose and send until cancelled or :meth:`close` d (started with ``tg.start``)."""
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                tg.start_soon(self._compose_loop)
                for target in self._targets:
                    tg.start_soon(self._send_loop, target)
                task_status.started()
        finally:
            self._scope = None

    async def close(self) -> None:
        """Stop hearing events, let what is queued go out for at most
        :attr:`NotifierLimits.stop_grace_s` seconds, then abandon the rest and stop :meth:`run`."""
        self._closing = True
        with anyio.move_on_after(self.limits.stop_grace_s):
            while self._scope is not None and not self._idle():
                self._settled = anyio.Event()
                await self._settled.wait()
        if self._scope is not None:
            self._scope.cancel()

    def _idle(self) -> bool:
        if self._composing or len(self._incoming):
            return False
        return not any(t.busy or len(t.queue) for t in self._targets)

    async def _compose_loop(self) -> None:
        while True:
            event = await self._incoming.get()
            self._composing = True
            try:
                message = await self._compose(event)
            except Exception:  # a bug in composing: recorded as evidence, the notifier goes on
                self._failed += 1
                log.exception(
                    "notifier: could not compose a notification of %s on run %s", event.kind, event.run_id
                )
                message = None
            if message is not None:
                self._fan_out(message)
            self._composing = False
            self._settled.set()

    def _fan_out(self, message: Notification) -> None:
        """Queue ``message`` for every target (a full queue drops its oldest, counted and logged)."""
        for target in self._targets:
            if target.queue.put(message):
                target.dropped += 1
                log.warning(
                    "notifier: queue of %s full, dropped the oldest notification (%d so far)",
                    target.target,
                    target.dropped,
                )

    async def _compose(self, event: RunEvent) -> Notification | None:
        """The event's notification, from its rows (a row that cannot be read is left out)."""
        run: Run | None = None
        session: Session | None = None
        approval: Approval | None = None
        try:
            run = await in_thread(self._store.get_run, event.run_id)
            session = await in_thread(self._store.get_session, run.session_id)
            approval_id = event.data.get("approval_id")
            if event.kind == "approval_requested" and isinstance(approval_id, str):
                approval = await in_thread(self._store.get_approval, approval_id)
        except OctipusError as exc:
            log.warning("notifier: composing with less for run %s: %s", event.run_id, exc.message)
        return compose(
            event,
            run=run,
            session=session,
            approval=approval,
            page=self._page_url,
            finished_after_s=self.settings.finishedAfterSeconds,
        )

    async def _send_loop(self, target: _Target) -> None:
        while True:
            message = await target.queue.get()
            target.busy = True
            try:
                await self._deliver(target, message)
            finally:
                target.busy = False
                self._settled.set()

    async def _deliver(self, target: _Target, message: Notification) -> None:
        """Send ``message`` to ``target``, retrying with exponential backoff up to
        ``notify.attempts`` sends; the outcome is counted on the target, never raised."""
        attempts = self.settings.attempts
        for attempt in range(1, attempts + 1):
            outcome = await send(target.url, message, self.settings.sendTimeoutSeconds, self._threads)
            if outcome.ok:
                target.sent += 1
                target.last_sent_at = datetime.now(UTC)
                log.info("notifier: sent %r to %s", message.title, target.target)
                return
            target.last_error = outcome.error
            target.last_error_at = datetime.now(UTC)
            log.warning(
                "notifier: send %d/%d of %r to %s failed: %s",
                attempt,
                attempts,
                message.title,
                target.target,
                outcome.error,
            )
            if attempt < attempts:
                target.retries += 1
                await anyio.sleep(self._backoff(attempt))
        target.failed += 1

    def _backoff(self, attempt: int) -> float:
        """Seconds before the retry that follows send number ``attempt`` (1-based)."""
        return float(min(self.settings.backoffSeconds * 2 ** (attempt - 1), self.limits.max_backoff_s))

    async def test(self) -> list[SendOutcome]:
        """Send one test notification to every target at once, waiting for each (its send deadline);
        not retried, not counted in :meth:`health`. Concurrent calls run one after another, each
        send holding a thread of the test's own (never one the store's calls or deliveries need).

        Raises:
            ConflictError: no ``notify.urls`` are configured.
        """
        if not self._targets:
            raise ConflictError(
                "no notification targets: set notify.urls (an Apprise URL list, e.g. "
                "OCTIPUS_NOTIFY__URLS='[\"ntfy://ntfy.sh/TOPIC\"]' or [notify] urls = [...] in the "
                "settings file) and restart octipusd"
            )
        link = self._page_url("/")
        body = "This is a test notification from octipusd: notifications reach you here."
        message = Notification(
            title=TEST_TITLE, body=body + (f"\nOpen: {link}" if link else ""), kind="test", link=link
        )
        outcomes: list[SendOutcome | None] = [None] * len(self._targets)
        # a thread per target, apart from the deliveries' own: a backlog of deliveries or slow
        # targets never makes a healthy target's test wait for a thread past its deadline
        threads = anyio.CapacityLimiter(len(self._targets))

        async def one(index: int, target: _Target) -> None:
            outcomes[index] = await send(target.url, message, self.settings.sendTimeoutSeconds, threads)

        async with self._testing, anyio.create_task_group() as tg:
            for index, target in enumerate(self._targets):
                tg.start_soon(one, index, target)
        return [o for o in outcomes if o is not None]
