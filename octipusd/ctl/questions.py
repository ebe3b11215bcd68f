"""Questionnaire approvals (Claude's AskUserQuestion) on the command line: show, parse, ask.

Used by ``octipusctl approvals show|answer`` and by ``octipusctl run`` answering on a terminal.
The questions come from ``ApprovalOut.questions`` (``{"questions": [{"question", "header",
"multiSelect", "options": [{"label", "description", "preview"}]}]}``); answers go back as
``ApprovalAnswer.answers`` (question text -> string, or a list of strings for multiple selection).
"""

from __future__ import annotations

from typing import Any

import typer

from octipusd.ctl.client import Client
from octipusd.ctl.common import bad_input, console, err, part, safe
from octipusd.errors import ApiError, OctipusError
from octipusd.questionnaire import questions_of

__all__ = [
    "answer_questionnaire_inline",
    "ask_questionnaire",
    "interpret_reply",
    "labels",
    "print_questionnaire",
    "questions_of",
    "resolve_answers",
]


def labels(question: dict[str, Any]) -> list[str]:
    """The option labels of a question, in order."""
    return [str(o.get("label")) for o in question.get("options") or [] if isinstance(o, dict)]


def _how_to_answer(question: dict[str, Any]) -> str:
    if question.get("multiSelect"):
        return "choose one or more; may add one text of your own"
    return "choose one, or give a text of your own"


def print_questionnaire(questions: list[dict[str, Any]], start: int = 1) -> None:
    """Print every question: number, header, text, selection kind, options with descriptions.

    Args:
        questions: The questions (:func:`questions_of`).
        start: The number of the first one.
    """
    for number, q in enumerate(questions, start):
        header = f"[{q['header']}] " if q.get("header") else ""
        console.print(f"  {number}. [bold]{safe(header)}{safe(q.get('question'))}[/]")
        multi = "multiple selection" if q.get("multiSelect") else "single selection"
        console.print(f"     [dim]{multi}: {_how_to_answer(q)}[/]")
        for index, option in enumerate(q.get("options") or [], 1):
            description = option.get("description")
            text = f"     {index}) {safe(option.get('label'))}"
            if description:
                text += f" [dim]- {safe(description)}[/]"
            console.print(text)
            if option.get("preview"):
                preview = str(option["preview"]).rstrip().replace("\n", "\n          ")
                console.print(f"        [dim]preview:[/]\n          {safe(preview)}")


def _question_list(questions: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{n}. " + (f"[{q['header']}] " if q.get("header") else "") + repr(q.get("question"))
        for n, q in enumerate(questions, 1)
    )


def _find_question(questions: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    key = key.strip()
    if key.isdigit():
        number = int(key)
        return questions[number - 1] if 1 <= number <= len(questions) else None
    for q in questions:
        if str(q.get("question")) == key:
            return q
    folded = key.casefold()
    for field in ("question", "header"):
        for q in questions:
            if q.get(field) and str(q[field]).strip().casefold() == folded:
                return q
    return None


def resolve_answers(questions: list[dict[str, Any]], items: list[str]) -> dict[str, str | list[str]]:
    """Turn ``--answer QUESTION=ANSWER`` items into the API's ``answers``.

    QUESTION is the question's exact text (which may hold ``=``), its 1-based number, or its text
    or header ignoring case. Repeating a multiple-selection question collects a list; every
    question needs an answer. Bad input ends the command with exit code 2.

    Returns:
        Question text -> answer (``str``; ``list[str]`` for a multiple-selection question).
    """
    collected: dict[str, list[str]] = {}
    by_text = sorted(questions, key=lambda q: len(str(q.get("question"))), reverse=True)
    for item in items:
        question = next((q for q in by_text if item.startswith(f"{q.get('question')}=")), None)
        if question is not None:
            value = item[len(str(question["question"])) + 1 :]
        else:
            key, eq, value = item.partition("=")
            if not eq:
                bad_input(f"--answer {item!r} is not QUESTION=ANSWER (QUESTION: its text, number or header)")
            question = _find_question(questions, key)
            if question is None:
                bad_input(
                    f"--answer {item!r}: no question {key.strip()!r}; the questions are: {_question_list(questions)}"
                )
        if not value.strip():
            bad_input(f"--answer {item!r} has an empty answer")
        collected.setdefault(str(question["question"]), []).append(value.strip())
    answers: dict[str, str | list[str]] = {}
    missing: list[str] = []
    for number, q in enumerate(questions, 1):
        text = str(q.get("question"))
        given = collected.get(text)
        if not given:
            missing.append(f"{number}. {text!r}")
        elif q.get("multiSelect"):
            answers[text] = given
        elif len(given) > 1:
            bad_input(f"question {number} ({text!r}) takes a single answer, got {len(given)}: {given}")
        else:
            answers[text] = given[0]
    if missing:
        bad_input(
            f"every question needs an answer; missing: {'; '.join(missing)} "
            "(add --answer 'NUMBER=ANSWER' for each; see octipusctl approvals show ID)"
        )
    return answers


def interpret_reply(question: dict[str, Any], reply: str) -> str | list[str]:
    """Read a person's typed reply to one question.

    A part that is an option number (1-based) or an option label (ignoring case) selects that
    option; anything else is a text of one's own. For a multiple-selection question the reply is
    split at commas (``1, 3`` selects options 1 and 3) and the parts that are not options form
    one text of one's own.

    Returns:
        The answer: ``str`` (single selection) or ``list[str]``.

    Raises:
        ValueError: an empty reply, or a bare number that is not an option's (message for a person).
    """
    choices = labels(question)

    def option(piece: str) -> str | None:
        text = piece.strip()
        if text.isdigit() and choices:
            number = int(text)
            if not 1 <= number <= len(choices):
                raise ValueError(
                    f"there is no option {number} (1-{len(choices)}); to answer with a number of your own, "
                    "add a word to it"
                )
            return choices[number - 1]
        folded = text.casefold()
        return next((label for label in choices if label.strip().casefold() == folded), None)

    if not reply.strip():
        raise ValueError("an answer is needed")
    if not question.get("multiSelect"):
        return option(reply) or reply.strip()
    chosen: list[str] = []
    own: list[str] = []
    for piece in reply.split(","):
        if not piece.strip():
            continue
        label = option(piece)
        if label is None:
            own.append(piece.strip())
        elif label not in chosen:
            chosen.append(label)
    if own:
        chosen.append(", ".join(own))
    return chosen


def ask_questionnaire(questions: list[dict[str, Any]]) -> dict[str, str | list[str]] | None:
    """Ask every question on the terminal; None when the person cancels the questionnaire."""
    while True:
        answers: dict[str, str | list[str]] = {}
        for number, q in enumerate(questions, 1):
            print_questionnaire([q], start=number)
            hint = (
                "numbers separated by commas, labels, and/or a text of your own"
                if q.get("multiSelect")
                else "a number, a label or a text of your own"
            )
            while True:
                reply = typer.prompt(f"Answer {number} ({hint})")
                try:
                    answers[str(q.get("question"))] = interpret_reply(q, reply)
                    break
                except ValueError as exc:
                    err.print(f"[yellow]{safe(exc)}[/]")
        for text, answer in answers.items():
            shown = ", ".join(answer) if isinstance(answer, list) else answer
            console.print(f"  {safe(text)} -> [bold]{safe(shown)}[/]")
        if typer.confirm("Send these answers?", default=True):
            return answers
        if typer.confirm("Cancel the questions (the agent is told you did not answer)?", default=False):
            return None


def answer_questionnaire_inline(client: Client, approval_id: str, approve: str) -> None:
    """Answer a questionnaire approval for ``octipusctl run``.

    ``approve`` ``yes`` leaves it pending (a questionnaire needs answers) and says how to answer
    it; ``no`` cancels it; ``ask`` asks every question on the terminal.
    """
    if approve == "yes":
        err.print(
            f"[yellow]octipusctl: approval {approval_id} is a questionnaire (AskUserQuestion): --approve yes "
            "cannot answer it, so it stays pending. See the questions with "
            f"`octipusctl approvals show {approval_id}` and answer with "
            f"`octipusctl approvals answer {approval_id} --answer 'NUMBER=ANSWER'` (one per question), "
            f"or cancel with `octipusctl approvals deny {approval_id}`[/]"
        )
        return
    if approve == "no":
        console.print(f"[yellow]answering {approval_id}: deny (cancels the questionnaire, --approve no)[/]")
        _post_inline(client, approval_id, {"decision": "deny"})
        return
    try:
        approval = client.request("GET", f"/approvals/{part(approval_id)}")
    except OctipusError as exc:
        err.print(f"octipusctl: could not read approval {approval_id}: {safe(exc.message)}")
        return
    questions = questions_of(approval)
    console.print(
        f"[yellow]the agent asks ({len(questions)} question{'s' if len(questions) != 1 else ''}):[/]"
    )
    while True:
        answers = ask_questionnaire(questions)
        if answers is None:
            console.print(f"[yellow]answering {approval_id}: deny (questions cancelled)[/]")
            _post_inline(client, approval_id, {"decision": "deny"})
            return
        try:
            client.request(
                "POST", f"/approvals/{part(approval_id)}", json={"decision": "approve", "answers": answers}
            )
        except ApiError as exc:
            err.print(f"octipusctl: could not answer approval {approval_id}: {safe(exc.message)}")
            if exc.http_status == 400:  # the answers do not fit: ask again
                continue
            return
        except OctipusError as exc:
            err.print(f"octipusctl: could not answer approval {approval_id}: {safe(exc.message)}")
            return
        console.print(f"[yellow]answered {approval_id}[/]")
        return


def _post_inline(client: Client, approval_id: str, body: dict[str, Any]) -> None:
    try:
        client.request("POST", f"/approvals/{part(approval_id)}", json=body)
    except OctipusError as exc:
        err.print(f"octipusctl: could not answer approval {approval_id}: {safe(exc.message)}")
