"""How every failure reaching the application becomes an answer ``{"code": ..., "message": ...}``.

* an :class:`~octipusd.errors.OctipusError`: its status and :meth:`~octipusd.errors.OctipusError.to_dict`;
* a request that fails its declared schema: FastAPI's 422 ``{"detail": [...]}``, except under
  ``/v1/models`` and ``/v1/vault``, where it is a 400 ``invalid_request`` naming the field and never
  the input (FastAPI's body echoes it, and a vault request carries a credential);
* a refusal of the framework itself (a path no route matches, a method the route does not take, a
  JSON body that does not parse): its status, with a code and a message saying what to do;
* anything else: a 500 ``internal_error``, logged with its traceback.

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
from octipusd.errors import InvalidRequestError, NotFoundError, OctipusError

__all__ = ["install_error_handlers"]

log = logging.getLogger("octipusd.api")

#: Paths whose schema failures are a 400 naming the field, without FastAPI's echo of the input.
NAMED_FIELD_PATHS: Final = (f"/{API_VERSION}/models", f"/{API_VERSION}/vault")

#: The code of a framework refusal by its status (any other status: ``http_error``).
FRAMEWORK_CODES: Final = {
    400: InvalidRequestError.code,
    404: NotFoundError.code,
    405: "method_not_allowed",
}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {error.get('msg')}")
    return "; ".join(parts) or "invalid request body"


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


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers of the module docstring on ``app``."""

    @app.exception_handler(OctipusError)
    async def _octipus_error(request: Request, exc: OctipusError) -> JSONResponse:
        return JSONResponse(status_code=exc.http_status, content=exc.to_dict())

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        if request.url.path.startswith(NAMED_FIELD_PATHS):
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
            content={"code": "internal_error", "message": f"internal error: {exc!r}; see the octipusd log"},
        )
