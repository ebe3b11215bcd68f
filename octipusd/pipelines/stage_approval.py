"""A ``requiresApproval`` stage asks a person before it runs (FACTS.md §6 step fields; seed 003
"Approvals inside a pipeline"; issue 28 item 4).

Before the walk runs a stage whose template step sets ``requiresApproval``, it asks a person through
the walk's own durable question (:mod:`octipusd.pipelines.asking`): the pipeline is
``awaiting_approval``, its node ``awaiting_approval``, ``pendingApproval`` has kind
``stage_approval``. The prompt lists the pipeline's gate commands (:func:`~octipusd.pipelines.
gate_commands.gate_commands`) in its reason and input; approving it stores them with the decision
(``metadata.approvedGateCommands``) so each exact command runs without asking in its own stage for
the rest of the walk. When the stage right before it in the template ``producesPlan`` and the plan
has items, the prompt is the **plan approval**: it shows the items too.

* Approved: the node is ``approved`` and runs; the walk does not ask again for that node in the
  same walk (a QA bounce back to it, the next plan item: the person approved the stage and its plan,
  not one visit).
* Denied: the walk stops at that stage (``stopped``, resumable); the resume asks again.
* A resume starts a new walk (``generation``): the approval of the previous walk no longer holds,
  so the node asks again when it next runs, and the gate commands approved then end with it.

The approvals given are the walk's state (``WalkState.approved``: node -> generation), rebuilt by
replay like the rest of it; the listing is a durable step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from octipusd.durable.engine import DurableEngine
from octipusd.pipelines.gate_commands import gate_commands
from octipusd.pipelines.graph import Graph
from octipusd.pipelines.walker import Walker
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import STAGE_APPROVAL_KIND

__all__ = ["MAX_ITEMS_SHOWN", "ApprovalWalk", "ask_stage_approval", "listing", "question"]

#: Plan items the approval's reason names at most (the input lists them all).
MAX_ITEMS_SHOWN: Final = 10
#: Characters of one item title in the reason at most.
MAX_TITLE_CHARS: Final = 80

#: Ask a person (the walk's durable question) and wait for the answer message.
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class _State(Protocol):
    node: str
    generation: int
    approved: dict[str, int]


class ApprovalWalk(Protocol):
    """What of a walk (:class:`~octipusd.pipelines.walk._Walk`) the stage approval uses."""

    @property
    def graph(self) -> Graph: ...

    @property
    def state(self) -> _State: ...

    @property
    def engine(self) -> DurableEngine: ...

    @property
    def w(self) -> Walker: ...

    @property
    def pid(self) -> str: ...


async def listing(walker: Walker, pipeline_id: str, node: str) -> dict[str, Any]:
    """Step: what the approval of ``node`` lists: the gate commands resolved from the run's
    parameters, and the plan's items when the stage before it produces the plan.

    Returns:
        ``{"gateCommands": [{"nodeKey", "stage", "command"}], "items": [{"id", "title"}] | None}``.
    """
    store = walker.store
    pipeline = await in_thread(store.get_pipeline, pipeline_id)
    graph = walker.graph_of(pipeline)
    listed = [g.to_json() for g in gate_commands(graph, pipeline.params)]
    index = graph.node(node).step_index
    items = None
    if index is not None and index > 0 and graph.template.steps[index - 1].produces_plan:
        rows = await in_thread(store.list_pipeline_items, pipeline_id)
        items = [{"id": i.id, "title": i.title} for i in rows] or None
    return {"gateCommands": listed, "items": items}


def question(stage: str, listed: dict[str, Any]) -> dict[str, Any]:
    """The stage or plan approval's question for the walk's ask (pure; see the module)."""
    items = listed.get("items")
    commands = listed.get("gateCommands") or []
    parts = []
    if items:
        titles = [str(i["title"])[:MAX_TITLE_CHARS] for i in items[:MAX_ITEMS_SHOWN]]
        more = f"; and {len(items) - MAX_ITEMS_SHOWN} more" if len(items) > MAX_ITEMS_SHOWN else ""
        parts.append(f"Approve the plan ({len(items)} items: {'; '.join(titles)}{more}) and stage {stage}.")
    else:
        parts.append(f"Approve stage {stage} before it runs.")
    if commands:
        shown = "; ".join(f"`{c['command']}` (stage {c['stage']})" for c in commands)
        parts.append(f"Gate commands, run without asking in their stage for the rest of this run: {shown}.")
    return {
        "stage": stage,
        "reason": " ".join(parts),
        "fields": [],
        "kind": STAGE_APPROVAL_KIND,
        "explanation": "approve to run the stage (and its listed gate commands without asking); "
        "deny to stop the pipeline at this stage (resumable)",
        "input": {"approval": "plan" if items else "stage", **listed},
    }


async def ask_stage_approval(walk: ApprovalWalk, ask: Ask) -> str | None:
    """Before the walk's current node runs: ask for its approval when it requires one and this walk
    has not approved it yet (see the module).

    Returns:
        None: the stage may run (approved now or earlier in this walk, or no approval needed);
        else why it may not (the person denied it: the walk stops there, resumable).
    """
    state, graph = walk.state, walk.graph
    node = graph.node(state.node)
    if node.step_index is None or not graph.step(state.node).requires_approval:
        return None
    if state.approved.get(state.node) == state.generation:
        return None
    listed = await walk.engine.step("approval_list", listing, walk.w, walk.pid, state.node)
    answer = await ask(question(node.name, listed))
    if not answer.get("approved"):
        why = f": {answer['reason']}" if answer.get("reason") else ""
        return f"stage {node.name}: the person denied its approval{why}; resume to be asked again"
    state.approved[state.node] = state.generation
    return None
