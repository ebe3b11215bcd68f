"""The notifier against a real store, the real event hub and a loopback Apprise ``json://`` receiver:
retries with backoff, giving up, the bounded queue, the test send, the shutdown grace, redaction."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.errors import ConfigError, ConflictError
from octipusd.notify import Notifier, NotifierLimits, scrub
from octipusd.runtime.events import EventHub
from octipusd.settings import load_settings
from octipusd.settings_notify import NotifySettings, redact_url
from octipusd.store import Store
from octipusd.store.aio import in_thread
from octipusd.store.records import RunStatus
from tests.unit.notify.receiver import Receiver, closed_port

pytestmark = pytest.mark.anyio

SECRET = "SECRETTOKEN42"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver(fail_first=2)
    yield made
    made.close()


@pytest.fixture
def held() -> Iterator[Receiver]:
    made = Receiver(hold=True)
    yield made
    made.close()


def settings(*urls: str, attempts: int = 4) -> NotifySettings:
    return NotifySettings(urls=urls, attempts=attempts, backoffSeconds=0.1, sendTimeoutSeconds=5)


async def until(predicate: Callable[[], Any], what: str) -> None:
    with anyio.fail_after(60):
        while not predicate():  # noqa: ASYNC110 - the notifier signals no count; its health is read
            await anyio.sleep(0.02)
    assert predicate(), what


class Rig:
    def __init__(self, store: Store, hub: EventHub, notifier: Notifier, run_id: str) -> None:
        self.store, self.hub, self.notifier, self.run_id = store, hub, notifier, run_id

    async def ask(self, subject: str) -> None:
        data = {"approval_id": None, "tool_id": "cli-native:Bash", "kind": "tool", "subject": subject}
        await self.hub.emit(self.run_id, "approval_requested", data)


def rig_factory(store: Store, tmp_path: Path) -> Callable[..., AbstractAsyncContextManager[Rig]]:
    @asynccontextmanager
    async def make(notify: NotifySettings, limits: NotifierLimits | None = None) -> AsyncIterator[Rig]:
        session = store.create_session(workspace=str(tmp_path), adapter="claude-code", title="notify")
        run = store.create_run(session_id=session.id, prompt="go", owner="test")
        hub = EventHub(store)
        notifier = Notifier(notify, store, lambda path: f"http://127.0.0.1:1{path}", limits)
        hub.add_listener(notifier.listen)
        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            yield Rig(store, hub, notifier, run.id)
            await notifier.close()

    return make


async def test_a_failing_target_is_retried_with_backoff_until_it_takes_the_notification(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    url = receiver.url(f"/hook/{SECRET}")
    async with rig_factory(store, tmp_path)(settings(url)) as rig:
        await rig.ask("rm -rf build")
        [body] = await anyio.to_thread.run_sync(receiver.wait_for, 1)
        assert receiver.posts == 3  # two answered 500, the third taken
        assert body["title"] == "Octipus: approval needed for cli-native:Bash"
        assert (
            "Subject: rm -rf build" in body["message"]
            and f"Open: http://127.0.0.1:1/runs/{rig.run_id}" in body["message"]
        )
        await until(lambda: rig.notifier.health().targets[0].sent == 1, "the send to be counted")
        [target] = rig.notifier.health().targets
        assert (target.sent, target.retries, target.failed, target.dropped) == (1, 2, 0, 0)
        assert target.target == f"json://127.0.0.1:{receiver.port}"
        assert target.last_error is not None and SECRET not in target.last_error
        assert target.last_error_at is not None and target.last_sent_at is not None


async def test_a_target_that_keeps_failing_is_given_up_after_the_attempts(
    store: Store, tmp_path: Path
) -> None:
    url = f"json://127.0.0.1:{closed_port()}/hook/{SECRET}"
    async with rig_factory(store, tmp_path)(settings(url, attempts=2)) as rig:
        await rig.ask("make deploy")
        await until(lambda: rig.notifier.health().targets[0].failed == 1, "the notification to be given up")
        [target] = rig.notifier.health().targets
        assert (target.sent, target.retries, target.failed) == (0, 1, 1)
        assert target.last_error and "127.0.0.1" in target.last_error and SECRET not in target.last_error


async def test_a_full_queue_drops_its_oldest_notification_and_counts_it(
    store: Store, tmp_path: Path, held: Receiver
) -> None:
    limits = NotifierLimits(queued_per_target=2)
    async with rig_factory(store, tmp_path)(settings(held.url()), limits) as rig:
        await rig.ask("first")
        await anyio.to_thread.run_sync(held.wait_posts, 1)  # the first is being sent (held)
        for name in ("second", "third", "fourth", "fifth"):
            await rig.ask(name)
        await until(lambda: rig.notifier.health().targets[0].dropped == 2, "two notifications to be dropped")
        held.release()
        received = await anyio.to_thread.run_sync(held.wait_for, 3)
        subjects = [b["message"].split("Subject: ")[1].split("\n")[0] for b in received]
        assert subjects == ["first", "fourth", "fifth"]
        await until(lambda: rig.notifier.health().targets[0].sent == 3, "the sends to be counted")


async def test_close_abandons_a_send_that_does_not_end_within_the_grace(
    store: Store, tmp_path: Path, held: Receiver
) -> None:
    limits = NotifierLimits(stop_grace_s=0.2)
    async with rig_factory(store, tmp_path)(settings(held.url()), limits) as rig:
        await rig.ask("never answered")
        await anyio.to_thread.run_sync(held.wait_posts, 1)
    # the rig's task group ended: close() cancelled the notifier's task while its send was held
    assert not rig.notifier.health().running
    assert rig.notifier.health().targets[0].sent == 0


async def test_hanging_targets_and_concurrent_test_sends_leave_the_store_its_threads(
    store: Store, tmp_path: Path, held: Receiver
) -> None:
    """Twenty targets that never answer, then two test sends at once: deliveries hold only the
    notifier's own threads, a test send only threads of its own, and the tests run one after the
    other, so the store's calls (anyio's default threads) still answer and a run still ends while
    every send is held."""
    urls = [held.url(f"/hook/{n}") for n in range(20)]
    notify = NotifySettings(urls=urls, attempts=1, sendTimeoutSeconds=120)
    async with rig_factory(store, tmp_path)(notify, NotifierLimits(send_threads=2)) as rig:
        await rig.ask("never answered")
        await anyio.to_thread.run_sync(held.wait_posts, 2)  # the notifier's two threads are held
        async with anyio.create_task_group() as tg:
            tg.start_soon(rig.notifier.test)
            tg.start_soon(rig.notifier.test)
            lock = rig.notifier._testing
            await until(lambda: lock.statistics().tasks_waiting == 1, "the second test to wait for the first")
            await anyio.to_thread.run_sync(held.wait_posts, 22)  # the first test reached every target
            assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
            ended = await in_thread(store.finish_run, rig.run_id, status=RunStatus.SUCCEEDED)
            await rig.hub.emit(rig.run_id, "run_status", {"status": "succeeded", "final": True})
            assert ended.status is RunStatus.SUCCEEDED
            assert held.received == []  # every send was still held meanwhile
            held.release()


async def test_a_test_send_does_not_wait_for_threads_held_by_deliveries(
    store: Store, tmp_path: Path, held: Receiver, receiver: Receiver
) -> None:
    """Deliveries to hanging targets hold every thread of the notifier; a test send still reaches
    the healthy target at once (its threads are its own) and reports it delivered."""
    receiver.fail_first = 0
    urls = [held.url("/a"), held.url("/b"), receiver.url("/ok")]
    notify = NotifySettings(urls=urls, attempts=1, sendTimeoutSeconds=5)
    async with rig_factory(store, tmp_path)(notify, NotifierLimits(send_threads=2)) as rig:
        await rig.ask("held")
        await anyio.to_thread.run_sync(held.wait_posts, 2)  # both notifier threads are held
        outcomes = await rig.notifier.test()
        held.release()
    assert outcomes[2].ok and outcomes[2].error is None, outcomes
    assert not outcomes[0].ok and not outcomes[1].ok, outcomes
    assert any(body["title"] == "Octipus: test notification" for body in receiver.received)


async def test_the_test_send_reports_each_target(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    receiver.fail_first = 0
    dead = f"json://127.0.0.1:{closed_port()}/x/{SECRET}"
    notifier = Notifier(settings(receiver.url(), dead), store, lambda path: None)
    good, bad = await notifier.test()
    assert good.ok and good.error is None and good.target == f"json://127.0.0.1:{receiver.port}"
    assert not bad.ok and bad.error and SECRET not in bad.error
    [body] = receiver.received
    assert body["title"] == "Octipus: test notification" and "Open:" not in body["message"]
    with pytest.raises(ConflictError, match=r"set notify\.urls"):
        await Notifier(settings(), store, lambda path: None).test()


async def test_markup_in_a_subject_arrives_as_text_on_every_kind_of_target(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """An agent's subject that looks like HTML or a Markdown link is escaped for a target that
    renders HTML or Markdown (a json:// target told ``format=html|markdown``) and unchanged text
    for a plain one: never markup a person could click."""
    receiver.fail_first = 0
    subject = '<a href="http://evil.example">Approve here</a> [Approve](http://evil.example)'
    urls = [
        receiver.url("/text"),
        receiver.url("/html", "format=html"),
        receiver.url("/md", "format=markdown"),
    ]
    async with rig_factory(store, tmp_path)(settings(*urls)) as rig:
        await rig.ask(subject)
        await anyio.to_thread.run_sync(receiver.wait_for, 3)
    said = {
        path.split("?")[0]: body["message"]
        for path, body in zip(receiver.paths, receiver.received, strict=True)
    }
    assert f"Subject: {subject}" in said["/text"]
    assert (
        "<a" not in said["/html"] and "&lt;a&nbsp;href=&quot;http://evil.example&quot;&gt;" in said["/html"]
    )
    assert "[Approve](" not in said["/md"] and r"\[Approve\]\(http://evil\.example\)" in said["/md"]


class RootLog(logging.Handler):
    """What the daemon's log hears: records reaching the root logger (pytest's caplog cannot
    stand in, it also hooks loggers that do not propagate)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture
def root_log() -> Iterator[RootLog]:
    handler, root = RootLog(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


async def test_no_send_writes_a_target_url_into_the_log_even_at_debug_level(
    store: Store, tmp_path: Path, receiver: Receiver, root_log: RootLog
) -> None:
    receiver.fail_first = 1
    async with rig_factory(store, tmp_path)(settings(receiver.url(f"/hook/{SECRET}"))) as rig:
        await rig.ask("make deploy")
        await anyio.to_thread.run_sync(receiver.wait_for, 1)
        await until(lambda: rig.notifier.health().targets[0].sent == 1, "the send to be counted")
    text = "\n".join(root_log.lines)
    assert "notifier: sent" in text and "notifier: send 1/4" in text, text
    assert SECRET not in text, text


def test_urls_are_validated_and_never_shown_whole() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(
            None, {"OCTIPUS_NOTIFY__URLS": f'["json://127.0.0.1:9/ok", "nosuch://user:{SECRET}@host"]'}
        )
    message = caught.value.message
    assert "notify.urls" in message and "urls[1] (nosuch://?)" in message and SECRET not in message
    loaded = load_settings(None, {"OCTIPUS_NOTIFY__URLS": f'["ntfy://ntfy.sh/{SECRET}"]'})
    assert loaded.notify.urls == (f"ntfy://ntfy.sh/{SECRET}",) and SECRET not in repr(loaded)
    assert redact_url(f"ntfy://ntfy.sh/{SECRET}") == "ntfy://ntfy.sh"
    slack = f"slack://T1JJ3T3L2/A1BRTD4JD/{SECRET}"
    assert SECRET not in redact_url(slack) and "A1BRTD4JD" not in redact_url(slack)
    said = f"POST https://hooks.slack.com/services/T1JJ3T3L2/A1BRTD4JD/{SECRET} answered 404"
    assert scrub(said, slack) == "POST https://hooks.slack.com/services/****/****/**** answered 404"
