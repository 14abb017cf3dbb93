"""Reliability Monte-Carlo: ETTR accounting, Young/Daly, MTTF scaling, Llama 3 interruption totals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.twin.failures import CAUSES, LLAMA3_DAYS, LLAMA3_GPUS, FailureConfig
from twinloop.twin.reliability import (
    job_failure_rates_per_h,
    job_mttf_h,
    simulate_job,
    sweep_checkpoint_interval,
    young_daly_interval_s,
)

ONLY_PLANNED = FailureConfig(disabled_causes=tuple(c.name for c in CAUSES if not c.planned))


@pytest.mark.parametrize(("n_gpus", "interval_s"), [(8, 600.0), (4096, 1800.0), (LLAMA3_GPUS, 300.0), (65536, 7200.0)])
def test_ettr_in_unit_interval_and_time_adds_up(n_gpus: int, interval_s: float) -> None:
    r = simulate_job(n_gpus, 10.0, interval_s, 60.0, 240.0, seed=1, n_runs=50)
    assert np.all((r.ettr > 0.0) & (r.ettr <= 1.0))
    np.testing.assert_allclose(r.ettr * r.wall_s + r.lost_work_s + r.checkpoint_s + r.restart_s, r.wall_s, rtol=1e-9)
    assert r.counts.shape == (50, len(CAUSES))


@settings(max_examples=40, deadline=None)
@given(
    n_gpus=st.integers(1, 200_000),
    interval_s=st.floats(1.0, 1e5),
    write_s=st.floats(0.0, 3600.0),
    restart_s=st.floats(0.0, 7200.0),
    rate_scale=st.floats(0.0, 50.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_time_accounting_invariant(
    n_gpus: int, interval_s: float, write_s: float, restart_s: float, rate_scale: float, seed: int
) -> None:
    cfg = FailureConfig(rate_scale=rate_scale)
    r = simulate_job(n_gpus, 2.0, interval_s, write_s, restart_s, seed=seed, n_runs=3, config=cfg)
    assert np.all((r.ettr >= 0.0) & (r.ettr <= 1.0))
    for part in (r.lost_work_s, r.checkpoint_s, r.restart_s):
        assert np.all(part >= 0.0)
    np.testing.assert_allclose(r.ettr * r.wall_s + r.lost_work_s + r.checkpoint_s + r.restart_s, r.wall_s, rtol=1e-9)


def test_without_failures_ettr_is_the_checkpoint_duty_cycle() -> None:
    r = simulate_job(1024, 5.0, 1000.0, 50.0, 300.0, seed=0, n_runs=3, config=FailureConfig(rate_scale=0.0))
    assert r.total_interruptions.sum() == 0
    np.testing.assert_allclose(r.ettr, 1000.0 / 1050.0, atol=1e-3)
    assert np.all(r.lost_work_s == 0.0) and np.all(r.restart_s == 0.0)


def test_ettr_decreases_with_failure_rate() -> None:
    ettr = [
        simulate_job(LLAMA3_GPUS, 20.0, 1200.0, 30.0, 180.0, seed=3, n_runs=60, config=FailureConfig(rate_scale=s))
        for s in (0.25, 1.0, 4.0, 16.0)
    ]
    means = [r.ettr_mean for r in ettr]
    assert all(a > b for a, b in itertools.pairwise(means))
    assert ettr[0].lost_work_s.mean() < ettr[-1].lost_work_s.mean()


def test_hotter_gpus_lower_ettr() -> None:
    cool = simulate_job(LLAMA3_GPUS, 20.0, 1200.0, 30.0, 180.0, gpu_temp_c=55.0, seed=3, n_runs=60)
    hot = simulate_job(LLAMA3_GPUS, 20.0, 1200.0, 30.0, 180.0, gpu_temp_c=85.0, seed=3, n_runs=60)
    assert hot.total_interruptions.mean() > cool.total_interruptions.mean()
    assert hot.ettr_mean < cool.ettr_mean
    assert hot.job_mttf_h < cool.job_mttf_h


def test_planned_interruptions_lose_no_work() -> None:
    r = simulate_job(LLAMA3_GPUS, 54.0, 1800.0, 30.0, 180.0, seed=5, n_runs=20, config=ONLY_PLANNED)
    assert r.total_interruptions.mean() > 20
    assert np.all(r.lost_work_s == 0.0) and np.all(r.restart_s > 0.0)


def test_sweep_optimum_near_young_daly() -> None:
    for write_s in (20.0, 90.0):
        sweep = sweep_checkpoint_interval(LLAMA3_GPUS, 30.0, write_s, 180.0, seed=7, n_runs=80)
        lam = float(job_failure_rates_per_h(LLAMA3_GPUS)[[not c.planned for c in CAUSES]].sum()) / 3600.0
        assert sweep.young_daly_s == pytest.approx(np.sqrt(2.0 * write_s / lam))
        assert 1 / 1.5 <= sweep.best_interval_s / sweep.young_daly_s <= 1.5
        # The optimum is interior: both ends of the 1/4..4x range are clearly worse.
        best = sweep.ettr_mean.max()
        assert sweep.ettr_mean[0] < best - 0.005 and sweep.ettr_mean[-1] < best - 0.005


def test_young_daly_formula() -> None:
    assert young_daly_interval_s(1.0 / 3600.0, 50.0) == pytest.approx(600.0)
    assert young_daly_interval_s(4.0 / 3600.0, 50.0) == pytest.approx(300.0)
    with pytest.raises(InputError, match="job_failure_rate_per_s"):
        young_daly_interval_s(0.0, 50.0)


def test_mttf_falls_as_one_over_gpu_count() -> None:
    sizes = (1024, 4096, LLAMA3_GPUS, 65536)
    mttf = [job_mttf_h(n) for n in sizes]
    assert all(a > b for a, b in itertools.pairwise(mttf))
    assert mttf[0] / mttf[2] == pytest.approx(16.0, rel=1e-9)
    assert mttf[2] == pytest.approx(LLAMA3_DAYS * 24.0 / 419.0, rel=1e-9)  # 419 unexpected in 54 days


def test_same_seed_same_result() -> None:
    a = simulate_job(2048, 7.0, 900.0, 30.0, 120.0, seed=9, n_runs=30)
    b = simulate_job(2048, 7.0, 900.0, 30.0, 120.0, seed=9, n_runs=30)
    c = simulate_job(2048, 7.0, 900.0, 30.0, 120.0, seed=10, n_runs=30)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.ettr, b.ettr)
    assert not np.array_equal(a.ettr, c.ettr)


def test_llama3_setting_reproduces_466_interruptions() -> None:
    r = simulate_job(LLAMA3_GPUS, LLAMA3_DAYS, 1200.0, 30.0, 180.0, seed=11, n_runs=100)
    assert r.total_interruptions.mean() == pytest.approx(466.0, rel=0.03)
    planned = np.array([c.planned for c in CAUSES])
    assert r.counts[:, planned].sum(axis=1).mean() == pytest.approx(47.0, rel=0.1)
    faulty = r.cause_names.index("faulty_gpu")
    assert r.mean_counts[faulty] == pytest.approx(148.0, rel=0.05)
    assert 0.85 < r.ettr_mean < 0.95


@pytest.mark.parametrize(
    ("kwargs", "fld"),
    [
        ({"n_gpus": 0}, "n_gpus"),
        ({"days": -1.0}, "days"),
        ({"checkpoint_interval_s": 0.0}, "checkpoint_interval_s"),
        ({"checkpoint_write_s": -5.0}, "checkpoint_write_s"),
        ({"restart_overhead_s": float("nan")}, "restart_overhead_s"),
        ({"n_runs": 0}, "n_runs"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, float], fld: str) -> None:
    args: dict[str, float] = {
        "n_gpus": 64,
        "days": 1.0,
        "checkpoint_interval_s": 600.0,
        "checkpoint_write_s": 30.0,
        "restart_overhead_s": 60.0,
        "n_runs": 2,
    }
    args.update(kwargs)
    with pytest.raises(InputError, match=fld):
        simulate_job(**args)  # type: ignore[arg-type]
