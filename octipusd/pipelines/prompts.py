"""Filling in a template's prompts, and checking a run's parameter values (FACTS.md §6 "Parameters").

:func:`resolve_parameters` checks the values given for a run against each parameter's ``inputType``
and ``requirement``. :func:`render_prompt` fills ``{{param.key}}`` (spaces inside the braces are
fine), ``{{description}}`` and ``{{previousOutput}}`` into a step's prompt in one pass (a value that
looks like a variable is not expanded again); any other ``{{...}}`` (a vault ``{{secret:NAME}}``
placeholder) is left as written. A step with no ``promptTemplate`` gets ``Execute: <name>``, then its
description, then the previous stage's output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from octipusd.errors import InvalidRequestError
from octipusd.pipelines.templates import (
    VARIABLE,
    Parameter,
    ParameterValue,
    Requirement,
    Step,
    Template,
    check_value,
)

__all__ = ["missing_prompts", "render_command", "render_prompt", "resolve_parameters"]


def resolve_parameters(template: Template, given: Mapping[str, object]) -> dict[str, ParameterValue]:
    """Check the values given for a run against the template's parameters.

    A value missing falls back to the parameter's default; a ``required`` parameter with neither
    is refused; an ``optional`` or ``user_prompt`` one is left out (the caller asks the person for
    the ``user_prompt`` ones still missing: :func:`missing_prompts`). Strings (``--param KEY=VALUE``)
    are converted to numbers and booleans.

    Raises:
        InvalidRequestError: A key is not declared, a value does not fit its type or options, or a
            required parameter has no value; the message names the parameter.
    """
    for key in given:
        if template.parameter(key) is None:
            declared = ", ".join(p.key for p in template.parameters) or "none"
            raise InvalidRequestError(
                f"parameters.{key}: template {template.name!r} declares no such parameter (declared: {declared})"
            )
    values: dict[str, ParameterValue] = {}
    for param in template.parameters:
        value = given.get(param.key)
        if value is None:
            value = param.default
        if value is None:
            if param.requirement is Requirement.REQUIRED:
                raise InvalidRequestError(
                    f"parameters.{param.key}: required by template {template.name!r}; give a value"
                )
            continue
        values[param.key] = check_value(param, value, f"parameters.{param.key}")
    return values


def missing_prompts(template: Template, values: Mapping[str, ParameterValue]) -> tuple[Parameter, ...]:
    """The ``user_prompt`` parameters that still have no value: a person must answer them first."""
    return tuple(
        p for p in template.parameters if p.requirement is Requirement.USER_PROMPT and p.key not in values
    )


def _display(value: ParameterValue | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _substitute(text: str, values: Mapping[str, ParameterValue], description: str, previous: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is not None:
            return _display(values.get(name))
        return description if match.group(2) == "description" else previous

    return VARIABLE.sub(one, text)


def render_prompt(
    template: Template,
    index: int,
    values: Mapping[str, ParameterValue],
    previous_output: str | None = None,
    description: str | None = None,
) -> str:
    """The prompt of ``template.steps[index]`` with its variables filled in (one pass: a value that
    itself looks like ``{{...}}`` is not expanded again).

    Args:
        template: The template.
        index: The step's index.
        values: The run's parameter values (:func:`resolve_parameters`); an optional parameter
            without a value renders empty.
        previous_output: The previous stage's output (empty when there is none).
        description: ``{{description}}`` when the step has no description of its own (the
            pipeline's task); defaults to the template's description.
    """
    step = template.steps[index]
    text = step.description or description or template.description
    previous = previous_output or ""
    if step.prompt_template is not None:
        return _substitute(step.prompt_template, values, text, previous)
    parts = [f"Execute: {step.name}", text, previous]
    return "\n\n".join(p for p in parts if p)


def render_command(step: Step, values: Mapping[str, ParameterValue]) -> str | None:
    """The step's ``verifyCommand`` with its ``{{param.key}}`` filled in, or None when it has none."""
    if step.verify_command is None:
        return None
    return _substitute(step.verify_command, values, step.description or "", "")
