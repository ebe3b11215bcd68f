"""API routes of notifications (issue 16, item 3).

Routes (under ``/v1``)::

    POST /notify/test                send one test notification to every notify.urls target now

The test waits for every target (each send is bounded by ``notify.sendTimeoutSeconds``) and
returns one outcome per target, redacted to its scheme and host; no target configured is a 409
naming the setting. :func:`notifier_health` is the notifier's block of ``GET /v1/health``.
"""

from __future__ import annotations

from operator import attrgetter

from fastapi import APIRouter

from octipusd.api.common import Services
from octipusd.api.models import (
    API_VERSION,
    NotifierHealth,
    NotifierTargetHealth,
    NotifyTestOut,
    NotifyTestTarget,
)
from octipusd.errors import ConflictError

__all__ = ["notifier_health", "notify_router"]


def notifier_health(services: Services) -> NotifierHealth | None:
    """The notifier's targets and figures for health, or None when the daemon has no notifier."""
    notifier = services.notifier
    if notifier is None:
        return None
    state = notifier.health()
    targets = [NotifierTargetHealth(**vars(t)) for t in state.targets]
    errored = [t for t in state.targets if t.last_error_at is not None]
    last = max(errored, key=attrgetter("last_error_at"), default=None)
    return NotifierHealth(
        running=state.running,
        targets=targets,
        sent=sum(t.sent for t in state.targets),
        failed=state.failed + sum(t.failed for t in state.targets),
        dropped=state.dropped + sum(t.dropped for t in state.targets),
        last_error=f"{last.target}: {last.last_error}" if last is not None else None,
        last_error_at=last.last_error_at if last is not None else None,
    )


def notify_router(services: Services) -> APIRouter:
    """Routes of notifications over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}/notify")

    @router.post("/test")
    async def notify_test() -> NotifyTestOut:
        """Send one test notification to every configured target and report each outcome."""
        if services.notifier is None:
            raise ConflictError("this daemon runs without a notifier; restart octipusd")
        outcomes = await services.notifier.test()
        results = [NotifyTestTarget(target=o.target, ok=o.ok, error=o.error) for o in outcomes]
        return NotifyTestOut(ok=all(r.ok for r in results), results=results)

    return router
