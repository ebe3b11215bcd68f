"""Pipeline templates (FACTS.md §6): parsing, every validation error (a 400 naming the step and the
field), the export envelope, parameter values and prompt rendering."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from octipusd.errors import InvalidRequestError
from octipusd.pipelines.presets import presets
from octipusd.pipelines.prompts import missing_prompts, render_command, render_prompt, resolve_parameters
from octipusd.pipelines.templates import (
    DEFAULT_MAX_RETRIES,
    HumanField,
    InputType,
    Parameter,
    Requirement,
    StageType,
    Step,
    parse_template,
)


def step(name: str = "build", **fields: Any) -> dict[str, Any]:
    return {"name": name, "topic": "coding", **fields}


def doc(*steps: dict[str, Any], parameters: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": list(steps), **top}
    if parameters is not None:
        out["parameters"] = parameters
    return out


#: Every step field but name and topic (FACTS.md §6, and the seed's hostServices).
OPTIONAL_STEP_FIELDS = (
    "description",
    "toolIds",
    "requiresApproval",
    "promptTemplate",
    "stageType",
    "maxRetries",
    "retryTargetStage",
    "model",
    "maxTokens",
    "verifyCommand",
    "humanFields",
    "producesArtifacts",
    "runsCommands",
    "readOnly",
    "mechanical",
    "loopOverPlan",
    "producesPlan",
    "hostServices",
)


def refused(document: object, message: str, **kwargs: Any) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_template(document, **{"name": "t", **kwargs})
    assert caught.value.message == message
    assert caught.value.http_status == 400


# Parsing --------------------------------------------------------------------------------------


def test_every_step_field_is_read() -> None:
    template = parse_template(
        {
            "octipusRecipe": 1,
            "name": "full",
            "description": "all fields",
            "parameters": [{"key": "cmd", "inputType": "string", "requirement": "required"}],
            "steps": [
                {
                    "name": "plan",
                    "topic": "planning",
                    "description": "d",
                    "toolIds": ["get_work_plan"],
                    "requiresApproval": True,
                    "promptTemplate": "p {{param.cmd}}",
                    "stageType": "standard",
                    "maxRetries": 5,
                    "model": "fast",
                    "maxTokens": 1000,
                    "producesPlan": True,
                    "readOnly": True,
                    "mechanical": True,
                    "hostServices": True,
                },
                {
                    "name": "ask",
                    "stageType": "human_input",
                    "humanFields": [
                        {"key": "ok", "label": "OK?", "options": ["yes", "no"]},
                        {"key": "why", "label": "Why"},
                    ],
                },
                {
                    "name": "do",
                    "topic": "coding",
                    "loopOverPlan": True,
                    "producesArtifacts": True,
                    "runsCommands": True,
                },
                {
                    "name": "qa",
                    "topic": "review",
                    "stageType": "qa_validation",
                    "loopOverPlan": True,
                    "retryTargetStage": 2,
                    "verifyCommand": "{{ param.cmd }}",
                },
            ],
        }
    )
    plan, ask, do, qa = template.steps
    assert plan == Step(
        name="plan",
        topic="planning",
        description="d",
        tool_ids=("get_work_plan",),
        requires_approval=True,
        prompt_template="p {{param.cmd}}",
        max_retries=5,
        model="fast",
        max_tokens=1000,
        produces_plan=True,
        read_only=True,
        mechanical=True,
        host_services=True,
    )
    assert ask.topic is None and ask.stage_type is StageType.HUMAN_INPUT and ask.is_human
    assert ask.human_fields == (HumanField("ok", "OK?", ("yes", "no")), HumanField("why", "Why"))
    assert (
        do.loop_over_plan
        and do.produces_artifacts
        and do.runs_commands
        and do.max_retries == DEFAULT_MAX_RETRIES
    )
    assert qa.is_qa and qa.retry_target_stage == 2 and qa.verify_command == "{{ param.cmd }}"
    assert template.parameters == (Parameter("cmd", InputType.STRING, Requirement.REQUIRED),)
    assert (template.name, template.description) == ("full", "all fields")


def test_the_export_envelope_round_trips() -> None:
    for preset in presets():
        envelope = preset.to_envelope()
        assert envelope["octipusRecipe"] == 1
        assert set(envelope) == {"octipusRecipe", "name", "description", "steps", "parameters"}
        assert parse_template(envelope) == preset


def test_steps_and_parameters_without_an_envelope_take_the_given_name() -> None:
    template = parse_template(doc(step()), name="from-file")
    assert template.name == "from-file" and template.parameters == ()
    assert parse_template({**doc(step()), "name": "inside"}, name="from-file").name == "inside"


# Validation errors: FACTS.md §6 "Validation errors", then the fields' shapes ----------------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (doc(), "steps: a template needs at least one stage"),
        ({"parameters": []}, "steps: a template needs at least one stage"),
        ({"steps": {"name": "x"}}, "steps: a template needs at least one stage"),
        (doc(step(), {"topic": "coding"}), "steps[1].name: missing; give a non-empty string"),
        (doc({"name": "  ", "topic": "x"}), "steps[0].name: '  ' is not a non-empty string"),
        (doc(step(), step("test", topic=None)), "steps[1] ('test').topic: missing; give a non-empty string"),
        (doc({"name": "lint"}), "steps[0] ('lint').topic: missing; give a non-empty string"),
        (doc(step("lint", topic="")), "steps[0] ('lint').topic: '' is not a non-empty string"),
        (
            doc(step(), step("qa", stageType="qa_validation", retryTargetStage=1)),
            "steps[1] ('qa').retryTargetStage: 1 is not an earlier stage (give an index from 0 to 0)",
        ),
        (
            doc(step(), step("qa", stageType="qa_validation", retryTargetStage=5)),
            "steps[1] ('qa').retryTargetStage: 5 is not an earlier stage (give an index from 0 to 0)",
        ),
        (
            doc(step("qa", stageType="qa_validation")),
            "steps[0] ('qa').retryTargetStage: a qa_validation stage needs an earlier stage to retry; it is the first",
        ),
        (
            doc(step(), step("qa", stageType="qa_validation", maxRetries=0)),
            "steps[1] ('qa').maxRetries: a qa_validation stage needs maxRetries >= 1, got 0",
        ),
        (
            doc(
                step("plan"),
                step("do", loopOverPlan=True),
                step("qa", stageType="qa_validation", loopOverPlan=True, retryTargetStage=0),
            ),
            "steps[2] ('qa').retryTargetStage: 'plan' (stage 0) is outside this stage's loop; inside a loop a QA stage "
            "retries an earlier stage of the same loop body (set retryTargetStage to one)",
        ),
        (
            doc(
                step("plan"),
                step("qa", stageType="qa_validation", loopOverPlan=True),
                step("do", loopOverPlan=True),
            ),
            "steps[1] ('qa').retryTargetStage: 'plan' (stage 0) is outside this stage's loop; inside a loop a QA stage "
            "retries an earlier stage of the same loop body (set retryTargetStage to one)",
        ),
        (
            doc(step(), step("fix", retryTargetStage=3)),
            "steps[1] ('fix').retryTargetStage: 3 is not an earlier stage (give an index from 0 to 0)",
        ),
        (
            doc(step(loopOverplan=True)),
            "steps[0] ('build').loopOverplan: unknown field; accepted: "
            + ", ".join(sorted({"name", "topic", *OPTIONAL_STEP_FIELDS})),
        ),
        (doc("build"), "steps[0]: str is not a JSON object"),
        (
            doc(step(stageType="qa")),
            "steps[0] ('build').stageType: 'qa' is not standard, qa_validation or human_input",
        ),
        (
            doc(step(toolIds="shell")),
            "steps[0] ('build').toolIds: 'shell' is not a list of non-empty strings",
        ),
        (doc(step(toolIds=[""])), "steps[0] ('build').toolIds: [''] is not a list of non-empty strings"),
        (doc(step(readOnly="yes")), "steps[0] ('build').readOnly: 'yes' is not true or false"),
        (doc(step(hostServices=1)), "steps[0] ('build').hostServices: 1 is not true or false"),
        (doc(step(requiresApproval="no")), "steps[0] ('build').requiresApproval: 'no' is not true or false"),
        (doc(step(maxTokens=0)), "steps[0] ('build').maxTokens: 0 is not a whole number >= 1"),
        (doc(step(maxRetries=-1)), "steps[0] ('build').maxRetries: -1 is not a whole number >= 0"),
        (doc(step(maxRetries=True)), "steps[0] ('build').maxRetries: True is not a whole number >= 0"),
        (
            doc(step(), step(retryTargetStage="0")),
            "steps[1] ('build').retryTargetStage: '0' is not a whole number >= 0",
        ),
        (doc(step(model="")), "steps[0] ('build').model: '' is not a non-empty string"),
        (doc(step(verifyCommand=" ")), "steps[0] ('build').verifyCommand: ' ' is not a non-empty string"),
        (doc(step(promptTemplate=3)), "steps[0] ('build').promptTemplate: 3 is not a non-empty string"),
        (doc(step(humanFields={})), "steps[0] ('build').humanFields: {} is not a list"),
        (
            doc(step(humanFields=[{"key": "k"}])),
            "steps[0] ('build').humanFields[0].label: missing; give a non-empty string",
        ),
        (
            doc(step(humanFields=[{"key": "k", "label": "L", "options": "a"}])),
            "steps[0] ('build').humanFields[0].options: 'a' is not a list of non-empty strings",
        ),
        (
            doc(step(promptTemplate="deploy {{ param.env }}")),
            "steps[0] ('build').promptTemplate: {{param.env}} names an undeclared parameter (declared: none)",
        ),
        (
            doc(step(verifyCommand="make {{param.target}}"), parameters=[{"key": "goal"}]),
            "steps[0] ('build').verifyCommand: {{param.target}} names an undeclared parameter (declared: goal)",
        ),
        ({**doc(step()), "octipusRecipe": 2}, "octipusRecipe: 2 is not a known version (1)"),
        (
            {**doc(step()), "extra": 1},
            "template.extra: unknown field; accepted: description, name, octipusRecipe, parameters, steps",
        ),
        ([step()], "template: list is not a JSON object"),
        ({**doc(step()), "parameters": {}}, "parameters: {} is not a list"),
    ],
)
def test_a_bad_document_is_refused_naming_the_step_and_field(document: object, message: str) -> None:
    refused(document, message)


def test_a_null_field_counts_as_not_given() -> None:
    nulls = dict.fromkeys(OPTIONAL_STEP_FIELDS)
    template = parse_template(
        {
            **doc(
                step(**nulls),
                parameters=[
                    {"key": "k", "inputType": None, "requirement": None, "default": None, "options": None}
                ],
            ),
            "description": None,
        },
        name="t",
    )
    assert template.steps == (Step("build", "coding"),)
    assert template.parameters == (Parameter("k"),) and template.description == ""
    assert parse_template({"steps": [step()], "parameters": None}, name="t").parameters == ()


def test_a_template_needs_a_name() -> None:
    with pytest.raises(InvalidRequestError, match=r"^name: the template has no name; give one$"):
        parse_template(doc(step()))
    with pytest.raises(InvalidRequestError, match=r"^name: the template has no name; give one$"):
        parse_template(doc(step()), name=" ")


def test_more_stages_than_max_pipeline_stages_are_refused() -> None:
    eleven = doc(*(step(f"s{i}") for i in range(11)))
    refused(eleven, "steps: 11 stages exceed orchestrator.maxPipelineStages (10)")
    refused(
        doc(step("a"), step("b")), "steps: 2 stages exceed orchestrator.maxPipelineStages (1)", max_stages=1
    )
    assert len(parse_template(doc(*(step(f"s{i}") for i in range(10))), name="t").steps) == 10


def test_a_human_input_stage_needs_no_topic_and_a_qa_stage_may_retry_any_earlier_stage() -> None:
    template = parse_template(
        doc(
            step("a"),
            {"name": "ask", "stageType": "human_input"},
            step("qa", stageType="qa_validation", retryTargetStage=0),
        ),
        name="t",
    )
    assert template.steps[1].topic is None and template.steps[2].retry_target_stage == 0


@pytest.mark.parametrize(
    ("parameter", "message"),
    [
        (
            {"key": "1st"},
            "parameters[0].key: '1st' is not a parameter key (a letter or '_', then up to 63 letters, digits, '_' or '-')",
        ),
        (
            {"key": "a.b"},
            "parameters[0].key: 'a.b' is not a parameter key (a letter or '_', then up to 63 letters, digits, '_' or '-')",
        ),
        (
            {"inputType": "string"},
            "parameters[0].key: None is not a parameter key (a letter or '_', then up to 63 letters, digits, '_' or '-')",
        ),
        (
            {"key": "k", "inputType": "text"},
            "parameters[0] ('k').inputType: 'text' is not string, number, boolean, date or select",
        ),
        (
            {"key": "k", "requirement": "maybe"},
            "parameters[0] ('k').requirement: 'maybe' is not required, optional or user_prompt",
        ),
        (
            {"key": "k", "inputType": "select"},
            "parameters[0] ('k').options: a select parameter needs a non-empty list of options",
        ),
        (
            {"key": "k", "inputType": "select", "options": []},
            "parameters[0] ('k').options: a select parameter needs a non-empty list of options",
        ),
        ({"key": "k", "options": ["a"]}, "parameters[0] ('k').options: only a select parameter has options"),
        (
            {"key": "k", "inputType": "number", "default": "many"},
            "parameters[0] ('k').default: 'many' is not a number",
        ),
        (
            {"key": "k", "inputType": "boolean", "default": 1},
            "parameters[0] ('k').default: 1 is not true or false",
        ),
        (
            {"key": "k", "inputType": "date", "default": "2024-02-30"},
            "parameters[0] ('k').default: '2024-02-30' is not a date YYYY-MM-DD",
        ),
        (
            {"key": "k", "inputType": "date", "default": "20240201"},
            "parameters[0] ('k').default: '20240201' is not a date YYYY-MM-DD",
        ),
        (
            {"key": "k", "inputType": "select", "options": ["a", "b"], "default": "c"},
            "parameters[0] ('k').default: 'c' is not one of a, b",
        ),
        ({"key": "k", "default": 3}, "parameters[0] ('k').default: 3 is not a string"),
        (
            {"key": "k", "label": "K"},
            "parameters[0].label: unknown field; accepted: default, description, inputType, key, options, requirement",
        ),
    ],
)
def test_a_bad_parameter_is_refused_naming_it(parameter: dict[str, Any], message: str) -> None:
    refused(doc(step(), parameters=[parameter]), message)


def test_a_parameter_declared_twice_is_refused() -> None:
    refused(
        doc(step(), parameters=[{"key": "k"}, {"key": "k"}]),
        "parameters[1] ('k').key: parameter 'k' is declared twice",
    )


def test_parameter_defaults_are_checked_and_kept() -> None:
    template = parse_template(
        doc(
            step(),
            parameters=[
                {"key": "n", "inputType": "number", "requirement": "optional", "default": 2.5},
                {"key": "on", "inputType": "boolean", "requirement": "optional", "default": False},
                {"key": "day", "inputType": "date", "default": "2024-02-29"},
                {
                    "key": "env",
                    "inputType": "select",
                    "options": ["dev", "prod"],
                    "default": "dev",
                    "description": "where",
                },
            ],
        ),
        name="t",
    )
    n, on, day, env = template.parameters
    assert (n.default, on.default, day.default, env.default) == (2.5, False, "2024-02-29", "dev")
    assert env.options == ("dev", "prod") and env.description == "where"
    assert parse_template(template.to_envelope()) == template


# Parameter values --------------------------------------------------------------------------------


PARAMS = [
    {"key": "goal", "requirement": "required"},
    {"key": "count", "inputType": "number", "requirement": "optional", "default": 3},
    {"key": "dry", "inputType": "boolean", "requirement": "optional"},
    {"key": "when", "inputType": "date", "requirement": "optional"},
    {"key": "env", "inputType": "select", "options": ["dev", "prod"], "requirement": "user_prompt"},
]


def _params_template() -> Any:
    return parse_template(doc(step(), parameters=PARAMS), name="deploy")


def test_values_are_checked_converted_and_defaulted() -> None:
    template = _params_template()
    values = resolve_parameters(template, {"goal": "ship", "count": "7", "dry": "TRUE", "when": "2025-01-31"})
    assert values == {"goal": "ship", "count": 7, "dry": True, "when": "2025-01-31"}
    assert resolve_parameters(template, {"goal": "g", "count": "1.5e1"})["count"] == 15.0
    assert resolve_parameters(template, {"goal": "g"}) == {"goal": "g", "count": 3}
    assert [p.key for p in missing_prompts(template, values)] == ["env"]
    assert missing_prompts(template, {**values, "env": "dev"}) == ()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "parameters.goal: required by template 'deploy'; give a value"),
        ({"goal": None}, "parameters.goal: required by template 'deploy'; give a value"),
        (
            {"goal": "g", "region": "eu"},
            "parameters.region: template 'deploy' declares no such parameter (declared: goal, count, dry, when, env)",
        ),
        ({"goal": 5}, "parameters.goal: 5 is not a string"),
        ({"goal": "g", "count": "nan"}, "parameters.count: 'nan' is not a number"),
        ({"goal": "g", "count": float("inf")}, "parameters.count: inf is not a number"),
        ({"goal": "g", "count": True}, "parameters.count: True is not a number"),
        ({"goal": "g", "dry": "yes"}, "parameters.dry: 'yes' is not true or false"),
        ({"goal": "g", "when": "tomorrow"}, "parameters.when: 'tomorrow' is not a date YYYY-MM-DD"),
        ({"goal": "g", "env": "staging"}, "parameters.env: 'staging' is not one of dev, prod"),
    ],
)
def test_bad_values_are_refused_naming_the_parameter(given: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        resolve_parameters(_params_template(), given)
    assert caught.value.message == message


# Prompts -------------------------------------------------------------------------------------------


def test_prompt_variables_are_filled_with_spaces_inside_the_braces() -> None:
    template = parse_template(
        doc(
            step(
                description="build it",
                promptTemplate="Goal: {{ param.goal }}/{{param.goal}}. Do: {{description}}. Before: {{  previousOutput }}. "
                "Keep {{secret:TOKEN}} and {{other}}; dry={{param.dry}} n={{param.count}} missing=[{{param.when}}]",
            ),
            parameters=PARAMS,
        ),
        name="t",
    )
    values = resolve_parameters(template, {"goal": "ship", "dry": False})
    assert render_prompt(template, 0, values, previous_output="plan done") == (
        "Goal: ship/ship. Do: build it. Before: plan done. Keep {{secret:TOKEN}} and {{other}}; dry=false n=3 missing=[]"
    )


def test_a_step_without_a_prompt_executes_its_name_description_and_previous_output() -> None:
    template = parse_template(
        {**doc(step("lint", description="run the linter"), step("fix")), "description": "tidy the repo"},
        name="t",
    )
    assert render_prompt(template, 0, {}) == "Execute: lint\n\nrun the linter"
    assert (
        render_prompt(template, 0, {}, previous_output="nothing yet")
        == "Execute: lint\n\nrun the linter\n\nnothing yet"
    )
    assert (
        render_prompt(template, 1, {}, previous_output="3 warnings")
        == "Execute: fix\n\ntidy the repo\n\n3 warnings"
    )
    assert render_prompt(template, 1, {}, description="the task") == "Execute: fix\n\nthe task"


def test_the_verify_command_is_rendered_from_the_parameters() -> None:
    template = parse_template(
        doc(
            step(verifyCommand="make {{ param.target }} -j{{param.n}}"),
            step("b"),
            parameters=[
                {"key": "target"},
                {"key": "n", "inputType": "number", "requirement": "optional", "default": 4},
            ],
        ),
        name="t",
    )
    values = resolve_parameters(template, {"target": "test"})
    assert render_command(template.steps[0], values) == "make test -j4"
    assert render_command(template.steps[1], values) is None


@given(value=st.text(max_size=40), previous=st.text(max_size=40))
def test_a_value_is_never_expanded_again(value: str, previous: str) -> None:
    template = parse_template(
        doc(
            step(promptTemplate="[{{param.a}}|{{previousOutput}}|{{param.b}}]"),
            parameters=[{"key": "a"}, {"key": "b"}],
        ),
        name="t",
    )
    values = resolve_parameters(template, {"a": value, "b": "{{param.a}}"})
    assert (
        render_prompt(template, 0, values, previous_output=previous)
        == f"[{value}|{previous}|{{{{param.a}}}}]"
    )
