"""A forced checkpoint that costs more than the work it saves (sweeps/new-user/slow-checkpoint.yaml, round 2).

Before: every rule that requeues a job after a forced checkpoint wrote one, whatever the job had to save. On the
slow-checkpoint hall (90 s writes) a second fault 50-140 s after a first requeue stopped the job for another 90 s
write to save 17-50 s of work since its restart. Now the write is skipped where the job's work since its last save is
less than the write (both known), and the requeue goes at once.
"""

from __future__ import annotations

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import JobTiming
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.ops.respond.restart_cost import choose_restart, write_pays

from .conftest import MemoryAdapter, make_incident


class SlowStorage(MemoryAdapter):
    """A job with a 90 s checkpoint write and ``unsaved_s`` of work since its last save; its checkpoint is
    confirmed 90 s after the request."""

    def __init__(self, unsaved_s: float | None, failures_per_s: float | None = None) -> None:
        super().__init__(supply_w=150.0)  # one PSU left: below the GPUs' 200 W floor
        self.unsaved_s = unsaved_s
        self.failures_per_s = failures_per_s
        self.now = 0.0

    def job_timing(self, job: str) -> JobTiming | None:
        return JobTiming(
            checkpoint_write_s=90.0,
            restart_s=120.0,
            next_checkpoint_in_s=500.0,
            unsaved_s=self.unsaved_s,
            checkpoint_interval_s=600.0,
            interruptions_per_s=self.failures_per_s,
        )

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        return self.now >= since_ts + 90.0


def _reader(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
    return None


def _run(adapter: SlowStorage, incident: Incident, until_s: float = 200.0) -> Responder:
    r = Responder(default_policy(), adapter, mode="auto")
    for t in range(0, int(until_s) + 1, 5):
        adapter.now = float(t)
        r.handle([incident], float(t), _reader)
    return r


def _gpu_cooling_fault() -> Incident:
    root = "dc/r1/k2/n1/g3"
    return Incident(1, EventClass.COOLING_DEGRADATION, root, (root,), 0.0, 0.0, Severity.MAJOR)


def _requeue_ts(r: Responder) -> list[float]:
    return [x.ts for x in r.log if x.request.kind == ActionKind.REQUEUE and x.status == "applied"]


def test_a_job_restarted_a_minute_ago_is_requeued_without_a_slow_checkpoint() -> None:
    adapter = SlowStorage(unsaved_s=50.0)
    r = _run(adapter, _gpu_cooling_fault())
    assert ActionKind.CHECKPOINT not in [a.kind for a in adapter.applied]
    assert _requeue_ts(r) == [0.0]
    refused = next(x for x in r.log if x.request.kind == ActionKind.CHECKPOINT)
    assert refused.status == "refused" and "50s of work since its last save" in refused.detail
    requeue = next(x for x in r.log if x.request.kind == ActionKind.REQUEUE)
    assert "requeue without a forced checkpoint" in requeue.request.reason


def test_more_unsaved_work_than_the_write_still_checkpoints_first() -> None:
    for unsaved_s in (400.0, None):  # more to save than the write costs; the cluster cannot tell
        adapter = SlowStorage(unsaved_s=unsaved_s)
        r = _run(adapter, _gpu_cooling_fault())
        assert ActionKind.CHECKPOINT in [a.kind for a in adapter.applied]
        assert _requeue_ts(r) == [90.0]


def test_a_short_supply_prices_the_restart_with_the_cheaper_of_write_and_redo() -> None:
    adapter = SlowStorage(unsaved_s=30.0)
    r = _run(adapter, make_incident(EventClass.POWER_DELIVERY_FAULT, root="dc/r1/k2/n1"))
    assert ActionKind.CHECKPOINT not in [a.kind for a in adapter.applied]
    assert _requeue_ts(r) == [0.0]
    timing = adapter.job_timing("dc/jobs/train")
    assert "checkpoint+restart now 150s" in choose_restart(1.0, timing).why  # R 120 + min(W 90, u 30)


def test_a_skipped_write_moves_the_job_at_once_not_after_the_rules_wait() -> None:
    """The straggler rule drains and requeues 30 s after its checkpoint request, to let the write finish. With the
    write skipped, those 30 s were computed and thrown away by the requeue (round 1's halls: a background straggler
    found 17-25 s in, requeued at 47 s without a checkpoint, lost more than the write would have cost)."""
    root = "dc/r1/k2/n1/g3"
    straggler = Incident(1, EventClass.STRAGGLER, root, (root,), 0.0, 0.0, Severity.MAJOR)
    adapter = SlowStorage(unsaved_s=10.0)
    r = _run(adapter, straggler, until_s=60.0)
    moves = [(x.ts, x.request.kind) for x in r.log if x.status == "applied"]
    assert moves[:2] == [(0.0, ActionKind.DRAIN), (0.0, ActionKind.REQUEUE)]  # drain first: the requeue avoids it


def test_a_job_that_keeps_failing_writes_what_a_quiet_job_would_redo() -> None:
    """A skipped write was not priced against a later failure (slow-checkpoint seeds 0 and 3: a GPU off the bus 6-13
    min after a skipped write lost the same iterations a second time). With the job's failure rate known (one every
    20 min: q = 1 - exp(-600/1200) = 0.39 over its 10-min interval, p = 0.07 over the 90 s write), 70 s of work is
    worth its 90 s write: 70 x 0.93 = 65 >= 90 x 0.61 = 55. Before: skipped (70 < 90)."""
    adapter = SlowStorage(unsaved_s=70.0, failures_per_s=1 / 1200)
    r = _run(adapter, _gpu_cooling_fault())
    assert ActionKind.CHECKPOINT in [a.kind for a in adapter.applied]
    assert _requeue_ts(r) == [90.0]


def test_a_job_that_keeps_failing_still_skips_a_write_worth_less_than_its_work() -> None:
    """The other side of ``u (1 - p) >= W (1 - q)``: 40 x 0.93 = 37 < 55, and a quiet job (no failure rate known,
    or the planner's Llama 3 rate for 256 GPUs, ~1 per 33 h) skips the 70 s one as before."""
    for unsaved_s, rate in ((40.0, 1 / 1200), (70.0, None), (70.0, 1 / (33 * 3600))):
        adapter = SlowStorage(unsaved_s=unsaved_s, failures_per_s=rate)
        r = _run(adapter, _gpu_cooling_fault())
        assert ActionKind.CHECKPOINT not in [a.kind for a in adapter.applied], (unsaved_s, rate)
        assert _requeue_ts(r) == [0.0]


def test_a_write_the_fault_itself_would_interrupt_never_pays() -> None:
    timing = JobTiming(checkpoint_write_s=20.0, unsaved_s=900.0)
    assert write_pays(timing) == (True, "900s of work since its last save against its 20s checkpoint write")
    pays, words = write_pays(timing, write_fails=1.0) or (True, "")
    assert not pays and "chance 100% the job fails during the write" in words
    assert write_pays(JobTiming(checkpoint_write_s=20.0)) is None  # u unknown: written, as before


def test_the_restart_now_prices_the_write_with_the_later_failure() -> None:
    # R 120 + min(W (1 - q) + p u, u): 90 x 0.61 + 0.07 x 70 = 59.7 < 70 -> 180 s; no rate: min(90, 70) -> 190 s.
    quiet = SlowStorage(unsaved_s=70.0).job_timing("j")
    failing = SlowStorage(unsaved_s=70.0, failures_per_s=1 / 1200).job_timing("j")
    assert "checkpoint+restart now 190s" in choose_restart(1.0, quiet).why
    assert "checkpoint+restart now 180s" in choose_restart(1.0, failing).why


def test_small_chances_are_stated_not_rounded_to_zero() -> None:
    # A 256-GPU job at Llama 3's rates: q about 0.1 % over its interval; the audit line said "0%" for both.
    timing = JobTiming(
        checkpoint_write_s=90.0, restart_s=120.0, next_checkpoint_in_s=300.0, remaining_s=None, unsaved_s=80.0,
        checkpoint_interval_s=600.0, interruptions_per_s=1.0 / (150 * 3600.0),
    )  # fmt: skip
    verdict = write_pays(timing)
    assert verdict is not None
    assert "chance 0.0167% the job fails during the write and 0.111% before its next save" in verdict[1]
