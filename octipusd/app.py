"""Composition root of octipusd: settings -> store -> services -> API, in one task group.

Start-up order (nothing is bound before settings and the database are known good):

1. settings (invalid -> message naming the key and its source, exit 2);
2. the database lock (another daemon -> message naming its pid, exit 1), then migrations;
3. runs left live by a previous daemon are marked ``interrupted`` (their approvals cancelled);
4. executables resolved (health reports them);
5. the vault (its key checked, a pending rotation finished) and its log filter;
6. the page's TCP socket (``web.enabled``) and then the Unix socket bound (0700 folder, 0600
   socket; a failure closes what was bound) and served; while
   ``swarm.worktreeIsolation`` is on, the orphan reaper of child worktrees sweeps at once and
   every ``swarm.orphanReaperIntervalMs`` beside it (:mod:`octipusd.runtime.reaping`); the
   notifier (:mod:`octipusd.notify`) hears every committed event batch and sends off the runs' path.

SIGTERM or SIGINT: stop accepting turns, stop every vendor process (whole group, confirmed
with psutil), mark their runs ``interrupted`` with the reason, let both servers finish their
in-flight requests and close, exit 0.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
from octipus_worktrees import WorktreeManager, default_root

from octipusd import __version__
from octipusd.adapter import Adapter, load_adapters
from octipusd.api.common import Services
from octipusd.api.disclosure import PrivateText
from octipusd.api.server import QuietServer, bind_unix_socket, make_server
from octipusd.app_pipelines import (
    build_pipelines,
    notify_pipelines,
    pause_interrupted_pipelines,
)
from octipusd.app_schedules import build_schedules, start_durable_work
from octipusd.app_security import LOG_FILTER, connector_secrets, find_sandbox, open_vault
from octipusd.connectors import ConnectorRegistry
from octipusd.durable.engine import DurableEngine
from octipusd.environment import vendor_environment
from octipusd.errors import ConfigError, NotFoundError, OctipusError
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.monitors.probes import ProbeRegistry
from octipusd.monitors.service import MonitorService
from octipusd.notify import Notifier, PageUrl
from octipusd.pipelines.runner import DurableRunner
from octipusd.pipelines.service import PipelineService
from octipusd.pipelines.template_service import TemplateService
from octipusd.pipelines.walker import Walker
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.flowguard import FlowGuardMode
from octipusd.policy.gate import PermissionGate
from octipusd.policy.protected import ProtectedPaths
from octipusd.runner.containment import Containment, choose_containment
from octipusd.runner.executables import Resolution, login_path, resolve_executable
from octipusd.runner.process import kill_run_tree
from octipusd.runner.transport import Launcher, VendorLauncher
from octipusd.runtime.actions import ActionService, manual_run_id
from octipusd.runtime.admission import Admission, HostProbe, limits_from_settings, raise_descriptor_limit
from octipusd.runtime.events import EventHub
from octipusd.runtime.inflight import end_left_requests
from octipusd.runtime.manager import RunManager
from octipusd.runtime.reaping import OrphanReaper
from octipusd.runtime.services import RunLimits, RunRegistry, RunServices, followers_emitter
from octipusd.schedules.service import ScheduleService
from octipusd.settings import (
    McpServerSettings,
    Settings,
    VendorBinary,
    default_config_path,
    load_settings,
    socket_path,
    xdg_data_dir,
)
from octipusd.store.aio import in_thread
from octipusd.store.engine import DatabaseTimeouts, default_sqlite_url, private_parts
from octipusd.store.journal_store import ToolAction
from octipusd.store.lock import DatabaseLock
from octipusd.store.repository import Store
from octipusd.toolkit import NO_SANDBOX, MonitorOps, PipelineOps, RecoveryContract, ShellSandbox, ToolSpec
from octipusd.tools import DEFAULT_TOOLS
from octipusd.vault import RESOLVED, Vault, install_log_filter
from octipusd.web.access import WebAccess
from octipusd.web.listener import bind_web_socket, endpoint_of, make_web_server
from octipusd.web.site import create_site

log = logging.getLogger("octipusd")


def page_links(access: WebAccess | None) -> PageUrl:
    """The link builder of notifications: the page's origin + a path, never its token; with the
    page off (``web.enabled`` false) notifications carry no link."""

    def page_url(path: str) -> str | None:
        return f"{access.origin}{path}" if access is not None else None

    return page_url


def start_notifier(settings: Settings, store: Store, hub: EventHub, page_url: PageUrl) -> Notifier:
    """The notifier of ``notify.urls``, hearing every committed event batch of ``hub`` (its task is
    started by the caller: :meth:`Notifier.run`); its targets are logged redacted."""
    notifier = Notifier(settings.notify, store, page_url)
    if notifier.configured:
        hub.add_listener(notifier.listen)
        targets = ", ".join(t.target for t in notifier.health().targets)
        log.info("notifications to %s", targets)
    return notifier


def binary_setting(settings: Settings, adapter: Adapter) -> str:
    """Return the configured ``cliModels.<key>.binaryPath`` of an adapter, or its default command."""
    return settings.cliModels.binary_path(adapter.setting_key) or adapter.default_binary


def vendor_binaries(adapters: Mapping[str, Adapter]) -> list[VendorBinary]:
    """The installed adapters' binary settings (declared ``setting_key`` and ``binary_env``), one per
    key: adapters sharing a key (Claude Code and its GLM and Kimi variants) share the setting."""
    found: dict[str, VendorBinary] = {}
    for name in sorted(adapters):
        adapter = adapters[name]
        known = found.get(adapter.setting_key)
        if known is None or (known.env is None and adapter.binary_env is not None):
            found[adapter.setting_key] = VendorBinary(adapter.setting_key, adapter.binary_env)
    return list(found.values())


def read_settings(config_file: Path | None, environ: Mapping[str, str] | None = None) -> Settings:
    """:func:`~octipusd.settings.load_settings` with the installed adapters' binary settings.

    Raises:
        ConfigError: as :func:`~octipusd.settings.load_settings` (an adapter that fails to load is
            left out here; the daemon reports it once it serves).
    """
    return load_settings(config_file, environ, vendor_binaries(load_adapters([])))


def tool_aliases(adapters: Mapping[str, Adapter]) -> dict[str, str]:
    """The installed adapters' native tool aliases, merged for the flow guard
    (:attr:`~octipusd.adapter.Adapter.tool_aliases`); on a name two adapters map differently the
    first adapter by registry name wins, and the conflict is logged."""
    merged: dict[str, str] = {}
    for name in sorted(adapters):
        for alias, tool in adapters[name].tool_aliases.items():
            if merged.setdefault(alias, tool) != tool:
                log.warning(
                    "adapter %s maps native tool %s to %s, kept as %s", name, alias, tool, merged[alias]
                )
    return merged


def resolve_all(settings: Settings, adapters: dict[str, Adapter]) -> dict[str, Resolution]:
    """Resolve every adapter's binary on ``cliModels.path`` or the login PATH (seed 003).

    The binaries' ``--version`` commands run at once, one thread each (start-up waits for the
    slowest, not for their sum).
    """
    search = settings.cliModels.path or login_path()
    base = vendor_base_env(search)

    def resolve(name: str) -> Resolution:
        a = adapters[name]
        # ``--version`` runs the vendor binary too: with its allowlisted environment, never the daemon's
        return resolve_executable(
            name,
            binary_setting(settings, a),
            search,
            a.version_argv,
            vendor_environment(base, a, {}),
            setting_key=a.setting_key,
        )

    if not adapters:
        return {}
    with ThreadPoolExecutor(max_workers=len(adapters), thread_name_prefix="resolve") as pool:
        return dict(zip(adapters, pool.map(resolve, adapters), strict=True))


def vendor_base_env(search_path: str) -> dict[str, str]:
    """The environment vendor launches pick from: the daemon's, with PATH set to the search PATH.

    Not handed to a vendor as it is: each launch takes only the login variables, the adapter's
    declared ones and the row's (:func:`octipusd.environment.vendor_environment`).
    """
    env = dict(os.environ)
    env["PATH"] = search_path
    return env


def build_runs(
    settings: Settings,
    *,
    store: Store,
    hub: EventHub,
    broker: ApprovalBroker,
    policy: Policy,
    adapters: Mapping[str, Adapter],
    resolutions: Mapping[str, Resolution],
    data_dir: Path,
    owner: str,
    base_env: Mapping[str, str],
    journal: ActionJournal,
    operator: RecoveryOperator,
    connectors: ConnectorRegistry | None,
    config_notices: Callable[[], list[str]] | None,
    launcher: Launcher,
    probe: HostProbe | None = None,
    vault: Vault | None = None,
    sandbox: ShellSandbox = NO_SANDBOX,
    pipelines: PipelineOps | None = None,
    monitors: MonitorOps | None = None,
    containment: Containment | None = None,
) -> tuple[RunManager, PermissionGate]:
    """Compose the run core: the registry of live runs, the permission gate, admission (``probe``
    reads the host's memory and descriptors: psutil unless given), the run services (``vault``
    resolves the runs' placeholders, None refuses them; ``sandbox``: the shell sandbox
    :func:`find_sandbox` found; while it is in force the flow guard counts a ``network: true``
    shell call as egress; the gate refuses every call reaching what the sandbox hides, in force or
    not: the daemon's private files, its runtime folder, the buses)."""
    registry = RunRegistry()
    admission = Admission(limits_from_settings(settings.agent), probe)
    log.info(
        "admission: at most %d run(s) working at once, each leaving %d MiB available",
        admission.limits.max_runs,
        admission.limits.min_free_memory_mib,
    )
    gate = PermissionGate(
        store,
        broker,
        followers_emitter(hub, registry),
        policy,
        flow_guard=FlowGuardMode(settings.agent.flowGuard),
        plan_tools=frozenset(t.name for t in DEFAULT_TOOLS if t.read_only or t.name == "update_work_plan"),
        tool_aliases=tool_aliases(adapters),
        sandboxed_shell=sandbox.in_force,
        protected=ProtectedPaths(sandbox.hidden),
    )
    services = RunServices(
        store=store,
        hub=hub,
        broker=broker,
        gate=gate,
        journal=journal,
        operator=operator,
        recovery=RecoveryGate(store, journal, gate, operator, hub.emit),
        adapters=adapters,
        resolutions=resolutions,
        data_dir=data_dir,
        owner=owner,
        user=getpass.getuser(),
        base_env=dict(base_env),
        limits=RunLimits(
            run_timeout_s=settings.daemon.runTimeoutSeconds, follow_ups=settings.agent.maxFollowUps
        ),
        prompt_dumps=settings.agent.promptDumps,
        connectors=connectors,
        config_notices=config_notices,
        launcher=launcher,
        compaction_threshold=settings.agent.compactionThresholdChars,
        compaction_keep_turns=settings.agent.compactionKeepTurns,
        admission=admission,
        swarm=settings.swarm,
        worktrees=WorktreeManager(default_root(base_env)),
        vault=vault,
        sandbox=sandbox,
        pipelines=pipelines,
        monitors=monitors,
        containment=containment,
    )
    return RunManager(services, registry), gate


class McpServersSource:
    """``mcpServers`` as of every new connector connection (seed 000: server settings,
    ``trustRecoveryHints`` included, apply on the next connection): the file is compared at each
    connection and validated again when it changed.

    Args:
        settings: The settings read at start-up (the fallback).
        config_file: The ``--config`` file, if one was given.
    """

    def __init__(self, settings: Settings, config_file: Path | None) -> None:
        self._last: Mapping[str, McpServerSettings] = settings.mcpServers
        self._config_file = config_file
        self._vendors = vendor_binaries(load_adapters([]))
        self._read: tuple[object, ...] | None = None  # what the last read saw (file bytes, environment)
        self.problem: str | None = None

    def _inputs(self) -> tuple[object, ...]:
        """What the settings are read from: the file's bytes (None when absent) and the environment.
        Comparing them costs a small read, validating the settings about 3.5 ms (measured)."""
        path = self._config_file or default_config_path()
        try:
            text: bytes | None = path.read_bytes()
        except OSError:
            text = None
        return (path, text, tuple(sorted(os.environ.items())))

    def __call__(self) -> Mapping[str, McpServerSettings]:
        """The current ``mcpServers``, validated again only when the file or the environment changed;
        an invalid edit keeps the last good ones (logged, and reported by :meth:`notices` to every
        run until the file is fixed)."""
        inputs = self._inputs()
        if inputs == self._read:
            return self._last
        self._read = inputs
        try:
            self._last = load_settings(self._config_file, vendors=self._vendors).mcpServers
            self.problem = None
        except ConfigError as exc:
            self.problem = exc.message
            log.error("mcpServers: keeping the previous servers: %s", exc.message)
        return self._last

    def notices(self) -> list[str]:
        """One line per configuration problem, for run notices."""
        if self.problem is None:
            return []
        return [
            f"the settings file has an error, so the MCP servers as last read correctly are used: {self.problem}"
        ]


class StopSignal:
    """SIGTERM/SIGINT, taken from the very start of :func:`serve` to its end.

    Before the API serves, a signal cancels start-up (its ``finally`` blocks close the socket, the
    store and the database lock: a clean stop at any moment); once it serves, it sets
    :attr:`received` for the graceful shutdown of the runs and the server.

    Attributes:
        received: Set when a signal arrived; :attr:`name` says which.
        name: ``SIGTERM`` or ``SIGINT`` once received.
    """

    def __init__(self) -> None:
        self.received = anyio.Event()
        self.name = ""
        self._startup: anyio.CancelScope | None = None

    def guard_startup(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` if a signal arrives (or arrived) before :meth:`serving`."""
        self._startup = scope
        if self.received.is_set():
            scope.cancel()

    def serving(self) -> None:
        """Start-up is over: from now on a signal only sets :attr:`received`."""
        self._startup = None

    async def watch(self, signals: AsyncIterator[int]) -> None:
        """Take the first signal (the receiver keeps catching later ones, so they do no harm)."""
        async for signum in signals:
            self.name = signal.Signals(signum).name
            log.info("received %s", self.name)
            self.received.set()
            if self._startup is not None:
                self._startup.cancel()
            return


async def serve(settings: Settings, config_file: Path | None = None) -> None:
    """Run the daemon until SIGTERM/SIGINT.

    The signals are taken before anything else (the database lock, the store, the socket), so a
    stop during start-up ends it cleanly, as one during shutdown does.

    Args:
        settings: The settings read at start-up.
        config_file: The ``--config`` file (re-read for ``mcpServers`` at each connection).

    Raises:
        OctipusError: start-up failed (database locked, socket in use...).
    """
    stop = StopSignal()
    failed: OctipusError | None = None
    raise_descriptor_limit()  # each run holds descriptors (about 1,000 at 200 runs)
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as watcher:
            watcher.start_soon(stop.watch, signals)
            try:
                with anyio.CancelScope() as startup:
                    stop.guard_startup(startup)
                    await _serve_settings(settings, config_file, stop)
                if startup.cancelled_caught:
                    log.info("start-up stopped by %s", stop.name)
            except OctipusError as exc:  # raised as itself, not inside the watcher's group
                failed = exc
            finally:
                watcher.cancel_scope.cancel()
    if failed is not None:
        raise failed


async def _serve_settings(settings: Settings, config_file: Path | None, stop: StopSignal) -> None:
    try:
        policy = Policy.from_setting(settings.permissions.rules)
    except ValueError as exc:
        raise ConfigError(f"invalid setting: permissions.rules: {exc}") from exc
    data_dir = xdg_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    url = settings.database.url or default_sqlite_url()
    timeouts = DatabaseTimeouts.from_settings(settings.database)
    containment = await in_thread(choose_containment, settings.agent.processContainment)
    log.info("process containment: %s (%s)", containment.mechanism, containment.detail)
    sandbox = await in_thread(find_sandbox, settings, data_dir, config_file)
    try:
        lock = DatabaseLock(url, timeouts=timeouts)
        await in_thread(lock.acquire)
        try:
            store = await in_thread(Store.open, url, timeouts=timeouts)
            try:
                sources = McpServersSource(settings, config_file)
                await _serve(settings, store, data_dir, policy, sources, stop, containment, sandbox)
            finally:
                with anyio.CancelScope(shield=True):
                    await in_thread(store.close)
        finally:
            with anyio.CancelScope(shield=True):
                await in_thread(lock.release)
    finally:
        with anyio.CancelScope(shield=True):
            await in_thread(containment.close)


@dataclass(frozen=True)
class _Core:
    """What the daemon serves, built by :func:`_build_core` before any socket is bound.

    Attributes:
        services: The API's services (without the page's endpoint and the notifier yet).
        connectors: The MCP connectors.
        left_in_flight: Actions a stopped daemon left in flight (ended once serving).
        engine: The durable engine (DBOS), loaded only when durable work is open or created.
        walker: The pipelines' walks (their live stages, their end notification).
        runner: The pipelines' runner (its watchdogs and answer deliveries run in the daemon's tasks).
        schedules: The schedules' service (its firer's dispatcher runs in the daemon's tasks).
    """

    services: Services
    connectors: ConnectorRegistry
    left_in_flight: list[ToolAction]
    engine: DurableEngine
    walker: Walker
    runner: DurableRunner
    schedules: ScheduleService


async def _serve(
    settings: Settings,
    store: Store,
    data_dir: Path,
    policy: Policy,
    mcp_servers: McpServersSource,
    stop: StopSignal,
    containment: Containment,
    sandbox: ShellSandbox,
) -> None:
    """Settle what a previous daemon left, build the services, serve until ``stop``.

    Raises:
        OctipusError: the sockets cannot be bound or the page's certificate read.
    """
    owner = f"{os.getpid()}-{secrets.token_hex(4)}"
    await _settle_previous_daemon(store, owner)
    await pause_interrupted_pipelines(store)
    core = await _build_core(settings, store, data_dir, policy, mcp_servers, containment, owner, sandbox)
    await _serve_sockets(settings, core, stop)


async def _settle_previous_daemon(store: Store, owner: str) -> None:
    """End what a stopped daemon left live (each step logged; nothing here raises on a leftover).

    Its live runs are marked ``interrupted`` and their process trees killed; its started actions
    become uncertain (seed 000) and the invocations it had claimed are settled (seed 001): an
    uncertain one's leftover job is killed and the kill noted as a receipt of its action.

    Args:
        store: The open store.
        owner: This daemon's owner id (rows of other owners are the previous daemon's).
    """
    interrupted = await in_thread(
        store.interrupt_orphaned_runs, live_owner=owner, reason="octipusd stopped while the run was live"
    )
    for run in interrupted:
        reaped = await anyio.to_thread.run_sync(kill_run_tree, run.id, None)
        log.warning(
            "run %s was live when the previous octipusd stopped; marked interrupted, %d leftover process(es) killed",
            run.id,
            len(reaped),
        )
    orphans = await in_thread(lambda: store.orphan_started_actions(owner=owner))
    for action in orphans:
        log.warning(
            "action %s (%s) was running when the previous octipusd stopped: now uncertain",
            action.id,
            action.tool,
        )
    settled = await in_thread(lambda: store.quarantine_invocations(owner=owner))
    for invocation in settled:
        if invocation.status == "uncertain" and invocation.action_id is not None:
            # its job may still run: stop it before anyone can review the action, and say so
            stopped = await anyio.to_thread.run_sync(kill_run_tree, manual_run_id(invocation.id), None)
            if stopped:
                note = {
                    "note": "leftover processes of the stopped daemon's call were killed at restart",
                    "pids": stopped,
                }
                await in_thread(store.add_receipt, invocation.action_id, kind="note", data=note)
        log.warning(
            "invocation %s claimed by the previous octipusd: now %s", invocation.id, invocation.status
        )


def _tool_resolver(
    connectors: ConnectorRegistry, mcp_servers: McpServersSource
) -> Callable[[str], AbstractAsyncContextManager[ToolSpec]]:
    """The lookup of a tool started by hand: a built-in one, or one an MCP server offers now.

    The returned context manager raises :class:`~octipusd.errors.NotFoundError` naming the tool
    (and the settings file's error, when the server is missing because of it).
    """
    builtin = {t.tool_id: t for t in DEFAULT_TOOLS}

    @asynccontextmanager
    async def resolve_tool(tool_id: str) -> AsyncIterator[ToolSpec]:
        spec = builtin.get(tool_id)
        if spec is not None:
            yield spec
            return
        server, dot, _ = tool_id.partition(".")
        if not dot:
            raise NotFoundError(f"no tool {tool_id!r} can be started by hand here")
        if mcp_servers.problem is not None and server not in mcp_servers():
            raise NotFoundError(
                f"MCP server {server!r} is not configured, and the settings file has an error: {mcp_servers.problem}"
            )
        async with connectors.connect(server) as found:
            match = next((t for t in found.tools if t.tool_id == tool_id), None)
            if match is None:
                raise NotFoundError(f"MCP server {server!r} offers no tool {tool_id!r} now")
            yield match

    return resolve_tool


def _contract_lookup(connectors: ConnectorRegistry) -> Callable[[str], RecoveryContract | None]:
    """The recovery contract of a tool id: a built-in tool's, else its MCP server's (or None)."""
    builtin = {t.tool_id: t for t in DEFAULT_TOOLS}

    def contract_of(tool_id: str) -> RecoveryContract | None:
        if tool_id in builtin:
            return builtin[tool_id].contract
        return connectors.contract_for(tool_id)

    return contract_of


async def _installed_adapters(settings: Settings) -> tuple[dict[str, Adapter], dict[str, Resolution]]:
    """The installed adapters and their resolved binaries, each logged; an adapter that fails to
    load is logged as an error and left out (the daemon still serves, health tells)."""
    load_errors: list[str] = []
    adapters = load_adapters(load_errors)
    for message in load_errors:
        log.error("%s", message)
    resolutions = await anyio.to_thread.run_sync(resolve_all, settings, adapters)
    for r in resolutions.values():
        log.info("adapter %s: %s %s", r.adapter, r.path or "NOT FOUND", r.version or r.error or "")
    return adapters, resolutions


async def _build_core(
    settings: Settings,
    store: Store,
    data_dir: Path,
    policy: Policy,
    mcp_servers: McpServersSource,
    containment: Containment,
    owner: str,
    sandbox: ShellSandbox,
) -> _Core:
    """Build the run core over the installed adapters, the action service and the orphan reaper
    (only while ``swarm.worktreeIsolation`` is on, seed 003)."""
    adapters, resolutions = await _installed_adapters(settings)
    hub = EventHub(store, scrub=RESOLVED.mask_data)  # defence in depth: no resolved value in an event
    broker = ApprovalBroker(store, settings.daemon.approvalTimeoutSeconds)
    vault = await open_vault(store, data_dir)
    connectors = ConnectorRegistry(mcp_servers, connector_secrets(vault, getpass.getuser()))
    journal = ActionJournal(store, owner)
    left_in_flight = await in_thread(lambda: store.open_dispatches(store.now()))
    operator = RecoveryOperator(store, _contract_lookup(connectors), hub.emit_optional)
    search = settings.cliModels.path or next(iter(resolutions.values())).searched_path
    pipelines = PipelineService(store)  # the walker (its runner) is wired in with the engine
    templates = TemplateService(store, max_stages=settings.orchestrator.maxPipelineStages)
    monitors = MonitorService(
        store, ProbeRegistry(store, pipelines)
    )  # its watcher is wired in with the engine
    runs, gate = build_runs(
        settings,
        store=store,
        hub=hub,
        broker=broker,
        policy=policy,
        adapters=adapters,
        resolutions=resolutions,
        data_dir=data_dir,
        owner=owner,
        base_env=vendor_base_env(search),
        journal=journal,
        operator=operator,
        connectors=connectors,
        config_notices=mcp_servers.notices,
        launcher=VendorLauncher(containment),
        vault=vault,
        sandbox=sandbox,
        pipelines=pipelines,
        monitors=monitors,
        containment=containment,
    )
    actions = ActionService(
        store=store,
        journal=journal,
        operator=operator,
        gate=gate,
        broker=broker,
        resolve=_tool_resolver(connectors, mcp_servers),
        owner=owner,
        vault=vault,
        sandbox=sandbox,
    )
    journal.on_uncertain = actions.worker.signal_deadline
    reaper = (
        OrphanReaper(runs.services.worktrees, settings.swarm.orphanReaperIntervalMs / 1000)
        if settings.swarm.worktreeIsolation
        else None
    )
    services = Services(
        store=store,
        runs=runs,
        gate=gate,
        adapters=adapters,
        user=runs.services.user,
        hub=hub,
        broker=broker,
        resolutions=resolutions,
        actions=actions,
        containment=containment,
        reaper=reaper,
        vault=vault,
        pipelines=pipelines,
        templates=templates,
        monitors=monitors,
        private=PrivateText.of_daemon(
            private_parts(settings.database.url or default_sqlite_url()), data_dir, socket_path(settings)
        ),
    )
    walker, runner = build_pipelines(settings, runs, broker, pipelines, templates, monitors)
    schedules = build_schedules(settings, walker.engine, runs, pipelines, templates)
    services = replace(services, schedules=schedules)
    return _Core(services, connectors, left_in_flight, walker.engine, walker, runner, schedules)


async def _serve_sockets(settings: Settings, core: _Core, stop: StopSignal) -> None:
    """Bind the page's TCP socket (when ``web.enabled``) and then the Unix socket, serve both until
    ``stop``; whatever was bound is closed on the way out, also when a later step fails.

    Raises:
        ConfigError: the page's address cannot be bound or its certificate read.
        ConflictError: another daemon answers on the Unix socket.
    """
    path = socket_path(settings)
    web_sock, access = bind_web_socket(settings.web) if settings.web.enabled else (None, None)
    sock: socket.socket | None = None
    try:
        sock = bind_unix_socket(path)
        services = core.services
        notifier = start_notifier(settings, services.store, services.hub, page_url=page_links(access))
        notify_pipelines(core.walker, core.runner, notifier)
        core.schedules.firer.on_failure = notifier.schedule_failed
        web = endpoint_of(access) if access is not None else None
        app = create_site(replace(services, web=web, notifier=notifier))
        listeners = [(make_server(app), sock)]
        if access is not None and web_sock is not None:
            listeners.append((make_web_server(app, access, settings.web), web_sock))
        install_log_filter(LOG_FILTER)  # uvicorn's configuration made handlers of its own
        page = f"; the page on {access.origin} (octipusctl web)" if access is not None else ""
        print(
            f"octipusd {__version__} listening on {path}{page} (database {services.store.url_for_display})",
            flush=True,
        )
        await _run_until_stopped(core, notifier, listeners, stop)
    finally:
        if web_sock is not None:
            web_sock.close()
        if sock is not None:
            sock.close()
            if path.exists():
                path.unlink()


async def _run_until_stopped(
    core: _Core,
    notifier: Notifier,
    listeners: list[tuple[QuietServer, socket.socket]],
    stop: StopSignal,
) -> None:
    """Serve ``listeners`` (the Unix socket's first) beside the daemon's background tasks until a
    signal: then the runs are shut down, the notifier closed and every server asked to exit; each
    finishes its in-flight requests (up to its graceful-shutdown bound) before the tasks are
    cancelled. Should the Unix server end on its own, the others are asked to exit too."""
    servers = [server for server, _ in listeners]
    runs, actions, reaper = core.services.runs, core.services.actions, core.services.reaper
    async with anyio.create_task_group() as tg:
        runs.bind(tg)
        if core.left_in_flight:
            # end what a stopped daemon left open; a probe that runs before this is done finds
            # the action still in flight, which only keeps it blocking a little longer
            tg.start_soon(end_left_requests, core.services.store, core.connectors, core.left_in_flight)
        if actions is not None:
            await tg.start(actions.worker.run)
        if reaper is not None:
            await tg.start(reaper.run)
        await tg.start(notifier.run)
        core.runner.bind(tg)
        await tg.start(core.schedules.firer.run)
        tg.start_soon(start_durable_work, core.engine, core.schedules)

        async def on_stop() -> None:
            await stop.received.wait()
            log.info("%s: stopping %d live run(s)", stop.name, len(runs.live_runs()))
            await runs.shutdown(f"octipusd received {stop.name} and stopped the run")
            await core.engine.shutdown()  # shielded, bounded; nothing when it never started
            await notifier.close()  # queued notifications get a short grace, then are abandoned
            core.services.hub.close()  # endless followers (the page's activity feed) end now
            for server in servers:
                server.should_exit = True

        tg.start_soon(on_stop)
        async with anyio.create_task_group() as serving:
            for server, sock in listeners[1:]:
                serving.start_soon(server.serve, [sock])
            stop.serving()
            await servers[0].serve(sockets=[listeners[0][1]])
            for server in servers[1:]:
                server.should_exit = True
        tg.cancel_scope.cancel()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse octipusd's command line."""
    parser = argparse.ArgumentParser(prog="octipusd", description="The Octipus daemon.")
    parser.add_argument("--config", type=Path, default=None, help="TOML settings file")
    parser.add_argument("--version", action="version", version=f"octipusd {__version__}")
    parser.add_argument("--log-level", default=os.environ.get("OCTIPUS_LOG_LEVEL", "INFO"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``octipusd``.

    Returns:
        0 after a clean stop; 2 for invalid settings; 1 for other start-up failures.
    """
    args = parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = read_settings(args.config)
    except ConfigError as exc:
        print(f"octipusd: {exc.message}", file=sys.stderr)
        return exc.exit_code
    try:
        anyio.run(serve, settings, args.config)
    except OctipusError as exc:
        print(f"octipusd: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 0
    return 0
