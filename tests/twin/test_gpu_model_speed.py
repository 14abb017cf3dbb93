"""A job's pace on a GPU model other than the one its profile was made for (issue 14, mixed_hall's `finetune`).

Before: the twin scaled a job's step only by each GPU's clock relative to its *own* f_max, so an A100 at 1,410 MHz
ran an H100 profile's step as fast as an H100 at 1,980 MHz (mixed_hall, seed 1: `finetune` did 2.007 s steps on
64 A100s, the H100 profile's full-clock 2.00 s, and beat the rack-capped H100 row).
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.twin.twin_helpers import make, small

from twinloop.closedloop.cluster import rank_step_times
from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import relative_speed
from twinloop.twin.gpu_rates import kind_rates, work_rate
from twinloop.twin.jobs import Phase

A100 = "a100-sxm-80gb"


def _hall(jobs: list[dict[str, object]]) -> dict[str, object]:
    """One H100 node row (the profiles' GPU: the first row's) and one A100 node row, first-fit placement."""
    return small(
        rows=[
            {"racks": 1, "nodes_per_rack": 2},
            {"racks": 1, "nodes_per_rack": 2, "node": {"gpu": A100, "psu_rating_w": 2000}},
        ],
        scheduler={"policy": "first_fit"},
        jobs=jobs,
    )


def _job(name: str, gpus: int) -> dict[str, object]:
    return {"name": name, "kind": "training", "gpus": gpus, "profile": {"load_bytes_per_gpu": 0}}


def _a100_full_clock_step_s(compute_s: float, comm_s: float, cf: float) -> float:
    rates = kind_rates((get_gpu(A100),), get_gpu("h100-sxm"))
    return compute_s / float(work_rate(np.ones(1), cf, rates.compute, rates.memory)[0]) + comm_s


def test_a100_rates_against_the_h100_are_the_catalogs() -> None:
    h100, a100 = get_gpu("h100-sxm"), get_gpu(A100)
    rates = kind_rates((h100, a100), h100)
    # Dense BF16 at f_max: the H100's 989 TFLOP/s hold at 1,830 MHz, its f_max is 1,980 MHz; the A100's at its f_max.
    assert rates.compute == pytest.approx([1.0, 312.0 / (989.0 * 1980.0 / 1830.0)])
    assert rates.memory == pytest.approx([1.0, 2.039 / 3.35])
    assert not rates.uniform
    assert kind_rates((h100,), h100).uniform
    x = np.linspace(0.1, 1.0, 10)
    for cf in (0.0, 0.5, 0.8, 1.0):
        assert work_rate(x, cf, np.ones(10), np.ones(10)) == pytest.approx(relative_speed(x, 1.0, cf))


def test_an_a100_runs_an_h100_profile_slower_than_an_h100_does() -> None:
    twin = make(_hall([_job("on-h100", 16), _job("on-a100", 16)]))
    twin.run(600)
    on_h100, on_a100 = twin.jobs
    kinds = {twin.topo.kinds[int(k)].name for k in twin.topo.gpu_kind[on_a100.gpus]}
    assert kinds == {A100}
    p = on_a100.profile
    a100_step_s = _a100_full_clock_step_s(p.compute_s, p.comm_s, p.compute_fraction)
    assert a100_step_s > 2 * p.iteration_s  # the roofline's A100 is well over twice as slow (catalog rates)
    # No faster than the A100's own full-clock step (before: the H100 profile's 4.0 s step at an A100's full clock).
    assert p.iteration_s / on_a100.speed >= a100_step_s - 1e-9
    assert on_a100.iterations <= 600 / a100_step_s + 1
    assert on_a100.iterations < on_h100.iterations


def test_a_job_over_both_models_keeps_the_a100s_pace_and_its_ranks_say_so() -> None:
    twin = make(_hall([_job("both", 32)]))
    twin.run(300)
    (job,) = twin.jobs
    assert job.phase == Phase.SUSTAINED
    p = job.profile
    job_step_s = p.iteration_s / job.speed
    assert job_step_s >= _a100_full_clock_step_s(p.compute_s, p.comm_s, p.compute_fraction) - 1e-9
    ranks = rank_step_times(twin)
    a100 = twin.topo.gpu_kind == twin.topo.kinds.index(get_gpu(A100))
    # The job's step is its slowest rank's; every A100 rank is slower than every H100 rank.
    assert ranks.max() == pytest.approx(job_step_s)
    assert ranks[a100].min() > ranks[~a100].max()


def test_a_hall_of_the_profiles_gpu_keeps_the_clock_only_pace() -> None:
    twin = make(small())
    assert all(j.rates is None for j in twin.jobs)
