"""The usage of one ACP run and its caps (tokens, model calls), from Vibe's session totals.

Vibe's figures are cumulative per session, also across ``session/load`` (observed: 300/60 after a
load of a 200/40 session). The totals announced before the first model step (``usage_update`` with
``_meta.steps == 0``) are the baseline; the run's usage is the difference; ``input_tokens``
excludes cached prompt tokens (``cache_read_input_tokens``). See
:class:`~octipus_vibe.acp_parser.AcpParser` for the caps.
"""

from __future__ import annotations

from decimal import Decimal

from octipusd.adapter import JSON, Usage, UsageEvent, VendorEvent

from ._coerce import as_cost, as_dict, as_int, as_tokens, field_max, is_zero, usage_from_totals


class SessionUsage:
    """The usage of one run, raised from Vibe's session totals; the sum of the emitted increments.

    Attributes:
        emitted: The run's usage so far: the sum of every :class:`UsageEvent` emitted (tokens).
        cancel_reason: ``(subtype, message)`` once the run passed a cap, else None.
    """

    def __init__(self) -> None:
        self._baseline = Usage()
        self._baseline_cost: Decimal | None = None
        self._baseline_frozen = False
        self.emitted = Usage()
        self._cost: Decimal | None = None
        self._steps = 0  # Vibe's ``_meta.steps`` (lags behind the model calls)
        self._model_calls = 0  # rises of the session's prompt-token total seen in this run
        self._prompt_seen = 0
        self.cancel_reason: tuple[str, str] | None = None

    def update(self, obj: JSON, update: JSON, *, prompt_sent: bool) -> list[VendorEvent] | None:
        """A ``usage_update``: the increment's :class:`UsageEvent`, if any; None when its totals are
        the session's past (announced before this process's first model step: the baseline)."""
        meta = as_dict(update.get("_meta"))
        steps = as_int(meta.get("steps"))
        totals = usage_from_totals(
            as_tokens(meta.get("promptTokens")),
            as_tokens(meta.get("completionTokens")),
            as_tokens(meta.get("cachedTokens")),
        )
        cost = as_cost(as_dict(update.get("cost")).get("amount"))
        if not self._baseline_frozen and (steps == 0 or (steps is None and not prompt_sent)):
            self._baseline = totals
            self._baseline_cost = cost
            self._prompt_seen = totals.input_tokens + totals.cache_read_input_tokens
            return None
        self._baseline_frozen = True
        if cost is not None:
            self._cost = cost
        if steps is not None:
            self._steps = max(self._steps, steps)
        prompt_total = totals.input_tokens + totals.cache_read_input_tokens
        if prompt_total > self._prompt_seen:
            # every model call adds its prompt tokens to the session totals
            self._model_calls += 1
            self._prompt_seen = prompt_total
        return self._account(obj, totals - self._baseline)

    def prompt_result(self, obj: JSON, usage: JSON) -> list[VendorEvent]:
        """The prompt result's session totals (``usage``): the last increment, if any."""
        total = usage_from_totals(
            as_tokens(usage.get("inputTokens")),
            as_tokens(usage.get("outputTokens")),
            as_tokens(usage.get("cachedReadTokens")),
        )
        return self._account(obj, total - self._baseline)

    def _account(self, obj: JSON, run_total: Usage) -> list[VendorEvent]:
        """Raise the run's usage to ``run_total`` (field-wise max); emit the increment if any."""
        new_total = field_max(self.emitted, run_total)
        increment = new_total - self.emitted
        self.emitted = new_total
        if is_zero(increment):
            return []
        return [UsageEvent(raw=obj, usage=increment)]

    def passes_cap(self, turn_limit: int | None, token_limit: int | None) -> bool:
        """Whether the run passed its turn cap (model calls) or token cap (input + output + cache
        reads) just now; sets :attr:`cancel_reason` the first time."""
        if self.cancel_reason is not None:
            return False
        turns = max(self._steps, self._model_calls)
        used = self.emitted
        tokens = used.input_tokens + used.output_tokens + used.cache_read_input_tokens
        if turn_limit is not None and turns > turn_limit:
            self.cancel_reason = (
                "error_max_turns",
                f"Vibe passed the run's turn limit of {turn_limit} model steps; Octipus cancelled the turn",
            )
        elif token_limit is not None and tokens > token_limit:
            self.cancel_reason = (
                "error_max_tokens",
                f"Vibe used {tokens} tokens, over the run's token limit of {token_limit}; "
                "Octipus cancelled the turn",
            )
        return self.cancel_reason is not None

    def run_cost(self) -> Decimal | None:
        """The run's cost (USD, exact): the session's cost now less its cost before the run, or None."""
        if self._cost is None:
            return None
        return max(self._cost - (self._baseline_cost or Decimal(0)), Decimal(0))
