"""Rules on what a CDU reports about itself: evidence of a cooling fault before any die or coolant temperature
moves.

The inputs are row fields that the caller gives each of the row's GPUs (as for the ``coolant`` rule), so every
rule here is vectorized over GPUs like the hardware rules and groups into a CDU incident the same way. All three
report ``cooling_degradation``:

* ``cdu_setpoint``: the supply setpoint the CDU reports (``TWINLOOP_FI_CDU_SETPOINT``) is not the one it was
  commanded (the scenario's configured value, or the last one the control system wrote, which the caller passes
  with :meth:`CduSetpointRule.commanded`). A setpoint register holds what was written to its resolution
  (0.1 °C on common CDU and BMS controllers), so a difference of more than ``tolerance_c`` means the controller
  no longer runs to the commanded setpoint: a drifting or overridden setpoint, a firmware fault, a local manual
  change. The ``coolant`` rule cannot see this, because the supply follows the drifting setpoint. GPUs whose
  CDU has no known commanded setpoint (e.g. a CDU running its own PID) are not judged.
* ``cdu_pump``: the flow per unit of commanded pump speed (``TWINLOOP_FI_CDU_FLOW`` / ``TWINLOOP_FI_CDU_PUMP_SPEED``)
  fell ``flow_drop`` below its learned value. At a fixed system curve a centrifugal pump's flow is proportional
  to its speed (affinity law), so the loop slowing or speeding the pump leaves the ratio where it was, while a
  worn impeller, a failing drive or a clogged strainer lowers it. 20 % is well beyond flow-meter accuracy
  (a few %).
* ``cdu_capacity``: the facility-water valve (``TWINLOOP_FI_CDU_VALVE``, 0..1) opened ``rise`` further per watt
  of heat rejected (``TWINLOOP_FI_CDU_HEAT_LOAD``) than it needed before, at the same pump speed. The CDU holds
  its supply temperature by opening the valve, so a fouled or partly blocked heat exchanger (or less secondary
  flow) shows as a wider valve at the same heat load long before the valve saturates and the supply warms.
  The valve-per-watt reference is learned per pump speed: a commanded speed change waits ``settle_s`` and
  learns it afresh (the exchanger's capacity depends on the secondary flow). A slow fouling over hours is
  learned, not reported; facility-water temperature changes are not compensated (the twin's exchanger capacity
  does not depend on them; a real one's does, so there they should hold the rule off like a speed change).

References learn only while the rule is calm, so a lasting fault stays visible and stays one incident.
Thresholds are guesses with physical meaning, not fitted.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.rules import (
    CDU_FLOW,
    CDU_HEAT_LOAD,
    CDU_PUMP_SPEED,
    CDU_SETPOINT,
    CDU_VALVE,
    F64,
    BoolArr,
    Rule,
    RuleFrame,
    ewma_toward,
    steps,
)
from twinloop.ops.events import EventClass


class CduSetpointRule(Rule):
    """The CDU's reported setpoint differs from its commanded one (see module docstring).

    Args:
        tolerance_c: allowed difference, °C (the setpoint's resolution with margin).
        persistence_s: how long the difference must hold, s (a command takes a step to show).
    """

    name = "cdu_setpoint"
    event_class = EventClass.COOLING_DEGRADATION

    def __init__(self, tolerance_c: float = 0.1, persistence_s: float = 3.0) -> None:
        super().__init__()
        self.tolerance_c = tolerance_c
        self.persistence_s = persistence_s
        self._commanded: F64 = np.zeros(0)
        self._pending: list[tuple[float, NDArray[np.int64], float]] = []

    def commanded(self, gpus: NDArray[np.int64], setpoint_c: float, at_s: float = -np.inf) -> None:
        """Record the setpoint commanded to the CDU cooling ``gpus``, in force from ``at_s`` (s; default: now).

        Call it with the configured setpoint at the start and whenever the control system writes a new one
        (also for a write scheduled for later, with its time); ``nan`` forgets it (the rule stops judging).
        """
        self._pending.append((at_s, np.asarray(gpus, dtype=np.int64), float(setpoint_c)))
        self._pending.sort(key=lambda p: p[0])

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Apply the commands now due, then judge the reported setpoint; the score is reported − commanded, °C."""
        n = frame.n_gpus
        if self._commanded.shape[0] != n:
            self._commanded = np.full(n, np.nan)
        while self._pending and self._pending[0][0] <= frame.ts:
            _, gpus, value = self._pending.pop(0)
            self._commanded[gpus] = value
        reported = frame.gpu.get(CDU_SETPOINT)
        if reported is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        valid = np.isfinite(reported) & np.isfinite(self._commanded)
        off = np.where(valid, reported - self._commanded, 0.0)
        # The float tolerance keeps a value written and read back exactly at the limit from flapping.
        cond = np.abs(off) > self.tolerance_c + 1e-9
        return self._persist(cond, valid, steps(self.persistence_s, frame.dt_s)), off


class _Reference:
    """A per-GPU reference value with its own age; NaN until first learned."""

    def __init__(self) -> None:
        self.value: F64 = np.zeros(0)
        self.age_s: F64 = np.zeros(0)

    def ensure(self, n: int) -> None:
        if self.value.shape[0] != n:
            self.value = np.full(n, np.nan)
            self.age_s = np.zeros(n)

    def forget(self, mask: BoolArr) -> None:
        self.value[mask] = np.nan
        self.age_s[mask] = 0.0

    def learn(self, x: F64, mask: BoolArr, dt_s: float, half_life_s: float) -> None:
        self.value = ewma_toward(self.value, x, mask, 1.0 - 2.0 ** (-dt_s / half_life_s))
        self.age_s = np.where(mask, self.age_s + dt_s, self.age_s)


class _SpeedWatch:
    """Per-GPU 'the CDU's commanded pump speed changed within ``settle_s``'."""

    def __init__(self) -> None:
        self.prev: F64 = np.zeros(0)
        self.until: F64 = np.zeros(0)

    def __call__(self, speed: F64, ts: float, settle_s: float) -> tuple[BoolArr, BoolArr]:
        """(moved now, settling) per GPU."""
        n = speed.shape[0]
        if self.prev.shape[0] != n:
            self.prev, self.until = np.full(n, np.nan), np.full(n, -np.inf)
        ok = np.isfinite(speed)
        with np.errstate(invalid="ignore"):
            moved = ok & np.isfinite(self.prev) & (np.abs(speed - self.prev) > 1e-3)
        self.until = np.where(moved, ts + settle_s, self.until)
        self.prev = np.where(ok, speed, self.prev)
        return moved, ts < self.until


class _RatioRule(Rule):
    """A per-GPU ratio judged against its own learned value (the pump and capacity rules).

    The reference learns only while the deviation is under half the threshold and no pump speed change is
    settling, and the rule judges only once the reference has ``warmup_s`` of samples behind it.
    """

    def __init__(self, learn_half_life_s: float, warmup_s: float, settle_s: float, persistence_s: float) -> None:
        super().__init__()
        self.learn_half_life_s = learn_half_life_s
        self.warmup_s = warmup_s
        self.settle_s = settle_s
        self.persistence_s = persistence_s
        self._ref = _Reference()
        self._speed = _SpeedWatch()

    def _judge(
        self, frame: RuleFrame, ratio: F64, deviation: F64, valid: BoolArr, settling: BoolArr, threshold: float
    ) -> tuple[BoolArr, F64]:
        judged = valid & ~settling & (self._ref.age_s >= self.warmup_s)
        cond = judged & (deviation >= threshold)
        calm = valid & ~settling & (deviation < 0.5 * threshold)
        self._ref.learn(ratio, calm, frame.dt_s, self.learn_half_life_s)
        return self._persist(cond, valid, steps(self.persistence_s, frame.dt_s)), deviation


class CduPumpRule(_RatioRule):
    """Flow per unit of commanded pump speed fell (see module docstring).

    Args:
        flow_drop: fraction below the learned flow per speed that is a fault.
        learn_half_life_s: half-life of the learned reference, s.
        warmup_s: samples needed before judging, s.
        settle_s: wait after a commanded speed change (the pump ramps), s.
        persistence_s: how long the drop must hold, s.
    """

    name = "cdu_pump"
    event_class = EventClass.COOLING_DEGRADATION

    def __init__(
        self,
        flow_drop: float = 0.2,
        learn_half_life_s: float = 600.0,
        warmup_s: float = 60.0,
        settle_s: float = 10.0,
        persistence_s: float = 5.0,
    ) -> None:
        super().__init__(learn_half_life_s, warmup_s, settle_s, persistence_s)
        self.flow_drop = flow_drop

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Judge the flow per pump speed; the score is its shortfall below the learned value (fraction)."""
        n = frame.n_gpus
        flow, speed = frame.gpu.get(CDU_FLOW), frame.gpu.get(CDU_PUMP_SPEED)
        if flow is None or speed is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        self._ref.ensure(n)
        _, settling = self._speed(speed, frame.ts, self.settle_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            valid = np.isfinite(flow) & np.isfinite(speed) & (speed > 0.0)
            per_speed = np.where(valid, flow / np.where(valid, speed, 1.0), np.nan)
            shortfall = np.where(valid, 1.0 - per_speed / self._ref.value, 0.0)
        shortfall = np.nan_to_num(shortfall, nan=0.0)
        return self._judge(frame, per_speed, shortfall, valid, settling, self.flow_drop)


class CduCapacityRule(_RatioRule):
    """The facility-water valve opens further per watt rejected at the same pump speed (see module docstring).

    Args:
        rise: fraction above the learned valve opening per watt that is a fault (0.25: the exchanger lost a
            fifth of its capacity).
        min_valve: below this opening the ratio is too noisy to judge (an idle row).
        learn_half_life_s: half-life of the learned reference, s.
        warmup_s: samples needed before judging (after a start or a speed change), s.
        settle_s: wait after a commanded pump speed change before learning afresh, s.
        persistence_s: how long the rise must hold, s.
    """

    name = "cdu_capacity"
    event_class = EventClass.COOLING_DEGRADATION

    def __init__(
        self,
        rise: float = 0.25,
        min_valve: float = 0.05,
        learn_half_life_s: float = 600.0,
        warmup_s: float = 30.0,
        settle_s: float = 30.0,
        persistence_s: float = 5.0,
    ) -> None:
        super().__init__(learn_half_life_s, warmup_s, settle_s, persistence_s)
        self.rise = rise
        self.min_valve = min_valve

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Judge the valve opening per watt; the score is its excess over the learned value (fraction)."""
        n = frame.n_gpus
        valve, heat = frame.gpu.get(CDU_VALVE), frame.gpu.get(CDU_HEAT_LOAD)
        if valve is None or heat is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        self._ref.ensure(n)
        speed = frame.gpu.get(CDU_PUMP_SPEED)
        settling = np.zeros(n, dtype=bool)
        if speed is not None:
            moved, settling = self._speed(speed, frame.ts, self.settle_s)
            self._ref.forget(moved)  # the exchanger's capacity depends on the secondary flow: learn it again
        with np.errstate(invalid="ignore", divide="ignore"):
            valid = np.isfinite(valve) & np.isfinite(heat) & (heat > 0.0) & (valve >= self.min_valve)
            per_w = np.where(valid, valve / np.where(valid, heat, 1.0), np.nan)
            excess = np.nan_to_num(np.where(valid, per_w / self._ref.value - 1.0, 0.0), nan=0.0)
        return self._judge(frame, per_w, excess, valid, settling, self.rise)


def cdu_rules() -> list[Rule]:
    """Fresh instances of the CDU rules with default thresholds."""
    return [CduSetpointRule(), CduPumpRule(), CduCapacityRule()]
