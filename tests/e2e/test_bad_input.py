"""Bad input never breaks the daemon (issue 14 item 10), through a real octipusd on its socket.

The sweep reads the daemon's own OpenAPI document, so every route (also one added later) is sent
every class of bad input: non-finite numbers (``NaN``, ``Infinity``, ``1e999``), ``limit`` 0 and
-1, integers too large for a column, JSON nested 100,000 deep, NUL characters, lone surrogates,
oversized strings and bodies, in path segments, query parameters and every body field. No answer
may be a 500 (nor a dropped connection), a refusal of a field names it, and afterwards the daemon
still runs turns. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from octipusd.api import API_VERSION
from octipusd.api.limits import API_LIMITS
from octipusd.errors import ApiError
from octipusd.store import Store
from tests.e2e.conftest import Env

HELLO = {"steps": [{"content": [{"type": "text", "text": "hello"}]}]}
PLACEHOLDER = "\u2063bad-input\u2063"
DEEP = "[" * 100_000 + "]" * 100_000
LONG_NAME = "n" * (API_LIMITS.max_name_chars + 1)
#: Raw JSON values put in place of one body field.
BODY_VALUES: tuple[str, ...] = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "1.7e308",
    "-1",
    "0",
    str(10**23),
    "9" * 5000,
    '"NaN"',
    '"1e999"',
    json.dumps("a\x00b"),
    '"\\ud800"',
    json.dumps(LONG_NAME),
    DEEP,
    '{"k": ' * 200 + "1" + "}" * 200,
    '{"a\\u0000": 1}',
)
#: Whole bodies (raw).
WHOLE_BODIES: tuple[bytes, ...] = (
    b"NaN",
    b"1e999",
    b"[]",
    DEEP.encode(),
    ('{"a": ' * 100_000 + "1" + "}" * 100_000).encode(),
    b'{"x": "\\u0000"}',
    b"\xff\xfe",
)
QUERY_VALUES: dict[str, tuple[str, ...]] = {
    "integer": ("0", "-1", str(2**31), str(10**23), "1e999", "NaN", "1.5", "²"),
    "number": ("nan", "inf", "-inf", "1e999", "-1", str(10**23)),
    "boolean": ("maybe", "\x00"),
    "string": ("a\x00b", LONG_NAME, "é\u2028"),
}
PATH_VALUES: tuple[str, ...] = ("a\x00b", LONG_NAME, "%ff", "..", " ")


class Sweep:
    """Sends requests, keeps every 5xx or dropped connection."""

    def __init__(self, socket: Path) -> None:
        self.http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://octipusd", timeout=30.0
        )
        self.failures: list[str] = []
        self.unnamed: list[str] = []
        self.sent = 0

    def send(self, method: str, url: str, *, body: bytes | None = None, field: str | None = None) -> None:
        self.sent += 1
        headers = {"content-type": "application/json"} if body is not None else {}
        what = f"{method.upper()} {url[:160]}" + (f" body {body[:120]!r}" if body is not None else "")
        try:
            if url.split("?")[0].endswith("/stream"):
                with self.http.stream(method, url, content=body, headers=headers) as response:
                    status, text = (
                        response.status_code,
                        "" if response.status_code == 200 else response.read().decode(),
                    )
            else:
                response = self.http.request(method, url, content=body, headers=headers)
                status, text = response.status_code, response.text
        except httpx.TransportError as exc:
            self.failures.append(f"{what}: connection failed ({exc!r})")
            return
        if status >= 500:
            self.failures.append(f"{what}: {status} {text[:300]}")
        elif field is not None and status in (400, 422) and field not in text:
            self.unnamed.append(f"{what}: {status} does not name {field!r}: {text[:300]}")


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:  # the first branch that is not null
            branches = [b for b in schema[key] if b.get("type") != "null"]
            return _resolve(spec, branches[0]) if branches else {}
    return schema


def _sample(spec: dict[str, Any], name: str, schema: dict[str, Any], known: dict[str, str]) -> Any:
    """A valid-looking value for a field (known ids for id fields, else by type)."""
    schema = _resolve(spec, schema)
    if name in known:
        return known[name]
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _sample(spec, k, v, known) for k, v in props.items() if k in schema.get("required", ())}
    text = "x" * int(schema.get("minLength", 1))
    return {"string": text, "integer": 1, "number": 1.0, "boolean": True, "array": []}.get(str(kind), text)


#: Base bodies of routes whose fields depend on one another (the schema alone gives no valid body): the
#: sweep varies one field of these. A pipeline is created in an unknown session (404 once the fields
#: pass), item edits go to an unknown pipeline, a template import gets a one-stage document; a monitor's
#: moves take no body (an unknown monitor: 404); a schedule is added to an unknown session.
BASE_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/pipelines"): {"template": "x", "session_id": "0" * 32},
    ("post", "/v1/pipelines/{pipeline_id}/items"): {"add": [{"title": "x"}]},
    ("post", "/v1/pipelines/templates"): {
        "document": {"steps": [{"name": "s", "topic": "t", "toolIds": []}]},
        "name": "sweep-template",
    },
    ("post", "/v1/monitors/{monitor_id}/pause"): {},
    ("post", "/v1/monitors/{monitor_id}/resume"): {},
    ("post", "/v1/monitors/{monitor_id}/cancel"): {},
    ("post", "/v1/schedules"): {"cron": "0 7 * * 1-5", "session_id": "0" * 32, "prompt": "x"},
}


def _body_fields(spec: dict[str, Any], schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    resolved = _resolve(spec, schema)
    return resolved, list(resolved.get("properties", {}))


def _sweep_operation(
    sweep: Sweep, spec: dict[str, Any], path: str, method: str, op: dict[str, Any], known: dict[str, str]
) -> None:
    params = op.get("parameters", [])
    path_values = {p["name"]: known.get(p["name"], "0" * 32) for p in params if p["in"] == "path"}

    def url(path_over: dict[str, str] | None = None, query: dict[str, str] | None = None) -> str:
        values = {**path_values, **(path_over or {})}
        target = path.format(**{k: quote(v, safe="") for k, v in values.items()})
        if query:
            target += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in query.items())
        return target

    schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    base_body: dict[str, Any] | None = None
    if schema is not None:
        resolved, _ = _body_fields(spec, schema)
        base_body = BASE_BODIES.get((method, path)) or _sample(spec, "", resolved, known)
    raw_base = json.dumps(base_body).encode() if base_body is not None else None
    for name in path_values:
        for value in PATH_VALUES:
            sweep.send(method, url({name: value}), body=raw_base)
    for param in (p for p in params if p["in"] == "query"):
        kind = _resolve(spec, param.get("schema", {})).get("type", "string")
        for value in QUERY_VALUES.get(str(kind), QUERY_VALUES["string"]):
            sweep.send(method, url(query={param["name"]: value}), body=raw_base, field=param["name"])
    if schema is None:
        return
    resolved, fields = _body_fields(spec, schema)
    for raw in WHOLE_BODIES:
        sweep.send(method, url(), body=raw)
    for field in fields:
        for value in BODY_VALUES:
            body = dict(base_body or {})
            body[field] = PLACEHOLDER
            text = json.dumps(body).replace(json.dumps(PLACEHOLDER), value)
            sweep.send(method, url(), body=text.encode(), field=field)
        nested = _resolve(spec, resolved["properties"][field])
        if nested.get("type") == "object" and nested.get("properties"):  # one level down (remember.*)
            inner = _sample(spec, field, {**nested, "required": list(nested["properties"])}, known)
            for sub in nested["properties"]:
                for value in ("NaN", "1e999", str(10**23), "-1", "0", json.dumps("\x00")):
                    body = {**(base_body or {}), field: {**inner, sub: PLACEHOLDER}}
                    text = json.dumps(body).replace(json.dumps(PLACEHOLDER), value)
                    sweep.send(method, url(), body=text.encode(), field=sub)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The daemon's database URL: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'octipus-sweep.db'}"
    else:
        request.applymarker(pytest.mark.postgres)
        yield str(request.getfixturevalue("postgres_database_url"))


def test_every_route_refuses_bad_input_without_a_500(octipus: Callable[..., Env], database: str) -> None:
    env = octipus(HELLO, extra_env={"OCTIPUS_DATABASE_URL": database})
    session = env.new_session()
    run = env.post(session, "hi")
    env.wait_final(run)
    env.client.request("POST", "/spaces", json={"name": "team"})
    known = {
        "session_id": session,
        "run_id": run,
        "id_or_name": "team",
        "user": "alice",
        "workspace": str(env.daemon.workspace),
        "tool_id": "shell__run",
        "tool": "shell__run",
        "name": "sweep",
        "adapter": "claude-code",
        "level": "allow",
        "decision": "deny",
        "prompt": "hi",
        "text": "hi",
        "note": "n",
        "rule": "shell__run(ls:*)",
        "role": "editor",
    }
    sweep = Sweep(env.daemon.socket)
    spec = sweep.http.get(f"/{API_VERSION}/openapi.json").json()
    operations = [(p, m, op) for p, ops in spec["paths"].items() for m, op in ops.items()]
    assert len(operations) >= 40, sorted(spec["paths"])
    # destructive routes last, so the known session and run stay for the others
    for path, method, op in sorted(operations, key=lambda o: o[1] == "delete"):
        _sweep_operation(sweep, spec, path, method, op, known)
    too_big = b'{"workspace": "' + b"x" * (API_LIMITS.max_body_bytes + 1) + b'"}'
    sweep.send("post", "/v1/sessions", body=too_big)
    assert not sweep.failures, f"{len(sweep.failures)} of {sweep.sent} requests failed:\n" + "\n".join(
        sweep.failures[:40]
    )
    assert not sweep.unnamed, "\n".join(sweep.unnamed[:40])
    # the daemon still works: nothing stored by the sweep breaks a new turn or the policy
    health = env.client.request("GET", "/health")
    assert health["warnings"] == [], health["warnings"]
    fresh = env.new_session()
    assert env.wait_final(env.post(fresh, "again"))["status"] == "succeeded"
    explained = env.client.request("POST", "/rules/explain", json={"tool_id": "cli-native:Bash"})
    assert explained["decision"]["level"] in ("allow", "ask", "deny")


def test_named_refusals_and_the_unknown_stream(octipus: Callable[..., Env]) -> None:
    """The classes the fuzzer found, one by one: each a 400/422 naming the field."""
    env = octipus(HELLO)
    http = Sweep(env.daemon.socket).http

    def refused(method: str, url: str, raw: str | None = None) -> str:
        headers = {"content-type": "application/json"}
        response = http.request(method, url, content=raw, headers=headers if raw is not None else {})
        assert response.status_code in (400, 422), (
            url,
            raw and raw[:80],
            response.status_code,
            response.text,
        )
        return response.text

    assert "ttl_seconds" in refused("POST", "/v1/grants", '{"tool_id": "shell__run", "ttl_seconds": 1e999}')
    assert "ttl_seconds" in refused("POST", "/v1/grants", '{"tool_id": "shell__run", "ttl_seconds": 1.7e308}')
    assert "max_uses" in refused(
        "POST", "/v1/grants", '{"tool_id": "shell__run", "max_uses": 1' + "0" * 23 + "}"
    )
    assert "arguments.a" in refused("POST", "/v1/rules/explain", '{"tool_id": "x", "arguments": {"a": NaN}}')
    assert "nested deeper than 64" in refused(
        "POST", "/v1/rules/explain", '{"tool_id": "x", "arguments": ' + DEEP + "}"
    )
    assert "NUL" in refused("POST", "/v1/spaces", json.dumps({"name": "a\x00b"}))
    assert "limit" in refused("GET", "/v1/runs?limit=0")
    assert "limit" in refused("GET", "/v1/sessions?limit=-1")
    assert "limit" in refused("GET", f"/v1/sessions?limit={10**23}")
    assert "after" in refused("GET", f"/v1/runs/x/events?after={10**23}")
    stream = http.get("/v1/runs/nope/stream")
    assert stream.status_code == 404 and stream.json()["code"] == "not_found", stream.text
    with pytest.raises(ApiError) as unknown:
        list(env.client.stream("nope"))
    assert unknown.value.http_status == 404


def test_grants_are_validated_like_rules(octipus: Callable[..., Env]) -> None:
    env = octipus(HELLO)
    with pytest.raises(ApiError, match="does not parse") as rule:
        env.client.request("POST", "/rules", json={"level": "allow", "rule": "c d"})
    with pytest.raises(ApiError, match="does not parse") as grant:
        env.client.request("POST", "/grants", json={"tool_id": "a b"})
    assert rule.value.http_status == grant.value.http_status == 400
    for tool_id in ("x(y)", "x)", " x", "Bash"):  # parentheses, spaces, a native tool without its prefix
        with pytest.raises(ApiError) as refused:
            env.client.request("POST", "/grants", json={"tool_id": tool_id})
        assert refused.value.http_status == 400, tool_id
    with pytest.raises(ApiError, match="tool_id: 'a b' is not a tool id") as explained:
        env.client.request("POST", "/rules/explain", json={"tool_id": "a b"})
    assert explained.value.http_status == 400
    made = env.client.request("POST", "/grants", json={"tool_id": "cli-native:Bash", "matcher": "git (x) y"})
    assert made["matcher"] == "git (x) y"
    assert env.client.request("GET", "/health")["warnings"] == []
    session = env.new_session()
    assert env.wait_final(env.post(session, "hi"))["status"] == "succeeded"


def test_a_stored_row_that_cannot_be_loaded_is_skipped_with_a_health_warning(
    octipus: Callable[..., Env], database: str
) -> None:
    """Rows an older daemon stored unvalidated: skipped and named, never failing runs or explain."""
    store = Store.open(database)
    try:
        bad_grant = store.create_grant(tool_id="a b", level="allow", created_by="old-daemon")
        bad_rule = store.add_rule(level="deny", rule="c d", created_by="old-daemon")
        good = store.add_rule(level="deny", rule="shell__run(rm:*)", created_by="old-daemon")
    finally:
        store.close()
    env = octipus(HELLO, extra_env={"OCTIPUS_DATABASE_URL": database})
    warnings = env.client.request("GET", "/health")["warnings"]
    assert len(warnings) == 2, warnings
    assert any(f"grant {bad_grant.id}" in w and "'a b'" in w and "revoke" in w for w in warnings), warnings
    assert any(f"stored rule {bad_rule.id}" in w and "'c d'" in w and "remove" in w for w in warnings), (
        warnings
    )
    explained = env.client.request(
        "POST", "/rules/explain", json={"tool_id": "shell__run", "arguments": {"command": "rm -x"}}
    )
    assert explained["decision"]["level"] == "deny" and good.rule in str(explained), explained
    session = env.new_session()
    assert env.wait_final(env.post(session, "hi"))["status"] == "succeeded"
    env.client.request("DELETE", f"/grants/{bad_grant.id}")
    env.client.request("DELETE", f"/rules/{bad_rule.id}")
    assert env.client.request("GET", "/health")["warnings"] == []
