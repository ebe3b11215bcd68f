"""``octipus-bridge``: reach the run's bridge from a terminal (vendors without MCP).

Seed 003 ("How tools and context work"): "Antigravity can reach the same bridge through a
supplied terminal helper. The helper supports listing tools and calling a named tool with
JSON arguments; credentials are inherited privately through the environment." Every vendor's
launch carries that environment (:func:`octipusd.adapter_launch.with_bridge_helper`), so any agent's own
shell can fall back to the helper when MCP is unavailable ("use the run's provided bridge helper to
call shell__run with the same JSON arguments").

Usage::

    octipus-bridge list [--json]
    octipus-bridge call TOOL '{"json": "arguments"}'
    echo '{"command": "ls"}' | octipus-bridge call shell__run -
    octipus-bridge shell-guard < hook-input.json

``shell-guard`` is the Claude Code PreToolUse hook of space mode (:mod:`octipusd.policy.shellguard`):
it reads the hook input on stdin, prints a deny decision or nothing, and needs no bridge; it exits 0,
or 2 (blocking) on an input it cannot read.

The bridge URL and capability come only from the environment (:data:`ENV_URL`,
:data:`ENV_TOKEN`), never from the command line, where other local users could read them.

Exit codes: 0 success; 1 the tool result is an error (``isError``); 2 bad usage, bad JSON or a
missing environment variable; 3 the bridge is unreachable or refused the capability (e.g. the
run has ended).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from octipusd.adapter import BRIDGE_CALL_TIMEOUT_SECONDS
from octipusd.adapter_launch import BRIDGE_TOKEN_ENV, BRIDGE_URL_ENV
from octipusd.policy import shellguard

if TYPE_CHECKING:
    import httpx2
    from mcp.client import Client
    from mcp_types import CallToolResult

# The MCP SDK takes about a second to import; it is imported only once a call is about to be
# made, so usage errors and ``--help`` answer at once.

#: The variables the helper reads; every vendor launch with a bridge carries them
#: (:func:`octipusd.adapter_launch.with_bridge_helper`).
ENV_URL = BRIDGE_URL_ENV
ENV_TOKEN = BRIDGE_TOKEN_ENV

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

#: Wall-clock bound of one helper invocation (seconds); seed 003 gives bridge tool requests
#: a two-hour vendor timeout, approval and delegation waits included.
CALL_DEADLINE_SECONDS = BRIDGE_CALL_TIMEOUT_SECONDS
_CONNECT_TIMEOUT_SECONDS = 10.0


class UsageError(Exception):
    """Bad usage, bad JSON or missing configuration (exit 2)."""


class BridgeUnreachableError(Exception):
    """The bridge could not be reached or refused the capability (exit 3)."""


def _config_from_env(environ: dict[str, str]) -> tuple[str, str]:
    url = environ.get(ENV_URL, "").strip()
    token = environ.get(ENV_TOKEN, "").strip()
    missing = [name for name, value in ((ENV_URL, url), (ENV_TOKEN, token)) if not value]
    if missing:
        raise UsageError(
            f"{' and '.join(missing)} not set: octipus-bridge only works inside an Octipus run, "
            "which provides the bridge URL and capability in the environment"
        )
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{ENV_URL} must be an http(s) URL, got {url!r}")
    return url, token


def _parse_arguments(raw: str, stdin: TextIO) -> dict[str, Any]:
    text = stdin.read() if raw == "-" else raw
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"arguments are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _result_text(result: CallToolResult) -> str:
    from mcp_types import TextContent

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(json.dumps(block.model_dump(by_alias=True, mode="json", exclude_none=True)))
    return "\n\n".join(parts)


class _Session:
    """One MCP client session against the bridge, with a clear story for failures."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.statuses: list[int] = []

    async def _on_response(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)

    def explain(self, exc: BaseException) -> BridgeUnreachableError:
        if 401 in self.statuses:
            return BridgeUnreachableError(
                f"the bridge at {self.url} rejected the capability (HTTP 401): {ENV_TOKEN} is not this "
                "run's capability, or the run has ended"
            )
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        return BridgeUnreachableError(f"cannot use the bridge at {self.url}: {type(leaf).__name__}: {leaf}")

    def client(self) -> tuple[httpx2.AsyncClient, Client]:
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx2.Timeout(_CONNECT_TIMEOUT_SECONDS, read=None),
            event_hooks={"response": [self._on_response]},
        )
        return http, Client(streamable_http_client(self.url, http_client=http))


async def list_tools(url: str, token: str) -> list[dict[str, Any]]:
    """Return the bridge's tools as ``[{"name", "description", "inputSchema"}]``.

    Raises:
        BridgeUnreachableError: the bridge is down or refused the capability.
    """
    session = _Session(url, token)
    try:
        with anyio.fail_after(CALL_DEADLINE_SECONDS):
            http, client = session.client()
            async with http, client:
                listing = await client.list_tools()
    except Exception as exc:
        raise session.explain(exc) from exc
    return [
        {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}
        for tool in listing.tools
    ]


async def call_tool(url: str, token: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    """Call one tool on the bridge and return its result.

    Raises:
        BridgeUnreachableError: the bridge is down, refused the capability, or answered with
            a protocol error instead of a tool result.
    """
    session = _Session(url, token)
    try:
        with anyio.fail_after(CALL_DEADLINE_SECONDS):
            http, client = session.client()
            async with http, client:
                return await client.call_tool(tool, arguments)
    except Exception as exc:
        raise session.explain(exc) from exc


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="octipus-bridge",
        description=(
            "Call the Octipus tools of the current run. The bridge URL and capability are read from "
            f"{ENV_URL} and {ENV_TOKEN}."
        ),
        epilog="Exit codes: 0 ok, 1 tool error, 2 usage/JSON/environment error, 3 bridge unreachable.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{list,call,shell-guard}")
    list_parser = commands.add_parser("list", help="list the tools with their descriptions")
    list_parser.add_argument(
        "--json", action="store_true", help="print names, descriptions and input schemas as JSON"
    )
    call_parser = commands.add_parser("call", help="call a tool with JSON arguments")
    call_parser.add_argument("tool", help="tool name, e.g. shell__run")
    call_parser.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        help="JSON object of arguments, or - to read it from stdin (default {})",
    )
    commands.add_parser(
        "shell-guard",
        help="run the space-mode shell guard as a Claude Code PreToolUse hook (hook JSON on stdin)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``octipus-bridge``.

    Args:
        argv: Arguments without the program name (default ``sys.argv[1:]``).

    Returns:
        The exit code (see the module docstring).
    """
    parser = _build_parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage message
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    if options.command == "shell-guard":
        return shellguard.main()
    try:
        url, token = _config_from_env(dict(os.environ))
        if options.command == "list":
            tools = anyio.run(list_tools, url, token)
            if options.json:
                print(json.dumps(tools, indent=2, ensure_ascii=False))
            else:
                for tool in tools:
                    description = "\n".join(f"    {line}" for line in tool["description"].splitlines())
                    print(f"{tool['name']}\n{description}\n")
            return EXIT_OK
        arguments = _parse_arguments(options.arguments, sys.stdin)
        result = anyio.run(call_tool, url, token, options.tool, arguments)
    except UsageError as exc:
        print(f"octipus-bridge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BridgeUnreachableError as exc:
        print(f"octipus-bridge: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    print(_result_text(result))
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
