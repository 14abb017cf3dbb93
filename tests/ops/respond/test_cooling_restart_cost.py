"""Issue 14, proportionate responses: a GPU cooling fault's requeue is priced like a straggler's, by what the faulty
GPU costs its job (ops/respond/restart_cost.py), not only kept back when the requeue would run the job slower.

Round 5's `thermal-move`: an H200 job at its power limit, whose faulty GPU its own thermal control held 2.5 % under the
median clock (never the job's slowest rank), was checkpointed and requeued onto an H100 node by `gpu-cooling-fault`:
-6.6 % goodput, 0/5 seeds. The requeue pace read 1.33, so nothing kept it back.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from twinloop.ops.events import EventClass, Impact, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import JobTiming, RequeuePace, ThermalPath
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Reader, Responder
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE

from .test_decisions import CheckpointAdapter

GPU = "dc/r1/k2/n1/g3"
NODE = "dc/r1/k2/n1"
# The twin's 70B job: a 30 s write, a 140 s restart, its own next checkpoint 600 s away, 30 min left.
TIMING = JobTiming(checkpoint_write_s=30.0, restart_s=140.0, next_checkpoint_in_s=600.0, remaining_s=1800.0)
FASTER = RequeuePace(1.33, "23 h200 + 1 h100-sxm nodes")  # what thermal-move's requeue pace read
SLOWER = RequeuePace(0.38, "64 h100-sxm + 128 a100-sxm-80gb")


class CoolingAdapter(CheckpointAdapter):
    """A training job whose checkpoint completes at 40 s, with known timing, requeue pace and GPU thermal path."""

    def __init__(
        self, pace: RequeuePace | None = FASTER, path: ThermalPath | None = None, timing: JobTiming = TIMING
    ) -> None:
        super().__init__(done_at_s=40.0)
        self.pace = pace
        self.path = path
        self.timing = timing

    def job_timing(self, job: str) -> JobTiming | None:
        return self.timing

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        return self.pace

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        return self.path


def _no_readings(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
    return None


def _die(hottest_c: float) -> Reader:
    """A faulty H100 at 480 W, 87 C on average, ``hottest_c`` at its hottest (89 C: its slowdown, reached)."""

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        if entity != GPU:
            return None
        if field == DCGM_FI_DEV_GPU_TEMP:
            return hottest_c if aggregate == "max" else 87.0
        return 480.0 if field == DCGM_FI_DEV_POWER_USAGE else None

    return read


def _incident(slowdown: float | None, cls: EventClass = EventClass.COOLING_DEGRADATION) -> Incident:
    impact = Impact(gpu_hours_at_risk=192.0, n_gpus=1, job_slowdown=slowdown)
    return Incident(1, cls, GPU, (GPU,), 0.0, 0.0, Severity.MAJOR, impact)


def _run(adapter: CoolingAdapter, incident: Incident, until_s: float = 300.0, read: Reader = _no_readings) -> Responder:
    r = Responder(default_policy(), adapter, mode="auto")
    _drive(r, adapter, incident, 0, until_s, read)
    return r


def _drive(
    r: Responder, adapter: CoolingAdapter, incident: Incident, start_s: int, until_s: float, read: Reader
) -> None:
    """Step the responder every 5 s from ``start_s``; the incident's one update comes at 0 s."""
    for t in range(start_s, int(until_s) + 1, 5):
        adapter.now = float(t)
        r.handle([incident] if t == 0 else [], float(t), read)


def _applied(r: Responder) -> list[tuple[float, str]]:
    return [(a.ts, str(a.request.kind)) for a in r.log if a.status == "applied"]


@pytest.mark.parametrize("cls", [EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE])
def test_a_cooling_fault_on_a_gpu_that_does_not_slow_its_job_is_capped_and_drained_but_not_moved(
    cls: EventClass,
) -> None:
    """thermal-move: the job waits for a slower rank than the faulty GPU (slowdown 0): no restart can pay for it.
    Before: checkpoint at once, requeue once it was confirmed (the pace, 1.33, did not keep it back)."""
    r = _run(CoolingAdapter(), _incident(0.0, cls))
    assert _applied(r) == [(0.0, "drain"), (60.0, "power_cap")]  # the cap falls back to 0.7 (no thermal path)
    assert not [a for a in r.log if a.request.kind in (ActionKind.CHECKPOINT, ActionKind.REQUEUE)]
    drain = r.log[0]
    assert "gpu-cooling-fault-kept" in drain.request.reason
    assert "the faulty GPU costs the job 0.0%" in drain.request.reason
    assert "-> never" in drain.request.reason and "waits for a slower rank" in drain.request.reason


def test_a_cooling_fault_that_halves_its_gpus_pace_is_checkpointed_and_requeued_at_once() -> None:
    """50 % of the 600 s to the job's own checkpoint is 300 s of its progress, more than a 30 s write."""
    r = _run(CoolingAdapter(), _incident(0.5))
    assert _applied(r) == [(0.0, "drain"), (0.0, "checkpoint"), (40.0, "requeue"), (60.0, "power_cap")]
    requeue = next(a for a in r.log if a.request.kind == ActionKind.REQUEUE)
    assert "gpu-cooling-fault on incident 1" in requeue.request.reason
    assert "job-seconds lost: checkpoint+restart now 170s" in requeue.request.reason
    assert "-> now" in requeue.request.reason


def test_a_mild_cooling_fault_moves_the_job_at_its_own_next_checkpoint() -> None:
    """4 % of the 600 s to its own checkpoint (24 s) costs less than a 30 s write; its end is not known."""
    adapter = CoolingAdapter(timing=replace(TIMING, remaining_s=None))
    adapter.done_at_s = 600.0
    r = _run(adapter, _incident(0.04), until_s=700)
    assert _applied(r) == [(0.0, "drain"), (60.0, "power_cap"), (600.0, "requeue")]
    assert "gpu-cooling-fault-at-checkpoint" in r.log[0].request.reason
    assert "restart at its own checkpoint 164s" in r.log[0].request.reason


def test_a_mild_cooling_fault_near_its_jobs_end_keeps_the_job() -> None:
    """4 % of the 1800 s left (72 s) costs less than any restart (140 s at least)."""
    r = _run(CoolingAdapter(), _incident(0.04), until_s=700)
    assert [kind for _, kind in _applied(r)] == ["drain", "power_cap"]
    assert "gpu-cooling-fault-kept" in r.log[0].request.reason and "no restart 72s" in r.log[0].request.reason


def test_a_kept_job_whose_requeue_would_run_slower_keeps_its_node_undrained() -> None:
    """As before the pricing (mixed_hall seed 0): the job stays, and a restart for another cause must find its node."""
    r = _run(CoolingAdapter(SLOWER), _incident(0.5))
    assert [kind for _, kind in _applied(r)] == ["power_cap"]
    (drain,) = [a for a in r.log if a.request.kind == ActionKind.DRAIN]
    assert drain.status == "refused" and drain.detail.startswith("no drain: the job stays on the node")
    assert not [a for a in r.log if a.request.kind in (ActionKind.CHECKPOINT, ActionKind.REQUEUE)]


def test_an_unmeasured_cooling_fault_is_checkpointed_and_requeued_as_before() -> None:
    r = _run(CoolingAdapter(), _incident(None))
    assert _applied(r) == [(0.0, "drain"), (0.0, "checkpoint"), (40.0, "requeue"), (60.0, "power_cap")]
    assert "what the faulty GPU costs the job: not measured: checkpoint and restart now" in r.log[0].request.reason


def test_a_kept_job_is_moved_once_the_rules_own_cap_would_slow_it() -> None:
    """A die its own thermal control holds costs the job nothing and gets no cap; once it reaches its slowdown the
    rule caps it (here 471 W of 700 W: up to 33 % slower), and then moving the job pays: it is checkpointed and
    requeued, without a second cap or drain."""
    adapter = CoolingAdapter(path=ThermalPath(89.0, 35.0))
    adapter.done_at_s = None
    incident = _incident(0.0)
    r = Responder(default_policy(), adapter, mode="auto")
    _drive(r, adapter, incident, 0, 195, _die(88.0))
    assert _applied(r) == [(0.0, "drain")]  # no cap: its own thermal control holds the die
    adapter.done_at_s = 260.0
    _drive(r, adapter, incident, 200, 400, _die(89.0))
    applied = _applied(r)
    assert [kind for _, kind in applied] == ["drain", "power_cap", "checkpoint", "requeue"]
    (cap_ts, _), (checkpoint_ts, _), (requeue_ts, _) = applied[1:]
    assert 200.0 <= cap_ts < checkpoint_ts <= cap_ts + 5.0 and requeue_ts == 260.0
    requeue = next(a for a in r.log if a.request.kind == ActionKind.REQUEUE)
    assert "gpu-cooling-fault on incident 1" in requeue.request.reason
    assert "the faulty GPU's thermal-path cap costs the job at most 32.7%" in requeue.request.reason
    assert len([a for a in r.log if a.request.kind == ActionKind.DRAIN]) == 1
