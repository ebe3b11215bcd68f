"""Pipeline templates as a service and in the store (FACTS.md §6 "Lookup"), on SQLite and PostgreSQL;
the presets that ship with Octipus."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.pipelines.graph import NodeKind, compile_graph
from octipusd.pipelines.presets import presets
from octipusd.pipelines.prompts import render_command, render_prompt, resolve_parameters
from octipusd.pipelines.template_service import LookupSource, TemplateService, fallback_template
from octipusd.pipelines.templates import Step, parse_template
from octipusd.store import Store

pytestmark = pytest.mark.anyio


def document(name: str, *stages: str, description: str = "") -> dict[str, Any]:
    return {
        "octipusRecipe": 1,
        "name": name,
        "description": description,
        "steps": [{"name": s, "topic": "coding"} for s in stages or ("work",)],
        "parameters": [],
    }


# Presets -------------------------------------------------------------------------------------------


def test_the_presets_parse_and_compile_as_intended() -> None:
    by_name = {t.name: t for t in presets()}
    assert sorted(by_name) == ["fix-failing-check", "plan-implement-verify", "review-branch"]

    piv = by_name["plan-implement-verify"]
    graph = compile_graph(piv)
    assert [(n.key, n.kind, n.name) for n in graph.nodes] == [
        ("n0", NodeKind.STEP, "plan"),
        ("n1", NodeKind.FOREACH, "for each item: implement, verify"),
        ("n2", NodeKind.STEP, "implement"),
        ("n3", NodeKind.STEP, "verify"),
    ]
    assert [(e.key, e.max_traversals) for e in graph.edges_from("n3")] == [
        ("n3->n2:qa_fail", 2),
        ("n3->n3:audit_gate_failed", 2),
        ("n3->n1:qa_pass", None),
    ]
    plan, implement, verify = piv.steps
    assert plan.produces_plan and plan.read_only
    assert implement.produces_artifacts and implement.runs_commands and implement.loop_over_plan
    values = resolve_parameters(piv, {"goal": "add a --json flag", "verifyCommand": "make test"})
    assert render_command(verify, values) == "make test"
    assert render_prompt(piv, 0, values).startswith("Goal: add a --json flag\n\n")
    with pytest.raises(
        InvalidRequestError, match=r"^parameters.verifyCommand: required by template 'plan-implement-verify'"
    ):
        resolve_parameters(piv, {"goal": "g"})

    review = by_name["review-branch"]
    (only,) = review.steps
    assert only.read_only and only.runs_commands and not only.produces_artifacts
    values = resolve_parameters(review, {"branch": "feature/x"})
    assert values == {"branch": "feature/x", "base": "main"}
    assert "`git diff main...feature/x`" in render_prompt(review, 0, values)

    fix = by_name["fix-failing-check"]
    assert [s.name for s in fix.steps] == ["diagnose", "fix", "verify"]
    assert render_command(fix.steps[2], {"command": "pytest -q"}) == "pytest -q"
    assert next((e.key, e.max_traversals) for e in compile_graph(fix).edges_from("n2")) == (
        "n2->n1:qa_fail",
        2,
    )


def test_the_fallback_is_one_general_stage_named_execute() -> None:
    template = fallback_template("  rename the flag  ")
    assert template.name == "Execute" and template.description == "rename the flag"
    assert template.steps == (Step(name="Execute", topic="general", description="rename the flag"),)
    assert render_prompt(template, 0, {}) == "Execute: Execute\n\nrename the flag"
    with pytest.raises(InvalidRequestError, match=r"^description: no template matched, and an empty request"):
        fallback_template(" ")


# The service on both backends -------------------------------------------------------------------------


async def test_list_shows_own_preset_and_unowned_templates_only(store: Store) -> None:
    service = TemplateService(store)
    await service.import_template("alice", document("mine"))
    await service.import_template(None, document("shared"))
    await service.import_template("bob", document("bobs"))
    listed = await service.list_templates("alice")
    assert [(e.name, e.owner, e.preset) for e in listed] == [
        ("fix-failing-check", None, True),
        ("mine", "alice", False),
        ("plan-implement-verify", None, True),
        ("review-branch", None, True),
        ("shared", None, False),
    ]
    summary = listed[2].summary()
    assert summary["id"] == "preset:plan-implement-verify" and summary["preset"] is True
    assert summary["stages"] == ["plan", "implement", "verify"] and summary["parameters"] == [
        "goal",
        "verifyCommand",
    ]
    assert parse_template(listed[1].to_json()["document"]) == parse_template(document("mine"))


async def test_import_show_and_export(store: Store) -> None:
    service = TemplateService(store)
    raw = {"steps": [{"name": "lint", "topic": "coding", "readOnly": True}], "parameters": [{"key": "path"}]}
    entry = await service.import_template("alice", raw, name="lint-it")
    assert len(entry.id) == 32 and entry.owner == "alice" and not entry.preset
    envelope = {
        "octipusRecipe": 1,
        "name": "lint-it",
        "description": "",
        "steps": [
            {
                "name": "lint",
                "topic": "coding",
                "toolIds": [],
                "requiresApproval": False,
                "stageType": "standard",
                "maxRetries": 3,
                "readOnly": True,
            }
        ],
        "parameters": [{"key": "path", "inputType": "string", "requirement": "required"}],
    }
    assert store.get_pipeline_template(entry.id).document == envelope
    assert (await service.show("alice", entry.id)).template == entry.template
    assert (await service.show("alice", "lint-it")).id == entry.id
    assert await service.export("alice", "lint-it") == envelope
    assert (
        await service.export("alice", "review-branch")
        == next(p for p in presets() if p.name == "review-branch").to_envelope()
    )
    with pytest.raises(
        NotFoundError, match=r"^pipeline template 'lint-it' not found \(no id or name matches\); octipusctl"
    ):
        await service.show("bob", "lint-it")
    with pytest.raises(
        NotFoundError,
        match=r"^pipeline template 'lint-i' not found \(no id or name matches\); did you mean lint-it\?$",
    ):
        await service.show("alice", "lint-i")


async def test_a_name_clash_is_a_conflict_naming_it_and_nothing_is_half_written(store: Store) -> None:
    service = TemplateService(store, max_stages=2)
    await service.import_template("alice", document("deploy"))
    with pytest.raises(ConflictError) as caught:
        await service.import_template("alice", document("deploy", "other"))
    assert (
        caught.value.message
        == "a pipeline template named 'deploy' (of 'alice') already exists; choose another name"
    )
    assert caught.value.http_status == 409
    await service.import_template("bob", document("deploy"))
    await service.import_template(None, document("deploy"))
    with pytest.raises(
        ConflictError, match=r"^a pipeline template named 'deploy' \(unowned\) already exists"
    ):
        await service.import_template(None, document("deploy"))
    with pytest.raises(
        ConflictError, match=r"^'review-branch' is the name of a preset template; choose another name$"
    ):
        await service.import_template("alice", document("review-branch"))
    with pytest.raises(InvalidRequestError, match=r"^steps\[0\] \('a'\)\.topic: missing"):
        await service.import_template("alice", {"name": "bad", "steps": [{"name": "a"}]})
    with pytest.raises(
        InvalidRequestError, match=r"^steps: 3 stages exceed orchestrator.maxPipelineStages \(2\)$"
    ):
        await service.import_template("alice", document("long", "a", "b", "c"))
    names = [(r.name, r.owner) for r in store.list_pipeline_templates("alice")]
    assert names == [("deploy", "alice"), ("deploy", None)]  # by name, own first


async def test_lookup_exact_then_fuzzy_then_the_execute_fallback(store: Store) -> None:
    service = TemplateService(store)
    shared = await service.import_template(None, document("nightly-report"))
    own = await service.import_template("alice", document("nightly-report", "mine"))
    await service.import_template(None, document("review-branch-strict"))

    exact = await service.lookup("alice", "nightly-report")
    assert (exact.source, exact.entry) == (LookupSource.EXACT, own)  # own before unowned
    assert (await service.lookup("bob", "nightly-report")).entry == shared
    assert (await service.lookup("bob", shared.id)).entry == shared
    preset = await service.lookup("alice", "review-branch")  # a preset before an unowned close name
    assert preset.source is LookupSource.EXACT and preset.entry is not None and preset.entry.preset

    fuzzy = await service.lookup("alice", "Nightly Report")
    assert (fuzzy.source, fuzzy.entry) == (LookupSource.FUZZY, own)
    close = await service.lookup("bob", "plan implement verfy")
    assert close.source is LookupSource.FUZZY and close.template.name == "plan-implement-verify"

    fallback = await service.lookup("alice", "translate the docs", request="translate the docs to French")
    assert fallback.source is LookupSource.FALLBACK and fallback.entry is None
    assert fallback.template == fallback_template("translate the docs to French")
    with pytest.raises(NotFoundError, match=r"^pipeline template 'translate the docs' not found"):
        await service.lookup("alice", "translate the docs")
    with pytest.raises(NotFoundError, match=r"^pipeline template '0{32}' not found"):
        await service.lookup("alice", "0" * 32)  # an id is never matched fuzzily


async def test_a_document_given_with_a_run_is_checked_but_not_stored(store: Store) -> None:
    service = TemplateService(store, max_stages=1)
    template = service.from_document({"steps": [{"name": "a", "topic": "x"}]}, name="inline")
    assert template.name == "inline" and [s.name for s in template.steps] == ["a"]
    with pytest.raises(
        InvalidRequestError, match=r"^steps: 2 stages exceed orchestrator.maxPipelineStages \(1\)$"
    ):
        service.from_document(document("two", "a", "b"))
    assert store.list_pipeline_templates(None) == []


async def test_lookup_refuses_a_stored_template_longer_than_the_stage_limit(store: Store) -> None:
    await TemplateService(store).import_template("alice", document("five", "a", "b", "c", "d", "e"))
    with pytest.raises(InvalidRequestError) as caught:
        await TemplateService(store, max_stages=4).lookup("alice", "five")
    assert (
        caught.value.message == "template: 'five' has 5 stages, more than orchestrator.maxPipelineStages (4)"
    )
    assert [e.name for e in await TemplateService(store, max_stages=4).list_templates("alice")].count(
        "five"
    ) == 1


async def test_delete_removes_only_what_the_user_owns(store: Store) -> None:
    service = TemplateService(store)
    entry = await service.import_template("alice", document("tmp"))
    await service.import_template(None, document("shared"))
    with pytest.raises(
        NotFoundError, match=r"^pipeline template 'tmp' not found among the templates you own$"
    ):
        await service.delete("bob", "tmp")
    with pytest.raises(
        NotFoundError, match=r"^pipeline template 'shared' not found among the templates you own$"
    ):
        await service.delete("alice", "shared")
    with pytest.raises(NotFoundError, match=r"^pipeline template 'review-branch' not found among"):
        await service.delete("alice", "review-branch")
    await service.delete("alice", "tmp")
    with pytest.raises(NotFoundError, match=rf"^pipeline template '{entry.id}' not found$"):
        store.get_pipeline_template(entry.id)
    await service.delete(None, "shared")
    assert store.list_pipeline_templates("alice") == []


def test_two_concurrent_imports_of_one_unowned_name_store_one(store: Store) -> None:
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def create() -> None:
        start.wait()
        try:
            store.create_pipeline_template(
                name="race", owner=None, description=None, document=document("race")
            )
            outcomes.append("stored")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "conflict", "conflict", "stored"]
    assert [r.name for r in store.list_pipeline_templates(None)] == ["race"]
