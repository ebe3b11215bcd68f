"""The pipeline graph (FACTS.md §6 "Graph"): the shapes a template compiles to, graph validation, and
the order in which :func:`next_node` picks an edge."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from octipusd.errors import InvalidRequestError
from octipusd.pipelines.graph import (
    Edge,
    EdgeCondition as C,
    Graph,
    Node,
    NodeKind,
    Outcome,
    Transition,
    TransitionKind as T,
    compile_graph,
    next_node,
    validate_graph,
)
from octipusd.pipelines.templates import Template, parse_template


def step(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "topic": "coding", **fields}


def compiled(*steps: dict[str, Any]) -> Graph:
    return compile_graph(parse_template({"steps": list(steps)}, name="t"))


def shape(graph: Graph) -> list[tuple[str, str, str, int, int | None]]:
    return [(e.source, e.target, e.condition.value, e.ordinal, e.max_traversals) for e in graph.edges]


def test_a_linear_template_is_a_chain_of_step_nodes() -> None:
    graph = compiled(step("a"), step("b"), step("c"))
    assert [(n.key, n.kind, n.name, n.step_index, n.loop) for n in graph.nodes] == [
        ("n0", NodeKind.STEP, "a", 0, None),
        ("n1", NodeKind.STEP, "b", 1, None),
        ("n2", NodeKind.STEP, "c", 2, None),
    ]
    assert shape(graph) == [("n0", "n1", "always", 0, None), ("n1", "n2", "always", 0, None)]
    assert (graph.entry, graph.exit) == ("n0", "n2")
    assert graph.step("n1") is graph.template.steps[1]


def test_a_qa_stage_bounces_to_the_previous_stage_and_audits_itself() -> None:
    graph = compiled(
        step("plan"), step("code"), step("qa", stageType="qa_validation", maxRetries=2), step("ship")
    )
    assert shape(graph) == [
        ("n0", "n1", "always", 0, None),
        ("n1", "n2", "always", 0, None),
        ("n2", "n1", "qa_fail", 0, 2),
        ("n2", "n2", "audit_gate_failed", 1, 2),
        ("n2", "n3", "qa_pass", 2, None),
    ]


def test_a_qa_stage_bounces_to_its_retry_target() -> None:
    graph = compiled(step("code"), step("docs"), step("qa", stageType="qa_validation", retryTargetStage=0))
    assert shape(graph)[2:] == [("n2", "n0", "qa_fail", 0, 3), ("n2", "n2", "audit_gate_failed", 1, 3)]


def test_consecutive_loop_over_plan_steps_are_one_foreach_body_with_qa_inside() -> None:
    graph = compiled(
        step("plan", producesPlan=True),
        step("implement", loopOverPlan=True),
        step("verify", stageType="qa_validation", loopOverPlan=True, maxRetries=4),
        step("report"),
    )
    assert [(n.key, n.kind, n.name, n.step_index, n.body, n.loop) for n in graph.nodes] == [
        ("n0", NodeKind.STEP, "plan", 0, (), None),
        ("n1", NodeKind.FOREACH, "for each item: implement, verify", None, ("n2", "n3"), None),
        ("n2", NodeKind.STEP, "implement", 1, (), "n1"),
        ("n3", NodeKind.STEP, "verify", 2, (), "n1"),
        ("n4", NodeKind.STEP, "report", 3, (), None),
    ]
    assert shape(graph) == [
        ("n0", "n1", "always", 0, None),
        ("n1", "n2", "loop_body", 0, None),
        ("n1", "n4", "loop_done", 1, None),
        ("n2", "n3", "always", 0, None),
        ("n3", "n2", "qa_fail", 0, 4),
        ("n3", "n3", "audit_gate_failed", 1, 4),
        ("n3", "n1", "qa_pass", 2, None),
    ]
    assert [n.key for n in graph.body("n1")] == ["n2", "n3"] and graph.body("n0") == ()
    assert graph.exit == "n4"
    with pytest.raises(InvalidRequestError, match=r"^node 'n1' is a foreach: it runs its body nodes n2, n3$"):
        graph.step("n1")


def test_two_separate_loops_are_two_foreach_nodes_and_a_loop_may_end_the_graph() -> None:
    graph = compiled(
        step("a", loopOverPlan=True), step("b"), step("c", loopOverPlan=True), step("d", loopOverPlan=True)
    )
    assert [(n.key, n.kind.value, n.loop) for n in graph.nodes] == [
        ("n0", "foreach", None),
        ("n1", "step", "n0"),
        ("n2", "step", None),
        ("n3", "foreach", None),
        ("n4", "step", "n3"),
        ("n5", "step", "n3"),
    ]
    assert shape(graph) == [
        ("n0", "n1", "loop_body", 0, None),
        ("n0", "n2", "loop_done", 1, None),
        ("n1", "n0", "always", 0, None),
        ("n2", "n3", "always", 0, None),
        ("n3", "n4", "loop_body", 0, None),
        ("n4", "n5", "always", 0, None),
        ("n5", "n3", "always", 0, None),
    ]
    assert graph.exit == "n3"
    assert next_node(graph, "n3", Outcome.ITEMS_DONE) == Transition(T.FINISH)


def test_a_human_input_stage_is_a_human_node_in_or_out_of_a_loop() -> None:
    graph = compiled(
        step("draft"),
        {"name": "approve", "stageType": "human_input"},
        step("apply", loopOverPlan=True),
        {"name": "check", "stageType": "human_input", "loopOverPlan": True},
    )
    assert [(n.key, n.kind.value) for n in graph.nodes] == [
        ("n0", "step"),
        ("n1", "human"),
        ("n2", "foreach"),
        ("n3", "step"),
        ("n4", "human"),
    ]
    assert shape(graph)[:2] == [("n0", "n1", "always", 0, None), ("n1", "n2", "always", 0, None)]
    assert ("n4", "n2", "always", 0, None) in shape(graph)


def test_a_qa_stage_after_a_loop_retrying_a_body_stage_goes_back_to_the_loop_head() -> None:
    graph = compiled(
        step("plan"), step("implement", loopOverPlan=True), step("final", stageType="qa_validation")
    )
    assert ("n3", "n1", "qa_fail", 0, 3) in shape(graph)
    validate_graph(graph)


def test_the_status_document_shape() -> None:
    graph = compiled(step("a", loopOverPlan=True), step("q", stageType="qa_validation", loopOverPlan=True))
    assert graph.to_json() == {
        "nodes": [
            {
                "key": "n0",
                "kind": "foreach",
                "name": "for each item: a, q",
                "stepIndex": None,
                "body": ["n1", "n2"],
                "loop": None,
            },
            {"key": "n1", "kind": "step", "name": "a", "stepIndex": 0, "body": [], "loop": "n0"},
            {"key": "n2", "kind": "step", "name": "q", "stepIndex": 1, "body": [], "loop": "n0"},
        ],
        "edges": [
            {
                "key": "n0->n1:loop_body",
                "source": "n0",
                "target": "n1",
                "condition": "loop_body",
                "ordinal": 0,
                "maxTraversals": None,
            },
            {
                "key": "n1->n2:always",
                "source": "n1",
                "target": "n2",
                "condition": "always",
                "ordinal": 0,
                "maxTraversals": None,
            },
            {
                "key": "n2->n1:qa_fail",
                "source": "n2",
                "target": "n1",
                "condition": "qa_fail",
                "ordinal": 0,
                "maxTraversals": 3,
            },
            {
                "key": "n2->n2:audit_gate_failed",
                "source": "n2",
                "target": "n2",
                "condition": "audit_gate_failed",
                "ordinal": 1,
                "maxTraversals": 3,
            },
            {
                "key": "n2->n0:qa_pass",
                "source": "n2",
                "target": "n0",
                "condition": "qa_pass",
                "ordinal": 2,
                "maxTraversals": None,
            },
        ],
    }


# Resolving fromStage --------------------------------------------------------------------------------


def test_from_stage_is_a_node_key_or_an_exact_stage_name() -> None:
    graph = compiled(step("a"), step("b"), step("a"))
    assert (
        graph.resolve("n1").name == "b" and graph.resolve("b").key == "n1" and graph.resolve("n2").key == "n2"
    )
    with pytest.raises(
        InvalidRequestError, match=r"^fromStage: 'a' names several stages \(n0, n2\); give the node key$"
    ):
        graph.resolve("a")
    with pytest.raises(
        InvalidRequestError,
        match=r"^fromStage: 'B' is no stage name or node key of this pipeline \(n0 \(a\), n1 \(b\), n2 \(a\)\)$",
    ):
        graph.resolve("B")
    with pytest.raises(InvalidRequestError, match=r"^node 'n9' is not in the graph \(nodes n0 to n2\)$"):
        graph.node("n9")


# Validation (FACTS.md §6: unbounded backward edge, unreachable node, unknown node, no nodes) ----------


def _hand_built(nodes: tuple[Node, ...], edges: tuple[Edge, ...]) -> Graph:
    template = parse_template({"steps": [step("a"), step("b"), step("c")]}, name="t")
    return Graph(template, nodes, edges)


A, B, Cn = (
    Node("n0", NodeKind.STEP, "a", 0),
    Node("n1", NodeKind.STEP, "b", 1),
    Node("n2", NodeKind.STEP, "c", 2),
)


@pytest.mark.parametrize(
    ("nodes", "edges", "message"),
    [
        ((), (), "graph: it has no nodes; a template needs at least one stage"),
        (
            (A, B),
            (Edge("n0", "n7", C.ALWAYS, 0),),
            "graph: edge n0 -> n7 (always) names an unknown node 'n7'",
        ),
        (
            (A, B),
            (Edge("n5", "n1", C.ALWAYS, 0),),
            "graph: edge n5 -> n1 (always) names an unknown node 'n5'",
        ),
        (
            (A, B),
            (Edge("n0", "n1", C.ALWAYS, 0), Edge("n1", "n0", C.QA_FAIL, 0)),
            "graph: edge n1 -> n0 (qa_fail) goes back without a bound (maxTraversals)",
        ),
        (
            (A, B),
            (Edge("n0", "n1", C.ALWAYS, 0), Edge("n1", "n1", C.AUDIT_GATE_FAILED, 0)),
            "graph: edge n1 -> n1 (audit_gate_failed) goes back without a bound (maxTraversals)",
        ),
        ((A, B, Cn), (Edge("n0", "n2", C.ALWAYS, 0),), "graph: node n1 ('b') is unreachable from n0"),
        ((A, B), (Edge("n1", "n0", C.ON_ERROR, 0, 1),), "graph: node n1 ('b') is unreachable from n0"),
    ],
)
def test_a_bad_graph_is_refused(nodes: tuple[Node, ...], edges: tuple[Edge, ...], message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        validate_graph(_hand_built(nodes, edges))
    assert caught.value.message == message


def test_a_loop_may_go_back_to_its_head_without_a_bound_but_nothing_else_may() -> None:
    head = Node("n0", NodeKind.FOREACH, "loop", body=("n1",))
    body = Node("n1", NodeKind.STEP, "a", 0, loop="n0")
    other = Node("n2", NodeKind.STEP, "b", 1)
    loop = (Edge("n0", "n1", C.LOOP_BODY, 0), Edge("n1", "n0", C.ALWAYS, 0), Edge("n0", "n2", C.LOOP_DONE, 1))
    validate_graph(_hand_built((head, body, other), loop))
    back = _hand_built((head, body, other), (*loop, Edge("n2", "n0", C.QA_FAIL, 0)))
    with pytest.raises(
        InvalidRequestError, match=r"^graph: edge n2 -> n0 \(qa_fail\) goes back without a bound"
    ):
        validate_graph(back)


_STEP = st.fixed_dictionaries(
    {
        "loop": st.booleans(),
        "qa": st.booleans(),
        "human": st.booleans(),
        "target": st.none() | st.integers(0, 9),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=10))
def test_every_template_that_parses_compiles_to_a_valid_graph(specs: list[dict[str, Any]]) -> None:
    steps = []
    for i, spec in enumerate(specs):
        raw: dict[str, Any] = {"name": f"s{i}", "topic": "t", "loopOverPlan": spec["loop"]}
        if spec["qa"]:
            raw["stageType"] = "qa_validation"
            if spec["target"] is not None:
                raw["retryTargetStage"] = spec["target"]
        elif spec["human"]:
            raw["stageType"] = "human_input"
        steps.append(raw)
    try:
        template = parse_template({"steps": steps}, name="t")
    except InvalidRequestError:
        return
    graph = compile_graph(template)
    validate_graph(graph)
    assert [n.key for n in graph.nodes] == [f"n{i}" for i in range(len(graph.nodes))]
    assert sorted(n.step_index for n in graph.nodes if n.step_index is not None) == list(range(len(steps)))
    for edge in graph.edges:
        if edge.condition is C.QA_FAIL:
            source = graph.node(edge.source)
            assert (
                graph.node(edge.target).loop == source.loop
                or graph.node(edge.target).kind is NodeKind.FOREACH
            )


# next_node -----------------------------------------------------------------------------------------------


def _qa_loop() -> Graph:
    return compiled(
        step("plan", producesPlan=True),
        step("implement", loopOverPlan=True),
        step("verify", stageType="qa_validation", loopOverPlan=True, maxRetries=2),
        step("report"),
    )


def test_next_node_walks_the_plan_loop() -> None:
    graph = _qa_loop()
    assert next_node(graph, "n0", Outcome.SUCCEEDED).target == "n1"
    assert next_node(graph, "n1", Outcome.ITEMS_PENDING) == Transition(
        T.ADVANCE, graph.edges_from("n1")[0], "n2"
    )
    assert next_node(graph, "n2", Outcome.SUCCEEDED).target == "n3"
    assert next_node(graph, "n3", Outcome.SUCCEEDED).target == "n1"
    assert next_node(graph, "n1", Outcome.ITEMS_DONE).target == "n4"
    assert next_node(graph, "n4", Outcome.SUCCEEDED) == Transition(T.FINISH)


def test_a_qa_failure_goes_back_to_the_implementer_until_its_retries_run_out() -> None:
    graph = _qa_loop()
    bounce = next_node(graph, "n3", Outcome.QA_FAILED)
    assert bounce.kind is T.ADVANCE and bounce.target == "n2" and bounce.edge is not None
    assert bounce.edge.key == "n3->n2:qa_fail"
    assert next_node(graph, "n3", Outcome.QA_FAILED, {"n3->n2:qa_fail": 1}).target == "n2"
    assert next_node(graph, "n3", Outcome.QA_FAILED, {"n3->n2:qa_fail": 2}) == Transition(
        T.EXHAUSTED, bounce.edge
    )
    audit = next_node(graph, "n3", Outcome.AUDIT_GATE_FAILED, {"n3->n2:qa_fail": 2})
    assert audit.target == "n3" and audit.edge is not None and audit.edge.condition is C.AUDIT_GATE_FAILED
    assert next_node(graph, "n3", Outcome.AUDIT_GATE_FAILED, {audit.edge.key: 2}).kind is T.EXHAUSTED


def test_an_error_fails_unless_an_on_error_edge_takes_it() -> None:
    graph = _qa_loop()
    assert next_node(graph, "n2", Outcome.ERROR) == Transition(T.FAIL)
    assert next_node(graph, "n4", Outcome.ERROR) == Transition(T.FAIL)
    assert next_node(graph, "n3", Outcome.ITEMS_DONE) == Transition(T.FAIL)  # nothing matches mid-graph
    handled = Graph(graph.template, graph.nodes, (*graph.edges, Edge("n2", "n4", C.ON_ERROR, 1)))
    assert next_node(handled, "n2", Outcome.ERROR).target == "n4"
    with pytest.raises(InvalidRequestError, match=r"^node 'n8' is not in the graph"):
        next_node(graph, "n8", Outcome.SUCCEEDED)


def test_when_several_edges_match_the_lowest_ordinal_wins() -> None:
    template: Template = parse_template({"steps": [step("a"), step("b"), step("c")]}, name="t")
    a, b, c = (Node(f"n{i}", NodeKind.STEP, n, i) for i, n in enumerate("abc"))
    edges = (
        Edge("n0", "n2", C.ALWAYS, 5),
        Edge("n0", "n1", C.QA_PASS, 2),
        Edge("n0", "n2", C.QA_FAIL, 1),
        Edge("n1", "n2", C.ALWAYS, 0),
    )
    graph = Graph(template, (a, b, c), edges)
    validate_graph(graph)
    assert next_node(graph, "n0", Outcome.SUCCEEDED).target == "n1"  # qa_pass (2) before always (5)
    assert next_node(graph, "n0", Outcome.QA_FAILED).target == "n2"
    assert next_node(graph, "n0", Outcome.AUDIT_GATE_FAILED).edge == edges[0]  # only always matches
    assert [e.ordinal for e in graph.edges_from("n0")] == [1, 2, 5]
    reordered = Graph(template, (a, b, c), (Edge("n0", "n2", C.ALWAYS, 0), *edges[1:]))
    assert next_node(reordered, "n0", Outcome.SUCCEEDED).target == "n2"
    assert next_node(reordered, "n0", Outcome.ERROR) == Transition(T.FAIL)  # always never matches an error
