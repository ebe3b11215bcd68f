"""The package layout holds (DESIGN.md "Layout" and "Layers"), read from the source with ``ast``.

Every module of ``octipusd/`` and of the adapter and worktree packages is parsed; each import
(anywhere in the module: top level, inside a function, or under ``if TYPE_CHECKING:``, which
gets no exemption) is mapped to the *room* it lands in: a top-level subpackage of ``octipusd``
(``runtime``, ``bridge``...), a foundation module (``errors``, ``settings``, ``adapter``...), or
an adapter/worktree package. Then:

* no two rooms import each other, directly or through others (no cycle);
* the layers point downward: clients (``ctl``, ``tui``, ``web``) know the API's models and the
  error tree, nothing else; orchestration (``runtime``, ``pipelines``) imports no API or client;
  a capability imports only the foundations (a sibling capability only in the named allowance
  below); the foundations import only foundations below them, in the order
  errors < settings < adapter, toolkit < store;
* no product module is over 800 lines (the named allowances below are ceilings: they may only
  shrink, and one that is no longer needed fails the test until it is removed);
* no product module outside ``octipusd/testing`` imports the test kit or the bridge's test double.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: Ranks of the foundations: a foundation imports only lower ranks (DESIGN.md "Layers", 5).
#: ``octipusd`` is the package itself (its version); ``adapterkit`` is the adapter SDK's helpers;
#: ``environment`` the allowlist of what child processes inherit; ``paths`` the XDG folders and
#: the socket; ``questionnaire`` the questions of a questionnaire approval (read by the clients, the
#: page and notifications alike); ``inert`` the one rule that makes agent text inert for a terminal,
#: a title or a notification (clients, page and notifications alike); ``settings_swarm``, ``settings_web``, ``settings_notify``,
#: ``settings_security``, ``settings_orchestrator`` and ``settings_schedules`` the ``swarm``, ``web``,
#: ``notify``, ``security``, ``orchestrator`` and ``schedules`` settings sections;
#: ``adapter_events`` the typed vendor events of the adapter protocol; ``adapter_launch`` the launch as
#: the runtime starts it (an adapter's launch plus the bridge helper's environment); ``money`` exact
#: amounts in US dollars, read, stored, sent and shown by one rule (by the clients, the page and
#: notifications alike).
FOUNDATIONS: Mapping[str, int] = {
    "octipusd": 0,
    "errors": 1,
    "environment": 1,
    "paths": 1,
    "inert": 1,
    "questionnaire": 1,
    "money": 1,
    "settings_swarm": 1,
    "settings_web": 1,
    "settings_notify": 1,
    "settings_security": 1,
    "settings_orchestrator": 1,
    "settings_schedules": 1,
    "settings": 2,
    "adapter_events": 2,
    "adapter": 3,
    "toolkit": 3,
    "adapter_launch": 4,
    "adapterkit": 5,
    "store": 6,
}
CLIENTS = frozenset({"ctl", "tui"})
#: ``web`` is the page the API application itself serves, server-rendered from the same services
#: as the JSON routes (issue 16: one application, one set of routes), so it sits at the API layer;
#: ``api`` never imports it (``web.site`` adds the pages, the composition root serves the site).
API = frozenset({"api", "web"})
ORCHESTRATION = frozenset({"runtime", "pipelines", "monitors", "schedules"})
CAPABILITIES = frozenset(
    {"bridge", "tools", "connectors", "policy", "journal", "runner", "vault", "sandbox", "notify", "durable"}
)
#: The composition root: it builds everything, so it may import every layer (``app_security`` is its
#: part that composes the sandbox and the vault, ``app_pipelines`` the pipelines' walker and engine,
#: ``app_schedules`` the schedules' firer and service on that engine).
ROOT_ROOMS = frozenset({"app", "app_security", "app_pipelines", "app_schedules", "__main__"})
#: The shipped test kit: it may import anything; no product module imports it.
KIT = frozenset({"testing"})
#: The modules of the API a client may import (the request and response models, the request
#: limits, and the package itself for its ``API_VERSION``).
CLIENT_API_MODULES = frozenset({"octipusd.api", "octipusd.api.models", "octipusd.api.request_limits"})

#: Capability -> capability imports that stay, each with its reason (never in a cycle).
CAPABILITY_USES: Mapping[tuple[str, str], str] = {
    ("bridge", "policy"): "the octipus-bridge helper (bridge/helper.py) is the hook that runs the "
    "policy's shell guard (policy/shellguard.py) in the vendor's process",
    ("tools", "policy"): "spawn_child's gates (tools/gate_args.py) refuse directory switches outside "
    "the child's tree before dispatch, read with the policy's shell parser (policy/dirswitch.py)",
    (
        "tools",
        "sandbox",
    ): "the shell tools (tools/shell_command.py) wrap each command in the sandbox's runner "
    "(sandbox/), which the daemon hands it through ToolHost.shell_terms",
}

#: Product modules allowed over :data:`MAX_LINES`, each with its ceiling (its size today).
OVERSIZED: Mapping[str, int] = {}
MAX_LINES = 800

#: What only tests may import.
TEST_ONLY_MODULES = ("octipusd.testing", "octipusd.bridge.fakes")
TEST_ONLY_NAMES = frozenset({"FakeToolHost"})


@dataclass(frozen=True)
class Import:
    """One import of one module: where it is and what it names."""

    module: str  # the importing module, e.g. octipusd.bridge.server
    path: str  # its file, relative to the repository
    line: int
    target: str  # the imported module, e.g. octipusd.toolkit
    names: tuple[str, ...]  # the names taken from it (from-imports)


def product_files() -> dict[str, Path]:
    """Module name -> file of every product module (octipusd, the adapters, the worktrees)."""
    tops = [ROOT / "octipusd"]
    for folder in ("adapters", "worktrees"):
        tops += sorted(p for p in (ROOT / folder).iterdir() if (p / "__init__.py").is_file())
    found: dict[str, Path] = {}
    for top in tops:
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports_of(module: str, path: Path, known: Iterable[str]) -> Iterator[Import]:
    """Every import statement of ``module``, with relative imports resolved and ``from pkg import
    submodule`` read as an import of the submodule."""
    modules = set(known)
    is_package = path.name == "__init__.py"
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, rel, node.lineno, alias.name, ())
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{base}.{name}" for name in names if f"{base}.{name}" in modules]
            for target in submodules:
                yield Import(module, rel, node.lineno, target, ())
            rest = tuple(name for name in names if f"{base}.{name}" not in modules)
            if rest or not submodules:
                yield Import(module, rel, node.lineno, base, rest)


def room_of(module: str, packages: Iterable[str]) -> str | None:
    """The room of a module name, or None for a module outside the product (stdlib, PyPI)."""
    parts = module.split(".")
    if parts[0] == "octipusd":
        return parts[1] if len(parts) > 1 else "octipusd"
    return parts[0] if parts[0] in set(packages) else None


def all_imports() -> tuple[list[Import], set[str]]:
    """Every product import, and the names of the adapter/worktree packages."""
    files = product_files()
    packages = {name for name in files if "." not in name and name != "octipusd"}
    found = [imp for module, path in files.items() for imp in imports_of(module, path, files)]
    return found, packages


def room_edges(imports: Iterable[Import], packages: set[str]) -> dict[tuple[str, str], list[Import]]:
    """(from room, to room) -> the imports that make that edge (rooms importing themselves left out)."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        source, target = room_of(imp.module, packages), room_of(imp.target, packages)
        if source is not None and target is not None and source != target:
            edges.setdefault((source, target), []).append(imp)
    return edges


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one room (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def layer_violations(edges: Mapping[tuple[str, str], list[Import]], packages: set[str]) -> list[str]:
    """Each import that points the wrong way between layers (see the module docstring)."""
    capabilities = CAPABILITIES | packages
    problems: list[str] = []
    for (source, target), imps in sorted(edges.items()):
        where = f"{imps[0].path}:{imps[0].line} imports {imps[0].target}"
        if source in CLIENTS:
            if target in API:
                bad = [imp for imp in imps if imp.target not in CLIENT_API_MODULES]
                if bad:
                    problems.append(f"client {source} imports {bad[0].target} ({bad[0].path}:{bad[0].line})")
            elif target not in ("errors", "inert", "paths", "questionnaire", "money", "settings", "octipusd"):
                problems.append(f"client {source} -> {target}: {where}")
        elif source in API:
            if target in CLIENTS | ROOT_ROOMS | KIT or (source, target) == ("api", "web"):
                problems.append(f"{source} -> {target}: {where}")
        elif source in ORCHESTRATION:
            if target in CLIENTS | API | ROOT_ROOMS | KIT:
                problems.append(f"orchestration {source} -> {target}: {where}")
        elif source in capabilities:
            if target in FOUNDATIONS:
                continue
            if target in capabilities and (source, target) in CAPABILITY_USES:
                continue
            problems.append(f"capability {source} -> {target}: {where}")
        elif source in FOUNDATIONS and (
            target not in FOUNDATIONS or FOUNDATIONS[target] >= FOUNDATIONS[source]
        ):
            problems.append(f"foundation {source} -> {target}: {where}")
    return problems


def unplaced_rooms(rooms: Iterable[str], packages: set[str]) -> list[str]:
    """Rooms that belong to no layer (a new package must be placed in one)."""
    placed = set(FOUNDATIONS) | CLIENTS | API | ORCHESTRATION | CAPABILITIES | ROOT_ROOMS | KIT | packages
    return sorted(set(rooms) - placed)


# ---------------------------------------------------------------------------- the checks


def test_no_two_rooms_import_each_other() -> None:
    imports, packages = all_imports()
    edges = room_edges(imports, packages)
    found = cycles(edges)
    detail = [
        f"{' <-> '.join(group)}: "
        + "; ".join(
            f"{a}->{b} ({edges[a, b][0].path}:{edges[a, b][0].line})"
            for a in group
            for b in group
            if (a, b) in edges
        )
        for group in found
    ]
    assert not found, "\n".join(detail)


def test_imports_point_down_the_layers() -> None:
    imports, packages = all_imports()
    edges = room_edges(imports, packages)
    rooms = {room for edge in edges for room in edge}
    assert unplaced_rooms(rooms, packages) == []
    assert layer_violations(edges, packages) == []


def test_capability_allowances_are_still_needed() -> None:
    imports, packages = all_imports()
    edges = room_edges(imports, packages)
    assert [use for use in CAPABILITY_USES if use not in edges] == []


def test_no_product_module_is_over_800_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in product_files().values()
    }
    over = {path: n for path, n in sizes.items() if n > OVERSIZED.get(path, MAX_LINES)}
    assert over == {}, f"modules over {MAX_LINES} lines (or over their allowance): {over}"
    stale = {path: sizes.get(path) for path in OVERSIZED if sizes.get(path, 0) <= MAX_LINES}
    assert stale == {}, f"remove these allowances from OVERSIZED, they are no longer needed: {stale}"


def test_no_product_module_imports_the_test_kit_or_the_fake_host() -> None:
    imports, _ = all_imports()
    offenders = [
        f"{imp.path}:{imp.line} imports {imp.target} {imp.names or ''}".rstrip()
        for imp in imports
        if not imp.module.startswith(TEST_ONLY_MODULES)
        and (imp.target.startswith(TEST_ONLY_MODULES) or TEST_ONLY_NAMES.intersection(imp.names))
    ]
    assert offenders == []


# ---------------------------------------------------------------------------- the checks can fail


def _imp(module: str, target: str, *names: str) -> Import:
    return Import(module, module.replace(".", "/") + ".py", 1, target, names)


def test_the_checks_see_cycles_wrong_layers_and_the_fake_host() -> None:
    """The same functions, on made-up imports that break each rule, report each break."""
    made_up = [
        _imp("octipusd.bridge.server", "octipusd.tools"),
        _imp("octipusd.tools.base", "octipusd.journal.executor"),
        _imp("octipusd.journal.executor", "octipusd.bridge.host"),
        _imp("octipusd.policy.gate", "octipusd.runtime.runs"),
        _imp("octipusd.ctl.main", "octipusd.api.app"),
        _imp("octipusd.toolkit.specs", "octipusd.store.records"),
        _imp("octipusd.runtime.actions", "octipusd.bridge.fakes", "FakeToolHost"),
        _imp("octipus_codex.parser", "octipusd.runner.process"),
    ]
    edges = room_edges(made_up, {"octipus_codex"})
    assert cycles(edges) == [["bridge", "journal", "tools"]]
    problems = "\n".join(layer_violations(edges, {"octipus_codex"}))
    for expected in (
        "capability bridge -> tools",
        "capability policy -> runtime",
        "client ctl imports octipusd.api.app",
        "foundation toolkit -> store",
        "capability octipus_codex -> runner",
    ):
        assert expected in problems, problems
    assert unplaced_rooms(["bridge", "gadgets"], set()) == ["gadgets"]
    kit = [_imp("octipusd.runtime.actions", "octipusd.bridge.fakes", "FakeToolHost")]
    assert [i for i in kit if i.target.startswith(TEST_ONLY_MODULES)] == kit


def test_imports_are_read_wherever_they_are_and_however_they_are_written(tmp_path: Path) -> None:
    """Relative imports, ``from pkg import submodule``, imports in functions and under
    ``TYPE_CHECKING`` all count."""
    folder = tmp_path / "octipusd" / "bridge"
    folder.mkdir(parents=True)
    source = folder / "server.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from octipusd import adapterkit\n"
        "from . import queue\n"
        "from ..tools import x\n"
        "if TYPE_CHECKING:\n"
        "    from octipusd.runtime.runs import RunManager\n"
        "def f():\n"
        "    import octipusd.api.app\n"
    )
    known = ["octipusd", "octipusd.adapterkit", "octipusd.bridge", "octipusd.bridge.queue", "octipusd.tools"]
    targets = sorted(imp.target for imp in imports_of("octipusd.bridge.server", source, known))
    assert targets == [
        "octipusd.adapterkit",
        "octipusd.api.app",
        "octipusd.bridge.queue",
        "octipusd.runtime.runs",
        "octipusd.tools",
        "typing",
    ]
