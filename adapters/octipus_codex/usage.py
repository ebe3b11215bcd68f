"""Codex's token usage -> this turn's own figures (tokens), for both transports.

app-server sends ``thread/tokenUsage/updated`` after every model request with ``last`` (that
request) and ``total`` (the thread, cumulative across resumes) (observed-2.md §1.6). The parser
counts ``last`` of the notifications whose ``turnId`` is this run's turn, once per distinct
``total``: a resumed thread first replays the previous turn's notification (its old ``turnId``,
observed on 0.171.0), which is not counted. Notifications that arrive before the turn id is
known are held until it is. So a turn's usage is exact whatever the thread's history, and
:attr:`ResultEvent.usage` is the turn's sum.

exec reports only ``turn.completed.usage``, cumulative for the whole thread across resumed runs
(observed.md §2.3). The parser emits the increase over the thread's usage before this turn: for a
resumed exec launch the adapter declares its usage cumulative
(:meth:`octipus_codex.CodexAdapter.usage_is_cumulative`), the runtime supplies what it stored for
the thread's earlier runs as :attr:`~octipusd.adapter.LaunchRequest.thread_usage`, and the parser
subtracts it (clamped at 0); a new thread (or a resume answered with another thread) starts from 0.
So the :class:`UsageEvent`, the :class:`ResultEvent` and :meth:`CodexStreamParser.total_usage`
carry this turn's own figures on both transports.

Codex's input counts include cached input; :class:`~octipusd.adapter.Usage` gets the uncached part
as ``input_tokens`` and the cached part as ``cache_read_input_tokens``.
"""

from __future__ import annotations

from octipusd.adapter import JSON, Usage, UsageEvent, VendorEvent

from ._coerce import as_dict, codex_usage, is_zero, to_text


class UsageCounter:
    """The usage of one run (tokens), each model request counted once.

    Args:
        thread_usage: For a resumed exec launch, the thread's usage Octipus stored before this turn
            (subtracted from exec's cumulative figures); ``Usage()`` otherwise.

    Attributes:
        turn: The usage of this run's app-server turn so far (the :class:`ResultEvent`'s).
        total: Everything emitted as :class:`UsageEvent` (the parser's ``total_usage``).
    """

    def __init__(self, thread_usage: Usage) -> None:
        self._exec_counted = thread_usage  # the thread's exec usage already counted
        self._pending: list[tuple[str | None, JSON]] = []
        self._last_total: str | None = None
        self.turn = Usage()
        self.total = Usage()

    def new_thread(self) -> None:
        """exec started another thread than the resumed one: none of its usage was counted before."""
        self._exec_counted = Usage()

    def notification(self, obj: JSON, turn_id: str | None, run_turn: str | None) -> list[VendorEvent]:
        """A ``thread/tokenUsage/updated`` line of turn ``turn_id``, while this run's turn is
        ``run_turn`` (None: not known yet, so the line is held until :meth:`release`)."""
        if run_turn is None:
            self._pending.append((turn_id, obj))
            return []
        if turn_id is not None and turn_id != run_turn:
            return []  # another turn's figures (the replay of a resumed thread's last turn)
        return self._count(obj)

    def release(self, run_turn: str) -> list[VendorEvent]:
        """This run's turn id is known: count the notifications held for it."""
        pending, self._pending = self._pending, []
        events: list[VendorEvent] = []
        for held_turn, held in pending:
            if held_turn in (None, run_turn):
                events.extend(self._count(held))
        return events

    def _count(self, obj: JSON) -> list[VendorEvent]:
        token_usage = as_dict(as_dict(obj.get("params")).get("tokenUsage"))
        total = to_text(token_usage.get("total"))
        if total == self._last_total:
            return []  # the same request reported again
        self._last_total = total
        usage = codex_usage(
            token_usage.get("last"),
            input_key="inputTokens",
            cached_key="cachedInputTokens",
            cache_write_key="cacheWriteInputTokens",
            output_key="outputTokens",
        )
        if usage is None or is_zero(usage):
            return []
        self.turn = self.turn + usage
        self.total = self.total + usage
        return [UsageEvent(raw=obj, usage=usage)]

    def exec_turn(self, obj: JSON) -> tuple[Usage, list[VendorEvent]]:
        """An exec ``turn.completed``: this turn's usage (the increase of the thread's cumulative
        figures) and its :class:`UsageEvent`, if any."""
        cumulative = codex_usage(
            obj.get("usage"),
            input_key="input_tokens",
            cached_key="cached_input_tokens",
            cache_write_key="cache_write_input_tokens",
            output_key="output_tokens",
        )
        if cumulative is None:
            return Usage(), []
        turn = cumulative - self._exec_counted
        self._exec_counted = cumulative
        if is_zero(turn):
            return turn, []
        self.total = self.total + turn
        return turn, [UsageEvent(raw=obj, usage=turn)]
