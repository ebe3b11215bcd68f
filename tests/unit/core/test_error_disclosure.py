"""The guard at the API's error boundary (issue 26 item 6): no error answer, a JSON body or an error
page, carries the daemon's database URL, its password, its data folder or its socket; the log has
them. The contract tests provoke real database failures on SQLite and PostgreSQL
(``tests/contract/test_error_bodies.py``); these pin every way a message reaches an answer.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.testclient import TestClient

from octipusd.api.disclosure import ErrorBodyGuard, PrivateText
from octipusd.api.error_handlers import install_error_handlers
from octipusd.errors import StoreError, VaultKeyError
from octipusd.store.engine import private_parts

PASSWORD = "pa ss/wörd&'x"
SOCKET_FOLDER = "/tmp/pg sock"
URL = f"postgresql+psycopg://octi:{PASSWORD.replace(' ', '%20').replace('/', '%2F')}@/octipus?host={SOCKET_FOLDER}"
DATA = Path("/home/ada/.local/share/octipus")
SOCKET = Path("/run/user/1000/octipus/octipusd.sock")


@pytest.fixture
def client() -> Iterator[TestClient]:
    private = PrivateText.of_daemon(private_parts(URL), DATA, SOCKET)
    app = FastAPI()
    app.add_middleware(ErrorBodyGuard, private=private)
    install_error_handlers(app, private)

    @app.get("/store")
    async def store() -> None:
        raise StoreError(f"database error in {URL} (password {PASSWORD}) on {SOCKET_FOLDER}")

    @app.get("/key")
    async def key() -> None:
        raise VaultKeyError(f"the key file {DATA / 'vault.key'} is open to others; chmod 600 it")

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError(f"cannot connect to {SOCKET}")

    @app.get("/page")
    async def page() -> HTMLResponse:
        return HTMLResponse(f"<p>{html.escape(str(DATA / 'runs'))} {html.escape(PASSWORD)}</p>", 404)

    @app.get("/fine")
    async def fine() -> JSONResponse:
        return JSONResponse({"data": str(DATA)})

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        return StreamingResponse(iter([b"a", b"b"]), media_type="text/plain")

    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _carried(text: str) -> list[str]:
    private = [URL, PASSWORD, html.escape(PASSWORD), SOCKET_FOLDER, "pg%20sock", str(DATA), str(SOCKET)]
    return [piece for piece in private if piece in text]


def test_no_error_answer_carries_private_text_and_the_log_has_it(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="octipusd.api")
    answers = {path: client.get(path) for path in ("/store", "/key", "/bug", "/page")}
    assert [r.status_code for r in answers.values()] == [500, 500, 500, 404]
    for path, response in answers.items():
        assert not _carried(response.text), (path, response.text)
    assert answers["/store"].json() == {
        "code": "store_error",
        "message": "database error in [REDACTED:database URL] (password [REDACTED:database password]) "
        "on [REDACTED:database socket]",
    }
    assert (
        answers["/key"].json()["message"].startswith("the key file [REDACTED:data folder]/vault.key is open")
    )
    assert answers["/bug"].json()["code"] == "internal_error"
    assert "[REDACTED:API socket]" in answers["/bug"].json()["message"]
    assert answers["/page"].text == "<p>[REDACTED:data folder]/runs [REDACTED:database password]</p>"
    assert int(answers["/page"].headers["content-length"]) == len(answers["/page"].content)
    logged = caplog.text
    assert URL in logged and str(DATA / "vault.key") in logged and str(SOCKET) in logged


def test_other_answers_pass_untouched(client: TestClient) -> None:
    assert client.get("/fine").json() == {"data": str(DATA)}
    assert client.get("/stream").text == "ab"


def test_the_private_parts_of_a_database_url() -> None:
    parts = dict.fromkeys(private_parts(URL))
    assert ("database password", PASSWORD) in parts and ("database socket", SOCKET_FOLDER) in parts
    assert ("database URL", URL) in parts
    assert ("database URL", "postgresql+psycopg://octi@/octipus?host=%2Ftmp%2Fpg+sock") in parts
    assert private_parts("sqlite:////var/lib/o/octipus.db") == (
        ("database URL", "sqlite:////var/lib/o/octipus.db"),
        ("database file", "/var/lib/o/octipus.db"),
    )
    assert [what for what, _ in private_parts("postgresql+psycopg://u@/d?host=/")] == ["database URL"] * 2
    assert private_parts("not a url") == (("database URL", "not a url"),)
