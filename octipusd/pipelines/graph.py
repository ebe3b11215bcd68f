"""A template compiled to a graph (FACTS.md §6 "Graph"), and the pure rule that walks it.

Nodes are ``n0``, ``n1``, ... in template order, of kind ``step`` (a stage), ``human`` (a
``human_input`` stage) or ``foreach``: a run of consecutive ``loopOverPlan`` steps becomes one
``foreach`` node followed by its body nodes (the steps, each its own node whose ``loop`` names the
head). For ``plan, implement*, verify*, report`` (``*``: ``loopOverPlan``) that is::

    n0 plan --always--> n1 foreach --loop_body--> n2 implement --always--> n3 verify (qa)
                          |   ^                        ^                      |
                          |   +------- qa_pass --------|----------------------+
                          |                            +------ qa_fail -------+ (maxTraversals = maxRetries)
                          +--loop_done--> n4 report                  n3 --audit_gate_failed--> n3

Edges carry a condition (:class:`EdgeCondition`) and an ordinal; when several edges of a node match
an outcome, the lowest ordinal wins (:func:`next_node`). A QA stage's ``qa_fail`` edge goes back to
the implementer (``retryTargetStage``, else the previous stage), inside a loop always within the
body; from outside a loop, a target inside a loop body means the loop's head (the loop reads the plan
again). ``audit_gate_failed`` goes back to the QA node itself. Both are backward edges bounded by
``maxTraversals`` (the QA step's ``maxRetries``); the last body node goes back to the loop head,
which is the one backward edge without a bound (the plan's items bound it).

The walker (``pipelines.walker``) runs a node, turns what happened into an :class:`Outcome` and asks
:func:`next_node` where to go; it counts the traversals of bounded edges (per plan item inside a
loop body) and keeps the counts in its checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from octipusd.errors import InvalidRequestError

if TYPE_CHECKING:
    from octipusd.pipelines.templates import Step, Template

__all__ = [
    "Edge",
    "EdgeCondition",
    "Graph",
    "Node",
    "NodeKind",
    "Outcome",
    "Transition",
    "TransitionKind",
    "compile_graph",
    "next_node",
    "validate_graph",
]


class NodeKind(StrEnum):
    """What a node is: a stage, a person's input, or the loop over the plan's items."""

    STEP = "step"
    HUMAN = "human"
    FOREACH = "foreach"


class EdgeCondition(StrEnum):
    """When an edge is taken (see :data:`_MATCHES`)."""

    ALWAYS = "always"
    QA_PASS = "qa_pass"
    QA_FAIL = "qa_fail"
    AUDIT_GATE_FAILED = "audit_gate_failed"
    LOOP_BODY = "loop_body"
    LOOP_DONE = "loop_done"
    ON_ERROR = "on_error"


class Outcome(StrEnum):
    """What happened at a node, as the walker reports it to :func:`next_node`.

    ``succeeded``: the stage delivered (a QA stage passed, a person answered); ``qa_failed``: a QA
    stage found issues; ``audit_gate_failed``: a QA stage's evidence or ``verifyCommand`` gate failed;
    ``error``: the stage failed; ``items_pending`` / ``items_done``: at a ``foreach`` head, the plan
    has an item left / has none.
    """

    SUCCEEDED = "succeeded"
    QA_FAILED = "qa_failed"
    AUDIT_GATE_FAILED = "audit_gate_failed"
    ERROR = "error"
    ITEMS_PENDING = "items_pending"
    ITEMS_DONE = "items_done"


#: The outcomes each condition matches: ``always`` matches everything but an error.
_MATCHES: Final[Mapping[EdgeCondition, frozenset[Outcome]]] = {
    EdgeCondition.ALWAYS: frozenset(Outcome) - {Outcome.ERROR},
    EdgeCondition.QA_PASS: frozenset({Outcome.SUCCEEDED}),
    EdgeCondition.QA_FAIL: frozenset({Outcome.QA_FAILED}),
    EdgeCondition.AUDIT_GATE_FAILED: frozenset({Outcome.AUDIT_GATE_FAILED}),
    EdgeCondition.LOOP_BODY: frozenset({Outcome.ITEMS_PENDING}),
    EdgeCondition.LOOP_DONE: frozenset({Outcome.ITEMS_DONE}),
    EdgeCondition.ON_ERROR: frozenset({Outcome.ERROR}),
}


@dataclass(frozen=True)
class Node:
    """One node of the graph.

    Attributes:
        key: ``n0``, ``n1``, ...
        kind: step, human or foreach.
        name: The stage's name; a foreach is named after its body (``for each item: a, b``).
        step_index: The template step of a step or human node; None for a foreach.
        body: A foreach's body node keys, in order (empty otherwise).
        loop: The foreach head a body node belongs to, or None at the top level.
    """

    key: str
    kind: NodeKind
    name: str
    step_index: int | None = None
    body: tuple[str, ...] = ()
    loop: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The node for the status document and the page."""
        return {
            "key": self.key,
            "kind": self.kind.value,
            "name": self.name,
            "stepIndex": self.step_index,
            "body": list(self.body),
            "loop": self.loop,
        }


@dataclass(frozen=True)
class Edge:
    """A directed edge ``source -> target`` taken on ``condition``.

    Attributes:
        key: ``<source>-><target>:<condition>``, unique in its graph (the walker's traversal counts
            are keyed by it).
        ordinal: Rank among the source's edges; the lowest matching one wins.
        max_traversals: How often the edge may be taken (per plan item inside a loop body); None:
            no bound (forward edges, the loop's way back to its head).
    """

    source: str
    target: str
    condition: EdgeCondition
    ordinal: int
    max_traversals: int | None = None

    @property
    def key(self) -> str:
        """``<source>-><target>:<condition>``."""
        return f"{self.source}->{self.target}:{self.condition.value}"

    def to_json(self) -> dict[str, Any]:
        """The edge for the status document and the page."""
        return {
            "key": self.key,
            "source": self.source,
            "target": self.target,
            "condition": self.condition.value,
            "ordinal": self.ordinal,
            "maxTraversals": self.max_traversals,
        }


@dataclass(frozen=True)
class Graph:
    """A compiled template: its nodes in order and its edges. Build it with :func:`compile_graph`.

    The entry is the first node; the exit is the last top-level node (finishing it ends the run).
    """

    template: Template
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    _index: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {n.key: i for i, n in enumerate(self.nodes)})

    @property
    def entry(self) -> str:
        """The first node's key (``n0``)."""
        return self.nodes[0].key

    @property
    def exit(self) -> str:
        """The last top-level node's key: a non-error outcome with no edge to take there ends the run."""
        return [n for n in self.nodes if n.loop is None][-1].key

    def node(self, key: str) -> Node:
        """The node ``key``.

        Raises:
            InvalidRequestError: No node has that key.
        """
        index = self._index.get(key)
        if index is None:
            raise InvalidRequestError(
                f"node {key!r} is not in the graph (nodes n0 to n{len(self.nodes) - 1})"
            )
        return self.nodes[index]

    def position(self, key: str) -> int:
        """The node's place in the graph's order (``n3`` is 3)."""
        self.node(key)
        return self._index[key]

    def step(self, key: str) -> Step:
        """The template step a step or human node runs.

        Raises:
            InvalidRequestError: The node is a foreach (it runs its body nodes) or unknown.
        """
        node = self.node(key)
        if node.step_index is None:
            raise InvalidRequestError(
                f"node {key!r} is a foreach: it runs its body nodes {', '.join(node.body)}"
            )
        return self.template.steps[node.step_index]

    def body(self, key: str) -> tuple[Node, ...]:
        """A foreach node's body nodes, in order (empty for other nodes)."""
        return tuple(self.node(k) for k in self.node(key).body)

    def edges_from(self, key: str) -> tuple[Edge, ...]:
        """The edges leaving ``key``, lowest ordinal first."""
        return tuple(sorted((e for e in self.edges if e.source == key), key=lambda e: e.ordinal))

    def resolve(self, stage: str) -> Node:
        """The node a ``fromStage`` names: a node key, or else an exact stage name.

        Raises:
            InvalidRequestError: Nothing has that key or name, or the name is shared by several
                stages (name the node key then).
        """
        if stage in self._index:
            return self.node(stage)
        named = [n for n in self.nodes if n.name == stage]
        if not named:
            known = ", ".join(f"{n.key} ({n.name})" for n in self.nodes)
            raise InvalidRequestError(
                f"fromStage: {stage!r} is no stage name or node key of this pipeline ({known})"
            )
        if len(named) > 1:
            keys = ", ".join(n.key for n in named)
            raise InvalidRequestError(
                f"fromStage: {stage!r} names several stages ({keys}); give the node key"
            )
        return named[0]

    def to_json(self) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` for the status document and the page."""
        return {"nodes": [n.to_json() for n in self.nodes], "edges": [e.to_json() for e in self.edges]}


# Compiling ----------------------------------------------------------------------------------------


def _nodes(template: Template) -> tuple[list[Node], dict[int, Node]]:
    """The nodes in order, and each step's node by step index."""
    nodes: list[Node] = []
    of_step: dict[int, Node] = {}
    steps = template.steps
    i = 0
    while i < len(steps):
        if not steps[i].loop_over_plan:
            node = Node(f"n{len(nodes)}", _kind(steps[i]), steps[i].name, step_index=i)
            nodes.append(node)
            of_step[i] = node
            i += 1
            continue
        end = i
        while end < len(steps) and steps[end].loop_over_plan:
            end += 1
        head_key = f"n{len(nodes)}"
        body = [
            Node(f"n{len(nodes) + 1 + k}", _kind(steps[j]), steps[j].name, step_index=j, loop=head_key)
            for k, j in enumerate(range(i, end))
        ]
        name = "for each item: " + ", ".join(n.name for n in body)
        nodes.append(Node(head_key, NodeKind.FOREACH, name, body=tuple(n.key for n in body)))
        nodes.extend(body)
        of_step.update({n.step_index: n for n in body if n.step_index is not None})
        i = end
    return nodes, of_step


def _kind(step: Step) -> NodeKind:
    return NodeKind.HUMAN if step.is_human else NodeKind.STEP


def _retry_node(template: Template, index: int, node: Node, of_step: Mapping[int, Node]) -> str:
    """The node a QA step's ``qa_fail`` goes back to (see the module docstring)."""
    step = template.steps[index]
    target = index - 1 if step.retry_target_stage is None else step.retry_target_stage
    where = f"steps[{index}] ({step.name!r}).retryTargetStage"
    if index == 0:
        raise InvalidRequestError(
            f"{where}: a qa_validation stage needs an earlier stage to retry; it is the first"
        )
    if target >= index:
        raise InvalidRequestError(
            f"{where}: {target} is not an earlier stage (give an index from 0 to {index - 1})"
        )
    goal = of_step[target]
    if node.loop is not None and goal.loop != node.loop:
        raise InvalidRequestError(
            f"{where}: {template.steps[target].name!r} (stage {target}) is outside this stage's loop; inside a "
            "loop a QA stage retries an earlier stage of the same loop body (set retryTargetStage to one)"
        )
    return goal.loop if node.loop is None and goal.loop is not None else goal.key


def compile_graph(template: Template) -> Graph:
    """Compile a template into its graph (see the module docstring for the shape).

    Raises:
        InvalidRequestError: A QA stage's retry target is not an earlier stage, or, inside a loop, not
            an earlier stage of the same loop body; the message names the step and field.
    """
    nodes, of_step = _nodes(template)
    edges: list[Edge] = []

    def following(node: Node) -> str | None:
        siblings = [n.key for n in nodes if n.loop == node.loop]
        place = siblings.index(node.key)
        return siblings[place + 1] if place + 1 < len(siblings) else node.loop

    for node in nodes:
        after = following(node)
        if node.kind is NodeKind.FOREACH:
            edges.append(Edge(node.key, node.body[0], EdgeCondition.LOOP_BODY, 0))
            if after is not None:
                edges.append(Edge(node.key, after, EdgeCondition.LOOP_DONE, 1))
            continue
        assert node.step_index is not None
        step = template.steps[node.step_index]
        if not step.is_qa:
            if after is not None:
                edges.append(Edge(node.key, after, EdgeCondition.ALWAYS, 0))
            continue
        bound = step.max_retries
        retry = _retry_node(template, node.step_index, node, of_step)
        edges.append(Edge(node.key, retry, EdgeCondition.QA_FAIL, 0, bound))
        edges.append(Edge(node.key, node.key, EdgeCondition.AUDIT_GATE_FAILED, 1, bound))
        if after is not None:
            edges.append(Edge(node.key, after, EdgeCondition.QA_PASS, 2))
    return Graph(template, tuple(nodes), tuple(edges))


def _describe(edge: Edge) -> str:
    return f"edge {edge.source} -> {edge.target} ({edge.condition.value})"


def validate_graph(graph: Graph) -> None:
    """Check a graph: it has nodes, every edge joins known nodes, every backward edge but a loop's
    way back to its head is bounded, and every node is reachable from the entry.

    Raises:
        InvalidRequestError: The first problem found; the message names the node or edge.
    """
    if not graph.nodes:
        raise InvalidRequestError("graph: it has no nodes; a template needs at least one stage")
    index = {n.key: i for i, n in enumerate(graph.nodes)}
    for edge in graph.edges:
        for end in (edge.source, edge.target):
            if end not in index:
                raise InvalidRequestError(f"graph: {_describe(edge)} names an unknown node {end!r}")
    for edge in graph.edges:
        backward = index[edge.target] <= index[edge.source]
        loop_back = graph.nodes[index[edge.source]].loop == edge.target
        if backward and not loop_back and edge.max_traversals is None:
            raise InvalidRequestError(f"graph: {_describe(edge)} goes back without a bound (maxTraversals)")
    reached = {graph.entry}
    frontier = [graph.entry]
    while frontier:
        key = frontier.pop()
        for edge in graph.edges:
            if edge.source == key and edge.target not in reached:
                reached.add(edge.target)
                frontier.append(edge.target)
    for node in graph.nodes:
        if node.key not in reached:
            raise InvalidRequestError(
                f"graph: node {node.key} ({node.name!r}) is unreachable from {graph.entry}"
            )


# Walking --------------------------------------------------------------------------------------


class TransitionKind(StrEnum):
    """What :func:`next_node` decided.

    ``advance``: go to ``target``; ``finish``: the run is done (the exit node delivered);
    ``exhausted``: the matching edge has used its ``maxTraversals`` (retries ran out: ask a person);
    ``fail``: no edge matches (an error with no ``on_error`` edge): the run fails.
    """

    ADVANCE = "advance"
    FINISH = "finish"
    EXHAUSTED = "exhausted"
    FAIL = "fail"


@dataclass(frozen=True)
class Transition:
    """Where to go from a node. ``edge`` is the edge chosen (None for ``finish`` and ``fail``);
    ``target`` the next node (``advance`` only)."""

    kind: TransitionKind
    edge: Edge | None = None
    target: str | None = None


def next_node(
    graph: Graph, node_key: str, outcome: Outcome, traversals: Mapping[str, int] | None = None
) -> Transition:
    """Where the walker goes after ``outcome`` at ``node_key``: the lowest-ordinal matching edge.

    Args:
        graph: The compiled graph.
        node_key: The node that just ran.
        outcome: What happened there.
        traversals: How often each bounded edge (by :attr:`Edge.key`) was taken already (for an
            edge inside a loop body: for the current item). Missing: never.

    Returns:
        ``advance`` with the edge and target; ``exhausted`` with the edge when that matching edge
        has been taken ``maxTraversals`` times (the walker asks a person, it does not try a later
        edge); ``finish`` when a non-error outcome has no edge at the exit node; ``fail`` otherwise.

    Raises:
        InvalidRequestError: ``node_key`` is not in the graph.
    """
    graph.node(node_key)
    counts = traversals or {}
    for edge in graph.edges_from(node_key):
        if outcome not in _MATCHES[edge.condition]:
            continue
        if edge.max_traversals is not None and counts.get(edge.key, 0) >= edge.max_traversals:
            return Transition(TransitionKind.EXHAUSTED, edge)
        return Transition(TransitionKind.ADVANCE, edge, edge.target)
    if outcome is not Outcome.ERROR and node_key == graph.exit:
        return Transition(TransitionKind.FINISH)
    return Transition(TransitionKind.FAIL)
