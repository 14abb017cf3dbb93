"""What the loop can ask a cluster to do, and what came of it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal


class ActionKind(enum.StrEnum):
    """Every action the respond stage can request. Units of ``value`` are in the comment."""

    POWER_CAP = "power_cap"  # W per GPU, on a gpu/node/rack/job
    SET_CLOCKS = "set_clocks"  # MHz SM clock ceiling, on a gpu/node/rack/job
    CDU_SETPOINT = "cdu_setpoint"  # °C coolant supply temperature, on a CDU
    CDU_FLOW = "cdu_flow"  # fraction of the CDU's nominal flow (1.0 = nominal), on a CDU
    FACILITY_WATER = "facility_water"  # °C facility (chilled/tower) water supply setpoint, on the site
    PRECOOL = "precool"  # °C supply setpoint to hold for duration_s before a job starts, on a CDU
    COOLING_RAMP_DOWN = "cooling_ramp_down"  # seconds over which to return to the nominal setpoint, on a CDU
    CHECKPOINT = "checkpoint"  # no value, on a job
    DRAIN = "drain"  # no value, on a node
    UNDRAIN = "undrain"  # no value, on a node
    REQUEUE = "requeue"  # no value, on a job
    RESTART_REPLICA = "restart_replica"  # no value, on a GPU: the serving replica holding it restarts (its pod)
    EXCLUDE_GPU = "exclude_gpu"  # no value, on a gpu (the job continues without it)
    STAGGER_START = "stagger_start"  # seconds of delay between job starts, on the site
    HOLD_ADMISSION = "hold_admission"  # no value, on the site
    RELEASE_ADMISSION = "release_admission"  # no value, on the site


#: Kinds whose value is a setting with a current value (so they can be rolled back).
SETTING_KINDS: frozenset[ActionKind] = frozenset(
    {
        ActionKind.POWER_CAP,
        ActionKind.SET_CLOCKS,
        ActionKind.CDU_SETPOINT,
        ActionKind.CDU_FLOW,
        ActionKind.FACILITY_WATER,
        ActionKind.PRECOOL,
    }
)

#: The inverse of each kind that has one (how a rollback undoes it).
INVERSE: dict[ActionKind, ActionKind] = {
    ActionKind.DRAIN: ActionKind.UNDRAIN,
    ActionKind.UNDRAIN: ActionKind.DRAIN,
    ActionKind.HOLD_ADMISSION: ActionKind.RELEASE_ADMISSION,
    ActionKind.RELEASE_ADMISSION: ActionKind.HOLD_ADMISSION,
}


@dataclass(frozen=True)
class Expectation:
    """The effect an action should have, checked after ``within_s`` (else the action is rolled back).

    Attributes:
        field: telemetry field to watch (DCGM-style name).
        direction: ``down`` or ``up`` relative to the value when the action was applied.
        within_s: how long to wait before judging, seconds.
        min_change: smallest change in ``direction`` that counts as the effect appearing.
        aggregate: how the field is taken over the target's GPUs: ``mean`` or ``max`` (the hottest GPU).
        relative_to: ``level`` compares with the value at the action; ``trend`` with where the value's trend over
            the minute before the action would have taken it (a capacity-limited coolant loop keeps warming after
            a good action, only slower); for a die temperature only its coolant's part of that trend, not its
            power's (``responder._trend_per_s``).
    """

    field: str
    direction: Literal["down", "up"]
    within_s: float
    min_change: float = 0.0
    aggregate: Literal["mean", "max"] = "mean"
    relative_to: Literal["level", "trend"] = "level"


@dataclass(frozen=True)
class ActionRequest:
    """One requested action.

    Attributes:
        kind: what to do.
        target: entity id it applies to (``site/row/rack/node/gpu``, a CDU id, ``<site>/jobs/<id>``).
        value: the setting (units per :class:`ActionKind`), None for value-less kinds.
        duration_s: for timed actions (precool), seconds.
        reason: why (rule and incident), shown in the action log and passed to Slurm/k8s.
        incident_id: the incident that caused it (-1 for none, e.g. a rollback or a schedule).
        expect: effect to verify, or None.
    """

    kind: ActionKind
    target: str
    value: float | None = None
    duration_s: float = 0.0
    reason: str = ""
    incident_id: int = -1
    expect: Expectation | None = None


ActionStatus = Literal[
    "applied",  # done by the adapter
    "dry_run",  # the adapter showed the command it would run
    "recommended",  # observe mode: recommendation only
    "pending",  # approve mode: waiting for a person
    "rejected",  # a person said no
    "refused",  # a guard rail or the adapter said no (reason in detail)
    "failed",  # the adapter tried and it went wrong (reason in detail)
    "rolled_back",  # the expected effect did not appear; the previous value was restored
    "verified",  # the expected effect appeared
    "restored",  # the incident closed; the setting went back to its previous value (or the drain/hold lifted)
    "superseded",  # the incident closed but the setting had been changed since; left as is
]


@dataclass(frozen=True)
class ActionResult:
    """What happened to a request.

    Attributes:
        action_id: sequence number in the responder's log.
        request: the (possibly clamped) request.
        status: see :data:`ActionStatus`.
        ts: when, seconds.
        detail: refusal reason, failure message, command line shown in dry run, etc.
        previous_value: the setting before the action (for rollback), when known.
        clamped: the value was moved inside the hardware limits by a guard rail.
    """

    action_id: int
    request: ActionRequest
    status: ActionStatus
    ts: float
    detail: str = ""
    previous_value: float | None = None
    clamped: bool = False
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """Who asked for it: ``incident`` (a policy rule on an incident), ``optimizer`` (the cooling optimizer's
        routine move), ``rollback`` or ``restore`` (the responder undoing an earlier action), else ``loop``.
        """
        reason = self.request.reason
        if reason.startswith("rollback of action"):
            return "rollback"
        if reason.startswith("incident ") and "restore after action" in reason:
            return "restore"
        if reason.startswith("cooling optimizer"):
            return "optimizer"
        return "incident" if self.request.incident_id >= 0 else "loop"

    @property
    def expected(self) -> str:
        """The effect the action is expected to have, in words ('' when none is checked)."""
        e = self.request.expect
        if e is None:
            return ""
        against = " against its pre-action trend" if e.relative_to == "trend" else ""
        return f"{e.aggregate} {e.field} {e.direction} by >= {e.min_change:g} within {e.within_s:g}s{against}"

    @property
    def audit_detail(self) -> str:
        """One line for an operator: what happened (``detail``), why (source and reason), the expected effect, and
        which earlier action a verification, rollback or restore judged.
        """
        parts = [self.detail] if self.detail else []
        if self.request.reason and self.request.reason not in self.detail:
            parts.append(f"why ({self.source}): {self.request.reason}")
        elif not self.request.reason:
            parts.append(f"why: {self.source}")
        if self.expected and self.status not in ("verified", "rolled_back", "failed"):
            parts.append(f"expects: {self.expected}")
        if "of_action" in self.extra:
            parts.append(f"judges action {int(self.extra['of_action'])}")
        return " | ".join(parts)
