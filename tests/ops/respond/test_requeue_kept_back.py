"""Issue 14: a requeue that would land a job on slower GPUs than it runs on now is not done (mixed_hall: a cooling
fault on one H100 requeued `pretrain` onto 64 H100 + 128 A100, where it ran at the A100s' pace for the rest of the
run). The cap and the drain stay; a hang or an SDC is not weighed (staying is no option there).
"""

from __future__ import annotations

import pytest

from twinloop.ops.events import EventClass, Impact, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import JobTiming, RequeuePace
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder

from .test_decisions import CheckpointAdapter

ROOT = "dc/r1/k2/n1/g3"
SLOWER = RequeuePace(0.38, "64 h100-sxm + 128 a100-sxm-80gb")


class PacedAdapter(CheckpointAdapter):
    """A job whose requeue would run at ``pace`` of its present pace (None: the adapter cannot tell)."""

    def __init__(self, pace: RequeuePace | None) -> None:
        super().__init__(done_at_s=40.0)
        self.pace = pace
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        self.asked.append((job, without))
        return self.pace

    def job_timing(self, job: str) -> JobTiming | None:
        return JobTiming(checkpoint_write_s=30.0, restart_s=140.0, next_checkpoint_in_s=600.0)


def _run(adapter: PacedAdapter, incident: Incident, until_s: float = 120.0) -> Responder:
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, int(until_s) + 1, 5):
        adapter.now = float(t)
        r.handle([incident], float(t), lambda *a, **k: None)
    return r


def _incident(cls: EventClass, root: str = ROOT, slowdown: float | None = None) -> Incident:
    impact = Impact(gpu_hours_at_risk=192.0, n_gpus=1, job_slowdown=slowdown)
    return Incident(1, cls, root, (root,), 0.0, 0.0, Severity.CRITICAL, impact)


def _applied(r: Responder) -> list[str]:
    return [str(a.request.kind) for a in r.log if a.status == "applied"]


def test_a_cooling_fault_keeps_the_job_when_its_requeue_would_run_slower() -> None:
    adapter = PacedAdapter(SLOWER)
    r = _run(adapter, _incident(EventClass.THERMAL_THROTTLE))
    assert _applied(r) == ["power_cap"]  # after its settle delay
    kept = [a for a in r.log if a.request.kind == ActionKind.REQUEUE]
    assert [a.status for a in kept] == ["refused"]
    why = "requeue kept back: would run at 0.38 of its present pace on 64 h100-sxm + 128 a100-sxm-80gb"
    assert kept[0].detail == why
    assert "gpu-cooling-fault" in kept[0].request.reason
    # The forced checkpoint would only have saved the work for that requeue: not written.
    (skipped,) = [a for a in r.log if a.request.kind == ActionKind.CHECKPOINT]
    assert (skipped.status, skipped.detail) == ("refused", f"no checkpoint forced: {why}")
    # Nor is the node drained: a restart for another cause (a failure elsewhere) must find it again, not land on
    # the slower GPUs (mixed_hall seed 0: 184 H100 + 8 A100 at half pace). Before, the drain was applied and lifted
    # in the same poll, on every incident of that GPU (6-18 per mixed_hall run). The pace is asked once, when the
    # rule fires, without the node the rule would drain.
    (drain,) = [a for a in r.log if a.request.kind == ActionKind.DRAIN]
    assert (drain.status, drain.request.target) == ("refused", "dc/r1/k2/n1")
    assert drain.detail == f"no drain: the job stays on the node and a restart should find it ({why})"
    assert not [a for a in r.log if a.request.kind == ActionKind.UNDRAIN]
    assert not adapter.current(ActionKind.DRAIN, "dc/r1/k2/n1")  # never set
    assert adapter.asked == [("dc/jobs/train", ("dc/r1/k2/n1",))]


@pytest.mark.parametrize("pace", [None, RequeuePace(1.0, "same GPUs"), RequeuePace(1.6, "healthy H100")])
def test_a_requeue_at_equal_or_better_or_unknown_pace_goes_ahead(pace: RequeuePace | None) -> None:
    r = _run(PacedAdapter(pace), _incident(EventClass.THERMAL_THROTTLE))
    assert _applied(r) == ["drain", "checkpoint", "requeue", "power_cap"]


def test_a_power_delivery_fault_keeps_the_job_too() -> None:
    """Priced like a straggler's (the requeue would run slower: keep the job): the node is capped and drained, and
    no checkpoint is forced for a requeue that will not come."""
    r = _run(PacedAdapter(SLOWER), _incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1"), until_s=4000)
    assert _applied(r) == ["power_cap", "drain"]
    cap = next(a for a in r.log if a.request.kind == ActionKind.POWER_CAP)
    assert "power-delivery-kept" in cap.request.reason and "requeue kept back" in cap.request.reason


def test_a_straggler_whose_requeue_would_run_slower_is_only_drained() -> None:
    """Without the pace a GPU at half speed is checkpointed and restarted at once; with a slower requeue the
    restart cost model prices staying first (no forced checkpoint for a requeue that will not come).
    """
    r = _run(PacedAdapter(SLOWER), _incident(EventClass.STRAGGLER, slowdown=0.5))
    assert _applied(r) == ["drain"]
    assert "straggler-kept" in r.log[0].request.reason
    assert "requeue kept back: would run at 0.38" in r.log[0].request.reason
    assert _applied(_run(PacedAdapter(None), _incident(EventClass.STRAGGLER, slowdown=0.5)))[0] == "checkpoint"


@pytest.mark.parametrize("cls", [EventClass.JOB_HANG, EventClass.SUSPECTED_SDC])
def test_a_hang_or_sdc_requeue_is_not_weighed_by_pace(cls: EventClass) -> None:
    adapter = PacedAdapter(SLOWER)
    r = _run(adapter, _incident(cls))  # even rooted at a GPU
    assert not any("kept back" in a.detail for a in r.log)
    assert adapter.asked == []
    assert [a.status for a in r.log if a.request.kind == ActionKind.REQUEUE] in (["applied"], ["pending"])


class PacedWithoutAdapter(PacedAdapter):
    """Slower only once the straggler's node is left out: on it the job keeps its pace (it would land back there)."""

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        self.asked.append((job, without))
        return SLOWER if "dc/r1/k2/n1" in without else RequeuePace(1.0, "the same nodes")


def test_a_stragglers_restart_is_priced_without_its_own_node() -> None:
    """Before, the restart's price asked the pace with the straggler's node still free (the placement put the job
    back on it: pace 1), so a GPU at half speed chose restart-now, whose requeue the kept-back check then refused
    with its checkpoint and drain: nothing was done, and the node stayed open to new work."""
    adapter = PacedWithoutAdapter(None)
    r = _run(adapter, _incident(EventClass.STRAGGLER, slowdown=0.5))
    assert _applied(r) == ["drain"]
    assert "requeue kept back: would run at 0.38" in r.log[0].request.reason
    assert adapter.asked and all(without == ("dc/r1/k2/n1",) for _, without in adapter.asked)


def test_a_requeue_kept_back_only_while_admission_holds_it_goes_ahead_once_admission_reopens() -> None:
    """power-events seed 0: a PSU loss 8 s before the utility cap ended; the requeue was kept back because the job
    would wait in the queue (admission held), and the job then ran on its node capped at 200 W for the 700 s of the
    PSUs' repair. The choice is asked again each poll while the wait lasts (the incident need not update)."""
    adapter = PacedAdapter(RequeuePace(0.0, "", "admission is held"))
    incident = _incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1")
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, 301, 5):
        adapter.now = float(t)
        if t == 150:
            adapter.pace = RequeuePace(1.0, "the same nodes")  # the hold ends
            adapter.done_at_s = 180.0  # the checkpoint it then forces is written by 180 s
        r.handle([incident] if t == 0 else [], float(t), lambda *a, **k: None)
        if t == 145:
            assert _applied(r) == ["power_cap", "drain"]  # kept with its job while the queue would hold it
    assert "requeue" in _applied(r)
    (requeue,) = [a for a in r.log if a.request.kind == ActionKind.REQUEUE and a.status == "applied"]
    assert requeue.ts >= 180 and "power-delivery-fault" in requeue.request.reason
