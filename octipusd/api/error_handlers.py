"""How every failure reaching the application becomes an answer ``{"code": ..., "message": ...}``.

* an :class:`~octipusd.errors.OctipusError`: its status and :meth:`~octipusd.errors.OctipusError.to_dict`;
* a request whose parameters (query, path, headers) fail their declared schema -- an integer past
  its column's range among them (issue 26 item 6) -- is a 400 ``invalid_request`` naming each
  parameter (``query parameter after: ...``), never its value;
* a request whose body fails its declared schema: FastAPI's 422 ``{"detail": [...]}``, except under
  ``/v1/models``, ``/v1/vault`` and ``/v1/pipelines``, where it is a 400 ``invalid_request`` naming the
  field and never the input (FastAPI's body echoes it, and a vault request carries a credential);
* a refusal of the framework itself (a path no route matches, a method the route does not take, a
  JSON body that does not parse): its status, with a code and a message saying what to do;
* anything else: a 500 ``internal_error``, logged with its traceback; its message is the
  exception's type and text with the daemon's private text hidden
  (:class:`~octipusd.api.disclosure.PrivateText`: this answer is written outside the middleware
  that hides it in every other error answer).

These are the bodies :data:`~octipusd.api.models.ERROR_RESPONSES` declares in the OpenAPI schema.
"""

from __future__ import annotations

import logging
from typing import Final

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from octipusd.api import API_VERSION
from octipusd.api.disclosure import PrivateText
from octipusd.errors import InvalidRequestError, NotFoundError, OctipusError

__all__ = ["install_error_handlers"]

log = logging.getLogger("octipusd.api")

#: Paths whose schema failures are a 400 naming the field, without FastAPI's echo of the input.
NAMED_FIELD_PATHS: Final = (f"/{API_VERSION}/models", f"/{API_VERSION}/vault", f"/{API_VERSION}/pipelines")

#: Where a request's parameters are (the first part of a validation error's location).
PARAMETER_PLACES: Final = frozenset({"query", "path", "header", "cookie"})

#: The code of a framework refusal by its status (any other status: ``http_error``).
FRAMEWORK_CODES: Final = {
    400: InvalidRequestError.code,
    404: NotFoundError.code,
    405: "method_not_allowed",
}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        if loc and loc[0] in PARAMETER_PLACES:
            where = f"{loc[0]} parameter {'.'.join(loc[1:])}"
        else:
            where = ".".join(p for p in loc if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg')}")
    return "; ".join(parts) or "invalid request body"


def _names_a_field(request: Request, exc: RequestValidationError) -> bool:
    """Whether a schema failure is a 400 naming the field (see the module docstring)."""
    if request.url.path.startswith(NAMED_FIELD_PATHS):
        return True
    return any(e.get("loc") and str(e["loc"][0]) in PARAMETER_PLACES for e in exc.errors())


def _framework_message(request: Request, exc: HTTPException) -> str:
    """What a person reads for a refusal the framework made before any route ran."""
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        return (
            f"{where}: no such resource (an id holding '/', '..' or nothing matches no route); check the id"
        )
    if exc.status_code == 400:
        return f"body: {exc.detail} (it is not valid JSON in UTF-8); send a JSON object"
    return f"{where}: {exc.detail}"


def install_error_handlers(app: FastAPI, private: PrivateText) -> None:
    """Register the handlers of the module docstring on ``app``; ``private`` is what an unexpected
    exception's answer hides."""

    @app.exception_handler(OctipusError)
    async def _octipus_error(request: Request, exc: OctipusError) -> JSONResponse:
        return JSONResponse(status_code=exc.http_status, content=exc.to_dict())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        if _names_a_field(request, exc):
            error = InvalidRequestError(_validation_message(exc))
            return JSONResponse(status_code=error.http_status, content=error.to_dict())
        return await request_validation_exception_handler(request, exc)

    @app.exception_handler(HTTPException)
    async def _framework_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = FRAMEWORK_CODES.get(exc.status_code, "http_error")
        return JSONResponse(
            status_code=exc.status_code,
            content={"code": code, "message": _framework_message(request, exc)},
            headers=exc.headers,
        )

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(
            status_code=500,
            content={
                "code": "internal_error",
                "message": private.hide(f"internal error: {exc!r}; see the octipusd log"),
            },
        )
