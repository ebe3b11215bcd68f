"""The tool vocabulary shared by the bridge, the tools, the connectors, policy and the journal.

A foundation (DESIGN.md "Layers": errors < settings < adapter, toolkit < store): it imports
only :mod:`octipusd.errors` (and the ``security`` setting's mode), so every capability room can use these types without importing a
sibling. Import the names from here; the modules are its parts:

* :mod:`~octipusd.toolkit.identity` -- :class:`RunIdentity`, identity-override stripping and
  the :data:`RUN_MARKER` of a run's processes;
* :mod:`~octipusd.toolkit.host` -- the :class:`ToolHost` seam, :class:`AuthorizationResult`,
  :class:`ChildRequest`, and a call's :class:`CallWatch` (:class:`CallStop`, :class:`StopCause`);
* :mod:`~octipusd.toolkit.specs` -- :class:`ToolSpec`, :data:`ToolResult`, :data:`ToolHandler`;
* :mod:`~octipusd.toolkit.outcomes` -- the journal's outcomes (:class:`ActionOutcome`,
  :class:`ToolOutcome`) and a call's end (:data:`Body`, :class:`Executed`, :func:`classify`,
  :func:`run_unjournaled`);
* :class:`NotExecutedError` -- re-exported from :mod:`octipusd.errors` (the error tree's
  home), as tools raise it.
* :mod:`~octipusd.toolkit.contracts` -- recovery contracts, probes, dispatch references (seed 004);
* :mod:`~octipusd.toolkit.plans` -- the work-plan vocabulary (:class:`FeedbackStatus`,
  :class:`FeedbackResponse`, :class:`PlanUpdate`);
* :mod:`~octipusd.toolkit.pipelines` -- the pipelines' vocabulary (:class:`PipelineOps`, the seam the
  bridge tools reach the pipelines' service through, :class:`PipelineCaller`, the requests);
* :mod:`~octipusd.toolkit.monitors` -- :class:`MonitorOps`, the seam the monitor tools reach the
  monitors' service through;
* :mod:`~octipusd.toolkit.gates` -- :class:`GateSpec`, one command scorer gate of a child;
* :mod:`~octipusd.toolkit.sandbox` -- what a shell tool needs to confine a command
  (:class:`ShellTerms`, :class:`ShellSandbox`, :class:`SandboxRunner`);
* :mod:`~octipusd.toolkit.background` -- a run's background shell commands (:class:`BackgroundJobs`,
  :class:`BackgroundStart`);
* :mod:`~octipusd.toolkit.calls` -- what the permission gate is asked (:class:`CallContext`)
  and answers (:class:`GateResult`).
"""

from __future__ import annotations

from octipusd.errors import NotExecutedError
from octipusd.toolkit.background import BackgroundJobs, BackgroundStart
from octipusd.toolkit.calls import CallAllowance, CallContext, GateResult
from octipusd.toolkit.contracts import (
    DEFAULT_DEADLINE_SECONDS,
    ActionRef,
    Compensation,
    DispatchEnd,
    DispatchKind,
    DispatchRef,
    IdempotencyKey,
    Probe,
    ProbeResult,
    ProbeStatus,
    ProbeVerdict,
    RecoveryContract,
    RecoveryState,
    RiskClass,
)
from octipusd.toolkit.gates import GateSpec
from octipusd.toolkit.host import AuthorizationResult, CallStop, CallWatch, ChildRequest, StopCause, ToolHost
from octipusd.toolkit.identity import (
    RESERVED_IDENTITY_ARGUMENTS,
    RUN_MARKER,
    RunIdentity,
    StageTag,
    strip_identity_arguments,
)
from octipusd.toolkit.monitors import MonitorAccess, MonitorOps, monitor_access
from octipusd.toolkit.outcomes import (
    DETAIL_CHARS,
    ActionOutcome,
    Body,
    Executed,
    Origin,
    ToolOutcome,
    classify,
    describe_failure,
    log_body_failure,
    run_unjournaled,
)
from octipusd.toolkit.pipelines import (
    CreateRequest,
    ItemChanges,
    ItemDraft,
    PipelineAccess,
    PipelineCaller,
    PipelineOps,
    ResumeRequest,
    pipeline_access,
)
from octipusd.toolkit.plans import FeedbackResponse, FeedbackStatus, PlanUpdate
from octipusd.toolkit.sandbox import NO_SANDBOX, RunnerKind, SandboxRunner, ShellSandbox, ShellTerms
from octipusd.toolkit.specs import UNDECLARED_CONTRACT, ToolHandler, ToolResult, ToolSpec, validate_tool_specs

__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "DETAIL_CHARS",
    "NO_SANDBOX",
    "RESERVED_IDENTITY_ARGUMENTS",
    "RUN_MARKER",
    "UNDECLARED_CONTRACT",
    "ActionOutcome",
    "ActionRef",
    "AuthorizationResult",
    "BackgroundJobs",
    "BackgroundStart",
    "Body",
    "CallAllowance",
    "CallContext",
    "CallStop",
    "CallWatch",
    "ChildRequest",
    "Compensation",
    "CreateRequest",
    "DispatchEnd",
    "DispatchKind",
    "DispatchRef",
    "Executed",
    "FeedbackResponse",
    "FeedbackStatus",
    "GateResult",
    "GateSpec",
    "IdempotencyKey",
    "ItemChanges",
    "ItemDraft",
    "MonitorAccess",
    "MonitorOps",
    "NotExecutedError",
    "Origin",
    "PipelineAccess",
    "PipelineCaller",
    "PipelineOps",
    "PlanUpdate",
    "Probe",
    "ProbeResult",
    "ProbeStatus",
    "ProbeVerdict",
    "RecoveryContract",
    "RecoveryState",
    "ResumeRequest",
    "RiskClass",
    "RunIdentity",
    "RunnerKind",
    "SandboxRunner",
    "ShellSandbox",
    "ShellTerms",
    "StageTag",
    "StopCause",
    "ToolHandler",
    "ToolHost",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "classify",
    "describe_failure",
    "log_body_failure",
    "monitor_access",
    "pipeline_access",
    "run_unjournaled",
    "strip_identity_arguments",
    "validate_tool_specs",
]
