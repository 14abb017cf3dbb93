"""A run that ends while a job hangs counts the job's unsaved work as lost (twin/jobs.py ``kept_iterations``):
the twin's own collective watchdog would interrupt it at ``hang_timeout_s`` and lose exactly that work."""

from __future__ import annotations

from typing import Any

from tests.twin.twin_helpers import make, small

from twinloop.twin.jobs import Phase
from twinloop.twin.summary import summarize


def _run(hang_start_s: float, duration_s: float) -> dict[str, Any]:
    raw = small(
        duration_s=duration_s,
        faults=[{"kind": "job_hang", "target": "train", "start_s": hang_start_s}],
    )
    raw["jobs"][0].update({"checkpoint_interval_s": 60, "checkpoint_write_s": 5, "hang_timeout_s": 600})
    twin = make(raw)
    twin.run()
    job = twin.jobs[0]
    assert job.phase == Phase.HUNG  # the case this test is about: the run ends inside the hang
    assert job.iterations > job.iterations_at_checkpoint > 0
    out: dict[str, Any] = summarize(twin, [], 1)["jobs"][0]
    out["tokens_per_step"] = job.profile.tokens_per_step
    out["checkpointed"] = job.iterations_at_checkpoint
    out["raw"] = job.iterations
    out["wall_s"] = twin.t_s - (job.first_start_s or 0.0)
    return out


def test_a_job_hung_at_the_end_keeps_only_its_checkpointed_work() -> None:
    # Before, goodput counted the iterations made since the last checkpoint of a job that was hung when the run
    # ended (cooling-plant: the hang at 51-53 min, its watchdog at 61-63 min, after the 1 h run), so a loop that
    # requeued the hang looked worse than one that let it idle with work it was bound to lose.
    out = _run(hang_start_s=150, duration_s=200)
    assert out["iterations"] == round(out["checkpointed"], 3)
    assert out["lost_iterations"] >= out["raw"] - out["checkpointed"] - 1e-3
    expected = out["checkpointed"] * out["tokens_per_step"] / out["wall_s"]
    assert abs(out["goodput_tokens_per_s"] - expected) <= 1e-3 * max(expected, 1.0)
