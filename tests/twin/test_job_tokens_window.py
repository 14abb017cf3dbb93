"""A job's tokens/s telemetry with job samples every few steps (either ``aggregate``; the closed loop uses ``sample``).

Before: the twin reported the tokens of the one step at the sample, so with mixed_hall's 5 s job samples a job whose
steps end between sample seconds showed 0 tokens/s sample after sample; once `pretrain` ran at the A100s' pace
(12–14 s steps) the hang rule saw no progress for three step times and requeued it eight times in 2 h (seed 0).
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.twin.twin_helpers import make, small

from twinloop.telemetry.fields import TWINLOOP_FI_JOB_TOKENS_PER_S
from twinloop.twin.jobs import Phase


def _job_tokens(aggregate: str, seconds: int) -> tuple[list[float], float, float]:
    """Job tokens/s samples (every 5 s), the job's completed tokens and its step time at the end."""
    raw = small(
        duration_s=seconds,
        telemetry={"gpu_every_s": 10, "facility_every_s": 5, "aggregate": aggregate},
        jobs=[
            {
                "name": "train",
                "kind": "training",
                "gpus": 16,
                "profile": {"load_bytes_per_gpu": 0, "compute_s": 9.0, "comm_s": 2.0},
            }
        ],
    )
    twin = make(raw)
    samples: list[float] = []
    for _ in range(seconds):
        result = twin.step()
        if result.facility is not None:
            samples.append(float(result.facility["job"][TWINLOOP_FI_JOB_TOKENS_PER_S][0]))
    (job,) = twin.jobs
    assert job.phase == Phase.SUSTAINED and job.interruptions == 0
    return samples, job.iterations * job.profile.tokens_per_step, job.profile.iteration_s / job.speed


@pytest.mark.parametrize("aggregate", ["window", "sample"])
def test_job_tokens_add_up_to_the_work_done_and_show_every_step(aggregate: str) -> None:
    samples, done, step_s = _job_tokens(aggregate, 600)
    assert len(samples) == 120
    # Every step's tokens are in exactly one sample: the samples times their interval are the work done.
    assert 5.0 * sum(samples) == pytest.approx(done, rel=1e-12)
    # A step ends in every window of its length: no run of zero samples longer than a step (a stall is not shown).
    started = int(np.flatnonzero(np.array(samples) > 0)[0])
    zeros = run = 0
    for s in samples[started:]:
        run = run + 1 if s == 0 else 0
        zeros = max(zeros, run)
    assert zeros * 5.0 < step_s
