"""The respond stage: incidents in, guarded actions out, effects verified, failures never retried blindly.

Modes: ``observe`` records recommendations only; ``approve`` queues actions until a person approves or rejects
them; ``auto`` applies them. Each rule fires once per incident. After an action with an expected effect, the
responder reads the watched field on the target; if the effect has not appeared by ``within_s`` the previous
setting is restored (a recorded rollback).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from twinloop.ops.events import Incident
from twinloop.ops.respond.actions import (
    INVERSE,
    SETTING_KINDS,
    ActionRequest,
    ActionResult,
    ActionStatus,
    Expectation,
)
from twinloop.ops.respond.adapters.base import ActionAdapter
from twinloop.ops.respond.guards import GuardRails
from twinloop.ops.respond.policy import ActionTemplate, Mode, Policy, Rule

#: ``read(field, entity) -> value`` gives the current telemetry value of a field aggregated over an entity.
Reader = Callable[[str, str], float | None]


@dataclass(frozen=True)
class _Watch:
    action_id: int
    request: ActionRequest
    expect: Expectation
    baseline: float
    due_ts: float
    previous_value: float | None


class Responder:
    """Turns incidents into actions under a policy, through guard rails, on one adapter."""

    def __init__(
        self, policy: Policy, adapter: ActionAdapter, guards: GuardRails | None = None, mode: Mode | None = None
    ) -> None:
        self.policy = policy
        self.adapter = adapter
        self.guards = guards or GuardRails()
        self.mode: Mode = mode or policy.mode
        self.log: list[ActionResult] = []
        self._fired: set[tuple[int, str]] = set()
        self._pending: dict[int, ActionRequest] = {}
        self._watches: list[_Watch] = []

    # ------------------------------------------------------------------ incidents → actions
    def handle(self, incidents: Iterable[Incident], now: float, read: Reader) -> list[ActionResult]:
        """Apply the policy to open incidents; returns the results recorded at ``now``."""
        out: list[ActionResult] = []
        for incident in incidents:
            if incident.status != "open":
                continue
            for rule in self.policy.rules_for(incident.event_class, incident.severity):
                key = (incident.incident_id, rule.name)
                if key in self._fired:
                    continue
                self._fired.add(key)
                for template in rule.actions:
                    requests = self._requests(rule, template, incident)
                    if not requests:
                        unresolved = ActionRequest(template.kind, incident.root, incident_id=incident.incident_id)
                        detail = f"cannot resolve target: no {template.target} for {incident.root}"
                        out.append(self._record(unresolved, "refused", now, detail, guard=False))
                    for request in requests:
                        out.append(self._submit(request, now, read))
        return out

    def _requests(self, rule: Rule, template: ActionTemplate, incident: Incident) -> list[ActionRequest]:
        expect = None
        if rule.expect is not None:
            e = rule.expect
            expect = Expectation(e.field, e.direction, e.within_s, e.min_change)
        reason = f"{rule.name} on incident {incident.incident_id} ({incident.event_class} at {incident.root})"
        requests = []
        for target in self.adapter.resolve(template.target, incident):
            value: float | None = template.value
            if template.change is not None or template.scale is not None:
                current = self.adapter.current(template.kind, target)
                if current is None:
                    value = None  # the guard refuses a relative change of an unknown setting
                else:
                    value = (
                        current + template.change if template.change is not None else current * (template.scale or 1)
                    )
            requests.append(
                ActionRequest(
                    kind=template.kind,
                    target=target,
                    value=value,
                    duration_s=template.duration_s,
                    reason=reason,
                    incident_id=incident.incident_id,
                    expect=expect if template.kind in SETTING_KINDS else None,
                )
            )
        return requests

    def _submit(self, request: ActionRequest, now: float, read: Reader) -> ActionResult:
        if request.kind in SETTING_KINDS and request.value is None:
            return self._record(request, "refused", now, f"current {request.kind} of {request.target} unknown")
        limits = self.adapter.limits(request.kind, request.target)
        current = self.adapter.current(request.kind, request.target)
        decision = self.guards.check(request, now, limits, current)
        if not decision.allowed:
            return self._record(decision.request, "refused", now, decision.refusal)
        if self.mode == "observe":
            return self._record(decision.request, "recommended", now, clamped=decision.clamped)
        if self.mode == "approve":
            result = self._record(decision.request, "pending", now, clamped=decision.clamped)
            self._pending[result.action_id] = decision.request
            return result
        return self._execute(decision.request, now, read, current, decision.clamped)

    def _execute(
        self, request: ActionRequest, now: float, read: Reader, current: float | None, clamped: bool = False
    ) -> ActionResult:
        reply = self.adapter.apply(request)
        result = self._record(request, reply.status, now, reply.detail, current, clamped)
        if reply.status == "applied" and request.expect is not None:
            baseline = read(request.expect.field, request.target)
            if baseline is not None:
                self._watches.append(
                    _Watch(result.action_id, request, request.expect, baseline, now + request.expect.within_s, current)
                )
        return result

    # ------------------------------------------------------------------ approvals
    @property
    def pending(self) -> dict[int, ActionRequest]:
        """Actions waiting for a person (approve mode), by action id."""
        return dict(self._pending)

    def approve(self, action_id: int, now: float, read: Reader) -> ActionResult:
        """A person approved a pending action: check the guard rails again (time has passed) and apply it."""
        request = self._pending.pop(action_id)
        current = self.adapter.current(request.kind, request.target)
        decision = self.guards.check(request, now, self.adapter.limits(request.kind, request.target), current)
        if not decision.allowed:
            return self._record(request, "refused", now, decision.refusal)
        return self._execute(decision.request, now, read, current, decision.clamped)

    def reject(self, action_id: int, now: float) -> ActionResult:
        """A person rejected a pending action."""
        return self._record(self._pending.pop(action_id), "rejected", now, "rejected by operator")

    # ------------------------------------------------------------------ verification and rollback
    def verify(self, now: float, read: Reader) -> list[ActionResult]:
        """Judge every watched action whose time has come; roll back those whose effect did not appear."""
        out: list[ActionResult] = []
        keep: list[_Watch] = []
        for w in self._watches:
            if now < w.due_ts:
                keep.append(w)
                continue
            value = read(w.expect.field, w.request.target)
            moved = (
                None if value is None else (w.baseline - value if w.expect.direction == "down" else value - w.baseline)
            )
            if moved is not None and moved >= w.expect.min_change:
                out.append(
                    self._record(
                        w.request, "verified", now, f"{w.expect.field} moved {moved:+.2f} ({w.expect.direction})"
                    )
                )
                continue
            out.append(
                self._rollback(w, now, "no effect" if moved is None else f"{w.expect.field} moved only {moved:+.2f}")
            )
        self._watches = keep
        return out

    def _rollback(self, w: _Watch, now: float, why: str) -> ActionResult:
        if w.request.kind in SETTING_KINDS and w.previous_value is not None:
            undo = replace(
                w.request, value=w.previous_value, expect=None, reason=f"rollback of action {w.action_id}: {why}"
            )
        elif w.request.kind in INVERSE:
            undo = replace(
                w.request,
                kind=INVERSE[w.request.kind],
                value=None,
                expect=None,
                reason=f"rollback of action {w.action_id}",
            )
        else:
            return self._record(w.request, "failed", now, f"expected effect missing ({why}) and no way to undo it")
        reply = self.adapter.apply(undo)
        status: ActionStatus = "rolled_back" if reply.status in ("applied", "dry_run") else "failed"
        return self._record(undo, status, now, f"{why}; {reply.detail}")

    def _record(
        self,
        request: ActionRequest,
        status: ActionStatus,
        now: float,
        detail: str = "",
        previous: float | None = None,
        clamped: bool = False,
        guard: bool = True,
    ) -> ActionResult:
        result = ActionResult(len(self.log), request, status, now, detail, previous, clamped)
        self.log.append(result)
        if guard:  # an action that never reached a real target must not back off that target's later actions
            self.guards.record(result)
        return result
