"""Claude's AskUserQuestion as a questionnaire: parsing, answer validation, the allow's updatedInput."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from octipusd.errors import InvalidRequestError, QuestionnaireError
from octipusd.policy.questionnaire import (
    BARE_ALLOW_ERROR,
    QUESTIONNAIRE_TOOL,
    Option,
    Question,
    Questionnaire,
    answered_input,
    is_questionnaire,
    parse_questionnaire,
    validate_answers,
)

DB = "Which database should the service use?"
FEATURES = "Which features do you want?"

#: A relayed can_use_tool input as Claude Code 2.1.197 sent it (plus a preview and metadata).
INPUT: dict[str, Any] = {
    "questions": [
        {
            "question": DB,
            "header": "Database",
            "options": [
                {"label": "PostgreSQL", "description": "Relational, strong consistency"},
                {"label": "SQLite", "description": "Embedded single file", "preview": "sqlite3 app.db"},
            ],
            "multiSelect": False,
        },
        {
            "question": FEATURES,
            "header": "Features",
            "options": [
                {"label": "Auth", "description": "Login"},
                {"label": "Search", "description": "Full text"},
                {"label": "Export", "description": "CSV"},
            ],
            "multiSelect": True,
        },
    ],
    "metadata": {"source": "model"},
}


def questionnaire() -> Questionnaire:
    return parse_questionnaire(INPUT)


# ------------------------------------------------------------------------------------- parsing


def test_parse_reads_every_field() -> None:
    q = questionnaire()
    assert q == Questionnaire(
        questions=(
            Question(
                question=DB,
                header="Database",
                options=(
                    Option("PostgreSQL", "Relational, strong consistency"),
                    Option("SQLite", "Embedded single file", preview="sqlite3 app.db"),
                ),
                multi_select=False,
            ),
            Question(
                question=FEATURES,
                header="Features",
                options=(Option("Auth", "Login"), Option("Search", "Full text"), Option("Export", "CSV")),
                multi_select=True,
            ),
        )
    )
    assert q.questions[1].labels == ("Auth", "Search", "Export")
    assert q.question(FEATURES) is q.questions[1]
    assert q.question("nope") is None


def test_to_dict_is_json_with_descriptions_and_multiselect() -> None:
    data = questionnaire().to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "questions": [
            {
                "question": DB,
                "header": "Database",
                "multiSelect": False,
                "options": [
                    {"label": "PostgreSQL", "description": "Relational, strong consistency", "preview": None},
                    {"label": "SQLite", "description": "Embedded single file", "preview": "sqlite3 app.db"},
                ],
            },
            {
                "question": FEATURES,
                "header": "Features",
                "multiSelect": True,
                "options": [
                    {"label": "Auth", "description": "Login", "preview": None},
                    {"label": "Search", "description": "Full text", "preview": None},
                    {"label": "Export", "description": "CSV", "preview": None},
                ],
            },
        ]
    }


def test_parse_is_tolerant_of_extra_and_missing_optional_fields() -> None:
    q = parse_questionnaire(
        {
            "questions": [
                {
                    "question": "Name?",
                    "extra": 1,
                    "options": [{"label": "a", "icon": "x"}, {"label": "b", "description": None}],
                },
                {"question": "Free?", "header": None, "multiSelect": None},
            ],
            "annotations": {},
            "future": True,
        }
    )
    first, second = q.questions
    assert first.header is None and not first.multi_select
    assert first.options == (Option("a"), Option("b"))
    assert second.options == () and not second.multi_select


@pytest.mark.parametrize(
    ("tool_input", "needle"),
    [
        ({}, "no 'questions'"),
        ({"questions": []}, "no questions"),
        ({"questions": "Which?"}, "must be a list"),
        ({"questions": ["Which?"]}, "questions[0]: expected an object"),
        ({"questions": [{"header": "H", "options": []}]}, "questions[0]: the question has no text"),
        ({"questions": [{"question": "  "}]}, "has no text"),
        ({"questions": [{"question": 3}]}, "has no text"),
        ({"questions": [{"question": "Q?", "options": "a,b"}]}, "'Q?').options: expected a list"),
        (
            {"questions": [{"question": "Q?", "options": [{"description": "d"}]}]},
            "options[0]: the option has no label",
        ),
        ({"questions": [{"question": "Q?", "options": ["a"]}]}, "options[0]: expected an object"),
        ({"questions": [{"question": "Q?", "options": [{"label": "a"}, {"label": "a"}]}]}, "repeated: ['a']"),
        ({"questions": [{"question": "Q?", "multiSelect": "yes"}]}, "multiSelect: expected true or false"),
        ({"questions": [{"question": "Q?", "header": 5}]}, "header: expected a string"),
        ({"questions": [{"question": "Q?", "options": [{"label": "a", "description": 1}]}]}, "description"),
        ({"questions": [{"question": "Q?"}, {"question": "Q?"}]}, "question texts must be unique"),
    ],
)
def test_parse_rejects_malformed_input(tool_input: dict[str, Any], needle: str) -> None:
    with pytest.raises(QuestionnaireError) as info:
        parse_questionnaire(tool_input)
    assert needle in str(info.value)


def test_parse_rejects_a_non_object() -> None:
    with pytest.raises(QuestionnaireError, match="expected an object"):
        parse_questionnaire([1, 2])  # type: ignore[arg-type]


def test_questionnaire_error_is_an_invalid_request() -> None:
    error = QuestionnaireError("Q?: expected one of 'a', 'b'")
    assert isinstance(error, InvalidRequestError)
    assert error.to_dict() == {"code": "invalid_request", "message": "Q?: expected one of 'a', 'b'"}
    assert error.http_status == 400


def test_is_questionnaire() -> None:
    assert QUESTIONNAIRE_TOOL == "AskUserQuestion"
    assert is_questionnaire("AskUserQuestion")
    assert is_questionnaire("cli-native:AskUserQuestion")
    assert not is_questionnaire("Bash")
    assert not is_questionnaire("askuserquestion")


def test_bare_allow_error_is_actionable() -> None:
    assert "AskUserQuestion" in BARE_ALLOW_ERROR
    assert "octipusctl approvals answer" in BARE_ALLOW_ERROR
    assert "deny" in BARE_ALLOW_ERROR


# ---------------------------------------------------------------------------------- validation


def test_labels_single_and_multi() -> None:
    assert validate_answers(questionnaire(), {DB: "SQLite", FEATURES: ["Auth", "Export"]}) == {
        DB: "SQLite",
        FEATURES: ["Auth", "Export"],
    }


def test_result_follows_question_order() -> None:
    answers = validate_answers(questionnaire(), {FEATURES: ["Search"], DB: "PostgreSQL"})
    assert list(answers) == [DB, FEATURES]


def test_free_text_is_allowed() -> None:
    answers = validate_answers(
        questionnaire(), {DB: "  DuckDB, if possible ", FEATURES: ["Auth", "Audit log"]}
    )
    assert answers == {DB: "DuckDB, if possible", FEATURES: ["Auth", "Audit log"]}


def test_multi_select_takes_one_string() -> None:
    assert validate_answers(questionnaire(), {DB: "SQLite", FEATURES: "Search"}) == {
        DB: "SQLite",
        FEATURES: ["Search"],
    }
    assert validate_answers(questionnaire(), {DB: "SQLite", FEATURES: "Something else"})[FEATURES] == [
        "Something else"
    ]


def test_single_select_takes_a_one_item_list() -> None:
    assert validate_answers(questionnaire(), {DB: ["SQLite"], FEATURES: "Auth"})[DB] == "SQLite"


def test_labels_match_case_insensitively_and_duplicates_collapse() -> None:
    answers = validate_answers(questionnaire(), {DB: "sqlite", FEATURES: ["auth", "Auth ", "EXPORT"]})
    assert answers == {DB: "SQLite", FEATURES: ["Auth", "Export"]}


@pytest.mark.parametrize(
    ("answers", "needles"),
    [
        ({DB: "SQLite"}, ["every question needs an answer", FEATURES, "one or more of the options"]),
        ({}, ["missing", DB, FEATURES]),
        ({DB: "SQLite", FEATURES: ["Auth"], "Colour?": "blue"}, ["not asked", "'Colour?'", DB]),
        ({DB: "", FEATURES: ["Auth"]}, [DB, "empty answer", "'PostgreSQL', 'SQLite'", "text of your own"]),
        ({DB: "   ", FEATURES: ["Auth"]}, [DB, "empty answer"]),
        ({DB: None, FEATURES: ["Auth"]}, [DB, "expected a text answer", "got null"]),
        ({DB: 3, FEATURES: ["Auth"]}, [DB, "got a number"]),
        ({DB: ["SQLite", "PostgreSQL"], FEATURES: ["Auth"]}, [DB, "single answer", "got 2 answers"]),
        ({DB: [], FEATURES: ["Auth"]}, [DB, "single answer", "got 0 answers"]),
        ({DB: "SQLite", FEATURES: []}, [FEATURES, "has no answer"]),
        ({DB: "SQLite", FEATURES: [""]}, [FEATURES, "empty answer"]),
        ({DB: "SQLite", FEATURES: ["Auth", 1]}, [FEATURES, "got a number"]),
        ({DB: "SQLite", FEATURES: {"Auth": True}}, [FEATURES, "got an object"]),
        ({DB: "SQLite", FEATURES: ["Auth", "mine", "also mine"]}, [FEATURES, "2 texts that are not options"]),
    ],
)
def test_invalid_answers_name_the_question_and_expectation(
    answers: dict[str, Any], needles: list[str]
) -> None:
    with pytest.raises(QuestionnaireError) as info:
        validate_answers(questionnaire(), answers)
    message = str(info.value)
    for needle in needles:
        assert needle in message, message


def test_answers_must_be_an_object() -> None:
    with pytest.raises(QuestionnaireError, match="question text -> answer"):
        validate_answers(questionnaire(), ["SQLite"])  # type: ignore[arg-type]


def test_free_text_only_question() -> None:
    q = parse_questionnaire(
        {"questions": [{"question": "Name?"}, {"question": "Tags?", "multiSelect": True}]}
    )
    assert validate_answers(q, {"Name?": "Ada", "Tags?": "x"}) == {"Name?": "Ada", "Tags?": ["x"]}
    with pytest.raises(QuestionnaireError, match="a text of your own"):
        validate_answers(q, {"Name?": "", "Tags?": "x"})


# ------------------------------------------------------------------------------ answered_input


def test_answered_input_echoes_questions_and_joins_multi_select() -> None:
    original = copy.deepcopy(INPUT)
    updated = answered_input(INPUT, {DB: "SQLite", FEATURES: ["Auth", "Export"]})
    assert updated == {
        "questions": INPUT["questions"],
        "metadata": {"source": "model"},
        "answers": {DB: "SQLite", FEATURES: "Auth, Export"},
    }
    assert original == INPUT  # not mutated
    assert json.loads(json.dumps(updated)) == updated


def test_answered_input_of_validated_answers_and_free_text() -> None:
    checked = validate_answers(questionnaire(), {DB: "DuckDB", FEATURES: "search"})
    assert answered_input(INPUT, checked)["answers"] == {DB: "DuckDB", FEATURES: "Search"}


def test_answered_input_replaces_prefilled_answers_and_annotations() -> None:
    prefilled = {**INPUT, "answers": {DB: "PostgreSQL"}, "annotations": {DB: {"notes": "model-made"}}}
    updated = answered_input(prefilled, {DB: "SQLite", FEATURES: "Auth"})
    assert updated["answers"] == {DB: "SQLite", FEATURES: "Auth"}
    assert "annotations" not in updated


def test_answered_input_validates() -> None:
    with pytest.raises(QuestionnaireError, match="missing"):
        answered_input(INPUT, {DB: "SQLite"})
    with pytest.raises(QuestionnaireError, match="no 'questions'"):
        answered_input({"command": "ls"}, {DB: "SQLite"})
