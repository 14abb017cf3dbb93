"""Facility rules, the job-slowdown (straggler) rule, restarts, mixed-kind limits and the learned thermal R."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.lab.detector_data import Fault, SyntheticCluster, fleet_entities
from twinloop.ops.detect.facility_rules import (
    SITE_FACILITY_POWER,
    SITE_IT_POWER,
    SITE_POWER_BUDGET,
    FacilityRules,
)
from twinloop.ops.detect.job_rules import JobSlowdownRule, SdcRule
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import JOB_LOSS, JOB_PROGRESS, JOB_STEP_TIME, SM_CLOCK, GpuLimits, RuleFrame
from twinloop.ops.events import FAULT_CLASSES, EventClass, Impact, Severity, severity


def run_facility(it_w: np.ndarray, fac_w: np.ndarray, budget_w: np.ndarray) -> list[set[EventClass]]:
    rules = FacilityRules()
    return [
        set(rules.update(float(t), 1.0, {SITE_IT_POWER: it_w[t], SITE_FACILITY_POWER: fac_w[t],
                                         SITE_POWER_BUDGET: budget_w[t]}))
        for t in range(it_w.size)
    ]  # fmt: skip


def test_pue_rise_at_steady_load_is_cooling_degradation_but_not_after_a_load_drop() -> None:
    t = 900
    it = np.full(t, 500e3)
    fac = 1.2 * it
    fac[600:] = 1.45 * it[600:]  # a heat wave: the plant spends much more on cooling
    fired = run_facility(it, fac, np.full(t, 2e6))
    first = next(i for i, f in enumerate(fired) if EventClass.COOLING_DEGRADATION in f)
    assert 600 < first <= 600 + 120
    assert not any(fired[:600])
    # The same PUE rise because the IT load halved is no cooling fault (cooling has fixed parts).
    it2 = np.full(t, 500e3)
    it2[600:] = 250e3
    fac2 = 1.2 * 500e3 + 0.0 * it2 + (it2 - 0.0)  # fixed 100 kW overhead: PUE 1.2 -> 1.4
    assert not any(EventClass.COOLING_DEGRADATION in f for f in run_facility(it2, fac2, np.full(t, 2e6)))


def test_budget_cut_and_power_near_budget_are_facility_excursions() -> None:
    t = 400
    it, fac = np.full(t, 300e3), np.full(t, 400e3)
    budget = np.full(t, 700e3)
    budget[200:] = 450e3
    fired = run_facility(it, fac, budget)
    assert not any(fired[:200])
    assert EventClass.FACILITY_POWER_EXCURSION in fired[215]
    near = run_facility(it, np.where(np.arange(t) >= 100, 690e3, 400e3), np.full(t, 700e3))
    assert EventClass.FACILITY_POWER_EXCURSION in near[120] and not near[50]


def _job_frame(t: int, step_time: float, clock: float, progress: float | None = None) -> RuleFrame:
    job = {JOB_STEP_TIME: np.array([step_time])}
    if progress is not None:
        job[JOB_PROGRESS] = np.array([progress])
    return RuleFrame(float(t), 1.0, {SM_CLOCK: np.full(4, clock)}, GpuLimits.default(4),
                     np.zeros(4, dtype=np.int64), job, 1, hw_recent=np.zeros(4, dtype=bool))  # fmt: skip


def test_job_slowdown_without_a_clock_drop_is_a_straggler() -> None:
    def run(clock_after: float) -> bool:
        rule = JobSlowdownRule()
        fired = False
        for t in range(120):
            slow = t >= 80
            st = (4.0 if not slow else 5.0) + 0.01 * (t % 3)  # a new value each second
            f, _ = rule.update(_job_frame(t, st, clock_after if slow else 1980.0))
            fired |= bool(f[0])
            assert not (f[0] and t < 80)
        return fired

    assert run(clock_after=1980.0)
    assert not run(clock_after=1700.0)  # the GPUs clocked down: throttling explains the slowdown


def test_sdc_rule_relearns_after_a_restart_from_checkpoint() -> None:
    rule = SdcRule()
    fired = []
    for t in range(80):
        progress = float(t if t < 50 else t - 30)  # restart at 50: replays 30 steps
        loss = 5.0 - 0.02 * progress
        frame = RuleFrame(float(t), 1.0, {}, GpuLimits.default(2), np.zeros(2, dtype=np.int64),
                          {JOB_LOSS: np.array([loss]), JOB_PROGRESS: np.array([progress])}, 1,
                          hw_recent=np.zeros(2, dtype=bool))  # fmt: skip
        f, _ = rule.update(frame)
        fired.append(bool(f[0]))
    assert not any(fired)


def test_limits_from_kinds_follow_each_gpu() -> None:
    h100, a100 = get_gpu("h100-sxm"), get_gpu("a100-sxm-80gb")
    lim = GpuLimits.from_kinds([h100, a100], np.array([0, 1, 1]), resistance_factor=np.array([1.0, 1.0, 1.8]))
    assert lim.tdp_w.tolist() == [h100.tdp_w, a100.tdp_w, a100.tdp_w]
    assert lim.thermal_resistance_c_per_w[2] == 1.8 * a100.thermal_resistance_c_per_w
    assert lim.thermal_tau_s[2] == 1.8 * a100.thermal_resistance_c_per_w * a100.thermal_capacitance_j_per_c


def test_idle_gpus_far_from_limits_are_info() -> None:
    idle = Impact(gpu_hours_at_risk=0.0, temp_margin_c=40.0, power_margin_w=600.0, n_gpus=64)
    assert severity(EventClass.COOLING_DEGRADATION, idle) == Severity.INFO
    busy = Impact(gpu_hours_at_risk=64.0, temp_margin_c=40.0, power_margin_w=600.0, n_gpus=64)
    assert severity(EventClass.COOLING_DEGRADATION, busy) == Severity.MAJOR


def test_wrong_thermal_resistance_with_a_workload_change_is_no_cooling_fault() -> None:
    """A rack whose real R is 1.4x the catalog (air-cooled) changes workload: no cooling incident; a TIM fault
    on another GPU at constant power is still found."""
    entities = fleet_entities(1, 2)
    faults = (Fault("phase", tuple(range(64, 128)), 300.0, None, 0.85), Fault("tim", (5,), 300.0, None, 1.5))
    sim = SyntheticCluster(entities, faults, seed=3, tensor_active=0.2)  # light load, then a heavy phase
    sim.r[64:] *= 1.4
    sim.temp[64:] = sim.coolant_c[64:] + sim.r[64:] * 330.0
    pipe = DetectionPipeline(entities, config=PipelineConfig(emit_info=False))
    roots = set()
    for t in range(450):
        s = sim.sample(float(t))
        for u in pipe.step(s.ts, s.fields, s.job_index, s.job_ids, s.job_fields):
            if u.event_class in FAULT_CLASSES:
                roots.add((u.event_class, u.root))
    assert roots == {(EventClass.COOLING_DEGRADATION, entities[5])}


def _power_bound_step_s(t: int) -> float:
    """A power-bound job's reported step time (the twin's: the step at its clock this second), as round 5's
    ``thermal-move`` had ``train-h100`` after its requeue: its steady pace, 18.67 s, the same value second after
    second (a hair different from one step to the next), and once per ~18 s step two samples near full clock
    between its compute phases (13.45 s, then 16.5 s): counted by *new* values, two of every three are dips. A
    checkpoint write at 600-620 s (no step reported), after which the pace creeps back from 18.50 s second by
    second as the dies warm again.
    """
    if 600 <= t < 620:
        return 0.0
    if 620 <= t < 640:
        return 18.50 + 0.0085 * (t - 620)
    k = t % 18
    return 13.45 if k == 0 else 16.5 if k == 1 else 18.67 + 0.002 * ((t // 18) % 3)


def test_brief_fast_steps_do_not_drag_the_job_slowdown_baseline_below_the_jobs_pace() -> None:
    """A job at a steady pace whose reported step dips briefly once a step is no job slowdown, however long it runs:
    the dips are no more the job's usual step than a brief slow one would be. Loop on, the baseline sank to the
    dips (only steps below it counted as calm) and the job's own pace read as a 24 % rise, held back only by its
    clock sitting 3 % under a reference the same dips raised: a zero-length straggler false alarm on train-h100."""
    rule = JobSlowdownRule()
    fired = [bool(rule.update(_job_frame(t, _power_bound_step_s(t), 1980.0))[0][0]) for t in range(900)]
    assert not any(fired)


def test_a_slowdown_after_brief_fast_steps_and_after_a_lasting_speedup_is_still_found() -> None:
    """The same job slowing by 20 % (a new step time each second from 700 s) is found; so is a job that first ran
    lastingly faster (a lifted cap: its new pace becomes the baseline) and then slowed back to its old pace."""

    def first_fire(step_s: Callable[[int], float]) -> int | None:
        rule = JobSlowdownRule()
        for t in range(900):
            if rule.update(_job_frame(t, step_s(t), 1980.0))[0][0]:
                return t
        return None

    slowed = first_fire(lambda t: 1.2 * 18.67 + 0.002 * (t % 4) if t >= 700 else _power_bound_step_s(t))
    assert slowed is not None and 700 <= slowed <= 705
    faster_then_back = first_fire(lambda t: (14.0 if 200 <= t < 600 else 18.67) + 0.002 * (t % 4))
    assert faster_then_back is not None and 600 <= faster_then_back <= 610
