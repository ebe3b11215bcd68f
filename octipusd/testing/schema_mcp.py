"""An MCP server (stdio) whose tools are read from a JSON file, for tests of tool schemas.

Run it as::

    python -m octipusd.testing.schema_mcp --tools FILE

``FILE`` holds ``[{"name": ..., "description": ..., "inputSchema": {...}}, ...]``; it is read at each
``tools/list``, so a test may rewrite it between two connections (the daemon connects its
``mcpServers`` afresh for every run). A call answers ``{"tool": NAME, "arguments": {...}}`` as text.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent, Tool

__all__ = ["SchemaServer", "configure", "lookup_tools", "main", "write_tools"]


def lookup_tools(description: str = "Look a word up.", **extra: Any) -> list[dict[str, Any]]:
    """A sample tool list: ``lookup`` (its description as given, its input schema ``word`` plus
    ``extra`` properties) and ``echo`` (fixed)."""
    properties = {"word": {"type": "string"}, **extra}
    return [
        {
            "name": "lookup",
            "description": description,
            "inputSchema": {"type": "object", "properties": properties},
        },
        {"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object"}},
    ]


def configure(
    config_file: Path, tools_file: Path, tools: list[dict[str, Any]], *, name: str = "schema"
) -> None:
    """Write ``tools`` to ``tools_file`` and an octipusd config file whose ``mcpServers.<name>`` is
    this server (over stdio, with this Python) serving them."""
    write_tools(tools_file, tools)
    args = ", ".join(json.dumps(a) for a in ["-m", "octipusd.testing.schema_mcp", "--tools", str(tools_file)])
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(
        f'[mcpServers.{name}]\ntransport = "stdio"\ncommand = {json.dumps(sys.executable)}\nargs = [{args}]\n',
        encoding="utf-8",
    )


def write_tools(path: Path, tools: list[dict[str, Any]]) -> None:
    """Write the tool list ``path`` serves (atomically: a listing never reads half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(tools), encoding="utf-8")
    tmp.replace(path)


class SchemaServer(MCPServer[Any]):
    """``MCPServer`` listing the tools of a JSON file (hand-written schemas, which the SDK's
    signature introspection cannot express)."""

    def __init__(self, tools: Path) -> None:
        super().__init__(name="schema", instructions="Tools read from a file.", log_level="WARNING")
        self._tools = tools

    async def list_tools(self) -> list[Tool]:
        listed = json.loads(await anyio.Path(self._tools).read_text(encoding="utf-8"))
        return [
            Tool(name=t["name"], description=t.get("description"), input_schema=t["inputSchema"])
            for t in listed
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        answer = json.dumps({"tool": name, "arguments": arguments})
        return CallToolResult(content=[TextContent(type="text", text=answer)], is_error=False)


def main(argv: list[str] | None = None) -> int:
    """Serve over stdio until stdin ends; returns the exit code (0)."""
    parser = argparse.ArgumentParser(
        prog="python -m octipusd.testing.schema_mcp", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--tools", type=Path, required=True, help="the JSON tool list, read at each listing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(SchemaServer(args.tools).run_stdio_async)
    return 0


if __name__ == "__main__":
    sys.exit(main())
