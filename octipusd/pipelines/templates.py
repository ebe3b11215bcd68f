"""Pipeline templates (FACTS.md §6, seed 003): the stages a pipeline runs and the parameters it takes.

A template is a JSON document, either its steps and parameters::

    {"steps": [{"name": "plan", "topic": "planning", "producesPlan": true}, ...],
     "parameters": [{"key": "branch", "inputType": "string", "requirement": "required"}]}

or the export envelope :func:`Template.to_envelope` writes (what ``octipusctl pipelines templates
export`` prints and ``import`` reads)::

    {"octipusRecipe": 1, "name": "review-branch", "description": "...", "steps": [...], "parameters": [...]}

:func:`parse_template` checks every field once and builds frozen :class:`Template`, :class:`Step` and
:class:`Parameter` objects; every refusal is an :class:`~octipusd.errors.InvalidRequestError` whose
message names the step (its index from 0 and its name) and the field, e.g.
``steps[2] ("verify").retryTargetStage: ...``. The graph's own checks (backward edges, reachability)
are :mod:`octipusd.pipelines.graph`'s; a field given as ``null`` counts as not given; :func:`parse_template` runs them too, so a template that parses
compiles.

Prompt variables are ``{{param.key}}`` (spaces inside the braces are fine), ``{{description}}`` and
``{{previousOutput}}`` (:data:`VARIABLE`); a variable naming an undeclared parameter, in a
``promptTemplate`` or a ``verifyCommand``, is refused here. Filling them in, and checking a run's
parameter values, is :mod:`octipusd.pipelines.prompts`'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from typing import Any, Final

from octipusd.errors import InvalidRequestError
from octipusd.pipelines.graph import compile_graph, validate_graph

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_STAGES",
    "RECIPE_VERSION",
    "VARIABLE",
    "HumanField",
    "InputType",
    "Parameter",
    "ParameterValue",
    "Requirement",
    "StageType",
    "Step",
    "Template",
    "check_value",
    "parse_template",
]

#: The export envelope's version (``octipusRecipe``).
RECIPE_VERSION: Final = 1
#: ``maxRetries`` of a step that does not set it (FACTS.md §6): QA bounces, retries of one stage.
DEFAULT_MAX_RETRIES: Final = 3
#: Default of ``orchestrator.maxPipelineStages``: steps one template may have at most.
DEFAULT_MAX_STAGES: Final = 10
#: Longest template or stage name, in characters.
MAX_NAME_CHARS: Final = 200

#: A parameter value once checked: text (``string``, ``date``, ``select``), a number or a boolean.
ParameterValue = str | int | float | bool

_PARAM_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: ``{{param.key}}``, ``{{description}}``, ``{{previousOutput}}``, spaces allowed inside the braces.
VARIABLE = re.compile(r"\{\{\s*(?:param\.([^\s{}]*)|(description|previousOutput))\s*\}\}")


class StageType(StrEnum):
    """``stageType``: an ordinary stage, a QA stage that can bounce work back, or a person's input."""

    STANDARD = "standard"
    QA_VALIDATION = "qa_validation"
    HUMAN_INPUT = "human_input"


class InputType(StrEnum):
    """``inputType`` of a parameter."""

    STRING = "string"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATE = "date"
    SELECT = "select"


class Requirement(StrEnum):
    """``requirement`` of a parameter: must be given, may be omitted, or asked of the person."""

    REQUIRED = "required"
    OPTIONAL = "optional"
    USER_PROMPT = "user_prompt"


@dataclass(frozen=True)
class HumanField:
    """One field a ``human_input`` stage asks a person (``humanFields[]``)."""

    key: str
    label: str
    options: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The field as the template document writes it."""
        out: dict[str, Any] = {"key": self.key, "label": self.label}
        if self.options is not None:
            out["options"] = list(self.options)
        return out


@dataclass(frozen=True)
class Step:
    """One stage of a template (FACTS.md §6 "Step fields", plus the seed's ``hostServices``).

    Attributes:
        name: The stage's name (``fromStage`` may name it).
        topic: What kind of work it is (e.g. ``planning``, ``coding``); None only for ``human_input``.
        description: What the stage does; ``{{description}}`` in its prompt.
        tool_ids: Octipus tools its worker's bridge publishes (empty: the defaults).
        requires_approval: A person approves the stage before it runs (the next issue's approvals).
        prompt_template: Its prompt; None: ``Execute: <name>``, description, previous output.
        stage_type: standard, qa_validation or human_input.
        max_retries: QA bounces (and contract retries) at most, additional attempts.
        retry_target_stage: Index (from 0) of the stage a QA failure goes back to; None: the previous.
        model: A model row name for the worker; None: the session's.
        max_tokens: Tokens one visit of the stage may use.
        verify_command: A command (``{{param.key}}`` allowed) whose outcome the auditor gets.
        human_fields: What a ``human_input`` stage asks.
        produces_artifacts: Evidence gate: the stage must change files.
        runs_commands: Evidence gate: the stage must run commands.
        read_only: Evidence gate: the stage must leave the disk unchanged.
        mechanical: The work is mechanical (a cheaper model may do it).
        loop_over_plan: The stage is in the body of the loop over the plan's items.
        produces_plan: The stage writes the plan's items; leaving none fails it.
        host_services: Its commands share the host network and the Docker socket (seed 003).
    """

    name: str
    topic: str | None
    description: str | None = None
    tool_ids: tuple[str, ...] = ()
    requires_approval: bool = False
    prompt_template: str | None = None
    stage_type: StageType = StageType.STANDARD
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_target_stage: int | None = None
    model: str | None = None
    max_tokens: int | None = None
    verify_command: str | None = None
    human_fields: tuple[HumanField, ...] = ()
    produces_artifacts: bool = False
    runs_commands: bool = False
    read_only: bool = False
    mechanical: bool = False
    loop_over_plan: bool = False
    produces_plan: bool = False
    host_services: bool = False

    @property
    def is_qa(self) -> bool:
        """A ``qa_validation`` stage."""
        return self.stage_type is StageType.QA_VALIDATION

    @property
    def is_human(self) -> bool:
        """A ``human_input`` stage."""
        return self.stage_type is StageType.HUMAN_INPUT

    def to_json(self) -> dict[str, Any]:
        """The step as the template document writes it (camelCase; unset optional fields left out)."""
        out: dict[str, Any] = {"name": self.name}
        for key, attr in _STEP_OPTIONAL:
            value = getattr(self, attr)
            if value is not None:
                out[key] = value
        out["toolIds"] = list(self.tool_ids)
        out["requiresApproval"] = self.requires_approval
        out["stageType"] = self.stage_type.value
        out["maxRetries"] = self.max_retries
        if self.human_fields:
            out["humanFields"] = [f.to_json() for f in self.human_fields]
        for key, attr in _STEP_FLAGS:
            if getattr(self, attr):
                out[key] = True
        return out


@dataclass(frozen=True)
class Parameter:
    """One parameter of a template (FACTS.md §6 "Parameters")."""

    key: str
    input_type: InputType = InputType.STRING
    requirement: Requirement = Requirement.REQUIRED
    description: str | None = None
    default: ParameterValue | None = None
    options: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The parameter as the template document writes it."""
        out: dict[str, Any] = {
            "key": self.key,
            "inputType": self.input_type.value,
            "requirement": self.requirement.value,
        }
        if self.description is not None:
            out["description"] = self.description
        if self.default is not None:
            out["default"] = self.default
        if self.options is not None:
            out["options"] = list(self.options)
        return out


@dataclass(frozen=True)
class Template:
    """A parsed, checked template. Build it with :func:`parse_template`."""

    name: str
    description: str
    steps: tuple[Step, ...]
    parameters: tuple[Parameter, ...] = ()
    _by_key: Mapping[str, Parameter] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {p.key: p for p in self.parameters})

    def parameter(self, key: str) -> Parameter | None:
        """The parameter declared under ``key``, or None."""
        return self._by_key.get(key)

    def to_envelope(self) -> dict[str, Any]:
        """The export envelope ``{octipusRecipe: 1, name, description, steps, parameters}``."""
        return {
            "octipusRecipe": RECIPE_VERSION,
            "name": self.name,
            "description": self.description,
            "steps": [s.to_json() for s in self.steps],
            "parameters": [p.to_json() for p in self.parameters],
        }


#: Optional step fields: (document key, attribute), written when not None.
_STEP_OPTIONAL: Final = (
    ("description", "description"),
    ("topic", "topic"),
    ("promptTemplate", "prompt_template"),
    ("retryTargetStage", "retry_target_stage"),
    ("model", "model"),
    ("maxTokens", "max_tokens"),
    ("verifyCommand", "verify_command"),
)
#: Boolean flags: (document key, attribute), written when true.
_STEP_FLAGS: Final = (
    ("producesArtifacts", "produces_artifacts"),
    ("runsCommands", "runs_commands"),
    ("readOnly", "read_only"),
    ("mechanical", "mechanical"),
    ("loopOverPlan", "loop_over_plan"),
    ("producesPlan", "produces_plan"),
    ("hostServices", "host_services"),
)
_STEP_KEYS: Final = frozenset(
    {"name", "toolIds", "requiresApproval", "stageType", "maxRetries", "humanFields"}
    | {k for k, _ in _STEP_OPTIONAL}
    | {k for k, _ in _STEP_FLAGS}
)
_PARAMETER_KEYS: Final = frozenset({"key", "description", "inputType", "requirement", "default", "options"})
_ENVELOPE_KEYS: Final = frozenset({"octipusRecipe", "name", "description", "steps", "parameters"})


# Parsing -------------------------------------------------------------------------------------


def _step_where(index: int, raw: object) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"steps[{index}] ({name!r})" if isinstance(name, str) and name.strip() else f"steps[{index}]"


def _given(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    """``raw[key]``, or ``default`` when it is missing or null."""
    value = raw.get(key)
    return default if value is None else value


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise InvalidRequestError(f"{where}.{key}: missing; give a non-empty string")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidRequestError(f"{where}.{key}: {value!r} is not a non-empty string")
    return value


def _flag(raw: Mapping[str, Any], key: str, where: str) -> bool:
    value = raw.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{where}.{key}: {value!r} is not true or false")
    return value


def _whole(raw: Mapping[str, Any], key: str, where: str, low: int) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidRequestError(f"{where}.{key}: {value!r} is not a whole number >= {low}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequestError(f"{where}: {value!r} is not a list of non-empty strings")
    return tuple(value)


def _object(value: object, where: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{where}: {type(value).__name__} is not a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"{where}.{unknown[0]}: unknown field; accepted: {', '.join(sorted(allowed))}"
        )
    return value


def _human_fields(value: object, where: str) -> tuple[HumanField, ...]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}.humanFields: {value!r} is not a list")
    out = []
    for i, raw in enumerate(value):
        here = f"{where}.humanFields[{i}]"
        item = _object(raw, here, frozenset({"key", "label", "options"}))
        options = item.get("options")
        out.append(
            HumanField(
                key=_text(item, "key", here, required=True) or "",
                label=_text(item, "label", here, required=True) or "",
                options=None if options is None else _strings(options, f"{here}.options"),
            )
        )
    return tuple(out)


def _parse_step(index: int, value: object) -> Step:
    where = _step_where(index, value)
    raw = _object(value, where, _STEP_KEYS)
    name = _text(raw, "name", where, required=True) or ""
    if len(name) > MAX_NAME_CHARS:
        raise InvalidRequestError(f"{where}.name: longer than {MAX_NAME_CHARS} characters")
    stage_type = _given(raw, "stageType", StageType.STANDARD.value)
    if stage_type not in {t.value for t in StageType}:
        raise InvalidRequestError(
            f"{where}.stageType: {stage_type!r} is not standard, qa_validation or human_input"
        )
    kind = StageType(stage_type)
    topic = _text(raw, "topic", where, required=kind is not StageType.HUMAN_INPUT)
    max_retries = _whole(raw, "maxRetries", where, 0)
    if kind is StageType.QA_VALIDATION and max_retries is not None and max_retries < 1:
        raise InvalidRequestError(
            f"{where}.maxRetries: a qa_validation stage needs maxRetries >= 1, got {max_retries}"
        )
    human = raw.get("humanFields")
    return Step(
        name=name,
        topic=topic,
        description=_text(raw, "description", where),
        tool_ids=_strings(_given(raw, "toolIds", []), f"{where}.toolIds"),
        requires_approval=_flag(raw, "requiresApproval", where),
        prompt_template=_text(raw, "promptTemplate", where),
        stage_type=kind,
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
        retry_target_stage=_whole(raw, "retryTargetStage", where, 0),
        model=_text(raw, "model", where, required=raw.get("model") is not None),
        max_tokens=_whole(raw, "maxTokens", where, 1),
        verify_command=_text(raw, "verifyCommand", where, required=raw.get("verifyCommand") is not None),
        human_fields=() if human is None else _human_fields(human, where),
        **{attr: _flag(raw, key, where) for key, attr in _STEP_FLAGS},
    )


def check_value(param: Parameter, value: object, where: str) -> ParameterValue:
    """``value`` checked against ``param``'s input type (a string from a command line is converted)."""
    kind = param.input_type
    if kind is InputType.NUMBER:
        if isinstance(value, str):
            with suppress(ValueError):
                value = float(value) if any(c in value for c in ".eE") else int(value)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidRequestError(f"{where}: {value!r} is not a number")
        return value
    if kind is InputType.BOOLEAN:
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            value = value.lower() == "true"
        if not isinstance(value, bool):
            raise InvalidRequestError(f"{where}: {value!r} is not true or false")
        return value
    if not isinstance(value, str):
        raise InvalidRequestError(f"{where}: {value!r} is not a string")
    if kind is InputType.DATE and not _DATE.match(value):
        raise InvalidRequestError(f"{where}: {value!r} is not a date YYYY-MM-DD")
    if kind is InputType.DATE:
        try:
            date.fromisoformat(value)
        except ValueError:
            raise InvalidRequestError(f"{where}: {value!r} is not a date YYYY-MM-DD") from None
    if kind is InputType.SELECT and param.options is not None and value not in param.options:
        raise InvalidRequestError(f"{where}: {value!r} is not one of {', '.join(param.options)}")
    return value


def _parse_parameter(index: int, value: object, seen: set[str]) -> Parameter:
    where = f"parameters[{index}]"
    raw = _object(value, where, _PARAMETER_KEYS)
    key = raw.get("key")
    if not isinstance(key, str) or not _PARAM_KEY.match(key):
        raise InvalidRequestError(
            f"{where}.key: {key!r} is not a parameter key (a letter or '_', then up to 63 letters, digits, '_' or '-')"
        )
    where = f"parameters[{index}] ({key!r})"
    if key in seen:
        raise InvalidRequestError(f"{where}.key: parameter {key!r} is declared twice")
    seen.add(key)
    input_type = _given(raw, "inputType", InputType.STRING.value)
    if input_type not in {t.value for t in InputType}:
        raise InvalidRequestError(
            f"{where}.inputType: {input_type!r} is not string, number, boolean, date or select"
        )
    requirement = _given(raw, "requirement", Requirement.REQUIRED.value)
    if requirement not in {r.value for r in Requirement}:
        raise InvalidRequestError(
            f"{where}.requirement: {requirement!r} is not required, optional or user_prompt"
        )
    options = raw.get("options")
    if options is not None and input_type != InputType.SELECT.value:
        raise InvalidRequestError(f"{where}.options: only a select parameter has options")
    if input_type == InputType.SELECT.value and not options:
        raise InvalidRequestError(f"{where}.options: a select parameter needs a non-empty list of options")
    param = Parameter(
        key=key,
        input_type=InputType(input_type),
        requirement=Requirement(requirement),
        description=_text(raw, "description", where),
        options=None if options is None else _strings(options, f"{where}.options"),
    )
    default = raw.get("default")
    if default is None:
        return param
    return replace(param, default=check_value(param, default, f"{where}.default"))


def _check_variables(template: Template) -> None:
    for i, step in enumerate(template.steps):
        for key, text in (("promptTemplate", step.prompt_template), ("verifyCommand", step.verify_command)):
            for match in VARIABLE.finditer(text or ""):
                name = match.group(1)
                if name is not None and template.parameter(name) is None:
                    declared = ", ".join(p.key for p in template.parameters) or "none"
                    raise InvalidRequestError(
                        f"steps[{i}] ({step.name!r}).{key}: {{{{param.{name}}}}} names an undeclared "
                        f"parameter (declared: {declared})"
                    )


def _check_retry_target(template: Template) -> None:
    """An explicit ``retryTargetStage`` names an earlier stage (the graph checks the QA defaults and loops)."""
    for i, step in enumerate(template.steps):
        target = step.retry_target_stage
        if target is not None and target >= i:
            where = f"steps[{i}] ({step.name!r}).retryTargetStage"
            earlier = f"give an index from 0 to {i - 1}" if i else "the first stage has none"
            raise InvalidRequestError(f"{where}: {target} is not an earlier stage ({earlier})")


def parse_template(
    document: object, *, name: str | None = None, max_stages: int = DEFAULT_MAX_STAGES
) -> Template:
    """Parse and check a template document (steps and parameters, or the export envelope).

    Args:
        document: The decoded JSON: ``{steps, parameters}`` or ``{octipusRecipe: 1, name,
            description, steps, parameters}``.
        name: The template's name when the document has none (a file's stem); the envelope's wins.
        max_stages: ``orchestrator.maxPipelineStages``: steps a template may have at most.

    Returns:
        The template; its graph compiles (:func:`octipusd.pipelines.graph.compile_graph`).

    Raises:
        InvalidRequestError: A field is missing or wrong; the message names the step (index and
            name) or parameter and the field, and what is accepted.
    """
    raw = _object(document, "template", _ENVELOPE_KEYS)
    if "octipusRecipe" in raw and raw["octipusRecipe"] != RECIPE_VERSION:
        raise InvalidRequestError(
            f"octipusRecipe: {raw['octipusRecipe']!r} is not a known version ({RECIPE_VERSION})"
        )
    title = _text(raw, "name", "template") or name
    if title is None or not title.strip():
        raise InvalidRequestError("name: the template has no name; give one")
    if len(title) > MAX_NAME_CHARS:
        raise InvalidRequestError(f"name: longer than {MAX_NAME_CHARS} characters")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InvalidRequestError("steps: a template needs at least one stage")
    if len(steps) > max_stages:
        raise InvalidRequestError(
            f"steps: {len(steps)} stages exceed orchestrator.maxPipelineStages ({max_stages})"
        )
    params = _given(raw, "parameters", [])
    if not isinstance(params, list):
        raise InvalidRequestError(f"parameters: {params!r} is not a list")
    seen: set[str] = set()
    template = Template(
        name=title.strip(),
        description=_text(raw, "description", "template") or "",
        steps=tuple(_parse_step(i, s) for i, s in enumerate(steps)),
        parameters=tuple(_parse_parameter(i, p, seen) for i, p in enumerate(params)),
    )
    _check_retry_target(template)
    _check_variables(template)
    validate_graph(compile_graph(template))
    return template
