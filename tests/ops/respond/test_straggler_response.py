"""Issue 14, proportionate responses: a straggler is answered by what moving its job off it costs, not with an
immediate forced checkpoint and restart of the whole job whatever its size.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from twinloop.ops.events import EventClass, Impact, Incident, Severity
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.adapters.base import JobTiming
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.ops.respond.restart_cost import choose_restart

from .test_decisions import CheckpointAdapter

ROOT = "dc/r1/k2/n1/g3"
# A job that writes a checkpoint in 30 s and restarts in 140 s (the twin's 120 s overhead + 20 s load), its own
# next checkpoint 600 s away, no time limit known.
TIMING = JobTiming(checkpoint_write_s=30.0, restart_s=140.0, next_checkpoint_in_s=600.0, remaining_s=None)


class TimedAdapter(CheckpointAdapter):
    """A job that reports what its checkpoints and restarts cost; its checkpoint completes at ``done_at_s``."""

    def __init__(self, done_at_s: float | None, timing: JobTiming | None) -> None:
        super().__init__(done_at_s=done_at_s)
        self.timing = timing

    def job_timing(self, job: str) -> JobTiming | None:
        return self.timing


def _straggler(slowdown: float) -> Incident:
    """A straggler GPU of a 192-GPU job (the mixed_hall `pretrain`), costing it ``slowdown`` of its throughput."""
    impact = Impact(gpu_hours_at_risk=192.0, n_gpus=1, job_slowdown=slowdown)
    return Incident(1, EventClass.STRAGGLER, ROOT, (ROOT,), 0.0, 0.0, Severity.CRITICAL, impact)


def _run(adapter: TimedAdapter, incident: Incident, until_s: float) -> list[tuple[float, str, str]]:
    """Step the responder every 5 s; (time, kind, status) of every job or node action."""
    r = Responder(default_policy(), adapter, mode="auto")
    out = []
    for t in range(0, int(until_s) + 1, 5):
        adapter.now = float(t)
        out += [(float(t), str(a.request.kind), a.status) for a in r.handle([incident], float(t), lambda *a, **k: None)]
    return out


def test_a_mild_straggler_on_a_big_job_is_moved_at_its_own_next_checkpoint() -> None:
    """Before: checkpoint at once, drain and requeue 30 s later, for any straggler (mixed_hall seeds 1 and 4)."""
    adapter = TimedAdapter(done_at_s=600.0, timing=TIMING)
    actions = _run(adapter, _straggler(0.04), until_s=700)
    # 4 % of 600 s is 24 s of the job's progress, less than a 30 s checkpoint write: wait for the job's own.
    assert "checkpoint" not in {kind for _, kind, _ in actions}, actions
    assert actions == [(0.0, "drain", "applied"), (600.0, "requeue", "applied")]
    requeue = next(a for a in adapter.applied if a.kind == ActionKind.REQUEUE)
    assert "straggler-at-checkpoint" in requeue.reason
    assert "-> at_checkpoint" in requeue.reason and "checkpoint of dc/jobs/train confirmed" in requeue.reason
    assert "expects: job at full speed" in requeue.reason


def test_a_job_with_nothing_unsaved_moves_now_not_at_the_save_after_next() -> None:
    """A job that has just saved reports its next checkpoint in 0 s (nothing to save). "At its own checkpoint" then
    tied with "now" and won as the less disruptive, and the requeue waited for the save after: a whole interval on
    the faulty node (power-events seed 2: 200 W for 700 s, 6,072 power-throttled GPU-s). Now it moves at once."""
    choice = choose_restart(0.7, replace(TIMING, next_checkpoint_in_s=0.0, unsaved_s=0.0))
    assert choice.when == "now", choice.why
    adapter = TimedAdapter(done_at_s=None, timing=replace(TIMING, next_checkpoint_in_s=0.0, unsaved_s=0.0))
    actions = _run(adapter, _straggler(0.7), until_s=60)
    assert ("requeue", "applied") in {(kind, status) for _, kind, status in actions}, actions


def test_a_gpu_at_half_speed_still_gets_a_checkpoint_and_restart_at_once() -> None:
    adapter = TimedAdapter(done_at_s=35.0, timing=TIMING)
    actions = _run(adapter, _straggler(0.5), until_s=120)
    assert actions[0] == (0.0, "checkpoint", "applied")
    assert (30.0, "drain", "applied") in actions
    assert (35.0, "requeue", "applied") in actions
    assert "-> now" in adapter.applied[0].reason


def test_a_straggler_near_its_jobs_end_is_only_drained() -> None:
    # 10 minutes left: 5 % of them (30 s) is less than any restart (140 s); the job's next checkpoint would come
    # after its end. No new work goes to the node; the job finishes where it is.
    timing = JobTiming(checkpoint_write_s=30.0, restart_s=140.0, next_checkpoint_in_s=900.0, remaining_s=600.0)
    adapter = TimedAdapter(done_at_s=None, timing=timing)
    actions = _run(adapter, _straggler(0.05), until_s=4000)
    assert actions == [(0.0, "drain", "applied")]
    assert "-> never" in adapter.applied[0].reason


def test_without_the_jobs_timing_a_straggler_is_restarted_at_once_as_before() -> None:
    adapter = TimedAdapter(done_at_s=35.0, timing=None)
    actions = _run(adapter, _straggler(0.04), until_s=120)
    assert [kind for _, kind, _ in actions] == ["checkpoint", "drain", "requeue"]
    assert "restart cost unknown" in adapter.applied[0].reason


@pytest.mark.parametrize(
    ("slowdown", "next_s", "expected"),
    [(0.05, 599.0, "at_checkpoint"), (0.05, 601.0, "now"), (0.5, 59.0, "at_checkpoint"), (0.5, 61.0, "now")],
)
def test_checkpoint_now_exactly_when_the_wait_costs_more_than_a_write(
    slowdown: float, next_s: float, expected: str
) -> None:
    # Break-even s * t = W (30 s): the restart's own cost is paid either way.
    timing = JobTiming(checkpoint_write_s=30.0, restart_s=140.0, next_checkpoint_in_s=next_s)
    assert choose_restart(slowdown, timing).when == expected


def test_a_live_scheduler_adapter_takes_its_jobs_timing_from_the_site() -> None:
    # Without the twin: the site tells the Slurm adapter its jobs' checkpoint cadence and time limits.
    from twinloop.ops.respond.adapters.commands import SlurmAdapter

    assert SlurmAdapter().job_timing("dc/jobs/train") is None
    assert SlurmAdapter(job_timing=lambda job: TIMING).job_timing("dc/jobs/train") == TIMING


def test_a_straggler_its_job_does_not_wait_for_is_only_drained() -> None:
    # The job's pace is set by a slower rank (a throttled peer): the straggler costs it nothing now, so no restart
    # of the whole job, whatever its remaining time; its node takes no new work.
    adapter = TimedAdapter(done_at_s=None, timing=TIMING)
    actions = _run(adapter, _straggler(0.0), until_s=4000)
    assert actions == [(0.0, "drain", "applied")]
    assert "-> never" in adapter.applied[0].reason and "waits for a slower rank" in adapter.applied[0].reason


def test_a_straggler_that_costs_nothing_is_not_restarted_even_when_the_costs_are_unknown() -> None:
    # A live cluster that cannot tell the job's checkpoint cadence: the straggler costs the job nothing (it waits
    # for a slower rank anyway), so no restart can pay; an unmeasured slowdown keeps the old immediate restart.
    assert choose_restart(0.0, None).when == "never"
    assert choose_restart(None, None).when == "now"
    assert choose_restart(0.05, None).when == "now"


def test_a_node_already_drained_is_not_drained_again_by_the_next_incident() -> None:
    """mixed_hall seeds 1 and 4: a straggler kept on its drained node opened a new incident after each of its job's
    restarts, and each drained the node again (9-11 drains of the same node in the audit trail)."""
    adapter = TimedAdapter(done_at_s=None, timing=JobTiming(30.0, 140.0, 600.0, remaining_s=300.0))
    r = Responder(default_policy(), adapter, mode="auto")
    first, second = _straggler(0.04), replace(_straggler(0.04), incident_id=2, start_ts=200.0, end_ts=200.0)
    r.handle([first], 0.0, lambda *a, **k: None)
    results = r.handle([second], 200.0, lambda *a, **k: None)
    assert [(str(a.request.kind), a.status) for a in results] == [("drain", "refused")]
    assert results[0].detail == f"no action: {'/'.join(ROOT.split('/')[:4])} is already drained"
    assert [a.kind for a in adapter.applied] == [ActionKind.DRAIN]
