"""Cross-signal rules: each fires on its own scenario and on no other one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.power import CLOCK_EVENT_HW_SLOWDOWN, CLOCK_EVENT_SW_THERMAL
from twinloop.lab.detector_data import Fault, SyntheticCluster, fleet_entities
from twinloop.ops.detect.job_rules import HangRule, SdcRule, group_median
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import (
    CLOCK_REASONS,
    JOB_LOSS,
    JOB_PROGRESS,
    POWER,
    POWER_LIMIT,
    SM_CLOCK,
    TEMP,
    TENSOR,
    XID,
    GpuLimits,
    PowerDeliveryRule,
    PowerThrottleRule,
    RuleFrame,
    ThermalThrottleRule,
    XidRule,
)
from twinloop.ops.events import FAULT_CLASSES, EventClass, Incident

ENTITIES = fleet_entities(1, 2)  # 128 GPUs: 2 racks x 8 nodes x 8 GPUs, 4 jobs of 32
ONSET_S = 200.0

SCENARIOS: dict[str, tuple[Fault | None, set[EventClass]]] = {
    "none": (None, set()),
    "coolant": (Fault("coolant", tuple(range(64, 128)), ONSET_S, None, 15.0), {EventClass.COOLING_DEGRADATION}),
    "tim": (Fault("tim", (5,), ONSET_S, None, 1.5), {EventClass.COOLING_DEGRADATION}),
    "thermal": (Fault("thermal", (7,), ONSET_S, None, 50.0), {EventClass.COOLING_DEGRADATION}),
    "power_cap": (Fault("power_cap", tuple(range(32)), ONSET_S, None, 400.0), {EventClass.POWER_THROTTLE}),
    "power_brake": (Fault("power_brake", (3, 4), ONSET_S, None), {EventClass.POWER_DELIVERY_FAULT}),
    "xid": (Fault("xid", (9,), ONSET_S, None, 79.0), {EventClass.GPU_HARDWARE_ERROR}),
    "straggler": (Fault("straggler", (10,), ONSET_S, None, 0.8), {EventClass.STRAGGLER}),
    "sdc": (Fault("sdc", (40,), ONSET_S, None, 0.5), {EventClass.SUSPECTED_SDC}),
    "hang": (Fault("hang", (70,), ONSET_S, None), {EventClass.JOB_HANG}),
    "phase": (Fault("phase", tuple(range(96, 128)), ONSET_S, None, 0.85), set()),
}


def run_scenario(fault: Fault | None, seconds: int = 330, seed: int = 1) -> list[Incident]:
    sim = SyntheticCluster(ENTITIES, (fault,) if fault else (), seed=seed)
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=False))
    updates: list[Incident] = []
    for t in range(seconds):
        s = sim.sample(float(t))
        updates += pipe.step(s.ts, s.fields, s.job_index, s.job_ids, s.job_fields)
    return updates


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_rule_fires_on_its_scenario_only(scenario: str) -> None:
    fault, expected = SCENARIOS[scenario]
    updates = run_scenario(fault)
    classes = {u.event_class for u in updates}
    assert classes == expected
    assert all(u.event_class in FAULT_CLASSES for u in updates)
    # One fault, one incident, opened after the onset and within 30 s (hang: its 60 s stall limit + 30 s).
    assert len({u.incident_id for u in updates if u.status != "merged"}) == len(expected)
    for u in updates:
        assert u.start_ts >= ONSET_S
        limit = 90.0 if u.event_class == EventClass.JOB_HANG else 30.0
        assert u.evidence[0].ts - ONSET_S <= limit


def test_rack_wide_coolant_fault_is_one_rack_incident_with_margin_based_severity() -> None:
    updates = run_scenario(SCENARIOS["coolant"][0])
    last = updates[-1]
    assert last.root == "dc/r00/k01"
    assert len(last.members) == 64
    assert last.impact.n_gpus == 64
    assert last.impact.gpu_hours_at_risk == pytest.approx(64.0)  # two whole jobs, 1 h horizon
    assert last.severity >= 2


def _frame(n: int, gpu: dict[str, np.ndarray], ts: float = 0.0, **kw: object) -> RuleFrame:
    return RuleFrame(ts, 1.0, gpu, GpuLimits.default(n), np.full(n, -1, dtype=np.int64), **kw)  # type: ignore[arg-type]


def test_thermal_bit_fires_after_persistence_and_nan_does_not_break_it() -> None:
    rule = ThermalThrottleRule(persistence_s=3.0)
    bits = np.array([CLOCK_EVENT_SW_THERMAL, 0.0])
    fired = []
    for t, b in enumerate([bits, bits, np.array([np.nan, 0.0]), bits]):
        f, _ = rule.update(_frame(2, {CLOCK_REASONS: b, TEMP: np.array([80.0, 60.0])}, float(t)))
        fired.append(f.copy())
    assert [f[0] for f in fired] == [False, False, False, True]
    assert not any(f[1] for f in fired)


def test_hw_slowdown_is_power_delivery_only_without_a_thermal_cause() -> None:
    rule = PowerDeliveryRule(persistence_s=1.0)
    bits = np.full(2, float(CLOCK_EVENT_HW_SLOWDOWN))
    fired, _ = rule.update(_frame(2, {CLOCK_REASONS: bits, TEMP: np.array([60.0, 88.0])}))
    assert fired.tolist() == [True, False]


def test_xid_fatal_at_once_and_burst_of_non_fatal() -> None:
    rule = XidRule(burst_count=3, burst_window_s=60.0)
    fired_any = np.zeros(3, dtype=bool)
    codes = [[0, 0, 0], [79, 13, 13], [79, 31, 0], [79, 13, 0], [79, 79, 0]]
    history = []
    for t, c in enumerate(codes):
        f, _ = rule.update(_frame(3, {XID: np.array(c, dtype=float)}, 10.0 * t))
        history.append(f.tolist())
        fired_any |= f
    assert history[1] == [True, False, False]  # fatal 79 at once; a first 13 is not a burst
    assert history[2][0] is False  # the same last-XID value again is not a new event
    assert history[3][1] is True  # 13, 31, 13 within 60 s: a burst
    assert not fired_any[2]  # one non-fatal XID


def test_sdc_is_vetoed_by_a_recent_hardware_change() -> None:
    def run(hw: bool) -> bool:
        rule = SdcRule()
        job_slot = np.array([0, 0, 1, 1])
        fired_at_spike = False
        for step in range(60):
            loss = np.array([5.0 - 0.01 * step, 5.0 - 0.01 * step])
            if step == 50:
                loss = loss + np.array([0.0, 1.0])  # job 1 spikes
            frame = RuleFrame(
                float(step),
                1.0,
                {},
                GpuLimits.default(4),
                job_slot,
                {JOB_LOSS: loss},
                2,
                hw_fault_onset_s=np.array([-np.inf, -np.inf, 40.0 if hw else -np.inf, -np.inf]),
            )
            fired, _ = rule.update(frame)
            assert not fired[0]
            fired_at_spike |= bool(fired[1])
        return fired_at_spike

    assert run(hw=False)
    assert not run(hw=True)


def test_hang_needs_prior_progress_and_idle_gpus() -> None:
    def run(tensor: float, progress_until: int) -> bool:
        rule = HangRule(n_steps=5.0, min_stall_s=30.0)
        fired_any = False
        for t in range(200):
            p = float(min(t, progress_until) // 2)
            frame = RuleFrame(
                float(t),
                1.0,
                {TENSOR: np.full(2, tensor)},
                GpuLimits.default(2),
                np.zeros(2, dtype=np.int64),
                {JOB_PROGRESS: np.array([p])},
                1,
            )
            fired, _ = rule.update(frame)
            fired_any |= bool(fired[0])
        return fired_any

    assert run(tensor=0.01, progress_until=100)  # progress stopped, GPUs idle: hang
    assert not run(tensor=0.6, progress_until=100)  # busy GPUs: a long step (e.g. eval), not a hang
    assert not run(tensor=0.01, progress_until=0)  # never progressed: still initializing


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60),
    n_groups=st.integers(1, 6),
    seed=st.integers(0, 10_000),
)
def test_group_median_matches_numpy(values: list[float], n_groups: int, seed: int) -> None:
    v = np.array(values)
    g = np.random.default_rng(seed).integers(-1, n_groups, v.size)
    med, count = group_median(v, g, n_groups)
    for k in range(n_groups):
        sel = v[g == k]
        assert count[k] == sel.size
        if sel.size:
            assert med[k] == pytest.approx(float(np.median(sel)), rel=1e-12, abs=1e-9)
        else:
            assert np.isnan(med[k])


def _training_gpu(t: int, limit_w: float) -> dict[str, np.ndarray]:
    """One power-bound training GPU: 4 s of compute at its limit (clock set by the limit), 1 s of communication
    far below it at full clock and low tensor activity, as the twin and real training steps alternate; under a cap
    the compute part of the step stretches (8 s)."""
    period = 5 if limit_w > 500 else 9
    comm = t % period == period - 1
    power = 480.0 if comm and limit_w > 500 else limit_w
    clock = 1980.0 if comm else 1410.0 * (limit_w / 700.0) ** 1.5
    tensor = 0.2 if comm else 0.85
    return {POWER: np.array([power]), POWER_LIMIT: np.array([limit_w]), SM_CLOCK: np.array([clock]),
            TENSOR: np.array([tensor])}  # fmt: skip


def _throttle_fired(cap_at_s: int, cap_w: float, seconds: int = 3100) -> list[int]:
    rule = PowerThrottleRule()
    fired_at = []
    for t in range(seconds):
        gpu = _training_gpu(t, cap_w if t >= cap_at_s else 700.0)
        fired, _ = rule.update(_frame(1, gpu, float(t)))
        if fired[0]:
            fired_at.append(t)
    return fired_at


def test_operator_cap_on_a_training_gpu_is_a_power_throttle() -> None:
    """A training GPU's activity alternates, so every compute sample looks heavier than the blended reference;
    a lowered limit is a throttle whatever the phase (before the fix the rule stayed quiet for the first 7 s and
    then flapped, and in the twin an operator cap on a training node was never reported)."""
    fired = _throttle_fired(cap_at_s=3000, cap_w=343.0)  # after the references have settled (half-life 300 s)
    assert fired and 3000 <= fired[0] <= 3010
    assert _throttle_fired(cap_at_s=10**6, cap_w=343.0) == []  # the same GPU, never capped: quiet


def test_a_cap_soon_after_an_idle_gpu_starts_its_job_is_a_power_throttle() -> None:
    """The clock reference is the GPU's usual clock *at its limit*: learned from idle (345 MHz on an H100) it sat
    far below any capped clock for the first minutes of a job, and a real H100's 400 W cap went unseen."""
    rule = PowerThrottleRule()
    fired_at = []
    for t in range(240):
        if t < 120:
            gpu = {POWER: np.array([70.0]), POWER_LIMIT: np.array([700.0]), SM_CLOCK: np.array([345.0]),
                   TENSOR: np.array([0.0])}  # fmt: skip
        else:
            gpu = _training_gpu(t, 400.0 if t >= 180 else 700.0)
        fired, _ = rule.update(_frame(1, gpu, float(t)))
        if fired[0]:
            fired_at.append(t)
    assert fired_at and 180 <= fired_at[0] <= 190


def test_a_lower_clock_at_the_same_limit_without_an_activity_reading_is_no_throttle() -> None:
    """NVML has no tensor activity: a heavier kernel mix (a real H200's FP8 GEMMs ran ~10 % below its BF16 clock
    at 700 W) cannot be told from a throttle, so only a lowered limit counts."""
    rule = PowerThrottleRule()
    for t in range(900):
        clock = 1450.0 if t < 600 else 1250.0
        gpu = {POWER: np.array([700.0]), POWER_LIMIT: np.array([700.0]), SM_CLOCK: np.array([clock])}
        fired, _ = rule.update(_frame(1, gpu, float(t)))
        assert not fired[0], t


def test_heavier_phase_at_the_same_limit_is_no_throttle() -> None:
    rule = PowerThrottleRule()
    for t in range(3100):
        gpu = _training_gpu(t, 700.0)
        if t >= 3000:  # a heavier kernel mix: more tensor activity, so a lower clock at the same 700 W
            gpu[TENSOR], gpu[SM_CLOCK] = np.array([0.99]), np.array([1200.0])
        fired, _ = rule.update(_frame(1, gpu, float(t)))
        assert not fired[0], t
