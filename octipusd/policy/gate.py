"""The permission gate: one decision path for every tool call of every adapter.

Every call Octipus is asked about goes through :meth:`PermissionGate.decide`: Octipus tools on
the bridge (``shell__run``), MCP connector tools (``server.tool``) and vendor-native tools
relayed as ``cli-native:<Tool>`` (seed 003 "Permissions and limits"). In order:

1. the rules (:class:`~octipusd.policy.live.LivePolicy`: the configured ``permissions.rules`` or
   the built-in defaults, the operator's stored rules and the active scoped grants, read from
   the store's in-memory view (:class:`~octipusd.store.policy_view.PolicyView`), which every
   write of a rule or grant updates once committed, so a rule added or a grant revoked applies
   to the next call); a DENY is final;
2. the flow guard (FACTS.md §9): a session that has read credentials, or mixed private data
   with untrusted content, turns an ALLOW of an egress call into an ASK; it never relaxes a
   decision (the session's label is read through the same view);
3. ``AskUserQuestion`` is a questionnaire: it always needs a person's answers, even under a
   stored ALLOW (seed 003);
4. ASK: an unattended session is refused ("review required"); an attended one gets a durable
   approval and waits for the answer (bounded by the broker's timeout). After an approval the
   rules are checked again, so a permission revoked while the prompt was open (a DENY added,
   the grant the answer relied on revoked) cannot be granted by that prompt;
5. an ALLOW that rests on a scoped grant counts one use of it, exactly once, as a hand-started
   call's does (:meth:`LivePolicy.decide_and_spend
   <octipusd.policy.live.LivePolicy.decide_and_spend>`); a grant used up meanwhile no longer
   allows, and the call is decided again (after repeated contention it needs a person: ASK).

Every decision is explained (which rule, grant or default matched) in the run's events
(``policy_decision``) and, for an ASK, in the approval itself.

A stored rule or grant that cannot be loaded (written by an older daemon that did not validate
it) is skipped: it decides nothing, is logged once and named by :meth:`PermissionGate.unloadable`
(``GET /v1/health`` ``warnings``) until it is removed; it never fails an unrelated call or run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import anyio

from octipusd.errors import QuestionnaireError, StoreError
from octipusd.policy.approvals import ApprovalBroker, ApprovalResult, Outcome
from octipusd.policy.engine import Policy, PolicyDecision
from octipusd.policy.flowguard import (
    Classification,
    FlowGuardMode,
    FlowState,
    classify,
    from_label,
    unattended_refusal,
)
from octipusd.policy.live import LivePolicy
from octipusd.policy.native import READ_ONLY_CLI_TOOLS
from octipusd.policy.protected import ProtectedPaths
from octipusd.policy.questionnaire import (
    CANCEL_MESSAGE,
    answered_input,
    is_questionnaire,
    parse_questionnaire,
)
from octipusd.policy.rules import (
    CLI_NATIVE_PREFIX,
    Level,
    subject_of,
)
from octipusd.policy.shellguard import command_decision
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.toolkit import CallAllowance, CallContext, GateResult

__all__ = ["Emit", "PermissionGate", "native_flow_id"]

log = logging.getLogger("octipusd.policy")

#: ``emit(run_id, kind, data)``: store and publish one run event.
Emit = Callable[[str, str, dict[str, Any]], Awaitable[Any]]

#: How Claude names the bridge's tools (MCP server ``octipus``): ``mcp__octipus__<tool>``.
BRIDGE_TOOL_PREFIX = "mcp__octipus__"

#: Octipus tools that run shell commands: in a space the shell guard judges them before the rules.
SPACE_GUARDED_TOOLS: frozenset[str] = frozenset({"shell__run", "shell__run_background"})


def _space_guard(args: Mapping[str, Any], workspace: str) -> str | None:
    """The shell guard's refusal of an Octipus shell call in a space, or None.

    The same judgement as the Claude space hook (:mod:`octipusd.policy.shellguard`): Octipus's
    own tools never write ``.claude/``, ``.codex/``, ``.gemini/``, ``.agents/``, ``.vibe/`` or
    ``.mcp.json`` in a space (seed 003 "In shared spaces").
    """
    command = args.get("command")
    if not isinstance(command, str):
        return None
    cwd = args.get("cwd")
    base = workspace if not isinstance(cwd, str) or not cwd else os.path.join(workspace, cwd)
    decision = command_decision(command, base)
    if decision is None:
        return None
    return str(decision["hookSpecificOutput"]["permissionDecisionReason"])


def native_flow_id(tool_id: str, aliases: Mapping[str, str]) -> str:
    """The tool id the flow guard classifies: a vendor's native tool name mapped to the Claude tool it
    behaves like (the adapters' declared ``tool_aliases``).

    Args:
        tool_id: ``cli-native:<Tool>`` or any other tool id (returned unchanged).
        aliases: Vendor native tool name -> Claude native tool name.

    Returns:
        E.g. ``cli-native:commandExecution`` -> ``cli-native:Bash`` with Codex's aliases.
    """
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        name = tool_id.removeprefix(CLI_NATIVE_PREFIX)
        return CLI_NATIVE_PREFIX + aliases.get(name, name)
    return tool_id


class PermissionGate:
    """Decides tool calls: rules, flow guard, questionnaires, approvals, grant usage.

    Args:
        store: The store (stored rules, grants, flow labels, approvals).
        broker: Creates approvals and waits for answers.
        emit: Stores and publishes run events.
        base: The configured policy (``permissions.rules`` or the built-in defaults).
        flow_guard: ``agent.flowGuard``: ``ask`` (default) or ``off``.
        plan_tools: Octipus tools a plan-mode turn may use (the read-only ones and the work plan).
        tool_aliases: Vendor native tool name -> the Claude native tool it behaves like, which the
            flow guard classifies (the installed adapters' ``Adapter.tool_aliases``, merged by the
            composition root).
        sandboxed_shell: The shell sandbox is in force (``security.shellSandbox`` with a working
            runner): Octipus's shell commands have no network unless a call sets ``network: true``,
            so the flow guard counts such a call as egress (:func:`~octipusd.policy.flowguard.classify`).
        protected: The daemon's private paths (data folder, vault key, database, settings file,
            socket folder, ``$CREDENTIALS_DIRECTORY``), composed by the composition root: a call
            reaching one is refused before the rules (:mod:`octipusd.policy.protected`); the default
            protects nothing.
        clock: Current time (aware UTC); tests pass a fake one.
        allowances: What people approved ahead (a pipeline's approved calls and gate commands),
            consulted where the gate would ask (:class:`~octipusd.toolkit.CallAllowance`); the
            composition root adds them with :meth:`add_allowance`.
    """

    def __init__(
        self,
        store: Store,
        broker: ApprovalBroker,
        emit: Emit,
        base: Policy,
        *,
        flow_guard: FlowGuardMode = FlowGuardMode.ASK,
        plan_tools: frozenset[str] = frozenset(),
        tool_aliases: Mapping[str, str] | None = None,
        sandboxed_shell: bool = False,
        protected: ProtectedPaths | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.broker = broker
        self.emit = emit
        self.base = base
        self.flow_guard = flow_guard
        self.plan_tools = plan_tools
        self.tool_aliases: Mapping[str, str] = dict(tool_aliases or {})
        self.sandboxed_shell = sandboxed_shell
        self.protected = protected or ProtectedPaths()
        self.live = LivePolicy(store, base, clock)
        self._labelling: dict[str, list[anyio.Event]] = {}
        self.allowances: list[CallAllowance] = []

    def add_allowance(self, allowance: CallAllowance) -> None:
        """Consult ``allowance`` where the gate would ask (after every allowance added before)."""
        self.allowances.append(allowance)

    async def _allowed_ahead(
        self, ctx: CallContext, tool_id: str, args: dict[str, Any], action: str | None, subject: str | None
    ) -> str | None:
        """The first allowance's reason for letting this call run without asking (recorded as a
        ``policy_decision`` of tier ``allowance``), or None. Store errors propagate."""
        for allowance in self.allowances:
            why = await allowance.allows(ctx, tool_id, args, action)
            if why is not None:
                await self.emit(
                    ctx.run_id,
                    "policy_decision",
                    {
                        "tool_id": tool_id,
                        "subject": subject,
                        "level": "allow",
                        "explanation": why,
                        "rule": None,
                        "tier": "allowance",
                        "grant_id": None,
                    },
                )
                return why
        return None

    # ------------------------------------------------------------------ policy

    def flow_id(self, tool_id: str) -> str:
        """The tool id the flow guard classifies for ``tool_id`` (see :func:`native_flow_id`)."""
        return native_flow_id(tool_id, self.tool_aliases)

    def plan_refusal(self, tool_id: str) -> str | None:
        """Why a plan-mode turn may not use ``tool_id``, or None when it may.

        Plan mode overrides the row's permission mode for one turn (seed 003); Claude's own plan
        mode still relays other tools and runs them once allowed (observed with claude 2.1.197),
        so Octipus itself keeps a plan turn to reading and planning: the read-only native tools
        (:data:`~octipusd.policy.native.READ_ONLY_CLI_TOOLS`), AskUserQuestion, and the Octipus tools
        in ``plan_tools``. ``ExitPlanMode`` is refused too: the plan is the turn's answer, and a
        person carries it out with another turn.
        """
        if tool_id.startswith(CLI_NATIVE_PREFIX):
            name = tool_id.removeprefix(CLI_NATIVE_PREFIX)
            if name in READ_ONLY_CLI_TOOLS or is_questionnaire(tool_id):
                return None
            if (
                name.startswith(BRIDGE_TOOL_PREFIX)
                and name.removeprefix(BRIDGE_TOOL_PREFIX) in self.plan_tools
            ):
                return None
        elif tool_id in self.plan_tools:
            return None
        return (
            f"plan mode: this turn plans and changes nothing, so {tool_id} is refused; give the plan as "
            "your answer (the person runs it with a turn without --plan)"
        )

    async def current_policy(self) -> Policy:
        """The policy with the stored rules and active grants as of now (see
        :meth:`LivePolicy.current <octipusd.policy.live.LivePolicy.current>`).

        Raises:
            StoreError: the first read of the rules and grants failed.
        """
        return await self.live.current()

    async def unloadable(self) -> list[str]:
        """The stored rules and grants skipped because they cannot be loaded, each named with why
        and how to remove it (empty: none); a failed first read of them is one warning too, so
        a health check never fails on it.
        """
        try:
            await self.current_policy()
        except StoreError as exc:
            return [f"the stored rules and grants could not be read: {exc.message}"]
        return [
            f"{name} cannot be loaded and is skipped: {why}; remove it with octipusctl rules "
            + ("remove" if name.startswith("stored rule") else "revoke")
            + f" {name.rsplit(' ', 1)[1]}"
            for name, why in sorted(self.live.skipped.items())
        ]

    async def evaluate(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None,
        session_id: str,
        workspace: str,
    ) -> PolicyDecision:
        """The rules' decision for one call, without the flow guard or any side effect."""
        return await self.live.evaluate(
            tool_id, arguments, action=action, session_id=session_id, workspace=workspace
        )

    # ------------------------------------------------------------------ flow guard

    async def observe(self, ctx: CallContext, tool_id: str, arguments: Mapping[str, Any]) -> None:
        """Record the flow flags a call sets on its session (tool-use streams and allowed calls).

        Called for every tool use seen in Claude's and Codex's streams, so reads that were
        auto-allowed (never relayed) still count (seed 003, the flow guard paragraph). Flags
        are only ever added.
        """
        if self.flow_guard is FlowGuardMode.OFF:
            return
        await self._observe(ctx, tool_id, classify(self.flow_id(tool_id), arguments))

    async def _observe(self, ctx: CallContext, tool_id: str, classification: Classification) -> None:
        """Add the flags of one call to its session; a decision of that session started meanwhile
        waits until they are stored and their ``flow_label`` event emitted (see :meth:`_settled`)."""
        if not classification.flags:
            return
        done = anyio.Event()
        pending = self._labelling.setdefault(ctx.session_id, [])
        pending.append(done)
        try:
            state = await self._flow_state(ctx.session_id)
            added = state.observe(classification)
            if added:
                flags = sorted(str(f) for f in added)
                label = await in_thread(self.store.add_flow_flags, ctx.session_id, flags)
                await self.emit(
                    ctx.run_id,
                    "flow_label",
                    {
                        "tool_id": tool_id,
                        "added": flags,
                        "label": label,
                        "reasons": list(classification.reasons),
                    },
                )
        finally:
            done.set()
            pending.remove(done)
            if not pending:
                self._labelling.pop(ctx.session_id, None)

    async def _settled(self, session_id: str) -> None:
        """Wait for the flag additions of ``session_id`` in progress (a read the stream showed just
        before this call), so the call is judged, and its events ordered, after them."""
        for done in list(self._labelling.get(session_id, ())):
            await done.wait()

    async def _flow_state(self, session_id: str) -> FlowState:
        """The session's flow state, from the store's in-memory view (read once per session)."""
        label = self.store.policy_view.flow_label(session_id)
        if label is None:
            label = await in_thread(self.store.flow_label, session_id)
        return FlowState(flags=from_label(label))

    # ------------------------------------------------------------------ decisions

    async def decide(
        self,
        ctx: CallContext,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None = None,
        vendor_request_id: str | None = None,
    ) -> GateResult:
        """Decide one call; for an ASK, ask a person and wait (see the module docstring).

        Args:
            ctx: The run and session asking.
            tool_id: ``cli-native:<Tool>``, ``shell__run``, ``server.tool``...
            arguments: The call's input (the subject is taken from it, FACTS.md §3).
            action: The action name (for ``cli-native:<Tool>``, the tool name).
            vendor_request_id: The vendor's id of the permission request, stored on the approval.

        Returns:
            The :class:`GateResult`. Never raises for a denial; store errors propagate.
        """
        args = dict(arguments)
        refusal = await self._refusal_before_rules(ctx, tool_id, args)
        if refusal is not None:
            return refusal
        questionnaire = is_questionnaire(tool_id)
        await self._settled(ctx.session_id)
        subject = subject_of(args, "") or None
        classification, flow_reason = await self._flow_check(ctx, tool_id, args)

        async def record(decision: PolicyDecision) -> None:
            await self.emit(
                ctx.run_id,
                "policy_decision",
                {
                    "tool_id": tool_id,
                    "subject": subject,
                    "level": str(decision.level),
                    "explanation": decision.explanation,
                    "rule": decision.rule,
                    "tier": decision.tier,
                    "grant_id": decision.grant_id,
                },
            )

        # an ALLOW that stands (no questionnaire, no flow guard ASK) spends its grant's use here;
        # grant contention is settled as for a hand-started call (LivePolicy.decide_and_spend)
        decision = await self.live.decide_and_spend(
            tool_id,
            args,
            action=action,
            session_id=ctx.session_id,
            workspace=ctx.workspace,
            spend=not questionnaire and flow_reason is None,
            record=record,
        )
        if decision.level is Level.DENY:
            return GateResult(False, f"denied by Octipus policy: {decision.explanation}")
        level, explanation = decision.level, decision.explanation
        if level is not Level.ALLOW:
            flow_reason = None  # the flow guard only ever turns an ALLOW into an ASK
        elif flow_reason is not None:
            level = Level.ASK
            explanation = f"{flow_reason} (the rules allow it: {decision.explanation})"
            await self.emit(
                ctx.run_id, "flow_guard", {"tool_id": tool_id, "subject": subject, "reason": flow_reason}
            )
        if questionnaire:
            answered = await self._questionnaire(ctx, tool_id, args, explanation, vendor_request_id)
            return await self._recheck(ctx, tool_id, args, action, answered)
        if level is not Level.ALLOW:
            ahead = await self._allowed_ahead(ctx, tool_id, args, action, subject)
            if ahead is not None:
                level, explanation = Level.ALLOW, ahead
        if level is Level.ALLOW:
            if classification is not None:
                await self._observe(ctx, tool_id, classification)
            return GateResult(True, explanation)
        if not ctx.attended:
            note = (
                unattended_refusal(flow_reason)
                if flow_reason is not None
                else f"review required: {tool_id}"
                + (f" ({subject})" if subject else "")
                + " needs a person's approval, and this session is unattended"
            )
            ctx.review_required.append(note)
            await self.emit(
                ctx.run_id, "review_required", {"tool_id": tool_id, "subject": subject, "reason": note}
            )
            return GateResult(False, note)
        result = await self._ask(
            ctx,
            tool_id,
            args,
            subject=subject,
            reason=flow_reason or (f"CLI: {action}" if action else f"Octipus tool {tool_id}"),
            explanation=explanation,
            vendor_request_id=vendor_request_id,
        )
        return await self._recheck(ctx, tool_id, args, action, result)

    async def _refusal_before_rules(
        self, ctx: CallContext, tool_id: str, args: dict[str, Any]
    ) -> GateResult | None:
        """A call reaching the daemon's private paths, a plan-mode turn's or a space's refusal, judged
        before the rules (emitted), or None."""
        refusal = self.protected.refusal(self.flow_id(tool_id), args, ctx.workspace)
        if refusal is None and ctx.plan:
            refusal = self.plan_refusal(tool_id)
        if refusal is None and ctx.space and tool_id in SPACE_GUARDED_TOOLS:
            refusal = _space_guard(args, ctx.workspace)
        if refusal is None:
            return None
        await self.emit(
            ctx.run_id, "policy_decision", {"tool_id": tool_id, "level": "deny", "explanation": refusal}
        )
        return GateResult(False, refusal)

    async def _flow_check(
        self, ctx: CallContext, tool_id: str, args: dict[str, Any]
    ) -> tuple[Classification | None, str | None]:
        """The call's flow classification and why the flow guard would turn an ALLOW of it into an
        ASK (None: it would not); ``(None, None)`` with the guard off."""
        if self.flow_guard is FlowGuardMode.OFF:
            return None, None
        classification = classify(self.flow_id(tool_id), args, sandboxed_shell=self.sandboxed_shell)
        return classification, (await self._flow_state(ctx.session_id)).check(classification)

    async def ask_recovery(
        self,
        ctx: CallContext,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action_ids: list[str],
        summary: dict[str, Any],
        explanation: str,
    ) -> GateResult:
        """Ask a person for a recovery review before a mutation (seed 000 "Check earlier").

        The approval (kind ``action_recovery``) covers exactly ``action_ids``; approving it
        acknowledges those records in the decision's own transaction. It is never remembered
        as a grant. After an approval the rules are checked again, so a permission revoked
        while the prompt was open still denies the call.

        Args:
            ctx: The run and session asking.
            tool_id: The proposed mutation.
            arguments: Its input (for the subject and the re-check).
            action_ids: The uncertain records under review (at most 20).
            summary: What people are shown (the records and the proposed call), JSON object.
            explanation: One line on why the review is needed.

        Returns:
            The :class:`GateResult` (denied, expired or approved).
        """
        args = dict(arguments)
        result = await self._ask(
            ctx,
            tool_id,
            summary,
            subject="Check earlier",
            reason="action_recovery · retry: earlier actions of this session have uncertain effects",
            explanation=explanation,
            vendor_request_id=None,
            kind="action_recovery",
            action_ids=action_ids,
        )
        return await self._recheck(ctx, tool_id, args, None, result)

    async def _recheck(
        self, ctx: CallContext, tool_id: str, args: dict[str, Any], action: str | None, result: GateResult
    ) -> GateResult:
        """After an approval (or a questionnaire's answers), check the rules again: a DENY wins.

        The outcome is reported to the broker, so the person's answer can say whether the call
        it approved will run (:meth:`ApprovalBroker.decide`)."""
        if not result.allowed:
            return result
        again = await self.evaluate(
            tool_id, args, action=action, session_id=ctx.session_id, workspace=ctx.workspace
        )
        if again.level is Level.DENY:  # revoked while the prompt was open: the prompt cannot grant it
            denied = GateResult(
                False,
                f"denied by Octipus policy: {again.explanation} (changed while the approval was open)",
                approval_id=result.approval_id,
            )
            if result.approval_id is not None:
                self.broker.report_recheck(result.approval_id, allowed=False, reason=denied.reason)
            return denied
        if result.approval_id is not None:
            self.broker.report_recheck(result.approval_id, allowed=True, reason=result.reason)
        await self.observe(ctx, tool_id, args)
        return result

    async def _ask(
        self,
        ctx: CallContext,
        tool_id: str,
        args: dict[str, Any],
        *,
        subject: str | None,
        reason: str,
        explanation: str,
        vendor_request_id: str | None,
        kind: str = "tool",
        questions: dict[str, Any] | None = None,
        action_ids: list[str] | None = None,
    ) -> GateResult:
        """Ask a person: store an approval, announce it, wait for its answer, say what it means.

        The run shows ``awaiting_approval`` (``ctx.on_waiting(+1)``) before the approval exists,
        so a client that sees the approval also sees the status, and ``-1`` once the wait ends,
        however it ends (shielded from cancellation). While the wait runs the approval's id is
        listed in ``ctx.approvals``; it is removed when the wait returns, and stays listed when
        the wait is cancelled (the caller went away), so the owner of the context knows which
        approval it left open (:class:`~octipusd.toolkit.CallContext`). The rules are not
        checked again here (see :meth:`_recheck`).

        Args:
            ctx: The run and session asking.
            tool_id: The call asked about.
            args: What the person is shown (the call's input, or a recovery review's summary).
            subject: The call's subject, shown with it.
            reason: Why a person is asked (one line).
            explanation: The rules' explanation of the ASK.
            vendor_request_id: The vendor's id of the permission request, or None.
            kind: ``tool``, ``questionnaire`` or ``action_recovery``.
            questions: A questionnaire's questions (``kind="questionnaire"``).
            action_ids: The records a recovery review covers (``kind="action_recovery"``).

        Returns:
            Approved (with the questionnaire's answered input), or refused: denied by the person
            (a questionnaire's refusal is :data:`CANCEL_MESSAGE`), expired (``expired=True``: the
            run must fail) or cancelled; ``approval_id`` names the approval in every case.

        Raises:
            StoreError: the approval could not be stored or read (nothing was asked when its
                creation failed; ``on_waiting`` is still balanced).
            anyio cancellation: the caller was cancelled; the broker marks the approval ``cancelled``.
        """
        if ctx.on_waiting is not None:
            await ctx.on_waiting(+1)
        try:
            approval = await self.broker.create(
                run_id=ctx.run_id,
                session_id=ctx.session_id,
                tool_id=tool_id,
                subject=subject,
                reason=reason,
                input=args,
                explanation=explanation,
                vendor_request_id=vendor_request_id,
                kind=kind,
                questions=questions,
                action_ids=action_ids,
            )
            await self.emit(
                ctx.run_id,
                "approval_requested",
                {
                    "approval_id": approval.id,
                    "tool_id": tool_id,
                    "kind": kind,
                    "subject": subject,
                    "reason": reason,
                    "explanation": explanation,
                    "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
                },
            )
            ctx.approvals.append(approval.id)
            result = await self.broker.wait(approval)
            ctx.approvals.remove(approval.id)  # a cancelled wait stays listed (CallContext.approvals)
        finally:
            if ctx.on_waiting is not None:
                with anyio.CancelScope(shield=True):
                    await ctx.on_waiting(-1)
        await self.emit(
            ctx.run_id,
            "approval_decided",
            {
                "approval_id": approval.id,
                "tool_id": tool_id,
                "outcome": str(result.outcome),
                "decided_by": result.approval.decided_by,
                "grant_id": result.approval.grant_id,
            },
        )
        return self._answer(result, tool_id, args, kind)

    def _answer(self, result: ApprovalResult, tool_id: str, args: dict[str, Any], kind: str) -> GateResult:
        """What the end of an approval's wait means for the call (see :meth:`_ask`'s Returns)."""
        final = result.approval
        if result.approved:
            updated = answered_input(args, final.answers or {}) if kind == "questionnaire" else None
            return GateResult(True, f"approved by {final.decided_by}", updated, approval_id=final.id)
        if result.outcome is Outcome.EXPIRED:
            return GateResult(
                False,
                f"approval {final.id} for {tool_id} was not answered within "
                f"{self.broker.timeout_seconds:g} s; the call was denied and the run failed",
                expired=True,
                approval_id=final.id,
            )
        if result.outcome is Outcome.CANCELLED:
            return GateResult(
                False, "the approval was cancelled because the run is ending", approval_id=final.id
            )
        if kind == "questionnaire":
            return GateResult(False, CANCEL_MESSAGE, approval_id=final.id)
        why = final.decision_reason
        return GateResult(
            False, f"denied by {final.decided_by}" + (f": {why}" if why else ""), approval_id=final.id
        )

    async def _questionnaire(
        self,
        ctx: CallContext,
        tool_id: str,
        args: dict[str, Any],
        explanation: str,
        vendor_request_id: str | None,
    ) -> GateResult:
        """AskUserQuestion: a person must answer, whatever the rules allow (seed 003)."""
        try:
            questionnaire = parse_questionnaire(args)
        except QuestionnaireError as exc:
            return GateResult(False, f"the questionnaire cannot be shown: {exc}")
        if not ctx.attended:
            note = "review required: AskUserQuestion needs a person's answers, and this session is unattended"
            ctx.review_required.append(note)
            await self.emit(
                ctx.run_id, "review_required", {"tool_id": tool_id, "subject": None, "reason": note}
            )
            return GateResult(False, note)
        return await self._ask(
            ctx,
            tool_id,
            args,
            subject=None,
            reason="CLI: AskUserQuestion (questionnaire)",
            explanation=explanation,
            vendor_request_id=vendor_request_id,
            kind="questionnaire",
            questions=questionnaire.to_dict(),
        )
