"""The Octipus store: durable state in SQLite (default) or PostgreSQL.

This package is the only place SQLModel appears. Everything outside it uses:

* :class:`Store` (``repository.py``): synchronous, thread-safe methods returning the frozen
  records of ``records.py``, one mixin module per aggregate (``session_store.py``,
  ``plan_store.py``, ``model_row_store.py``, ``run_store.py``, ``approval_store.py``, ``policy_store.py``,
  ``journal_store.py``, ``recovery_store.py``, ``invocation_store.py``, ``reuse_store.py``,
  ``turn_store.py``) sharing
  the helpers of ``codec.py``;
* ``validation.py``: shape checks of model rows and session options (also used by the API);
* :class:`DatabaseLock` (``lock.py``): one active octipusd per database;
* :func:`make_engine` / :func:`default_sqlite_url` (``engine.py``) and :func:`upgrade`
  (``migrate.py``, Alembic, run by :meth:`Store.open`).
"""

from __future__ import annotations

from octipusd.store.engine import default_sqlite_url, display_url, make_engine
from octipusd.store.lock import DatabaseLock
from octipusd.store.migrate import upgrade
from octipusd.store.records import (
    Approval,
    ApprovalStatus,
    FeedbackStatus,
    ModelRow,
    PermissionGrant,
    PermissionRule,
    PlanFeedback,
    Run,
    RunEvent,
    RunStatus,
    Session,
    Space,
    SpaceRole,
    VendorSession,
    WorkPlan,
)
from octipusd.store.repository import Store

__all__ = [
    "Approval",
    "ApprovalStatus",
    "DatabaseLock",
    "FeedbackStatus",
    "ModelRow",
    "PermissionGrant",
    "PermissionRule",
    "PlanFeedback",
    "Run",
    "RunEvent",
    "RunStatus",
    "Session",
    "Space",
    "SpaceRole",
    "Store",
    "VendorSession",
    "WorkPlan",
    "default_sqlite_url",
    "display_url",
    "make_engine",
    "upgrade",
]
