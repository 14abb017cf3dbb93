"""Cross-signal rules a person would write, over per-GPU arrays of DCGM fields (hardware rules here; job rules
in :mod:`.job_rules`).

Every rule is vectorized over GPUs, keeps its own state, is NaN-safe (a missing input leaves that GPU's state
as it was) and needs its condition to hold for ``persistence_s`` before it fires:

* ``cooling`` → cooling degradation: the die temperature rises *at constant power*. The expected temperature
  follows power through the thermal RC (``T = T_coolant + R·P_filtered``, ``P_filtered`` = power through a
  first-order lag of time constant ``tau_s``), with ``R`` learned per GPU from its own history (the catalog
  value as a prior); the rise of the temperature above that expectation by ``rise_c`` while the power has been
  steady on the thermal time scale (RC-filtered power within ``power_tolerance`` of its 1-minute average) is
  a cooling or thermal-interface fault. Where the CDU's supply temperature is given per GPU, the model is of the
  die's rise above it, so a supply the loop warmed on purpose is no fault (a CDU losing its supply is the
  ``coolant`` rule's).
* ``coolant`` → cooling degradation, sooner: the coolant supply of the GPU's CDU (``TWINLOOP_FI_CDU_SUPPLY_TEMP``
  with ``TWINLOOP_FI_CDU_SETPOINT``, row fields the caller gives each of the row's GPUs) climbs above its
  setpoint at ``rate_c_per_s`` or faster: a CDU that cannot hold its setpoint has lost pump or heat-exchanger
  capacity, and its supply moves minutes before the dies pass the ``cooling`` rule's margin. A setpoint change
  holds the rule off for ``holdoff_s`` (the loop moving its own setpoint is not a fault), and so does the first
  reading of a supply: from a cold start the loop heads for a level it has never reached (an air handler or CDU
  whose setpoint lies under facility water + approach warms to that floor in its first seconds), which is the
  plant settling, not a CDU losing capacity.
* ``thermal_throttle``: a thermal clock-event bit (SW/HW thermal), or the temperature within ``margin_c`` of
  slowdown with the clock down ``clock_drop`` from its reference.
* ``power_throttle``: the clock falls ``clock_drop`` below its reference while power is at the limit
  (``at_limit``), and the tensor activity did not rise (a heavier phase at the cap is normal operation).
* ``power_delivery``: the HW power-brake bit, HW slowdown without any thermal cause, or the node's PSUs
  reporting lost redundancy (``TWINLOOP_FI_PSU_STATE`` >= 1, a node field the caller gives each of the node's
  GPUs, as a BMC's Redfish power-supply health would): that holds while the PSUs are out, so a loop that capped
  the node does not see the fault vanish with the brakes it prevented.
* the CDU's own reports (setpoint against the commanded one, flow per pump speed, valve opening per watt):
  :mod:`.cdu_rules`.
* ``xid``: a fatal XID code (fell off the bus, DBE, uncontained ECC, GSP timeout, ...) or a burst of
  ``burst_count`` XIDs within ``burst_window_s``. ``DCGM_FI_DEV_XID_ERRORS`` holds the *last* XID code, so an
  event is a change to a non-zero code.

Thresholds are guesses with physical units (°C, fraction of clock, fraction of limit), not fitted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import (
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_HW_THERMAL,
    CLOCK_EVENT_SW_THERMAL,
    GpuPowerModel,
)
from twinloop.ops.events import EventClass
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    TWINLOOP_FI_CDU_FLOW,
    TWINLOOP_FI_CDU_HEAT_LOAD,
    TWINLOOP_FI_CDU_PUMP_SPEED,
    TWINLOOP_FI_CDU_SETPOINT,
    TWINLOOP_FI_CDU_SUPPLY_TEMP,
    TWINLOOP_FI_CDU_VALVE,
    TWINLOOP_FI_JOB_GRAD_NORM,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
    TWINLOOP_FI_PSU_STATE,
    TWINLOOP_FI_RANK_STEP_TIME,
)

F64 = NDArray[np.float64]
BoolArr = NDArray[np.bool_]

# Field names (twinloop.telemetry.fields); the two job fields it does not list yet are named in its style.
TEMP = DCGM_FI_DEV_GPU_TEMP
POWER = DCGM_FI_DEV_POWER_USAGE
SM_CLOCK = DCGM_FI_DEV_SM_CLOCK
POWER_LIMIT = DCGM_FI_DEV_POWER_MGMT_LIMIT
CLOCK_REASONS = DCGM_FI_DEV_CLOCKS_EVENT_REASONS
XID = DCGM_FI_DEV_XID_ERRORS
TENSOR = DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
PSU_STATE = TWINLOOP_FI_PSU_STATE
CDU_SUPPLY = TWINLOOP_FI_CDU_SUPPLY_TEMP
CDU_SETPOINT = TWINLOOP_FI_CDU_SETPOINT
CDU_FLOW = TWINLOOP_FI_CDU_FLOW
CDU_PUMP_SPEED = TWINLOOP_FI_CDU_PUMP_SPEED
CDU_HEAT_LOAD = TWINLOOP_FI_CDU_HEAT_LOAD
CDU_VALVE = TWINLOOP_FI_CDU_VALVE
JOB_STEP_TIME = TWINLOOP_FI_JOB_STEP_TIME
JOB_LOSS = TWINLOOP_FI_JOB_LOSS
JOB_TOKENS = TWINLOOP_FI_JOB_TOKENS_PER_S
JOB_GRAD_NORM = TWINLOOP_FI_JOB_GRAD_NORM
JOB_PROGRESS = TWINLOOP_FI_JOB_PROGRESS
JOB_PHASE = TWINLOOP_FI_JOB_PHASE
#: Per GPU: the step time of the job's rank on this GPU on its own, s (its compute and its own communication,
#: without the wait for slower peers at the collectives), as a framework's per-rank step timers report it.
RANK_STEP_TIME = TWINLOOP_FI_RANK_STEP_TIME

#: XID codes that mean the GPU (or its memory) is broken on the first occurrence (NVIDIA Xid catalog).
FATAL_XIDS: frozenset[int] = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121})


def static_w_per_c(spec: GpuSpec) -> float:
    """``d P_static / d T`` of ``spec``'s GPU, W/°C: its cold idle power times the fitted leakage growth per °C
    (:meth:`twinloop.hardware.power.GpuPowerModel.static_w`; H100: 70 W × 0.0075/°C = 0.53 W/°C).
    """
    model = GpuPowerModel(spec)
    return float(model.static_w(1.0) - model.static_w(0.0))


@dataclass(frozen=True)
class GpuLimits:
    """Per-GPU physical limits the rules compare against (arrays of shape (n_gpus,)).

    Attributes:
        slowdown_temp_c: die temperature where the GPU starts to slow down, °C.
        thermal_resistance_c_per_w: die-to-coolant thermal resistance, °C/W (a model parameter).
        thermal_tau_s: thermal time constant R·C, s.
        tdp_w: default power limit, W.
        model_index: per-GPU GPU model (index into the site's kinds); None = one model. GPUs of different
            models run at different clocks and step times on purpose: peers are compared within a model.
        static_w_per_c: per-GPU growth of static (leakage) power per °C of die temperature, W/°C, from the fitted
            power model (:func:`static_w_per_c`); None = unknown. What a warmer coolant costs a GPU: more watts at
            the same clock, or (at its power limit) the same watts at a lower clock.
    """

    slowdown_temp_c: F64
    thermal_resistance_c_per_w: F64
    thermal_tau_s: F64
    tdp_w: F64
    model_index: NDArray[np.int64] | None = None
    static_w_per_c: F64 | None = None

    def models(self) -> tuple[NDArray[np.int64], int]:
        """(per-GPU model index, number of models); one model when none was given."""
        if self.model_index is None:
            return np.zeros(self.tdp_w.shape[0], dtype=np.int64), 1
        return self.model_index, int(self.model_index.max(initial=-1)) + 1 or 1

    @classmethod
    def from_spec(cls, spec: GpuSpec, n_gpus: int) -> GpuLimits:
        """Limits of ``n_gpus`` GPUs of one kind."""
        r = spec.thermal_resistance_c_per_w
        return cls(
            slowdown_temp_c=np.full(n_gpus, spec.slowdown_temp_c),
            thermal_resistance_c_per_w=np.full(n_gpus, r),
            thermal_tau_s=np.full(n_gpus, r * spec.thermal_capacitance_j_per_c),
            tdp_w=np.full(n_gpus, spec.tdp_w),
            static_w_per_c=np.full(n_gpus, static_w_per_c(spec)),
        )

    @classmethod
    def from_kinds(
        cls, specs: Sequence[GpuSpec], kind_index: NDArray[np.integer], resistance_factor: F64 | None = None
    ) -> GpuLimits:
        """Limits of a mixed site: ``specs[kind_index[i]]`` for GPU ``i``.

        Args:
            specs: one spec per GPU kind.
            kind_index: per GPU, index into ``specs``.
            resistance_factor: optional per-GPU multiplier of the thermal resistance (e.g. air-cooled rows).
        """
        k = np.asarray(kind_index, dtype=np.int64)
        r = np.array([s.thermal_resistance_c_per_w for s in specs])[k]
        if resistance_factor is not None:
            r = r * resistance_factor
        c = np.array([s.thermal_capacitance_j_per_c for s in specs])[k]
        return cls(
            slowdown_temp_c=np.array([s.slowdown_temp_c for s in specs], dtype=np.float64)[k],
            thermal_resistance_c_per_w=r.astype(np.float64),
            thermal_tau_s=(r * c).astype(np.float64),
            tdp_w=np.array([s.tdp_w for s in specs], dtype=np.float64)[k],
            model_index=k,
            static_w_per_c=np.array([static_w_per_c(s) for s in specs], dtype=np.float64)[k],
        )

    @classmethod
    def default(cls, n_gpus: int) -> GpuLimits:
        """H100 SXM limits from the catalog (the most common kind in the anchors)."""
        return cls.from_spec(get_gpu("h100-sxm"), n_gpus)


@dataclass
class RuleFrame:
    """What every rule sees at one step.

    Attributes:
        ts: time, s. dt_s: the sampling interval in use, s.
        gpu: per-GPU fields (n_gpus,), NaN = missing; absent fields are simply not in the dict.
        limits: per-GPU limits.
        job_slot: per-GPU job slot (index into the job arrays), -1 = no job.
        job: per-slot job fields (n_slots,), NaN = not reported this step.
        n_slots: number of job slots.
        hw_recent: per-GPU flag: some hardware signal of this GPU changed (began) recently (explains a job slowdown).
        hw_fault_onset_s: per-GPU time a hardware fault that can change a step's results or replay it (an XID, a
            power-delivery fault) last began on this GPU, if recently, s; -inf = none (vetoes a suspected SDC on its
            job, unless the job restarted since).
        slowing: per-GPU flag: a hardware cause is firing on this GPU now and it runs slow (job slowdown rule).
        expected_slow: per-GPU flag: a known cause makes this GPU slower on purpose (a power cap or clock lock
            the loop applied), so the straggler rules neither flag it nor count it as a peer.
    """

    ts: float
    dt_s: float
    gpu: dict[str, F64]
    limits: GpuLimits
    job_slot: NDArray[np.int64]
    job: dict[str, F64] = field(default_factory=dict)
    n_slots: int = 0
    hw_recent: BoolArr | None = None
    hw_fault_onset_s: F64 | None = None
    expected_slow: BoolArr | None = None
    slowing: BoolArr | None = None

    @property
    def n_gpus(self) -> int:
        """Number of GPUs."""
        return int(self.job_slot.shape[0])


class Persist:
    """k-consecutive-sample persistence that a NaN (``valid`` False) neither breaks nor extends."""

    def __init__(self) -> None:
        self.run: NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def __call__(self, cond: BoolArr, valid: BoolArr, k: int) -> BoolArr:
        """Where ``cond`` has held on the last ``k`` valid samples; an invalid sample keeps the run as it was."""
        if self.run.shape != cond.shape:
            self.run = np.zeros(cond.shape, dtype=np.int64)
        self.run = np.where(cond & valid, self.run + 1, np.where(valid, 0, self.run))
        return self.run >= k


def steps(seconds: float, dt_s: float) -> int:
    """A duration as a number of samples (at least 1)."""
    return max(1, int(np.ceil(seconds / dt_s - 1e-9)))


def ewma_toward(state: F64, x: F64, mask: BoolArr, alpha: float | F64) -> F64:
    """EWMA step where ``mask``; NaN state takes ``x`` directly."""
    new = np.where(np.isnan(state), x, state + alpha * (x - state))
    return np.where(mask, new, state)


def _bits(frame: RuleFrame) -> tuple[NDArray[np.int64], BoolArr]:
    raw = frame.gpu.get(CLOCK_REASONS)
    if raw is None:
        return np.zeros(frame.n_gpus, dtype=np.int64), np.zeros(frame.n_gpus, dtype=bool)
    ok = np.isfinite(raw)
    return np.where(ok, raw, 0).astype(np.int64), ok


RuleScope = Literal["gpu", "job"]


class Rule(ABC):
    """A cross-signal rule: ``update(frame)`` returns (fired, score) per GPU (or per job slot)."""

    name: ClassVar[str]
    event_class: ClassVar[EventClass]
    scope: ClassVar[RuleScope] = "gpu"
    persistence_s: float = 5.0

    def __init__(self) -> None:
        self._persist = Persist()

    @abstractmethod
    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Advance the rule by one step; (fired, score) arrays per GPU (``scope == "gpu"``) or per job slot."""


class CoolingRule(Rule):
    """Temperature rising at constant power (see module docstring).

    The expected temperature is a per-GPU linear model ``T = m_T + R·(P_filt - m_P)`` learned online (EWMA
    means and co-moments, half-life ``learn_half_life_s``) from calm samples, with the catalog's thermal
    resistance as a prior (strength ``prior_w``: a GPU that never changed power keeps the catalog value). The
    rise is the temperature above that model. Because the slope is uncertain (``prior_sd`` of the catalog
    value), a rise after a large power change must also exceed twice that uncertainty times the power change
    (a wrong R, e.g. an air-cooled row, is not a cooling fault), while at constant power any rise counts.
    """

    name = "cooling"
    event_class = EventClass.COOLING_DEGRADATION

    def __init__(
        self,
        rise_c: float = 4.0,
        power_tolerance: float = 0.08,
        learn_half_life_s: float = 1800.0,
        steady_half_life_s: float = 60.0,
        warmup_s: float = 120.0,
        persistence_s: float = 5.0,
        prior_w: float = 150.0,
        prior_sd: float = 0.5,
    ) -> None:
        super().__init__()
        self.rise_c = rise_c
        self.power_tolerance = power_tolerance
        self.learn_half_life_s = learn_half_life_s
        self.steady_half_life_s = steady_half_life_s
        self.warmup_s = warmup_s
        self.persistence_s = persistence_s
        self.prior_w2 = prior_w * prior_w
        self.prior_sd = prior_sd
        self._p_filt: F64 | None = None

    def _alloc(self, n: int) -> None:
        self._p_filt = np.full(n, np.nan)
        self._p_slow = np.full(n, np.nan)
        self._m_t = np.full(n, np.nan)
        self._m_p = np.full(n, np.nan)
        self._c_tp = np.zeros(n)
        self._c_pp = np.zeros(n)
        self._age = np.zeros(n)
        self._active = np.zeros(n, dtype=bool)
        self._last_ts = np.full(n, -np.inf)
        self._holdoff_until = np.full(n, -np.inf)

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a lasting rise above the learned thermal model at steady power; the score is that rise, °C."""
        n = frame.n_gpus
        t, p = frame.gpu.get(TEMP), frame.gpu.get(POWER)
        if t is None or p is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        supply = frame.gpu.get(CDU_SUPPLY)
        if supply is not None:
            # The die above its coolant: a warmer supply set on purpose (or lost by a CDU, which the coolant rule
            # reports) is not this GPU's cooling fault.
            t = t - np.where(np.isfinite(supply), supply, 0.0)
        if self._p_filt is None or self._p_filt.shape[0] != n:
            self._alloc(n)
        lim = frame.limits
        valid = np.isfinite(t) & np.isfinite(p)
        # A hole in the data leaves the power filter behind the die: restart it at the current power and hold
        # off for three time constants while the filter and the die agree again.
        elapsed = frame.ts - self._last_ts
        gap = valid & (elapsed > 5.0 * frame.dt_s) & np.isfinite(self._last_ts)
        assert self._p_filt is not None
        if gap.any():
            self._p_filt[gap] = p[gap]
            self._p_slow[gap] = p[gap]
            self._holdoff_until[gap] = frame.ts + 3.0 * lim.thermal_tau_s[gap]
        self._last_ts = np.where(valid, frame.ts, self._last_ts)
        # Exact first-order lag over the elapsed time, the same as the thermal RC.
        step_s = np.where(np.isfinite(elapsed) & ~gap, np.clip(elapsed, 0.0, 5.0 * frame.dt_s), frame.dt_s)
        a_rc = -np.expm1(-step_s / lim.thermal_tau_s)
        self._p_filt = pf = ewma_toward(self._p_filt, p, valid, a_rc)
        self._p_slow = ewma_toward(self._p_slow, p, valid, 1.0 - 2.0 ** (-frame.dt_s / self.steady_half_life_s))
        r0 = lim.thermal_resistance_c_per_w
        k = self.prior_w2
        r_hat = (self._c_tp + k * r0) / (self._c_pp + k)
        # The slope stays this uncertain however much history there is: time constants differ too, and an
        # air-cooled row can have ~2x the catalog R. So right after a big power change only a rise beyond that
        # uncertainty counts; at constant power (dp ~ 0) any rise does.
        r_sd = self.prior_sd * r0
        dp = np.where(np.isfinite(self._m_p), pf - self._m_p, 0.0)
        expected = np.where(np.isfinite(self._m_t), self._m_t + r_hat * dp, t)
        rise = np.where(valid, t - expected, 0.0)
        margin = 2.0 * r_sd * np.abs(dp)
        scale_w = np.maximum(self._p_slow, 0.1 * lim.tdp_w)
        # "Constant power" on the thermal time scale: training power swings every iteration (compute vs
        # communication) far faster than the die's RC, so the instantaneous power is not compared.
        steady = np.abs(pf - self._p_slow) <= self.power_tolerance * scale_w
        self._age = np.where(valid, self._age + frame.dt_s, self._age)
        warm = self._age >= self.warmup_s
        holding = frame.ts < self._holdoff_until
        warm &= ~holding
        cond = warm & steady & (rise >= self.rise_c + margin)
        # Once firing, the fault holds while the rise stays above half the threshold, steady power or not (a
        # throttling GPU's power no longer is), so one fault stays one incident.
        hold = self._active & valid & (rise >= 0.5 * self.rise_c)
        # The model learns only while nothing is wrong, so a lasting fault stays visible.
        calm = valid & ~holding & (~warm | (rise < 0.5 * self.rise_c + margin))
        a = np.where(warm, 1.0 - 2.0 ** (-frame.dt_s / self.learn_half_life_s), 0.1)
        first = calm & np.isnan(self._m_t)
        upd = calm & ~first
        d_t = np.where(upd, t - self._m_t, 0.0)
        d_p = np.where(upd, pf - self._m_p, 0.0)
        self._m_t = np.where(first, t, np.where(upd, self._m_t + a * d_t, self._m_t))
        self._m_p = np.where(first, pf, np.where(upd, self._m_p + a * d_p, self._m_p))
        self._c_tp = np.where(upd, (1.0 - a) * (self._c_tp + a * d_t * d_p), self._c_tp)
        self._c_pp = np.where(upd, (1.0 - a) * (self._c_pp + a * d_p * d_p), self._c_pp)
        fired = self._persist(cond, valid, steps(self.persistence_s, frame.dt_s)) | hold
        self._active = np.where(valid, fired, self._active)
        return fired, rise


class ClockReference:
    """Slow reference of a per-GPU signal that learns only while its rule is calm."""

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self.value: F64 | None = None

    def get(self, n: int) -> F64:
        """The reference for ``n`` GPUs; all NaN (unlearned) on first use or after the number of GPUs changed."""
        if self.value is None or self.value.shape[0] != n:
            self.value = np.full(n, np.nan)
        return self.value

    def learn(self, x: F64, mask: BoolArr, dt_s: float) -> None:
        """Move the reference toward ``x`` where ``mask`` holds and ``x`` is finite (half-life ``half_life_s``)."""
        ref = self.get(x.shape[0])
        self.value = ewma_toward(ref, x, mask & np.isfinite(x), 1.0 - 2.0 ** (-dt_s / self.half_life_s))


class CoolantRule(Rule):
    """The CDU's supply temperature climbing above its setpoint (see module docstring)."""

    name = "coolant"
    event_class = EventClass.COOLING_DEGRADATION

    def __init__(
        self, rate_c_per_s: float = 0.02, above_c: float = 0.5, smooth_s: float = 10.0, holdoff_s: float = 180.0,
        persistence_s: float = 5.0,
    ) -> None:  # fmt: skip
        super().__init__()
        self.rate_c_per_s = rate_c_per_s
        self.above_c = above_c
        self.smooth_s = smooth_s
        self.holdoff_s = holdoff_s
        self.persistence_s = persistence_s
        self._prev: F64 | None = None

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a supply climbing above its setpoint outside a hold-off; the score is supply − setpoint, °C."""
        n = frame.n_gpus
        supply, setpoint = frame.gpu.get(CDU_SUPPLY), frame.gpu.get(CDU_SETPOINT)
        if supply is None or setpoint is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        if self._prev is None or self._prev.shape[0] != n:
            self._prev, self._prev_sp = np.full(n, np.nan), np.full(n, np.nan)
            self._rate, self._holdoff_until = np.zeros(n), np.full(n, -np.inf)
        valid = np.isfinite(supply) & np.isfinite(setpoint)
        with np.errstate(invalid="ignore"):
            moved = valid & np.isfinite(self._prev_sp) & (np.abs(setpoint - self._prev_sp) > 1e-3)
            rate = np.where(valid & np.isfinite(self._prev), (supply - self._prev) / frame.dt_s, 0.0)
        # No settled supply to judge against yet: the first reading starts the same hold-off as a setpoint move.
        moved |= valid & np.isnan(self._prev_sp)
        self._holdoff_until = np.where(moved, frame.ts + self.holdoff_s, self._holdoff_until)
        self._rate = ewma_toward(self._rate, rate, valid, min(1.0, frame.dt_s / self.smooth_s))
        self._prev = np.where(valid, supply, self._prev)
        self._prev_sp = np.where(valid, setpoint, self._prev_sp)
        with np.errstate(invalid="ignore"):
            cond = (
                (self._rate >= self.rate_c_per_s)
                & (supply >= setpoint + self.above_c)
                & (frame.ts >= self._holdoff_until)
            )
        fired = self._persist(cond, valid, steps(self.persistence_s, frame.dt_s))
        return fired, np.where(valid, np.nan_to_num(supply - setpoint), 0.0)


class ThermalThrottleRule(Rule):
    """Thermal clock-event bits, or near slowdown with the clock down."""

    name = "thermal_throttle"
    event_class = EventClass.THERMAL_THROTTLE

    def __init__(self, margin_c: float = 2.0, clock_drop: float = 0.05, persistence_s: float = 3.0) -> None:
        super().__init__()
        self.margin_c = margin_c
        self.clock_drop = clock_drop
        self.persistence_s = persistence_s
        self._clock_ref = ClockReference(300.0)

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on lasting thermal throttling; the score is the temperature above slowdown − ``margin_c``, °C."""
        n = frame.n_gpus
        bits, bits_ok = _bits(frame)
        thermal_bit = (bits & (CLOCK_EVENT_SW_THERMAL | CLOCK_EVENT_HW_THERMAL)) != 0
        t = frame.gpu.get(TEMP, np.full(n, np.nan))
        clock = frame.gpu.get(SM_CLOCK, np.full(n, np.nan))
        ref = self._clock_ref.get(n)
        with np.errstate(invalid="ignore"):
            hot = t >= frame.limits.slowdown_temp_c - self.margin_c
            slowed = clock < ref * (1.0 - self.clock_drop)
        cond = thermal_bit | (hot & slowed)
        valid = bits_ok | (np.isfinite(t) & np.isfinite(clock))
        self._clock_ref.learn(clock, ~cond & ~hot, frame.dt_s)
        score = np.where(np.isfinite(t), t - (frame.limits.slowdown_temp_c - self.margin_c), 0.0)
        return self._persist(cond, valid, steps(self.persistence_s, frame.dt_s)), score


class PowerThrottleRule(Rule):
    """Clock falling with power at its limit, not explained by a heavier workload phase, or under a lowered limit.

    Two ways in. Without a limit change, the clock must fall ``clock_drop`` below its usual clock at the limit with
    no rise of tensor activity above its reference (a heavier phase at the same limit is no throttle; with no
    activity reading at all this way is closed). When the enforced limit falls ``cap_tolerance`` below the GPU's
    usual limit (an operator's ``nvidia-smi -pl``, a rack or site cap), a clock drop at that limit is a throttle
    whatever the phase: the activity test would otherwise excuse it on a training GPU, whose activity alternates
    between compute at the limit and communication far below it, so every compute sample reads "heavier" than the
    blended reference (an operator cap on a training node went unseen in the twin). GPUs the caller marks as
    capped by the loop itself (``frame.expected_slow``) take only the first way in: the loop knows why it capped
    them.
    """

    name = "power_throttle"
    event_class = EventClass.POWER_THROTTLE

    def __init__(
        self, at_limit: float = 0.97, clock_drop: float = 0.10, activity_rise: float = 0.1, persistence_s: float = 5.0,
        cap_tolerance: float = 0.02, limit_half_life_s: float = 3600.0,
    ) -> None:  # fmt: skip
        super().__init__()
        self.at_limit = at_limit
        self.clock_drop = clock_drop
        self.activity_rise = activity_rise
        self.persistence_s = persistence_s
        self.cap_tolerance = cap_tolerance
        self._clock_ref = ClockReference(300.0)
        self._act_ref = ClockReference(300.0)
        self._limit_ref = ClockReference(limit_half_life_s)

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a lasting clock drop at the power limit; the score is the relative drop below the clock reference."""
        n = frame.n_gpus
        nan = np.full(n, np.nan)
        p, lim_w = frame.gpu.get(POWER, nan), frame.gpu.get(POWER_LIMIT, frame.limits.tdp_w)
        clock, act = frame.gpu.get(SM_CLOCK, nan), frame.gpu.get(TENSOR, nan)
        c_ref, a_ref, l_ref = self._clock_ref.get(n), self._act_ref.get(n), self._limit_ref.get(n)
        with np.errstate(invalid="ignore"):
            at_limit = p >= self.at_limit * lim_w
            drop = 1.0 - clock / c_ref
            # Without an activity reading (NVML has none; DCGM profiling may be off) a heavier phase cannot be
            # ruled out: a real H200 ran its FP8 GEMMs at the limit ~10 % below its BF16 clock. Then only a
            # lowered limit makes a throttle.
            heavier = ~(act <= a_ref + self.activity_rise)
            capped = lim_w < (1.0 - self.cap_tolerance) * l_ref
        if frame.expected_slow is not None:
            capped &= ~frame.expected_slow
        cond = at_limit & (drop >= self.clock_drop) & (~heavier | capped)
        valid = np.isfinite(p) & np.isfinite(clock)
        calm = ~cond
        # The reference is the clock this GPU usually holds *at its limit*: learning it from idle samples (345 MHz
        # on an H100) or memory-bound phases below the limit (boost clock) made a cap on a real GPU read as a clock
        # rise for the first minutes of a job (H100 device check, tests/fixtures/h100_nvml).
        self._clock_ref.learn(clock, calm & at_limit, frame.dt_s)
        self._act_ref.learn(np.where(np.isfinite(act), act, np.nan), calm, frame.dt_s)
        self._limit_ref.learn(np.asarray(lim_w, dtype=np.float64), calm, frame.dt_s)
        fired = self._persist(cond, valid, steps(self.persistence_s, frame.dt_s))
        return fired, np.where(np.isfinite(drop), drop, 0.0)


class PowerDeliveryRule(Rule):
    """HW power brake, or HW slowdown with no thermal cause."""

    name = "power_delivery"
    event_class = EventClass.POWER_DELIVERY_FAULT

    def __init__(self, margin_c: float = 5.0, persistence_s: float = 2.0) -> None:
        super().__init__()
        self.margin_c = margin_c
        self.persistence_s = persistence_s

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a lasting brake, unexplained HW slowdown or lost PSU redundancy; the score is 1 while one holds."""
        n = frame.n_gpus
        bits, ok = _bits(frame)
        t = frame.gpu.get(TEMP, np.full(n, np.nan))
        thermal = ((bits & (CLOCK_EVENT_SW_THERMAL | CLOCK_EVENT_HW_THERMAL)) != 0) | (
            np.nan_to_num(t, nan=0.0) >= frame.limits.slowdown_temp_c - self.margin_c
        )
        brake = (bits & CLOCK_EVENT_HW_POWER_BRAKE) != 0
        hw_slow = ((bits & CLOCK_EVENT_HW_SLOWDOWN) != 0) & ~thermal
        psu = frame.gpu.get(PSU_STATE)
        psu_lost = np.zeros(n, dtype=bool) if psu is None else np.nan_to_num(psu, nan=0.0) >= 1.0
        cond = brake | hw_slow | psu_lost
        valid = ok | psu_lost
        return self._persist(cond, valid, steps(self.persistence_s, frame.dt_s)), cond.astype(np.float64)


class XidRule(Rule):
    """Fatal XID codes at once; other codes when ``burst_count`` arrive within ``burst_window_s``."""

    name = "xid"
    event_class = EventClass.GPU_HARDWARE_ERROR

    def __init__(self, burst_count: int = 3, burst_window_s: float = 60.0) -> None:
        super().__init__()
        self.burst_count = burst_count
        self.burst_window_s = burst_window_s
        self._prev: F64 | None = None

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a new fatal XID or a burst of XIDs; the score is the XID code where it fired, else 0."""
        n = frame.n_gpus
        x = frame.gpu.get(XID)
        if x is None:
            return np.zeros(n, dtype=bool), np.zeros(n)
        if self._prev is None or self._prev.shape[0] != n:
            self._prev = np.zeros(n)
            self._times = np.full((n, self.burst_count), -np.inf)
            self._pos = np.zeros(n, dtype=np.int64)
        ok = np.isfinite(x)
        code = np.where(ok, x, 0.0)
        event = ok & (code > 0) & (code != self._prev)
        np.copyto(self._prev, code, where=ok)
        fatal = event & np.isin(code.astype(np.int64), np.fromiter(FATAL_XIDS, dtype=np.int64))
        idx = np.flatnonzero(event)
        self._times[idx, self._pos[idx]] = frame.ts
        self._pos[idx] = (self._pos[idx] + 1) % self.burst_count
        burst = event & (frame.ts - self._times.min(axis=1) <= self.burst_window_s)
        fired = fatal | burst
        return fired, np.where(fired, code, 0.0)


def hardware_rules() -> list[Rule]:
    """Fresh instances of the per-GPU hardware rules with default thresholds."""
    return [CoolingRule(), CoolantRule(), ThermalThrottleRule(), PowerThrottleRule(), PowerDeliveryRule(), XidRule()]
