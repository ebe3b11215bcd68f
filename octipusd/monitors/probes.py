"""What a monitor may read: the probe-able tools, each run as the monitor's owner.

FACTS.md §7: a tool source names a read, list, search or inspect action, or a tool marked
read-only (:attr:`~octipusd.toolkit.ToolSpec.read_only`). Every mutation is refused as a probe,
``resume_pipeline`` among them (seed 003), and so is ``collect_children`` (it waits for children to
finish: not a read). A probe runs without a live run: :class:`ProbeRegistry` holds the tools this
Octipus can read for an owner directly, through the same services their bridge tools call, with the
owner's user, session and workspace as the caller (an owner reads only what its session may):

* ``get_pipeline_status({id})``: :meth:`PipelineOps.status` with ``includeHistory: false`` always
  (a monitor polls; the history is not fetched on every check);
* ``get_work_plan({})``: the owner's session's work plan.

Another tool that only reads (``get_cli_run_context``, an MCP server's read action) is refused with
an error saying it cannot be probed here; a name no tool has is refused naming the probe-able ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from octipusd.errors import InvalidRequestError
from octipusd.runtime.feedback import plan_for_agent
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.toolkit import PipelineCaller, PipelineOps
from octipusd.tools import DEFAULT_TOOLS

__all__ = ["READ_ACTIONS", "Probe", "ProbeRegistry"]

#: The action words (after ``container__``) of a read, list, search or inspect action (FACTS.md §7).
READ_ACTIONS: Final = ("read", "list", "search", "inspect", "get", "show", "status", "find", "view")
#: Tools that only wait, never read: refused as probes with their own reason.
_WAITING: Final = {
    "collect_children": "collect_children waits for children to finish and is not a monitor probe"
}

Reader = Callable[[dict[str, Any], PipelineCaller], Awaitable[Any]]


@dataclass(frozen=True)
class Probe:
    """One probe-able tool.

    Attributes:
        name: The tool's name.
        args: The arguments it accepts (others are refused).
        required: The arguments it needs.
        forced: Arguments a monitor always passes (``includeHistory: false``).
        read: Runs it for an owner: ``read(args, owner)`` -> its result.
    """

    name: str
    args: tuple[str, ...]
    required: tuple[str, ...]
    forced: Mapping[str, Any]
    read: Reader


class ProbeRegistry:
    """The probe-able tools of this daemon (see the module).

    Args:
        store: The store (the work plan).
        pipelines: The pipelines' service, or None (then ``get_pipeline_status`` answers that this
            daemon has no pipelines).
    """

    def __init__(self, store: Store, pipelines: PipelineOps | None) -> None:
        self._store = store
        self._pipelines = pipelines
        self._probes = {
            p.name: p
            for p in (
                Probe(
                    "get_pipeline_status",
                    ("id", "includeHistory"),
                    ("id",),
                    {"includeHistory": False},
                    self._status,
                ),
                Probe("get_work_plan", (), (), {}, self._plan),
            )
        }

    @property
    def names(self) -> tuple[str, ...]:
        """The probe-able tools' names."""
        return tuple(self._probes)

    def check(self, name: Any, args: Any, where: str = "source") -> tuple[str, dict[str, Any]]:
        """The tool and its arguments as a monitor will call them (``forced`` ones set), checked.

        Raises:
            InvalidRequestError: naming ``where``: a mutation, a waiting tool, a read this daemon
                cannot probe, an unknown tool, or bad arguments.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequestError(f"{where}.name: required (a read-only tool's name)")
        probe = self._probes.get(name)
        if probe is None:
            raise InvalidRequestError(f"{where}.name: {self._refusal(name)}")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise InvalidRequestError(f"{where}.args: must be an object of the tool's arguments")
        unknown = sorted(set(args) - set(probe.args))
        if unknown:
            raise InvalidRequestError(f"{where}.args.{unknown[0]}: {name} takes no such argument")
        for key in probe.required:
            if not isinstance(args.get(key), str) or not args[key].strip():
                raise InvalidRequestError(f"{where}.args.{key}: required by {name} (a non-empty string)")
        return name, {**args, **probe.forced}

    async def read(self, name: str, args: dict[str, Any], owner: PipelineCaller) -> Any:
        """Run the probe ``name`` for ``owner`` (its errors raised: the service's own, naming them).

        Raises:
            InvalidRequestError: ``name`` is not probe-able (a monitor stored before a change).
            OctipusError: the tool's failure (not found, forbidden, storage timeout...).
        """
        probe = self._probes.get(name)
        if probe is None:
            raise InvalidRequestError(self._refusal(name))
        return await probe.read({**args, **probe.forced}, owner)

    def _refusal(self, name: str) -> str:
        known = {t.name: t for t in DEFAULT_TOOLS}
        offered = ", ".join(self._probes)
        if name in _WAITING:
            return _WAITING[name]
        spec = known.get(name)
        if spec is not None and not spec.read_only:
            return f"{name} is a mutation and cannot be used as a monitor probe (probe-able: {offered})"
        action = name.partition("__")[2]
        if spec is not None or action.startswith(READ_ACTIONS):
            return (
                f"{name} reads, but a monitor cannot probe it in this Octipus (it needs a live run or a "
                f"connection); probe-able: {offered}"
            )
        return f"no read-only tool {name!r}; probe-able: {offered}"

    async def _status(self, args: dict[str, Any], owner: PipelineCaller) -> Any:
        if self._pipelines is None:
            raise InvalidRequestError("get_pipeline_status: this daemon has no pipelines' service")
        return await self._pipelines.status(str(args["id"]), owner, include_history=False)

    async def _plan(self, args: dict[str, Any], owner: PipelineCaller) -> Any:
        if owner.session_id is None:
            raise InvalidRequestError("get_work_plan: a monitor's owner has a session")
        plan, _feedback = await in_thread(self._store.read_plan, owner.session_id)
        return {"plan": plan_for_agent(plan)}
