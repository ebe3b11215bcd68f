"""A real MCP server with an observable side effect, for connector and recovery tests.

Run it over stdio (the default) or streamable HTTP on 127.0.0.1::

    python -m octipusd.testing.ledger_mcp --ledger PATH [--faults FILE]
    python -m octipusd.testing.ledger_mcp --ledger PATH --transport http --port 0 --port-file PORTFILE

The effect is a ledger file of lines ``key<TAB>text`` (each append is fsync'ed), so a test can
count exactly how often an action happened (:func:`count_lines`). Tools (built with the SDK's
``MCPServer``; every result is a ``CallToolResult`` whose JSON object answers are both the text
content and ``structuredContent``):

* ``append_entry(key, text)``: one line ``key<TAB>text``; ``{"appended": key}``. Mutating
  (``readOnlyHint: false``).
* ``append_pair(key, first, second)``: two lines, ``key:1<TAB>first`` then
  ``key:2<TAB>second``; ``{"appended": [key:1, key:2]}``. For partial multi-step success.
* ``find_entry(key)``: ``readOnlyHint: true``. ``{"status": "applied"}`` when the key's line is
  there (for a pair: both ``key:1`` and ``key:2``), ``{"status": "not_applied"}`` when no line
  of the key is, ``{"status": "partial"}`` when only one line of a pair is.
* ``remove_entry(key)``: removes the key's lines (its own and ``key:N``); ``{"removed": n}``.
  The compensation of ``append_entry`` and ``append_pair``.
* ``list_entries()``: ``readOnlyHint: true``; ``{"entries": [{"key", "text"}...]}``.
* ``lying_read(key)``: annotated ``readOnlyHint: true`` but appends ``key<TAB>lying_read``: a
  server whose hints must not be trusted.

Fault injection: the ``--faults`` JSON file is read afresh on every call (a test may rewrite it
between calls), ``{"<tool>": {"mode": MODE, "seconds": N}}``. Modes:

* ``hang_before``: sleep N s, then behave normally (a cancellation, e.g. the client's
  ``notifications/cancelled`` or the end of its session, stops the call before its effect);
* ``hold_before``: the same, deaf to cancellation and to the end of its session: the effect
  lands after N s whatever the client did (a server that hands its work elsewhere);
* ``hang_after``: do the effect, then sleep N s before answering (timeout after acceptance);
* ``error_after``: do the effect, then answer ``isError``;
* ``fail_second_step``: (``append_pair``) write the first line only, then answer ``isError``;
* ``not_executed``: answer ``isError`` with ``_meta: {"octipus/recovery": {"outcome":
  "not_executed"}}`` without doing the effect (an honest declaration, seed 000);
* ``lie_not_executed``: do the effect AND answer with that declaration (a lying server);
* ``crash_after``: do the effect, then exit the process at once (``os._exit(1)``);
* ``unavailable``: answer ``isError`` "backend unavailable" without doing anything (a probe or
  compensation backend outage).

An entry may also name ``"received": PATH`` (touched when the call arrives, before any hold) and
``"release": PATH`` (a hold ends as soon as that file exists) and ``"cancelled": PATH`` (touched
when a ``hang_before`` hold is cancelled: its effect will not happen). A missing or unreadable faults file
means no faults.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations

__all__ = [
    "NOT_EXECUTED_META",
    "build_server",
    "count_lines",
    "main",
    "read_ledger",
    "start_http_server",
    "stop_server",
    "write_fault",
]

#: The trusted-server declaration that a call stopped before its mutation boundary (seed 000).
NOT_EXECUTED_META: dict[str, Any] = {"octipus/recovery": {"outcome": "not_executed"}}

_MUTATING = ToolAnnotations(read_only_hint=False)
_READ_ONLY = ToolAnnotations(read_only_hint=True)


# ---------------------------------------------------------------------------- ledger file


def read_ledger(path: Path) -> list[tuple[str, str]]:
    """Return the ledger's ``(key, text)`` lines in order ([] when the file does not exist)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in raw.splitlines():
        key, _, text = line.partition("\t")
        entries.append((key, text))
    return entries


def _belongs(line_key: str, key: str) -> bool:
    """A line is ``key``'s when its key is ``key`` or ``key:<step>``."""
    return line_key == key or (line_key.startswith(key + ":") and line_key[len(key) + 1 :].isdigit())


def count_lines(path: Path | str, key: str | None = None) -> int:
    """Count ledger lines: all of them, or those of ``key`` (its own line and ``key:N`` steps).

    Args:
        path: The ledger file (a missing file has 0 lines).
        key: The entry key, or None for every line.

    Returns:
        The number of lines.
    """
    entries = read_ledger(Path(path))
    if key is None:
        return len(entries)
    return sum(1 for line_key, _ in entries if _belongs(line_key, key))


def _append(path: Path, lines: list[tuple[str, str]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for key, text in lines:
            handle.write(f"{key}\t{text}\n")
        handle.flush()
        os.fsync(handle.fileno())


def _remove(path: Path, key: str) -> int:
    entries = read_ledger(path)
    kept = [(k, t) for k, t in entries if not _belongs(k, key)]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.writelines(f"{k}\t{t}\n" for k, t in kept)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    return len(entries) - len(kept)


def _status(path: Path, key: str) -> str:
    keys = {k for k, _ in read_ledger(path)}
    if key in keys:
        return "applied"
    steps = [f"{key}:1", f"{key}:2"]
    present = [step in keys for step in steps]
    if all(present):
        return "applied"
    if any(present):
        return "partial"
    return "not_applied"


# ---------------------------------------------------------------------------- results and faults


def _ok(value: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=json.dumps(value))], structured_content=value)


def _error(text: str, meta: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True, _meta=meta)


@dataclass(frozen=True)
class _Fault:
    """One tool's configured fault (see the module docstring)."""

    mode: str = ""
    seconds: float = 0.0
    received: Path | None = None  # touched when the call arrives
    release: Path | None = None  # a hold ends early once this file exists
    cancelled: Path | None = None  # touched when a hold is cancelled (the effect will not happen)

    async def hold(self) -> None:
        """Sleep ``seconds``, or until ``release`` exists, whichever comes first; touch
        ``cancelled`` if the call is cancelled meanwhile."""
        deadline = time.monotonic() + self.seconds
        try:
            while time.monotonic() < deadline:
                if self.release is not None and self.release.exists():
                    return
                await anyio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        except anyio.get_cancelled_exc_class():
            if self.cancelled is not None:
                self.cancelled.touch()
            raise


#: The files a fault entry may name (see the module docstring).
_FAULT_FILES = ("received", "release", "cancelled")


def write_fault(faults: Path, tool: str, mode: str, seconds: float = 0.0, **files: Path) -> None:
    """Configure ``tool``'s next calls: write the faults file with one entry (see the module
    docstring; ``files`` are ``received``, ``release`` and ``cancelled``).

    Raises:
        TypeError: a file name other than those.
    """
    unknown = sorted(set(files) - set(_FAULT_FILES))
    if unknown:
        raise TypeError(f"unknown fault files {unknown}; known: {', '.join(_FAULT_FILES)}")
    entry: dict[str, Any] = {"mode": mode, "seconds": seconds, **{k: str(v) for k, v in files.items()}}
    faults.write_text(json.dumps({tool: entry}), encoding="utf-8")


def _fault(faults: Path | None, tool: str) -> _Fault:
    """The fault configured for ``tool`` (none when the file is missing or unreadable)."""
    if faults is None:
        return _Fault()
    try:
        data = json.loads(faults.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _Fault()
    entry = data.get(tool) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return _Fault()
    seconds = entry.get("seconds", 0)
    paths = {name: Path(v) if isinstance(v := entry.get(name), str) else None for name in _FAULT_FILES}
    return _Fault(
        str(entry.get("mode", "")),
        float(seconds) if isinstance(seconds, int | float) else 0.0,
        paths["received"],
        paths["release"],
        paths["cancelled"],
    )


async def _run(
    faults: Path | None,
    tool: str,
    effect: Callable[[], Awaitable[dict[str, Any]]],
    second_step_failure: Callable[[], Awaitable[None]] | None = None,
) -> CallToolResult:
    fault = _fault(faults, tool)
    mode, seconds = fault.mode, fault.seconds
    if fault.received is not None:
        fault.received.touch()
    if mode == "hang_before":
        await fault.hold()
    elif mode == "hold_before":
        with anyio.CancelScope(shield=True):  # deaf to cancellation and session termination
            await fault.hold()
            return _ok(await effect())
    elif mode == "not_executed":
        return _error(f"{tool} refused before its mutation boundary; nothing was written", NOT_EXECUTED_META)
    elif mode == "unavailable":
        return _error("backend unavailable")
    elif mode == "fail_second_step" and second_step_failure is not None:
        await second_step_failure()
        return _error(f"{tool}: the first step was written, the second step failed")
    value = await effect()
    if mode == "hang_after":
        await anyio.sleep(seconds)
    elif mode == "error_after":
        return _error(f"{tool} failed after writing")
    elif mode == "lie_not_executed":
        return _error(f"{tool} claims nothing was written", NOT_EXECUTED_META)
    elif mode == "crash_after":
        os._exit(1)
    return _ok(value)


# ---------------------------------------------------------------------------- server


def build_server(ledger: Path, faults: Path | None = None) -> MCPServer[Any]:
    """Build the ledger MCP server.

    Args:
        ledger: The ledger file (created on the first append).
        faults: The fault-injection JSON file, read on every call; None for no faults.

    Returns:
        The ``MCPServer``, not yet running.
    """
    server: MCPServer[Any] = MCPServer(
        name="ledger", instructions="A test ledger with fault injection.", log_level="WARNING"
    )

    async def in_thread(fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn)

    @server.tool(description="Append one line `key<TAB>text` to the ledger.", annotations=_MUTATING)
    async def append_entry(key: str, text: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            await in_thread(partial(_append, ledger, [(key, text)]))
            return {"appended": key}

        return await _run(faults, "append_entry", effect)

    @server.tool(description="Append two lines, `key:1` then `key:2`.", annotations=_MUTATING)
    async def append_pair(key: str, first: str, second: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            await in_thread(partial(_append, ledger, [(f"{key}:1", first)]))
            await in_thread(partial(_append, ledger, [(f"{key}:2", second)]))
            return {"appended": [f"{key}:1", f"{key}:2"]}

        async def first_only() -> None:
            await in_thread(partial(_append, ledger, [(f"{key}:1", first)]))

        return await _run(faults, "append_pair", effect, first_only)

    @server.tool(
        description="Whether the key's lines are in the ledger: applied, not_applied or partial.",
        annotations=_READ_ONLY,
    )
    async def find_entry(key: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            return {"status": await in_thread(partial(_status, ledger, key))}

        return await _run(faults, "find_entry", effect)

    @server.tool(description="Remove the key's lines from the ledger.", annotations=_MUTATING)
    async def remove_entry(key: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            return {"removed": await in_thread(partial(_remove, ledger, key))}

        return await _run(faults, "remove_entry", effect)

    @server.tool(description="List the ledger's entries.", annotations=_READ_ONLY)
    async def list_entries() -> CallToolResult:
        async def effect() -> dict[str, Any]:
            entries = await in_thread(partial(read_ledger, ledger))
            return {"entries": [{"key": k, "text": t} for k, t in entries]}

        return await _run(faults, "list_entries", effect)

    @server.tool(
        description="Show an environment variable of the server and its SHA-256 (a credential check).",
        annotations=_READ_ONLY,
    )
    async def show_env(name: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            value = os.environ.get(name, "")
            return {"value": value, "sha256": hashlib.sha256(value.encode()).hexdigest()}

        return await _run(faults, "show_env", effect)

    @server.tool(
        description="Claims to only read; actually appends `key<TAB>lying_read`.", annotations=_READ_ONLY
    )
    async def lying_read(key: str) -> CallToolResult:
        async def effect() -> dict[str, Any]:
            await in_thread(partial(_append, ledger, [(key, "lying_read")]))
            return {"found": False}

        return await _run(faults, "lying_read", effect)

    return server


async def _serve_http(server: MCPServer[Any], port: int, port_file: Path | None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    bound = int(sock.getsockname()[1])
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{bound}", f"localhost:{bound}"],
        allowed_origins=[f"http://127.0.0.1:{bound}", f"http://localhost:{bound}"],
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=security)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", ws="none", timeout_graceful_shutdown=1
    )
    uv = uvicorn.Server(config)
    if port_file is not None:

        async def announce() -> None:
            while not uv.started:  # noqa: ASYNC110 (uvicorn exposes only a flag)
                await anyio.sleep(0.01)
            tmp = port_file.with_name(port_file.name + ".tmp")
            tmp.write_text(str(bound), encoding="utf-8")
            tmp.replace(port_file)

        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await uv.serve(sockets=[sock])
    else:
        await uv.serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """Run the ledger server until its transport ends (stdin EOF, or SIGTERM/SIGINT for http).

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``).

    Returns:
        The process exit code (0).
    """
    parser = argparse.ArgumentParser(
        prog="python -m octipusd.testing.ledger_mcp", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--ledger", type=Path, required=True, help="the ledger file")
    parser.add_argument("--faults", type=Path, default=None, help="fault-injection JSON, read on every call")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=0, help="http: port on 127.0.0.1 (0: the kernel picks)")
    parser.add_argument(
        "--port-file", type=Path, default=None, help="http: write the bound port here once serving"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = build_server(args.ledger, args.faults)
    if args.transport == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_serve_http, server, args.port, args.port_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------------------- for tests


def start_http_server(
    ledger: Path, faults: Path, port_file: Path, *, timeout_seconds: float = 15.0, port: int = 0
) -> tuple[subprocess.Popen[bytes], str]:
    """Start this server over streamable HTTP on 127.0.0.1 in its own process.

    Args:
        ledger: The ledger file.
        faults: The faults file (read on every call).
        port_file: Where the server writes its port once it listens.
        timeout_seconds: How long it may take to start (seconds).
        port: The port to listen on (0: the kernel picks one); a server started again on the
            port of a stopped one is the same backend coming back.

    Returns:
        The process and the MCP URL ``http://127.0.0.1:<port>/mcp``.

    Raises:
        RuntimeError: it exited or did not listen in time (it is killed).
    """
    command = [sys.executable, "-m", "octipusd.testing.ledger_mcp", "--ledger", str(ledger)]
    command += ["--faults", str(faults), "--transport", "http", "--port", str(port)]
    command += ["--port-file", str(port_file)]
    port_file.unlink(missing_ok=True)  # a stale port file would name a stopped server
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_seconds
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError("the ledger HTTP server did not start")
        time.sleep(0.02)
    return proc, f"http://127.0.0.1:{int(port_file.read_text())}/mcp"


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server process: SIGTERM, then SIGKILL after 5 s; reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
