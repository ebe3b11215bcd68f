"""One vendor invocation of a run (:class:`Invocation`, owned by its supervisor) and its state
(:class:`Attempt`): launch, read the stream in batches, reap, account.

A run makes one invocation, or two when a resumed vendor session turned out to be gone (the cold
fallback, :meth:`RunSupervisor._attempts <octipusd.runtime.supervisor.RunSupervisor>`). The
supervisor keeps the run's state; this module does the invocation's I/O.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from octipusd.adapter import Adapter, LaunchRequest, ResultEvent, StreamParser, Usage
from octipusd.adapter_launch import vendor_launch
from octipusd.errors import ExecutableNotFoundError
from octipusd.runner.transport import Transport
from octipusd.runtime.outcome import result_failed, result_failure
from octipusd.runtime.prompts import dump_prompt, dump_text
from octipusd.runtime.sessions import ResumePlan
from octipusd.store.aio import in_thread
from octipusd.store.records import RunStatus

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["Attempt", "Invocation"]


@dataclass
class Attempt:
    """The state of one vendor invocation (a cold retry starts a new one).

    Attributes:
        process: The vendor process, once started.
        parser: The adapter's parser of this invocation.
        result: The vendor's accepted result (the last one, when guidance added turns).
        confirmed: The vendor session id the vendor announced or confirmed in this invocation.
        answered: The vendor answered in that session (an assistant message, or a result that is
            not an error): it holds the conversation, which is saved at once (seed 003; an init
            alone confirms nothing).
        kept: The vendor session id saved at once in this invocation, or None.
        session_missing: A vendor signal that the resumed session is gone (Codex's other thread).
        results_seen: Results received since the vendor took up the turn.
        input_ended: Octipus closed the vendor's stdin (its turn is over): no more guidance is written.
        exit_by: Once the turn's final result arrived (:meth:`end_turn`), the time (anyio's clock)
            by which the vendor must have exited and closed its output; None while the turn goes on.
        before_prompt: That result came before the vendor took the launch prompt (it answered
            something else): the turn goes on if the vendor takes it now (:meth:`reopen`).
        after_result: Events printed after the turn's final result, dropped (all but those the
            adapter declares, ``Adapter.after_result``).
        reading: The scope of the wait for the vendor's next output, while one is under way.
        stopping: Why a stop began, once it did: nothing printed afterwards is accepted.
        frozen_usage: The vendor's usage when its turn ended or a stop began (later figures are not
            accepted, but those of a usage event the adapter declares after a result).
        discarded: Events printed after the stop began, dropped.
        bridge_pending: The failure reason while the vendor reports its bridge as still connecting.
        cost_usd: The cost of the results accepted from this invocation (USD, exact), None while no
            result reported one.
        answers: The texts of the run's accepted successful results, in order: a steered process
            answers more than once, and a follow-up invocation starts with the earlier ones.
        answers_before_result: How many :attr:`answers` there were before the last accepted result.
        answers_before_prompt: How many there were before the result that ended the turn before the
            vendor took its prompt: :meth:`reopen` drops the rest (they answered something else).
    """

    process: Transport | None = None
    parser: StreamParser | None = None
    result: ResultEvent | None = None
    confirmed: str | None = None
    answered: bool = False
    kept: str | None = None
    session_missing: str | None = None
    results_seen: int = 0
    input_ended: bool = False
    exit_by: float | None = None
    before_prompt: bool = False
    after_result: int = 0
    reading: anyio.CancelScope | None = None
    stopping: str | None = None
    frozen_usage: Usage | None = None
    discarded: int = 0
    bridge_pending: str | None = None
    cost_usd: Decimal | None = None
    answers: list[str] = field(default_factory=list)
    answers_before_result: int = 0
    answers_before_prompt: int = 0

    def accept_result(self, result: ResultEvent) -> None:
        """Keep an accepted result: the last one decides the invocation's outcome, every one's cost
        counts, and every successful one's text is part of the answer."""
        self.result = result
        self.results_seen += 1
        self.answers_before_result = len(self.answers)
        if result.cost_usd is not None:
            self.cost_usd = (self.cost_usd or Decimal(0)) + result.cost_usd
        if result.text and not result_failed(result):
            self.answers.append(result.text)

    def answer(self) -> str | None:
        """The run's answer so far: every accepted successful result's text, in order (nothing of
        it is lost to a later turn of the process or a follow-up); else the last result's text."""
        if self.answers:
            return "\n\n".join(self.answers)
        return self.result.text if self.result is not None else None

    def usage(self) -> Usage:
        """The usage accepted from this invocation."""
        if self.frozen_usage is not None:
            return self.frozen_usage
        return self.parser.total_usage() if self.parser is not None else Usage()

    def end_turn(self, grace: float, *, before_prompt: bool = False) -> None:
        """The turn's final result arrived (no guidance waits for an answer): no more input, its
        usage is kept as it is, and the vendor's output is read for ``grace`` more seconds at most,
        whether or not it exits or closes its pipes (:attr:`exit_by`). ``before_prompt``: the vendor
        had not taken the launch prompt yet (:attr:`before_prompt`)."""
        self.input_ended = True
        if self.exit_by is None:
            self.exit_by = anyio.current_time() + grace
            self.frozen_usage = self.usage()
            self.before_prompt = before_prompt
            self.answers_before_prompt = self.answers_before_result
        if self.reading is not None:
            self.reading.deadline = min(self.reading.deadline, self.exit_by)

    def reopen(self) -> None:
        """The vendor takes the launch prompt only after the result that ended the turn (which
        answered something else, so its text is no part of the answer): the turn goes on to its next
        result; the input stays ended."""
        del self.answers[self.answers_before_prompt :]
        self.exit_by, self.before_prompt = None, False
        self.frozen_usage = None
        self.results_seen = 0


class Invocation:
    """The vendor invocations of one run.

    Args:
        supervisor: The run.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor
        self._spent = Usage()  # the run's invocations that ended: tokens
        self._spent_cost: Decimal | None = None  # and the cost their vendors reported (USD)
        self._spent_by_thread: dict[str, Usage] = {}  # tokens per vendor session id
        self._count = 0  # invocations started

    async def thread_usage(self, request: LaunchRequest) -> Usage:
        """The vendor thread's usage before this invocation (tokens), for an adapter whose vendor
        reports thread totals (``Adapter.usage_is_cumulative``; ``codex exec``, observed.md §2.3):
        every other run of the same vendor session is stored with its own usage, summed in the
        database, plus this run's ended invocations in that thread (a follow-up's earlier ones).
        The adapter's parser subtracts it (``LaunchRequest.thread_usage``)."""
        earlier = self.spent_in(request.vendor_session_id)
        if request.vendor_session_id is None:
            return earlier
        run = self._run.run
        totals = await in_thread(
            functools.partial(
                self._run.services.store.usage_totals,
                run.session_id,
                vendor_session_id=request.vendor_session_id,
                exclude_run_id=run.id,
            )
        )
        stored = Usage(
            totals.input_tokens,
            totals.output_tokens,
            totals.cache_creation_input_tokens,
            totals.cache_read_input_tokens,
        )
        return stored + earlier

    def spent(self) -> Usage:
        """The tokens of this run's invocations that ended (accounted); the one streaming now is
        :meth:`Attempt.usage` until its end."""
        return self._spent

    def spent_in(self, vendor_session_id: str | None) -> Usage:
        """The tokens this run's ended invocations used in one vendor session (a thread's earlier
        usage, for a vendor that reports thread totals)."""
        if vendor_session_id is None:
            return Usage()
        return self._spent_by_thread.get(vendor_session_id, Usage())

    async def run(self, request: LaunchRequest, resume: ResumePlan) -> None:
        """One vendor invocation of the run: dump its prompt, launch, stream, reap, account usage.

        Raises:
            OSError: the first invocation's prompt dump could not be written (``agent.promptDumps``;
                a later one's failure is a notice).
            AdapterError: the adapter refused the launch (nothing was started).
            ExecutableNotFoundError: the binary could not be executed.
        """
        adapter = self._run.adapter
        assert adapter is not None
        self._count += 1
        if self._run.services.prompt_dumps:  # the whole prompt, system instructions included (seed 003)
            text = dump_text(request.prompt, request.system_prompt)
            dump = functools.partial(dump_prompt, self._run.run.id, text, invocation=self._count)
            try:
                await anyio.to_thread.run_sync(dump)
            except OSError as exc:
                if self._count == 1:
                    raise
                await self._run.notice(f"the prompt of invocation {self._count} could not be dumped: {exc}")
        # AdapterError surfaces with its own message; every vendor gets the bridge helper's environment
        spec = vendor_launch(adapter, request)
        for message in spec.notices:
            await self._run.notice(message)
        if self._run.stop_status is not None:
            return
        async with anyio.create_task_group() as tg:
            try:
                process = await self._run.services.launcher.start(spec, self._run.run.id)
            except OSError as exc:
                raise ExecutableNotFoundError(f"could not start {request.binary}: {exc}") from exc
            self._run.attempt.process = process
            await self._started(
                process, resume, [a for a in spec.argv if all(s not in a for s in spec.secrets)]
            )
            if self._run.stop_status is not None:  # stopped while starting
                self._run.begin_stop(self._run.stop_reason or "stopped")
                await process.stop(self._run.stop_reason or "stopped")
            tg.start_soon(process.pump_stderr)
            tg.start_soon(self._run.watch_active_time)
            parser = adapter.new_parser(request)
            self._run.attempt.parser = parser
            await self._read(process, parser, tg)
            lingered = await self._await_exit(process)
            await process.reap()
            for event in parser.finish(process.returncode):
                await self._run.events.handle(event, tg)
            await self._run.events.stored()
            await self._run.events.check_bridge_answered()
            await self._report_after_result(lingered)
            await self._account(adapter, request, process)
            tg.cancel_scope.cancel()

    async def _read(self, process: Transport, parser: StreamParser, tg: anyio.abc.TaskGroup) -> None:
        """Hand the vendor's output to the run's event handling, one read at a time (one commit
        each), until the output ends, or, once the turn's final result arrived, until
        :attr:`Attempt.exit_by`, whatever the vendor still prints or holds open (the wait for its next
        output is then abandoned)."""
        attempt, events = self._run.attempt, self._run.events
        batches = aiter(process.line_batches())
        while True:
            batch: list[bytes] | None = None
            exit_by = attempt.exit_by if attempt.exit_by is not None else math.inf
            with anyio.CancelScope(deadline=exit_by) as attempt.reading:
                batch = await anext(batches, None)
            attempt.reading = None
            if batch is None:
                return
            for line in batch:
                for event in parser.feed(line):
                    await events.handle(event, tg)
            await events.stored()  # one commit for the events of one read

    async def _await_exit(self, process: Transport) -> bool:
        """Wait for the vendor's exit once its output was read: until :attr:`Attempt.exit_by` after
        the turn's final result, else ``RunLimits.exit_after_output_s``; past it, stop it and its
        whole tree as any stop does.

        Returns:
            Whether the vendor had to be stopped after its turn's final result.
        """
        attempt, limits = self._run.attempt, self._run.services.limits
        exit_by = attempt.exit_by if attempt.stopping is None else None  # else a stop is ending it
        deadline = exit_by if exit_by is not None else anyio.current_time() + limits.exit_after_output_s
        with anyio.CancelScope(deadline=deadline):
            await process.wait()
        if process.returncode is not None:
            return False
        if exit_by is None:
            await process.stop("did not exit after its output ended")
            return False
        await process.stop(f"did not exit within {limits.result_grace_s:g} s of its final result")
        return True

    async def _report_after_result(self, lingered: bool) -> None:
        """One notice, when the vendor outlived its turn's final result: it had to be stopped, and
        how many events it printed after that result were left out of the run."""
        dropped, grace = self._run.attempt.after_result, self._run.services.limits.result_grace_s
        parts = []
        if lingered:
            parts.append(f"the vendor did not exit within {grace:g} s of its final result and was stopped")
        if dropped:
            s = "s" if dropped != 1 else ""
            parts.append(
                f"{dropped} event{s} it printed after that result {'are' if s else 'is'} not part of the run"
            )
        if parts:
            message = "; ".join(parts) + "; the run keeps that result"
            await self._run.notice(message, after_result=dropped, lingered=lingered)

    async def _started(self, process: Transport, resume: ResumePlan, argv: list[str]) -> None:
        """Store and publish that the vendor runs (status ``running``)."""
        self._run.run = await in_thread(
            self._run.services.store.update_run,
            self._run.run.id,
            status=RunStatus.RUNNING,
            reason=None,  # a reason shown while it was queued
            pid=process.pid,
            vendor_session_id=resume.vendor_session_id,
            resumed=resume.resume,
            started_at=datetime.now(UTC),
        )
        await self._run.services.hub.emit(
            self._run.run.id,
            "run_status",
            {
                "status": str(RunStatus.RUNNING),
                "pid": process.pid,
                "argv": argv,
                "vendor_session_id": resume.vendor_session_id,
                "resumed": resume.resume,
            },
        )

    async def _account(self, adapter: Adapter, request: LaunchRequest, process: Transport) -> None:
        """Account the invocation's exit code, usage and result (only what was accepted): kept in
        :attr:`accounting` until :meth:`finish` (or the next attempt) stores it."""
        attempt = self._run.attempt
        dropped = process.discarded_lines + attempt.discarded
        if dropped:
            await self._run.notice(
                f"{dropped} line{'s' if dropped != 1 else ''} of output the vendor printed after the stop began "
                f"({attempt.stopping}) {'were' if dropped != 1 else 'was'} discarded",
                discarded=dropped,
                discarded_bytes=process.discarded_bytes,
            )
        if process.output_held:
            await self._run.notice(
                "the vendor exited while a process it started still held its output; the run ended without "
                "waiting for it, and what was left of it was stopped"
            )
        # the run's figures are the sum of its invocations (a cold retry, a follow-up): one figure
        usage = attempt.usage()
        self._spent = self._spent + usage
        thread = attempt.confirmed or request.vendor_session_id
        if thread is not None:
            self._spent_by_thread[thread] = self.spent_in(thread) + usage
        if attempt.cost_usd is not None:
            self._spent_cost = (self._spent_cost or Decimal(0)) + attempt.cost_usd
        # stored with the final status (one commit), or before a retry (_keep_accounting)
        self._run.accounting = {
            "exit_code": process.returncode,
            "input_tokens": self._spent.input_tokens,
            "output_tokens": self._spent.output_tokens,
            "cache_creation_input_tokens": self._spent.cache_creation_input_tokens,
            "cache_read_input_tokens": self._spent.cache_read_input_tokens,
            "usage_estimated": self._spent.estimated,
            "cost_usd": self._spent_cost,
            "result_text": attempt.answer(),
        }

    async def keep_accounting(self) -> None:
        """Store the accounting of the invocation that ended, before another one starts."""
        if self._run.accounting:
            accounting, self._run.accounting = self._run.accounting, {}
            self._run.run = await in_thread(
                self._run.services.store.update_run, self._run.run.id, **accounting
            )

    def session_gone(self) -> str | None:
        """How the vendor said the resumed session is gone, or None.

        Signals (seed 003 "Cold fallback", observed.md): Claude's result ``No conversation found``;
        Codex's ``no rollout found`` (in the result, or on stderr for ``codex exec``, which prints
        nothing on stdout then, observed.md §2.6); a Codex thread other than the one requested
        (the adapter's ``cold_start`` status); Vibe's ``Session not found``.
        """
        attempt, adapter = self._run.attempt, self._run.adapter
        assert adapter is not None
        if attempt.session_missing is not None:
            return attempt.session_missing
        if attempt.result is not None:
            return result_failure(attempt.result) if adapter.session_missing(attempt.result) else None
        if attempt.process is None:
            return None
        tail = attempt.process.stderr_tail
        return f"stderr: {tail.strip()[-300:]}" if adapter.stderr_session_missing(tail) else None
