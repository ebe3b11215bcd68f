"""A scripted OpenAI Responses API server on 127.0.0.1, for driving the real Codex CLI offline.

Only the model's decisions are mocked: the CLI, its sandbox, tools, MCP and approvals run for real.
The wire format follows what Codex CLI 0.171.0 was seen to send and accept
(``/work/shared/protocols/observed.md`` §2.2, ``observed-2.md`` §1):

- ``HEAD /`` and ``GET /`` answer 200; ``GET /v1/models`` answers an empty model list.
- ``POST /v1/responses`` with ``"stream": true`` (the only model call Codex makes, one per model
  turn) answers Server-Sent Events over HTTP/1.1 chunked transfer encoding: ``response.created``,
  ``response.in_progress``, then per content block ``response.output_item.added``, the item's
  deltas (``response.content_part.added`` / ``response.output_text.delta`` /
  ``response.output_text.done`` / ``response.content_part.done`` for text,
  ``response.function_call_arguments.delta`` / ``.done`` for a tool call) and
  ``response.output_item.done``, and finally ``response.completed`` with ``usage``
  (``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``,
  ``output_tokens_details.reasoning_tokens``, ``total_tokens``). With ``"stream": false`` it answers
  the whole ``response`` object as JSON.
- Errors are ``{"error": {"message", "type", "param": null, "code"}}`` (the OpenAI error shape; Codex
  passes a 400 body through as the turn's error text, observed.md §2.7).

The reply is chosen from a script in the same format as the Anthropic server's
(:mod:`octipusd.testing.script`), with this mapping of ``tool_use`` blocks to Responses items:

- ``mcp__<server>__<tool>`` becomes a ``function_call`` with ``"namespace": "mcp__<server>"`` and
  ``"name": "<tool>"``: Codex exposes each MCP server as a tool namespace and rejects the flat name
  (``unsupported call: mcp__lab__echo``, observed.md §2.5);
- ``exec_command`` with input ``{"cmd": ...}`` is Codex's shell tool (observed.md §2.2);
- any other name passes through unchanged. ``input`` becomes the JSON text of ``arguments``; the
  block's ``id`` (or a generated ``call_<random>``) is the ``call_id``.

Step choice: the step index is the number of *assistant turns* already in the request's ``input``
(:func:`count_assistant_turns`). An assistant turn is a maximal run of consecutive model-output
items (``message`` with ``role: "assistant"``, ``function_call``, ``reasoning``, and any other
``*_call`` item) uninterrupted by anything else (user/developer messages, ``*_call_output``
items). One scripted step is one model response, whose items (text and tool calls) arrive back
consecutively in the next request, so it counts once. Codex resends the whole thread on every
request, including after ``codex exec resume`` and app-server ``thread/resume`` (observed.md §2.6,
observed-2.md §1.5), so a resumed thread continues the script where it stopped. Items of unknown
shape are ignored. A failed request does not add output to the history, so a retry plays the same
step again (see the per-step attempt counters in :mod:`octipusd.testing.script`).

Conversation choice (for a script with ``"conversations"``, see :mod:`octipusd.testing.script`):
the ``match`` strings are looked for in the request's opening texts (:func:`opening_texts`): its
``instructions``, and the text of the ``developer`` / ``system`` / ``user`` message items that
come before the first model-output item. Codex sends two ``developer`` items, a user
``<environment_context>`` item and then the prompt item (observed.md §2.2), so all of them count;
later user prompts and tool outputs do not. The request is recorded with the index of the
conversation it played (``conversation``, None for the top-level steps).

Every request is recorded (method, path, lower-cased headers with ``authorization`` redacted to
``***``, JSON body) in memory and, optionally, as JSON lines in a file.

Python use::

    with ScriptedResponsesServer("script.json") as srv:
        config["model_providers.mock.base_url"] = srv.base_url   # "http://127.0.0.1:PORT/v1"
        ...run codex...
        srv.wait_for_requests(2, timeout=10.0, responses_only=True)

Command line::

    python -m octipusd.testing.responses_server --script FILE [--host 127.0.0.1] [--port 0]
        [--port-file PATH] [--record FILE]

It prints ``listening on http://127.0.0.1:PORT/v1``, writes the port to ``--port-file`` once
listening, and exits 0 on SIGTERM or SIGINT. A host that is not a loopback address is refused
(exit 2).
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from octipusd.testing.script import Step, StepError, TextBlock, ToolUseBlock
from octipusd.testing.scripted_http import (
    REDACTED_HEADERS as REDACTED_HEADERS,
    BaseRecordedRequest,
    ScriptedHandler,
    ScriptedServer,
    check_loopback,
    content_texts,
    encode_sse,
    run_cli,
    split_text,
)

__all__ = [
    "MCP_PREFIX",
    "RecordedRequest",
    "ScriptedResponsesServer",
    "check_loopback",
    "count_assistant_turns",
    "function_call_item",
    "main",
    "opening_texts",
    "response_for_step",
    "sse_events_for_step",
]

#: Model name used when a request names none.
DEFAULT_MODEL: Final = "mock-model"

#: Prefix of a script tool name that targets an MCP server tool (``mcp__<server>__<tool>``).
MCP_PREFIX: Final = "mcp__"

#: Responses API path of the model-turn endpoint (relative to the server root).
RESPONSES_PATH: Final = "/v1/responses"

#: ``input`` item types that are model output although their name does not end in ``_call``.
_ASSISTANT_ITEM_TYPES: Final = frozenset({"function_call", "reasoning", "compaction"})


@dataclass(frozen=True)
class RecordedRequest(BaseRecordedRequest):
    """One HTTP request the server received.

    Attributes:
        method: ``GET``, ``HEAD``, ``POST``...
        path: Request target including the query string, e.g. ``/v1/responses``.
        headers: Lower-cased header names to values; ``authorization`` is ``***``.
        body: The decoded JSON body; the raw text if it was not JSON; None if there was no body.
        step: For ``POST /v1/responses``, the script step index that was played; else None.
        attempt: For ``POST /v1/responses``, how many earlier requests played the same step of the
            same conversation (0 for the first; retries replay a step); else None.
        time: Arrival time, seconds since the epoch.
        conversation: For ``POST /v1/responses``, the index of the script conversation the request
            matched (:func:`opening_texts`), or None when it played the top-level steps.
    """

    @property
    def is_responses_call(self) -> bool:
        """True for ``POST /v1/responses`` (with any query string), the model-turn endpoint."""
        return self.method == "POST" and urlsplit(self.path).path.rstrip("/") == RESPONSES_PATH


def _is_assistant_item(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        return item.get("role") == "assistant"
    if not isinstance(kind, str):
        return False
    if kind.endswith("_call_output") or kind.endswith("_output"):
        return False
    return kind in _ASSISTANT_ITEM_TYPES or kind.endswith("_call")


def count_assistant_turns(items: object) -> int:
    """Count the assistant turns in a request's ``input``: the index of the step to play.

    An assistant turn is a maximal run of consecutive model-output items (``message`` items with
    ``role: "assistant"``, ``function_call``, ``reasoning``, any other ``*_call`` item) that is not
    interrupted by another item (see the module docstring for why).

    Args:
        items: The request body's ``input`` value (normally a list of item objects).

    Returns:
        The number of assistant turns, >= 0; 0 when ``items`` is not a list.
    """
    if not isinstance(items, list):
        return 0
    count = 0
    previous_assistant = False
    for item in items:
        if _is_assistant_item(item):
            if not previous_assistant:
                count += 1
            previous_assistant = True
        else:
            previous_assistant = False
    return count


#: Roles of the ``input`` message items whose text is looked for a conversation ``match``.
_OPENING_ROLES: Final = frozenset({"developer", "system", "user"})


def opening_texts(body: Mapping[str, Any]) -> list[str]:
    """The texts a script conversation's ``match`` is looked for in (see the module docstring).

    Args:
        body: The decoded ``POST /v1/responses`` body.

    Returns:
        ``instructions`` (when a string), then the text parts of the ``developer`` / ``system`` /
        ``user`` message items before the first model-output item (a string ``input`` counts as a
        user text).
    """
    texts = content_texts(body.get("instructions"))
    items = body.get("input")
    if isinstance(items, str):
        texts.append(items)
        return texts
    if not isinstance(items, list):
        return texts
    for item in items:
        if _is_assistant_item(item):
            break
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        if item.get("role") in _OPENING_ROLES:
            texts.extend(content_texts(item.get("content")))
    return texts


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _usage(step: Step) -> dict[str, Any]:
    """The step's usage as a Responses ``usage`` object (tokens).

    ``input_tokens`` includes the cached tokens, as in the OpenAI API: the script's
    ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` is reported as
    ``input_tokens``, with ``cache_read_input_tokens`` as ``input_tokens_details.cached_tokens``.
    """
    u = step.usage
    input_tokens = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + u.output_tokens,
    }


def function_call_item(block: ToolUseBlock, *, item_id: str, status: str = "completed") -> dict[str, Any]:
    """Build the ``function_call`` output item for a scripted ``tool_use`` block.

    ``mcp__<server>__<tool>`` becomes ``namespace: "mcp__<server>"``, ``name: "<tool>"``
    (observed.md §2.5); any other name is kept as is (``exec_command`` is the shell tool,
    observed.md §2.2).

    Args:
        block: The scripted tool call.
        item_id: The output item's ``id`` (``fc_<random>``).
        status: ``in_progress`` (in ``output_item.added``) or ``completed``.

    Returns:
        ``{"id", "type": "function_call", "status", "call_id", "name", "arguments", ["namespace"]}``;
        ``arguments`` is ``""`` while in progress.
    """
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": block.id or "",
        "name": block.name,
        "arguments": json.dumps(block.input, ensure_ascii=False) if status == "completed" else "",
    }
    if block.name.startswith(MCP_PREFIX):
        parts = block.name.split("__", 2)
        if len(parts) == 3 and parts[1] and parts[2]:
            item["namespace"] = f"{MCP_PREFIX}{parts[1]}"
            item["name"] = parts[2]
    return item


def _resolve(step: Step) -> list[TextBlock | ToolUseBlock]:
    """The step's blocks with generated ``call_`` ids for tool calls that have none."""
    out: list[TextBlock | ToolUseBlock] = []
    for block in step.content:
        if isinstance(block, ToolUseBlock) and block.id is None:
            block = ToolUseBlock(name=block.name, input=block.input, id=_new_id("call_"))
        out.append(block)
    return out


def _message_item(text: str, item_id: str, *, done: bool) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed" if done else "in_progress",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if done else [],
    }


def _response(response_id: str, model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "error": None,
        "incomplete_details": None,
        "usage": None,
    }


def response_for_step(step: Step, model: str) -> dict[str, Any]:
    """Build the non-streaming ``response`` object for a step.

    Args:
        step: The scripted step (its ``error`` is ignored here).
        model: Model name to echo back.

    Returns:
        A Responses ``response`` object with ``status: "completed"``, ``output`` items and ``usage``.
    """
    output: list[dict[str, Any]] = []
    for block in _resolve(step):
        if isinstance(block, TextBlock):
            output.append(_message_item(block.text, _new_id("msg_"), done=True))
        else:
            output.append(function_call_item(block, item_id=_new_id("fc_")))
    body = _response(_new_id("resp_"), model, "completed", output)
    body["usage"] = _usage(step)
    return body


def sse_events_for_step(step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield the SSE events that stream one step, as ``(event name, data object)`` pairs.

    The sequence is the one in observed.md §2.2 (plus the optional events the real API sends):
    ``response.created``, ``response.in_progress``, per block ``response.output_item.added``, the
    block's deltas and ``response.output_item.done``, then ``response.completed`` with ``usage``.
    Every data object carries ``"type"`` equal to the event name and a ``sequence_number``.

    Args:
        step: The scripted step (its ``error``, ``delay_seconds`` and ``stall_seconds`` are the
            caller's business).
        model: Model name echoed in the ``response`` objects.

    Yields:
        ``(event, data)`` pairs in wire order.
    """
    response_id = _new_id("resp_")
    sequence = 0

    def event(name: str, **data: Any) -> tuple[str, dict[str, Any]]:
        nonlocal sequence
        payload = {"type": name, "sequence_number": sequence, **data}
        sequence += 1
        return name, payload

    yield event("response.created", response=_response(response_id, model, "in_progress", []))
    yield event("response.in_progress", response=_response(response_id, model, "in_progress", []))
    output: list[dict[str, Any]] = []
    for index, block in enumerate(_resolve(step)):
        if isinstance(block, TextBlock):
            item_id = _new_id("msg_")
            yield event(
                "response.output_item.added",
                output_index=index,
                item=_message_item("", item_id, done=False),
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in split_text(block.text):
                yield event(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            yield event(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=block.text,
                logprobs=[],
            )
            yield event(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part={**part, "text": block.text},
            )
            done = _message_item(block.text, item_id, done=True)
        else:
            item_id = _new_id("fc_")
            yield event(
                "response.output_item.added",
                output_index=index,
                item=function_call_item(block, item_id=item_id, status="in_progress"),
            )
            arguments = json.dumps(block.input, ensure_ascii=False)
            for piece in split_text(arguments):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=arguments,
            )
            done = function_call_item(block, item_id=item_id)
        output.append(done)
        yield event("response.output_item.done", output_index=index, item=done)
    completed = _response(response_id, model, "completed", output)
    completed["usage"] = _usage(step)
    yield event("response.completed", response=completed)


def _error_body(error: StepError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": error.type}}


class _Handler(ScriptedHandler):
    """The Responses API on one connection: ``/v1/models``, and one script step per response."""

    server_version = "octipus-scripted-responses/1"
    model_path = RESPONSES_PATH
    default_model = DEFAULT_MODEL
    record_class = RecordedRequest

    def _step_index(self, body: Mapping[str, Any]) -> int:
        return count_assistant_turns(body.get("input"))

    def _match_texts(self, body: Mapping[str, Any]) -> list[str]:
        return opening_texts(body)

    def _complete(self, step: Step, model: str) -> Mapping[str, Any]:
        return response_for_step(step, model)

    def _frames(self, step: Step, model: str) -> Iterator[bytes]:
        for event, data in sse_events_for_step(step, model):
            yield encode_sse(event, data)

    def _error_payload(self, error: StepError) -> Mapping[str, Any]:
        return _error_body(error)

    def _request_id(self) -> str:
        return _new_id("req_")

    def _get_payload(self, path: str) -> Mapping[str, Any] | None:
        route = path.rstrip("/")
        if route == "":
            return {"ok": True}
        if route == "/v1/models":
            return {"object": "list", "data": [], "models": []}
        return None

    def do_DELETE(self) -> None:
        self._record(None)
        self._not_found()


class ScriptedResponsesServer(ScriptedServer[RecordedRequest]):
    """Runs the scripted OpenAI Responses server in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`close`)::

        with ScriptedResponsesServer(script) as srv:
            srv.base_url            # "http://127.0.0.1:PORT/v1": a Codex provider's base_url
            srv.requests            # RecordedRequest list, in arrival order
            srv.wait_for_requests(2, timeout=10.0, responses_only=True)

    ``base_url`` is ``root_url`` + ``/v1``, the value a Codex ``model_providers.<id>.base_url``
    wants (observed.md §2.1/§2.2: Codex appends ``/responses``); ``message_requests`` are the
    ``POST /v1/responses`` requests.

    The constructor (``script``, ``host``, ``port``, ``record_path``) and its errors are those of
    :class:`~octipusd.testing.scripted_http.ScriptedServer`; a ``record_path`` line is
    :meth:`RecordedRequest.as_dict`.
    """

    handler_class: ClassVar[type[ScriptedHandler]] = _Handler
    thread_name: ClassVar[str] = "scripted-responses"
    url_path: ClassVar[str] = "/v1"

    def _is_turn(self, record: RecordedRequest) -> bool:
        return record.is_responses_call

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, *, responses_only: bool = False
    ) -> list[RecordedRequest]:
        """Block until ``n`` requests arrived (with ``responses_only``, only ``POST /v1/responses``).

        Returns the snapshot of the requests counted; raises TimeoutError when fewer than ``n``
        arrived within ``timeout`` seconds.
        """
        return self._wait_for_requests(n, timeout, turns_only=responses_only)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (:func:`~octipusd.testing.scripted_http.run_cli`); returns the exit status."""
    return run_cli(
        ScriptedResponsesServer,
        argv,
        prog="python -m octipusd.testing.responses_server",
        description="Scripted OpenAI Responses API server for offline Codex CLI runs (127.0.0.1 only).",
    )


if __name__ == "__main__":
    sys.exit(main())
