"""Requests a stopped daemon left in flight: end their transports at restart (issue 11).

An MCP call that was running when the daemon died may still land on its server: a streamable
HTTP server keeps handling a request whose client went away, and a stdio server may outlive
its client. Until that request can no longer land, a probe's "not applied" proves nothing
(seed 004), so :class:`~octipusd.journal.operator.RecoveryOperator` keeps such an action
unconfirmed until its in-flight bound has passed, or until Octipus has positively ended the
request's transport. :func:`end_left_requests` does that at start-up for every unresolved action
whose request may still land on a transport not yet ended (the stopped daemon's orphans, and
earlier ones whose end failed), from the :class:`~octipusd.toolkit.DispatchRef`
recorded with their ``started``:

* ``mcp_http``: the session is terminated (``DELETE`` with its ``Mcp-Session-Id``);
* ``mcp_stdio``: the server's leftover processes (found by their environment marker) are
  killed.

Either ends the request only for a server that declares ``terminationCancelsCalls``; for the
others the evidence is recorded and the action waits out its bound. A probe that runs before
this finished sees the action still in flight, which is only more conservative.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial

import anyio
import anyio.to_thread

from octipusd.connectors import ConnectorRegistry
from octipusd.runner.process import kill_run_tree, run_processes
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ToolAction
from octipusd.store.repository import Store
from octipusd.toolkit import DispatchEnd, DispatchKind, DispatchRef

__all__ = ["end_left_requests"]

log = logging.getLogger("octipusd.journal")

#: Time for killed stdio server processes to disappear before they are counted (seconds).
KILL_SETTLE_SECONDS = 0.5


async def end_left_requests(
    store: Store, connectors: ConnectorRegistry, actions: Sequence[ToolAction]
) -> None:
    """End the transports of ``actions`` (see :meth:`Store.open_dispatches`) and record what that
    established.

    Each distinct transport is ended once. An action whose transport is now provably ended gets
    ``dispatch_ended_at`` and a ``dispatch_ended`` receipt entry; the others a ``dispatch``
    entry with the evidence (they stay in flight until their bound).

    Never raises but for cancellation: a failure is logged with its traceback and the action
    simply keeps waiting out its in-flight bound.
    """
    done: dict[DispatchRef, DispatchEnd] = {}
    for action in actions:
        ref = DispatchRef.from_json(action.dispatch) if action.dispatch else None
        if ref is None:
            continue
        try:
            if ref not in done:
                done[ref] = await _end(connectors, ref)
            end = done[ref]
            data = {"dispatch": ref.to_json(), "evidence": end.evidence}
            if end.ended:
                await in_thread(partial(store.end_dispatch, action.id, data=data))
            else:
                await in_thread(partial(store.add_receipt, action.id, kind="dispatch", data=data))
            log.info("action %s: %s", action.id, end.evidence)
        except Exception:
            log.exception(
                "ending the request of action %s failed; it waits out its in-flight bound", action.id
            )


async def _end(connectors: ConnectorRegistry, ref: DispatchRef) -> DispatchEnd:
    """End one transport: terminate an HTTP session, or kill a stdio server's leftover processes."""
    if ref.kind is DispatchKind.MCP_HTTP:
        return await connectors.terminate_session(ref.server, ref)
    marker = ref.marker
    if not marker:  # DispatchRef.from_json refuses this; never scan for an empty marker
        return DispatchEnd(False, f"stdio MCP server {ref.server!r}: no process marker was recorded")
    killed = await anyio.to_thread.run_sync(kill_run_tree, marker, None)
    if killed:
        await anyio.sleep(KILL_SETTLE_SECONDS)
    remaining = await anyio.to_thread.run_sync(run_processes, marker)
    what = f"killed {len(killed)} leftover process(es)" if killed else "no process of it was left"
    if remaining:
        return DispatchEnd(
            False, f"stdio MCP server {ref.server!r}: {len(remaining)} process(es) survived SIGKILL"
        )
    if not connectors.cancels_on_termination(ref.server):
        return DispatchEnd(
            False,
            f"stdio MCP server {ref.server!r}: {what}; it does not declare terminationCancelsCalls, so work it "
            "handed elsewhere may still land",
        )
    return DispatchEnd(True, f"stdio MCP server {ref.server!r}: {what}")
