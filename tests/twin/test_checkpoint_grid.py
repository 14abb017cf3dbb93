"""Periodic checkpoints come at iteration counts from iteration 0, as frameworks save (Megatron-LM:
``iteration % save_interval == 0``), not an interval after the last save of any kind."""

from __future__ import annotations

from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import TriggerCheckpoint
from twinloop.twin.engine import Twin
from twinloop.twin.jobs import Job, Phase


def _saves(twin: Twin, job: Job, seconds: int) -> list[float]:
    """The job's iteration count at each checkpoint completed over the next ``seconds``."""
    out, last = [], job.iterations_at_checkpoint
    for _ in range(seconds):
        twin.step()
        if job.iterations_at_checkpoint != last:
            last = job.iterations_at_checkpoint
            out.append(last)
    return out


def _job(interval_s: float, **changes: object) -> tuple[Twin, Job]:
    raw = small(duration_s=3600, **changes)
    raw["jobs"][0].update(checkpoint_interval_s=interval_s, checkpoint_write_s=10)
    twin = make(raw)
    return twin, twin.jobs[0]


def _every(twin: Twin, job: Job) -> float:
    """The job's save interval in iterations, fixed from its pace on its first step of work."""
    while job.save_every is None:
        twin.step()
    return job.save_every


def test_periodic_saves_land_on_multiples_of_the_interval_in_iterations() -> None:
    twin, job = _job(300.0)
    every = _every(twin, job)
    assert every == round(300.0 / job.wall_iteration_s())  # the interval at the pace the job started at
    saves = _saves(twin, job, 1000)
    assert len(saves) >= 2 and saves == [every * (i + 1) for i in range(len(saves))], (saves, every)


def test_a_forced_checkpoint_between_two_saves_leaves_the_next_save_where_it_was() -> None:
    """Before: the next periodic save came a whole interval after the forced one, so a failure soon after lost up
    to an interval of work; a framework saves at its next multiple of the interval all the same."""
    twin, job = _job(300.0)
    every = _every(twin, job)
    while job.iterations < 1.5 * every:
        twin.step()
    assert twin.apply(TriggerCheckpoint("train")).ok
    saves = _saves(twin, job, 400)
    assert saves[0] >= 1.5 * every and saves[1] == 2 * every, (saves, every)


def test_a_job_slowed_after_it_started_saves_later_in_wall_time_at_the_same_iteration() -> None:
    fast, job = _job(300.0)
    slowed, slow = _job(300.0, faults=[{"kind": "straggler", "target": "dc1/r01/k01/n01/g5", "start_s": 120,
                                        "magnitude": 0.5}])  # fmt: skip
    for twin, j in ((fast, job), (slowed, slow)):
        while j.iterations_at_checkpoint == 0 or j.phase == Phase.CHECKPOINT:
            twin.step()
    assert job.iterations_at_checkpoint == slow.iterations_at_checkpoint
    assert slow.saved_at_s > job.saved_at_s
