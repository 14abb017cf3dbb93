"""Guard rails: every action bounded by hardware limits, limited in step size and rate, never retried blindly.

The guard is the last word before an adapter: whatever a policy (or a learned component) asks for, what leaves
here is inside the target's hardware range, moves a setting by at most ``max_step`` at a time, respects a
minimum interval per target and a global budget per window, and is not re-issued after a refusal or failure
until ``failure_backoff_s`` has passed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult

#: The direction (+1 up, -1 down) in which a setting only makes the hardware safer at once: less power, lower
#: clocks, more coolant flow. A move that way is bounded by the hardware range alone, so a power fault can be met
#: in one action; ``max_step`` limits moves the other way. Coolant setpoints are step-limited both ways: a
#: large drop makes the plant pull the loop's thermal mass down at full capacity, a facility power spike.
SAFE_DIRECTION: dict[ActionKind, int] = {ActionKind.POWER_CAP: -1, ActionKind.SET_CLOCKS: -1, ActionKind.CDU_FLOW: +1}


def _default_max_step() -> dict[ActionKind, float]:
    return {
        ActionKind.POWER_CAP: 250.0,  # W per action
        ActionKind.SET_CLOCKS: 600.0,  # MHz per action
        ActionKind.CDU_SETPOINT: 4.0,  # °C per action
        ActionKind.PRECOOL: 6.0,  # °C below the current setpoint
        ActionKind.CDU_FLOW: 0.5,  # fraction of nominal flow per action
        ActionKind.FACILITY_WATER: 2.0,  # °C per action
    }


@dataclass(frozen=True)
class GuardConfig:
    """Guard-rail settings (all times in seconds).

    Attributes:
        min_interval_s: no two actions of the same kind on the same target closer than this.
        window_s / max_actions_per_window: at most this many actions (all kinds) per sliding window.
        max_step: largest change of a setting in one action away from its safe direction (``SAFE_DIRECTION``),
            per kind (units of the kind's value).
        failure_backoff_s: a refused or failed (kind, target) is not tried again before this.
        incident_reserve: actions of each window kept for incident responses: a routine move (one no incident
            asked for: the cooling optimizer's) is refused once the window holds ``max_actions_per_window -
            incident_reserve`` actions (at least one is left to routine moves), and a routine move never starts
            ``min_interval_s`` for an incident's.
    """

    min_interval_s: float = 30.0
    window_s: float = 300.0
    max_actions_per_window: int = 50
    max_step: dict[ActionKind, float] = field(default_factory=_default_max_step)
    failure_backoff_s: float = 900.0
    incident_reserve: int = 10

    def __post_init__(self) -> None:
        if self.min_interval_s < 0 or self.window_s <= 0 or self.max_actions_per_window < 1:
            raise ValueError("guard config: need min_interval_s >= 0, window_s > 0, max_actions_per_window >= 1")
        if self.incident_reserve < 0:
            raise ValueError("guard config: need incident_reserve >= 0")


@dataclass(frozen=True)
class GuardDecision:
    """The guard's answer: the (possibly clamped) request, or a refusal reason."""

    request: ActionRequest
    refusal: str = ""
    clamped: bool = False
    retry_at_s: float | None = None  # a rate-limit refusal: when the budget frees again

    @property
    def allowed(self) -> bool:
        """True when the request may go to the adapter."""
        return not self.refusal


class GuardRails:
    """Stateful guard: remembers what was issued (rate limits) and what failed (back-off)."""

    def __init__(self, config: GuardConfig | None = None) -> None:
        self.config = config or GuardConfig()
        self._last: dict[tuple[ActionKind, str], float] = {}  # any action
        self._last_incident: dict[tuple[ActionKind, str], float] = {}  # actions an incident asked for
        self._blocked_until: dict[tuple[ActionKind, str], float] = {}
        self._recent: deque[float] = deque()
        self._clock = -math.inf  # latest finite time seen: stands in for a non-finite result time in record()

    def check(
        self,
        request: ActionRequest,
        now: float,
        limits: tuple[float, float] | None,
        current: float | None,
        undo: bool = False,
    ) -> GuardDecision:
        """Decide on ``request`` at time ``now`` given the target's hardware ``limits`` and ``current`` setting.

        A value outside the limits is clamped into them; a step larger than ``max_step`` from ``current`` against
        the kind's safe direction is shortened to ``max_step``. A value kind with unknown limits is refused (the
        guard will not guess).

        Unknowable inputs refuse rather than pass: a non-finite ``now``, value, limit or current setting, and an
        unknown ``current`` for a kind with a step limit when the move could go against its safe direction.
        ``undo``: a restore or rollback toward an earlier setting: bounded by the hardware range and the step
        limit like any action, but not rate-limited (a rollback must not wait behind the actions it undoes).
        """
        key = (request.kind, request.target)
        cfg = self.config
        if not math.isfinite(now):
            return GuardDecision(request, f"clock not finite (now={now!r}): no action without a valid time")
        self._clock = max(self._clock, now)
        if request.value is not None and not math.isfinite(request.value):
            return GuardDecision(request, f"value {request.value!r} not finite (allowed: a finite number)")
        if undo:
            return self._bound(request, limits, current)
        if now < self._blocked_until.get(key, -float("inf")):
            return GuardDecision(
                request, f"backing off after an earlier refusal/failure until t={self._blocked_until[key]:.0f}s"
            )
        incident = request.incident_id >= 0
        last = (self._last_incident if incident else self._last).get(key)
        if last is not None and now - last < cfg.min_interval_s:
            return GuardDecision(
                request,
                f"rate limit: last {request.kind} on {request.target} {now - last:.0f}s ago"
                f" (min {cfg.min_interval_s:.0f}s)",
                retry_at_s=last + cfg.min_interval_s,
            )
        while self._recent and now - self._recent[0] > cfg.window_s:
            self._recent.popleft()
        reserve = 0 if incident else min(cfg.incident_reserve, cfg.max_actions_per_window - 1)
        budget = cfg.max_actions_per_window - reserve
        if len(self._recent) >= budget:
            return GuardDecision(
                request,
                f"rate limit: {budget} actions in {cfg.window_s:.0f}s",
                retry_at_s=self._recent[len(self._recent) - budget] + cfg.window_s + 1e-6,
            )
        return self._bound(request, limits, current)

    def _bound(
        self, request: ActionRequest, limits: tuple[float, float] | None, current: float | None
    ) -> GuardDecision:
        """Clamp a value into the hardware range and the step limit (see :meth:`check`)."""
        if request.value is None:
            return GuardDecision(request)
        if limits is None:
            return GuardDecision(request, f"no hardware limits known for {request.kind} on {request.target}")
        if not all(math.isfinite(x) for x in limits) or limits[0] > limits[1]:
            return GuardDecision(request, f"hardware limits {limits} of {request.target} not a finite range")
        lo, hi = limits
        value = min(max(request.value, lo), hi)
        step = self.config.max_step.get(request.kind)
        if current is not None and not math.isfinite(current):
            current = None
        safe = SAFE_DIRECTION.get(request.kind, 0)
        if step is not None and current is None:
            # Without the current setting the step limit cannot be checked: only a kind with a safe direction may
            # go on, and only to the safe end of its range (for a power cap: the hardware minimum is never a
            # dangerous raise, whatever the present cap is).
            if safe == 0 or value != (lo if safe < 0 else hi):
                return GuardDecision(
                    request, f"current {request.kind} on {request.target} unknown: the {step:g} step limit cannot be"
                    " checked (allowed: a known current setting)",
                )  # fmt: skip
        elif step is not None and current is not None:
            down = float("inf") if safe < 0 else step
            up = float("inf") if safe > 0 else step
            value = min(max(value, current - down), current + up)
            value = min(max(value, lo), hi)
        clamped = value != request.value
        return GuardDecision(replace(request, value=value), clamped=clamped)

    def record(self, result: ActionResult) -> None:
        """Remember an outcome: issued actions count against rate limits; refusals and failures back off."""
        key = (result.request.kind, result.request.target)
        # A record with a NaN/inf time would never leave the window nor end its back-off: use the guard's clock.
        ts = result.ts if math.isfinite(result.ts) else self._clock
        if not math.isfinite(ts):
            ts = 0.0
        result = replace(result, ts=ts)
        if result.status in ("applied", "dry_run", "rolled_back", "restored"):
            self._last[key] = result.ts
            if result.request.incident_id >= 0:
                self._last_incident[key] = result.ts
            self._recent.append(result.ts)
        elif result.status in ("refused", "failed"):
            self._blocked_until[key] = result.ts + self.config.failure_backoff_s
