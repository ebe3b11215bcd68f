"""Accounting on the real ``claude`` (issue 14 item 8): per-turn cost is the increase of the
vendor's cumulative total, a run shows one token figure, a session's usage sums every run."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from octipusd.money import usd
from octipusd.testing.conformance import octipus
from octipusd.testing.kit_claude import ClaudeKit


def test_a_process_serving_two_turns_costs_each_its_own_share(tmp_path: Path) -> None:
    """Guidance during a stalled model call is a second turn of the same claude process; Claude's
    ``total_cost_usd`` is cumulative per process, so the second result's cost is the increase and
    the run's cost is the sum (the process's final total), never the total counted twice."""
    kit = ClaudeKit()
    first = kit.text("first answer")
    first["stall_seconds"] = 3
    with octipus(kit, tmp_path, [first, kit.text("second answer"), kit.text("later turn")]) as env:
        session = env.new_session()
        run = env.post(session, "start working")
        env.wait(
            lambda: env.run(run)["status"] == "running" and env.model.conversation_texts(),
            60,
            "the first model call",
        )
        env.client.request("POST", f"/sessions/{session}/steer", json={"text": "and one more thing"})
        final = env.wait_final(run)
        assert final["status"] == "succeeded", final
        results = env.kinds(run, "result")
        assert len(results) == 2, results
        # num_turns is per result, not cumulative like the cost: the turn budget counts it as it is
        assert [r["turns"] for r in results] == [1, 1], results
        # every figure is an exact decimal string (issue 26 item 4): each result's share of Claude's
        # cumulative total, and the run's cost, add up to the process's last total to the nano-dollar
        costs = [Decimal(r["cost_usd"]) for r in results]
        assert all(isinstance(r["cost_usd"], str) for r in results) and all(c > 0 for c in costs), results
        # the model server bills every call the same: the second turn is not the cumulative figure
        assert abs(costs[1] - costs[0]) <= costs[0] / 2, costs
        assert Decimal(final["cost_usd"]) == sum(costs) == usd(results[-1]["raw"]["total_cost_usd"])

        later = env.wait_final(env.post(session, "next turn"))
        assert later["status"] == "succeeded", later
        usage = env.client.request("GET", f"/sessions/{session}/usage")
        assert usage["runs"] == 2 and usage["runs_without_cost"] == 0
        assert usage["input_tokens"] == final["input_tokens"] + later["input_tokens"]
        assert usage["output_tokens"] == final["output_tokens"] + later["output_tokens"]
        assert Decimal(usage["cost_usd"]) == Decimal(final["cost_usd"]) + Decimal(later["cost_usd"])
