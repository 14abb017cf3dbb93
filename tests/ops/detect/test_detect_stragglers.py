"""Stragglers located and explained (issue 14): named down to the GPU from per-rank step times or clocks against
the job's same-model peers at the same time; a different GPU model or a cap/lock the loop applied is no straggler.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import POWER_LIMIT, RANK_STEP_TIME, SM_CLOCK, GpuLimits
from twinloop.ops.events import EventClass, Incident

# Two nodes of 8 GPUs, one training job over all 16.
ENTITIES = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in (1, 2) for g in range(8))
N = len(ENTITIES)
Fields = dict[str, np.ndarray]


def run(
    fields_at: Callable[[float, np.random.Generator], Fields],
    seconds: float = 600.0,
    limits: GpuLimits | None = None,
    before_step: Callable[[float, DetectionPipeline], None] | None = None,
) -> list[Incident]:
    """Straggler incidents (new or grown) of a pipeline fed ``fields_at(t, rng)`` every second."""
    rng = np.random.default_rng(3)
    pipe = DetectionPipeline(ENTITIES, limits=limits, config=PipelineConfig(emit_info=False))
    out: list[Incident] = []
    for t in np.arange(0.0, seconds, 1.0):
        if before_step is not None:
            before_step(float(t), pipe)
        updates = pipe.step(float(t), fields_at(float(t), rng), np.zeros(N, dtype=np.int64), ["train"])
        out += [u for u in updates if u.event_class == EventClass.STRAGGLER and u.status == "open"]
    return out


def healthy(t: float, rng: np.random.Generator, clock_mhz: float | np.ndarray = 1980.0) -> Fields:
    return {
        SM_CLOCK: np.round(np.broadcast_to(clock_mhz, (N,)) * (1.0 + 0.002 * rng.standard_normal(N)) / 15.0) * 15.0,
        RANK_STEP_TIME: 2.0 * (1.0 + 0.005 * rng.standard_normal(N)),
        POWER_LIMIT: np.full(N, 700.0),
    }


def test_a_straggler_present_from_the_first_step_is_named_by_its_rank_step_time() -> None:
    # GPU 11 (node 2) is 20 % slow from t = 0 and its clocks look normal (a degraded GPU or a slow host behind it):
    # no history would show a change, only its peers at the same time do. Before: no incident at all.
    def fields(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        f[RANK_STEP_TIME][11] *= 1.25
        return f

    incidents = run(fields, seconds=120.0)
    assert incidents, "the from-the-start straggler was not found"
    first = incidents[0]
    assert first.root == ENTITIES[11]
    assert first.start_ts <= 30.0
    assert {i.root for i in incidents} == {ENTITIES[11]}
    assert "rule:rank_straggler" in {d.source for d in first.evidence}


def test_a_straggler_by_clock_is_named_too() -> None:
    def fields(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        f[SM_CLOCK][4] = 1980.0 * 0.8
        return f

    assert {i.root for i in run(fields, seconds=120.0)} == {ENTITIES[4]}


def test_a_job_over_two_gpu_models_has_no_straggler() -> None:
    # Node 1 has A100s (1410 MHz, and a longer step for its rank), node 2 H100s (1980 MHz): the same job, each GPU
    # at its own model's normal speed. Before: the A100s were stragglers against the job's median (the mixed_hall
    # drains). A real straggler among the A100s is still found against the A100 peers.
    kinds = [get_gpu("a100-sxm-80gb"), get_gpu("h100-sxm")]
    model = np.repeat([0, 1], 8)
    limits = GpuLimits.from_kinds(kinds, model)
    clock = np.where(model == 0, 1410.0, 1980.0)

    def fields(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng, clock)
        f[RANK_STEP_TIME] *= np.where(model == 0, 1.6, 1.0)
        f[POWER_LIMIT] = np.where(model == 0, 400.0, 700.0)
        return f

    assert run(fields, limits=limits) == []

    def with_straggler(t: float, rng: np.random.Generator) -> Fields:
        f = fields(t, rng)
        f[RANK_STEP_TIME][2] *= 1.3
        return f

    assert {i.root for i in run(with_straggler, seconds=120.0, limits=limits)} == {ENTITIES[2]}


def test_a_gpu_the_loop_capped_is_no_straggler() -> None:
    # From t = 60 s two GPUs of node 2 run 20 % slower: (a) a power cap their enforced limit shows, (b) a clock lock
    # on node 2 the loop applied and told the pipeline of (NVML shows no limit change for a lock). Before: node 2 was
    # a straggler.
    def capped(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        if t >= 60.0:
            f[SM_CLOCK][8:10] *= 0.8
            f[RANK_STEP_TIME][8:10] *= 1.2
            f[POWER_LIMIT][8:10] = 450.0
        return f

    assert run(capped) == []

    def locked(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        if t >= 60.0:
            f[SM_CLOCK][8:10] *= 0.8
            f[RANK_STEP_TIME][8:10] *= 1.2
        return f

    def lock_node_2(t: float, pipe: DetectionPipeline) -> None:
        if t == 60.0:
            assert pipe.loop_setting("dc/r01/k01/n02", True) == 8

    assert run(locked, before_step=lock_node_2) == []
    # The same slowdown with nobody telling the pipeline is a straggler node: the test can fail.
    assert {i.root for i in run(locked)} == {"dc/r01/k01/n02"}

    def release_at_300(t: float, pipe: DetectionPipeline) -> None:
        lock_node_2(t, pipe)
        if t == 300.0:
            pipe.loop_setting("dc/r01/k01/n02", False)

    # Released, but still slow: now it is a straggler.
    late = run(locked, before_step=release_at_300)
    assert late and min(i.start_ts for i in late) >= 300.0


def test_the_loop_setting_on_a_job_covers_its_gpus() -> None:
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=False))
    rng = np.random.default_rng(0)
    pipe.step(0.0, healthy(0.0, rng), np.zeros(N, dtype=np.int64), ["train"])
    assert pipe.loop_setting("dc/jobs/train", True) == N
    assert pipe.loop_setting("dc/r01/k01/n01/g3", False) == 1
    assert pipe.loop_setting("dc/r09", True) == 0


def _job_incidents(replicas: bool) -> list[Incident]:
    """Job-rooted straggler incidents when the job's step time doubles at t = 300 s with clocks unchanged."""
    from twinloop.telemetry.fields import TWINLOOP_FI_JOB_STEP_TIME

    rng = np.random.default_rng(5)
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=False))
    if replicas:
        pipe.replica_job("serve")
    out: list[Incident] = []
    for t in np.arange(0.0, 600.0, 1.0):
        fields = healthy(float(t), rng)
        fields.pop(RANK_STEP_TIME)
        step_s = np.array([2.0 * (2.0 if t >= 300 else 1.0) * (1.0 + 0.005 * rng.standard_normal())])
        updates = pipe.step(
            float(t), fields, np.zeros(N, dtype=np.int64), ["serve"], {TWINLOOP_FI_JOB_STEP_TIME: step_s}
        )
        out += [u for u in updates if u.event_class == EventClass.STRAGGLER and u.status == "open"]
    return out


def test_a_serving_fleet_whose_iterations_slow_with_load_is_no_straggler() -> None:
    # Before: the job-level slowdown rule opened straggler incidents on the serving fleet whenever its load (and
    # so its iteration time) rose: 4 of the default hall's 5 remaining false alarms.
    assert _job_incidents(replicas=False), "a synchronous job whose steps slow down is a straggler somewhere"
    assert _job_incidents(replicas=True) == []


def test_a_lifted_operator_cap_is_no_straggler() -> None:
    # Two GPUs run under an operator cap (limit 343 W, clock 50 % down) from t = 60 to 300 s, then the cap is lifted
    # and their clock is back at once. Before: their smoothed clock still lagged their peers after the lift, when
    # they were no longer excused as capped, and they were reported stragglers (the twin's operator-cap runs).
    def fields(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        if 60.0 <= t < 300.0:
            f[SM_CLOCK][2:4] *= 0.5
            f[POWER_LIMIT][2:4] = 343.0
        return f

    assert run(fields, seconds=420.0) == []


def test_a_straggler_incident_says_how_much_it_slows_its_job() -> None:
    # The respond stage weighs a straggler's cost against a restart's, so the incident carries it. The job keeps
    # its slowest rank's pace: a rank 25 % longer per step than all others runs the job at 1/1.25 (20 % lost); by
    # clock alone (no per-rank step times), a GPU at half its peers' clock costs 50 %.
    def by_step(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        f[RANK_STEP_TIME][11] *= 1.25
        return f

    def by_clock(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        f[SM_CLOCK][4] = 1980.0 * 0.5
        del f[RANK_STEP_TIME]
        return f

    assert abs(run(by_step, seconds=120.0)[0].impact.job_slowdown - 0.2) < 0.02
    assert abs(run(by_clock, seconds=120.0)[0].impact.job_slowdown - 0.5) < 0.02


def test_a_straggler_whose_job_waits_for_a_slower_rank_anyway_costs_little() -> None:
    # Rank 11 is 25 % slower than the median, rank 3 (its clock capped by someone, say) 22 %: without rank 11 the
    # job would still wait for rank 3, so rank 11 costs 1 - 1.22/1.25 = 2.4 %, not 20 %. Before: its deficit
    # against the median. A restart away from it would buy little.
    def fields(t: float, rng: np.random.Generator) -> Fields:
        f = healthy(t, rng)
        f[RANK_STEP_TIME][11] *= 1.25
        f[RANK_STEP_TIME][3] *= 1.22
        return f

    first = next(i for i in run(fields, seconds=120.0) if i.root == ENTITIES[11])
    assert 0.01 < first.impact.job_slowdown < 0.04
