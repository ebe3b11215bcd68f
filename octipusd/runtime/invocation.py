"""One vendor invocation of a run (:class:`Invocation`, owned by its supervisor) and its state
(:class:`Attempt`): launch, read the stream in batches, reap, account.

A run makes one invocation, or two when a resumed vendor session turned out to be gone (the cold
fallback, :meth:`RunSupervisor._attempts <octipusd.runtime.supervisor.RunSupervisor>`). The
supervisor keeps the run's state; this module does the invocation's I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio

from octipusd.adapter import Adapter, LaunchRequest, ResultEvent, StreamParser, Usage
from octipusd.errors import ExecutableNotFoundError
from octipusd.runner.transport import Transport
from octipusd.runtime.outcome import result_failure
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
        confirmed: The vendor session id the vendor confirmed in this invocation.
        session_missing: A vendor signal that the resumed session is gone (Codex's other thread).
        results_seen: Results received so far.
        input_ended: Octipus closed the vendor's stdin (its turn is over): no more guidance is written.
        stopping: Why a stop began, once it did: nothing printed afterwards is accepted.
        usage_at_stop: The vendor's usage when the stop began (later figures are not accepted).
        discarded: Events printed after the stop began, dropped.
        bridge_pending: The failure reason while the vendor reports its bridge as still connecting.
    """

    process: Transport | None = None
    parser: StreamParser | None = None
    result: ResultEvent | None = None
    confirmed: str | None = None
    session_missing: str | None = None
    results_seen: int = 0
    input_ended: bool = False
    stopping: str | None = None
    usage_at_stop: Usage | None = None
    discarded: int = 0
    bridge_pending: str | None = None

    def usage(self) -> Usage:
        """The usage accepted from this invocation."""
        if self.usage_at_stop is not None:
            return self.usage_at_stop
        return self.parser.total_usage() if self.parser is not None else Usage()


class Invocation:
    """The vendor invocations of one run.

    Args:
        supervisor: The run.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor

    async def run(self, request: LaunchRequest, resume: ResumePlan) -> None:
        """One vendor invocation of the run: launch, stream, reap, account usage.

        Raises:
            AdapterError: the adapter refused the launch (nothing was started).
            ExecutableNotFoundError: the binary could not be executed.
        """
        adapter = self._run.adapter
        assert adapter is not None
        spec = adapter.build_launch(request)  # AdapterError surfaces with its own message
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
            async for batch in process.line_batches():
                for line in batch:
                    for event in parser.feed(line):
                        await self._run.events.handle(event, tg)
                await self._run.events.stored()  # one commit for the events of one read
            with anyio.move_on_after(self._run.services.limits.exit_after_result_s):
                await process.wait()
            if process.returncode is None:
                await process.stop("did not exit after its output ended")
            await process.reap()
            for event in parser.finish(process.returncode):
                await self._run.events.handle(event, tg)
            await self._run.events.stored()
            await self._run.events.check_bridge_answered()
            await self._account(adapter, request, process)
            tg.cancel_scope.cancel()

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
        usage = attempt.usage()
        result = attempt.result
        # stored with the final status (one commit), or before a retry (_keep_accounting)
        self._run.accounting = {
            "exit_code": process.returncode,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "usage_estimated": usage.estimated,
            "cost_usd": result.cost_usd if result else None,
            "result_text": result.text if result else None,
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
