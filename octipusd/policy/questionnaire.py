"""Claude Code's ``AskUserQuestion`` tool as an Octipus questionnaire approval. Pure: no I/O.

``AskUserQuestion`` is an interactive questionnaire, not a yes/no tool approval (seed 003, "All
Octipus tool calls use Octipus permissions"): Claude relays it like any native tool as a
``control_request``/``can_use_tool`` (Octipus tool id ``cli-native:AskUserQuestion``), and the
answers travel back inside the allow's ``updatedInput``. Cancelling is a deny.

Protocol facts (sources.md §1.9, and what Claude Code 2.1.197 did when driven offline through the
Claude Code adapter, see ``tests/unit/adapters/test_claude_code_questionnaire.py``):

* The relayed ``input`` is ``{"questions": [{"question", "header", "options": [{"label",
  "description", "preview"?}], "multiSelect"}], "metadata"?}``. Claude validates the model's call
  before relaying it (1-4 questions, 2-4 options, ``description`` required, question texts unique,
  labels unique within a question; ``multiSelect`` defaults to false) and strips any ``answers``
  the model put in its own input. The request is relayed in every permission mode, including
  ``bypassPermissions``.
* Allow with ``updatedInput = {**input, "answers": {"<question text>": "<answer>"}}``: the model
  receives the tool result ``Your questions have been answered: "<q1>"="<a1>", "<q2>"="<a2>". You
  can now continue with these answers in mind.`` Each answer string is shown verbatim, so a free
  text is as good as a label. A list value is shown JavaScript-style, ``Auth,Export`` (no
  space); hence :func:`answered_input` joins multi-select answers with ``", "`` itself.
* Claude does not check the answers: a missing question, an empty string or an unknown question
  key is silently left out, and an allow without any answer (a bare allow echoing the input)
  gives the model ``The user did not answer the questions.`` with no error. So Octipus validates
  the answers (:func:`validate_answers`) and refuses a bare allow (:data:`BARE_ALLOW_ERROR`).
* Deny with a message: the model receives that message as an error tool result
  (``is_error: true``) and the call is listed in ``result.permission_denials``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from octipusd.errors import QuestionnaireError

__all__ = [
    "BARE_ALLOW_ERROR",
    "CANCEL_MESSAGE",
    "QUESTIONNAIRE_TOOL",
    "Option",
    "Question",
    "Questionnaire",
    "answered_input",
    "is_questionnaire",
    "parse_questionnaire",
    "validate_answers",
]

#: Claude Code's native tool name for the questionnaire (Octipus tool id ``cli-native:AskUserQuestion``).
QUESTIONNAIRE_TOOL: Final = "AskUserQuestion"

#: Error for a client that answers a questionnaire approval with a bare allow (no answers). Claude
#: would tell the model "The user did not answer the questions." as if that were an answer.
BARE_ALLOW_ERROR: Final = (
    "this approval is a questionnaire (AskUserQuestion), not a yes/no tool approval: a bare allow "
    "cannot answer it. Send an answer for every question (octipusctl approvals answer ID --answer "
    "'QUESTION=ANSWER', one --answer per question, or POST answers to /v1/approvals/ID), or deny to cancel it"
)

#: Denial message when a person cancels a questionnaire without giving a reason of their own.
CANCEL_MESSAGE: Final = "The user cancelled the questions without answering them."

#: Separator of the options chosen for one multi-select question in the answer string (sources.md
#: §1.9 ``"A, B"``).
MULTI_SELECT_SEPARATOR: Final = ", "


@dataclass(frozen=True)
class Option:
    """One choice of a question.

    Attributes:
        label: The text the person picks; a single-select answer equal to it selects it.
        description: What the choice means, shown next to the label; None if the input had none.
        preview: Optional content Claude offers for comparing choices (e.g. a code snippet), or None.
    """

    label: str
    description: str | None = None
    preview: str | None = None


@dataclass(frozen=True)
class Question:
    """One question of a questionnaire.

    Attributes:
        question: The full question text; answers are keyed by it exactly.
        header: A short tag for the question (Claude limits it to 12 characters), or None.
        options: The offered choices, in order (possibly empty: free text only).
        multi_select: True if several options (and one free text) may be chosen.
    """

    question: str
    header: str | None
    options: tuple[Option, ...]
    multi_select: bool

    @property
    def labels(self) -> tuple[str, ...]:
        """The option labels, in order."""
        return tuple(option.label for option in self.options)

    def to_dict(self) -> dict[str, Any]:
        """The question as JSON for API clients.

        Returns:
            ``{"question": str, "header": str | None, "multiSelect": bool, "options":
            [{"label": str, "description": str | None, "preview": str | None}, ...]}``.
        """
        return {
            "question": self.question,
            "header": self.header,
            "multiSelect": self.multi_select,
            "options": [
                {"label": o.label, "description": o.description, "preview": o.preview} for o in self.options
            ],
        }


@dataclass(frozen=True)
class Questionnaire:
    """The questions of one ``AskUserQuestion`` call.

    Attributes:
        questions: The questions, in the order Claude asked them (at least one; texts unique).
    """

    questions: tuple[Question, ...]

    def to_dict(self) -> dict[str, Any]:
        """The questionnaire as JSON for API clients (the web answer form, ``octipusctl``).

        Returns:
            ``{"questions": [Question.to_dict(), ...]}``: every question, header, option label and
            description, preview and multiSelect flag.
        """
        return {"questions": [question.to_dict() for question in self.questions]}

    def question(self, text: str) -> Question | None:
        """Return the question whose text is exactly ``text``, or None."""
        for question in self.questions:
            if question.question == text:
                return question
        return None


def is_questionnaire(tool_name: str) -> bool:
    """Whether a relayed native tool is Claude's questionnaire.

    Args:
        tool_name: The ``can_use_tool`` request's ``tool_name`` (``PermissionRequestEvent.tool_name``),
            or the Octipus tool id ``cli-native:<Tool>``.

    Returns:
        True for ``AskUserQuestion`` and ``cli-native:AskUserQuestion``.
    """
    return tool_name in (QUESTIONNAIRE_TOOL, f"cli-native:{QUESTIONNAIRE_TOOL}")


def _optional_text(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise QuestionnaireError(f"{where}: expected a string, got {_kind(value)}")
    return value


def _parse_option(raw: object, where: str) -> Option:
    if not isinstance(raw, Mapping):
        raise QuestionnaireError(f"{where}: expected an object with a 'label', got {_kind(raw)}")
    label = raw.get("label")
    if not isinstance(label, str) or not label.strip():
        raise QuestionnaireError(f"{where}: the option has no label (expected a non-empty string)")
    return Option(
        label=label,
        description=_optional_text(raw.get("description"), f"{where}.description"),
        preview=_optional_text(raw.get("preview"), f"{where}.preview"),
    )


def _parse_question(raw: object, where: str) -> Question:
    if not isinstance(raw, Mapping):
        raise QuestionnaireError(f"{where}: expected an object with a 'question', got {_kind(raw)}")
    text = raw.get("question")
    if not isinstance(text, str) or not text.strip():
        raise QuestionnaireError(f"{where}: the question has no text (expected a non-empty string)")
    where = f"{where} ({text!r})"
    raw_options = raw.get("options")
    if raw_options is None:
        raw_options = []
    if not isinstance(raw_options, list | tuple):
        raise QuestionnaireError(f"{where}.options: expected a list of options, got {_kind(raw_options)}")
    options = tuple(_parse_option(item, f"{where}.options[{i}]") for i, item in enumerate(raw_options))
    labels = [option.label for option in options]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise QuestionnaireError(f"{where}: option labels must be unique; repeated: {duplicates}")
    multi = raw.get("multiSelect", False)
    if multi is None:
        multi = False
    if not isinstance(multi, bool):
        raise QuestionnaireError(f"{where}.multiSelect: expected true or false, got {_kind(multi)}")
    return Question(
        question=text,
        header=_optional_text(raw.get("header"), f"{where}.header"),
        options=options,
        multi_select=multi,
    )


def parse_questionnaire(tool_input: Mapping[str, Any]) -> Questionnaire:
    """Read the questionnaire out of an ``AskUserQuestion`` input.

    Args:
        tool_input: The relayed input (``PermissionRequestEvent.input``), shape (sources.md §1.9)
            ``{"questions": [{"question": str, "header": str, "options": [{"label": str,
            "description": str, "preview"?: str}], "multiSelect": bool}], "answers"?, "annotations"?,
            "metadata"?}``. Unknown fields anywhere are ignored; ``header``, ``description`` and
            ``preview`` may be missing or null; a missing ``multiSelect`` means single-select; a
            missing ``options`` means free text only. Claude's own limits (1-4 questions, 2-4
            options, a 12-character header) are not enforced here.

    Returns:
        The questionnaire.

    Raises:
        QuestionnaireError: the input is not an object; ``questions`` is missing, not a list or
            empty; a question is not an object or has no text; two questions have the same text
            (answers are keyed by it); an option is not an object or has no label; two options of
            one question have the same label; ``multiSelect`` is not a boolean; ``header``,
            ``description`` or ``preview`` is not a string. The message names the question.
    """
    if not isinstance(tool_input, Mapping):
        raise QuestionnaireError(f"{QUESTIONNAIRE_TOOL} input: expected an object, got {_kind(tool_input)}")
    raw_questions = tool_input.get("questions")
    if raw_questions is None:
        raise QuestionnaireError(f"{QUESTIONNAIRE_TOOL} input has no 'questions'")
    if not isinstance(raw_questions, list | tuple):
        raise QuestionnaireError(
            f"{QUESTIONNAIRE_TOOL} input: 'questions' must be a list, got {_kind(raw_questions)}"
        )
    if not raw_questions:
        raise QuestionnaireError(f"{QUESTIONNAIRE_TOOL} input has no questions (an empty 'questions' list)")
    questions = tuple(_parse_question(raw, f"questions[{i}]") for i, raw in enumerate(raw_questions))
    texts = [question.question for question in questions]
    duplicates = sorted({text for text in texts if texts.count(text) > 1})
    if duplicates:
        raise QuestionnaireError(
            f"{QUESTIONNAIRE_TOOL} input: question texts must be unique (answers are keyed by them); "
            f"repeated: {duplicates}"
        )
    return Questionnaire(questions=questions)


def _expected(question: Question) -> str:
    labels = ", ".join(repr(label) for label in question.labels)
    if question.multi_select:
        if labels:
            return f"one or more of the options {labels} and/or one text of your own"
        return "a text of your own"
    if labels:
        return f"one of the options {labels} or a text of your own"
    return "a text of your own"


def _canonical(question: Question, value: str) -> str:
    """The exact option label ``value`` names (ignoring case and outer spaces), else ``value`` stripped."""
    text = value.strip()
    for label in question.labels:
        if label == text:
            return label
    folded = text.casefold()
    for label in question.labels:
        if label.strip().casefold() == folded:
            return label
    return text


def _single(question: Question, value: object) -> str:
    where = f"question {question.question!r}"
    if isinstance(value, list | tuple) and not question.multi_select:
        if len(value) != 1:
            raise QuestionnaireError(
                f"{where} takes a single answer ({_expected(question)}), got {len(value)} answers"
            )
        value = value[0]
    if not isinstance(value, str):
        raise QuestionnaireError(
            f"{where}: expected a text answer ({_expected(question)}), got {_kind(value)}"
        )
    if not value.strip():
        raise QuestionnaireError(f"{where} has an empty answer; expected {_expected(question)}")
    return _canonical(question, value)


def _multi(question: Question, value: object) -> list[str]:
    where = f"question {question.question!r}"
    items: Sequence[object] = value if isinstance(value, list | tuple) else [value]
    chosen: list[str] = []
    for item in items:
        answer = _single(question, item)
        if answer not in chosen:
            chosen.append(answer)
    if not chosen:
        raise QuestionnaireError(f"{where} has no answer; expected {_expected(question)}")
    free = [answer for answer in chosen if answer not in question.labels]
    if len(free) > 1:
        raise QuestionnaireError(
            f"{where} takes {_expected(question)}; got {len(free)} texts that are not options: {free}"
        )
    return chosen


def validate_answers(q: Questionnaire, answers: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """Check a person's answers against the questionnaire and normalize them.

    Args:
        q: The questionnaire (:func:`parse_questionnaire`).
        answers: Question text (exactly as asked) -> answer. A single-select question takes one
            string: an option label or a text of the person's own ("custom text"); a one-item list
            is accepted too. A multi-select question takes a list of strings (option labels and at
            most one text of the person's own) or one string. An answer equal to a label apart from
            case and outer spaces is taken as that label; other texts are stripped of outer spaces;
            repeated choices are kept once.

    Returns:
        Question text -> ``str`` (single-select) or ``list[str]`` (multi-select, in the given order),
        in the questionnaire's question order. Feed it to :func:`answered_input`.

    Raises:
        QuestionnaireError: ``answers`` is not an object; a key is not a question of this
            questionnaire; a question has no answer, or an empty one; an answer is not a string (or a
            list of strings for multi-select); a single-select question got several answers; a
            multi-select question got more than one text that is not an option. The message names
            the question and what is expected.
    """
    if not isinstance(answers, Mapping):
        raise QuestionnaireError(
            f"answers: expected an object of question text -> answer, got {_kind(answers)}"
        )
    texts = [question.question for question in q.questions]
    unknown = [key for key in answers if key not in texts]
    if unknown:
        asked = "; ".join(repr(text) for text in texts)
        raise QuestionnaireError(
            f"answers name questions that were not asked: {', '.join(repr(k) for k in unknown)}; "
            f"answer each question by its exact text: {asked}"
        )
    missing = [question for question in q.questions if question.question not in answers]
    if missing:
        detail = "; ".join(f"{m.question!r} ({_expected(m)})" for m in missing)
        raise QuestionnaireError(f"every question needs an answer; missing: {detail}")
    result: dict[str, str | list[str]] = {}
    for question in q.questions:
        value = answers[question.question]
        result[question.question] = (
            _multi(question, value) if question.multi_select else _single(question, value)
        )
    return result


def answered_input(tool_input: Mapping[str, Any], answers: Mapping[str, str | list[str]]) -> dict[str, Any]:
    """Build the allow's ``updatedInput`` that returns the answers to Claude.

    Shape (sources.md §1.9; accepted by Claude Code 2.1.197)::

        {**tool_input, "answers": {"<question text>": "<label or text>" | "A, B"}}

    The questions (and any other field, e.g. ``metadata``) are echoed unchanged. Any ``answers`` or
    ``annotations`` already in ``tool_input`` are dropped: only the person's answers go back
    (Claude shows annotations to the model as the person's notes). Multi-select answers are joined
    with ``", "``, since Claude would render a list as ``A,B``.

    Args:
        tool_input: The relayed ``AskUserQuestion`` input (``PermissionRequestEvent.input``).
        answers: Question text -> answer, as returned by :func:`validate_answers` (validated again
            here, so raw answers are accepted too).

    Returns:
        A new dict for ``PermissionDecision(allow=True, updated_input=...)``.

    Raises:
        QuestionnaireError: ``tool_input`` is not a valid questionnaire, or the answers do not fit
            it (see :func:`parse_questionnaire`, :func:`validate_answers`).
    """
    checked = validate_answers(parse_questionnaire(tool_input), answers)
    rendered = {
        text: MULTI_SELECT_SEPARATOR.join(value) if isinstance(value, list) else value
        for text, value in checked.items()
    }
    updated = {key: value for key, value in tool_input.items() if key not in ("answers", "annotations")}
    updated["answers"] = rendered
    return updated


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
