"""What every API route module shares: the services, record-to-model conversion, store calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel
from starlette.requests import Request

from octipusd.adapter import Adapter
from octipusd.api.disclosure import PrivateText
from octipusd.monitors.service import MonitorService
from octipusd.notify import Notifier
from octipusd.pipelines.catalog import TemplateCatalog
from octipusd.pipelines.service import PipelineService
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.gate import PermissionGate
from octipusd.runner.containment import Containment
from octipusd.runner.executables import Resolution
from octipusd.runtime.actions import ActionService
from octipusd.runtime.events import EventHub
from octipusd.runtime.manager import RunManager
from octipusd.runtime.reaping import OrphanReaper
from octipusd.schedules.service import ScheduleService
from octipusd.store.repository import Store
from octipusd.vault import Vault

__all__ = [
    "CLIENT_STATE_KEY",
    "CSRF_STATE_KEY",
    "WEB_STATE_KEY",
    "Services",
    "WebEndpoint",
    "client_name",
    "dump",
    "live_action_ids",
    "out",
    "via_web",
]

M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
T = TypeVar("T")

#: ``request.scope["state"]`` key the web listener's access guard sets (True) on every request it
#: lets through; absent on the Unix socket.
WEB_STATE_KEY = "via_web"
#: ``request.scope["state"]`` key holding the web session's CSRF token ("" with a bearer token).
CSRF_STATE_KEY = "csrf_token"
#: ``request.scope["state"]`` key holding the client name the web listener's guard sets ("web").
CLIENT_STATE_KEY = "client"
#: The header a client of the Unix socket names itself in (``octipusctl`` sends "octipusctl").
CLIENT_HEADER = "x-octipus-client"


def via_web(request: Request) -> bool:
    """True when ``request`` came through the web listener (its guard marked it), False on the Unix
    socket."""
    state: dict[str, Any] = request.scope.get("state", {})
    return bool(state.get(WEB_STATE_KEY))


def client_name(request: Request) -> str:
    """Who sent ``request``, for ``decided_by``: "web" on the web listener (set by its guard, a
    client-sent header is ignored there), else the ``X-Octipus-Client`` header or "api"."""
    state: dict[str, Any] = request.scope.get("state", {})
    given = state.get(CLIENT_STATE_KEY)
    return str(given) if given else request.headers.get(CLIENT_HEADER, "api")


@dataclass(frozen=True)
class WebEndpoint:
    """Where the page is served (``octipusd.web.access`` owns the token; this is what the API tells).

    Attributes:
        origin: ``http(s)://ADDRESS:PORT``, the page without its token (links in notifications).
        link: The ready URL with the token (only ``GET /v1/web`` on the Unix socket gives it).
        tls: Served over HTTPS.
    """

    origin: str
    link: str = field(repr=False)
    tls: bool


@dataclass(frozen=True)
class Services:
    """What the API calls; built by the composition root (``octipusd.app``). ``private`` is what no
    error answer shows (:class:`~octipusd.api.disclosure.PrivateText`; by default nothing);
    ``pipelines`` and ``templates`` are the pipelines' services, ``monitors`` the monitors', ``schedules``
    the schedules' (None: their
    routes answer 503)."""

    store: Store
    runs: RunManager
    gate: PermissionGate
    adapters: Mapping[str, Adapter]
    user: str
    hub: EventHub
    broker: ApprovalBroker
    resolutions: dict[str, Resolution]
    actions: ActionService | None = None
    containment: Containment | None = None
    reaper: OrphanReaper | None = None
    web: WebEndpoint | None = None
    notifier: Notifier | None = None
    vault: Vault | None = None
    pipelines: PipelineService | None = None
    templates: TemplateCatalog | None = None
    monitors: MonitorService | None = None
    schedules: ScheduleService | None = None
    private: PrivateText = field(default_factory=PrivateText)


def live_action_ids(services: Services) -> set[str]:
    """Ids of the journaled actions whose call still runs in this daemon (no recovery review yet)."""
    return set(services.actions.journal.live) if services.actions is not None else set()


def dump(record: Any) -> dict[str, Any]:
    data = asdict(record)
    for key, value in data.items():
        if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
            data[key] = value.value
    return data


def out(model: type[M], record: Any) -> M:
    """Build an API model from a store record, taking the fields the model declares."""
    data = dump(record)
    return model(**{k: v for k, v in data.items() if k in model.model_fields})
