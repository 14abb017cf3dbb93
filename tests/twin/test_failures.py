"""Failure model: calibration against the Llama 3 table, Poisson draws, thinning, temperature, signals."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.twin.failures import (
    CAUSE_NAMES,
    CAUSES,
    LLAMA3_GPUS,
    LLAMA3_GPUS_PER_NODE,
    LLAMA3_HOURS,
    LLAMA3_NODES,
    LLAMA3_PLANNED,
    LLAMA3_TABLE,
    LLAMA3_UNEXPECTED,
    N_CAUSES,
    FailureConfig,
    FailureModel,
    arrhenius_factor,
    baseline_loss_curve,
    cause_index,
    draw_stragglers,
    sdc_loss_signature,
)

TABLE_COUNTS = np.array([row[2] for row in LLAMA3_TABLE], dtype=np.float64)


def _fleet(n_gpus: int = LLAMA3_GPUS, temp_c: float = 65.0) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n_gpus, temp_c, dtype=np.float32), np.zeros(n_gpus, dtype=np.int64)


def _counts(
    model: FailureModel, seed: int, n_draws: int, dt_s: float, temps: np.ndarray, jobs: np.ndarray
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros(N_CAUSES, dtype=np.int64)
    for _ in range(n_draws):
        d = model.draw(rng, dt_s, temps, LLAMA3_GPUS_PER_NODE, jobs)
        counts += np.bincount(d.cause, minlength=N_CAUSES)
    return counts


def test_table_totals_match_the_paper() -> None:
    planned = sum(c.llama3_count for c in CAUSES if c.planned)
    unexpected = sum(c.llama3_count for c in CAUSES if not c.planned)
    assert (planned, unexpected) == (LLAMA3_PLANNED, LLAMA3_UNEXPECTED)
    hardware = sum(c.llama3_count for c in CAUSES if c.hardware)
    assert 0.75 <= hardware / unexpected <= 0.80  # paper: ~78 % of unexpected interruptions were hardware
    assert len(set(CAUSE_NAMES)) == N_CAUSES == 19


def test_expected_rates_reproduce_the_table_exactly() -> None:
    model = FailureModel()
    per_hour = model.expected_rate_per_hour(LLAMA3_GPUS, LLAMA3_GPUS_PER_NODE, temp_c=65.0)
    np.testing.assert_allclose(per_hour * LLAMA3_HOURS, TABLE_COUNTS, rtol=1e-12)
    for cause, count in zip(CAUSES, TABLE_COUNTS, strict=True):
        units = LLAMA3_NODES if cause.scope in ("node", "network") else LLAMA3_GPUS
        assert cause.rate_per_unit_hour * units * LLAMA3_HOURS == pytest.approx(count, rel=1e-12)


def test_scopes_as_documented() -> None:
    scope = {c.name: c.scope for c in CAUSES}
    assert {n for n, s in scope.items() if s == "gpu"} == {
        "faulty_gpu",
        "gpu_hbm3",
        "gpu_sram",
        "gpu_system_processor",
        "gpu_thermal_interface_sensor",
        "silent_data_corruption",
    }
    assert scope["network_switch_cable"] == "network"
    assert {scope[n] for n in ("software_bug", "nccl_watchdog", "dependency")} == {"job"}
    assert all(c.temp_accelerated == (c.scope == "gpu" and c.hardware) for c in CAUSES)


def test_sdc_is_silent() -> None:
    sdc = CAUSES[cause_index("silent_data_corruption")]
    assert not sdc.detectable and sdc.xid is None and sdc.hardware
    assert all(c.detectable for c in CAUSES if c.name != "silent_data_corruption")
    assert CAUSES[cause_index("faulty_gpu")].xid == 79


def test_draw_is_deterministic_per_rng() -> None:
    model = FailureModel()
    temps, jobs = _fleet()
    a = _counts(model, 7, 50, 3600.0 * 20, temps, jobs)
    b = _counts(model, 7, 50, 3600.0 * 20, temps, jobs)
    c = _counts(model, 8, 50, 3600.0 * 20, temps, jobs)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_poisson_means_match_the_table_over_many_draws() -> None:
    model = FailureModel()
    temps, jobs = _fleet()
    n_draws, reps = 400, 20  # 20 replications of the 54-day run, in 400 steps of 2.7 days
    counts = _counts(model, 1, n_draws, LLAMA3_HOURS * 3600.0 * reps / n_draws, temps, jobs)
    expected = TABLE_COUNTS * reps
    assert np.all(np.abs(counts - expected) <= 5.0 * np.sqrt(expected) + 1.0)
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 50.0  # 18 degrees of freedom: p < 1e-4 above 50
    assert abs(counts.sum() - expected.sum()) < 4.0 * np.sqrt(expected.sum())


def test_thinning_follows_per_gpu_temperature() -> None:
    model = FailureModel(FailureConfig(disabled_causes=tuple(c.name for c in CAUSES if c.scope != "gpu")))
    n = 4096
    temps = np.where(np.arange(n) < n // 2, 85.0, 45.0).astype(np.float32)
    jobs = np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(3)
    hot = total = 0
    dt_s = 3600.0 * 5000
    for _ in range(200):
        d = model.draw(rng, dt_s, temps, 8, jobs)
        total += d.n_events
        hot += int(np.count_nonzero(d.gpu < n // 2))
    expected_total = model.expected_rate_per_hour(n, 8, temps.astype(np.float64)).sum() * dt_s / 3600.0 * 200
    assert abs(total - expected_total) < 4.0 * np.sqrt(expected_total)
    af_hot, af_cold = arrhenius_factor(np.array([85.0, 45.0]), 65.0, 0.7)
    assert hot / total == pytest.approx(af_hot / (af_hot + af_cold), abs=0.02)


def test_hotter_means_more_hardware_failures_only_for_temperature_causes() -> None:
    model = FailureModel()
    rates = [model.expected_rate_per_hour(LLAMA3_GPUS, 8, temp_c=t) for t in (40.0, 65.0, 80.0, 95.0)]
    accel = np.array([c.temp_accelerated for c in CAUSES])
    for cold, hot in itertools.pairwise(rates):
        assert np.all(hot[accel] > cold[accel])
        np.testing.assert_array_equal(hot[~accel], cold[~accel])


def test_idle_gpus_get_no_job_scope_events() -> None:
    job_causes = {i for i, c in enumerate(CAUSES) if c.scope == "job"}
    model = FailureModel()
    temps, _ = _fleet(2048)
    jobs = np.where(np.arange(2048) % 3 == 0, 5, -1).astype(np.int64)
    rng = np.random.default_rng(11)
    n_job = 0
    for _ in range(300):
        d = model.draw(rng, 3600.0 * 2000, temps, 8, jobs)
        is_job = np.isin(d.cause, list(job_causes))
        assert np.all(jobs[d.gpu[is_job]] >= 0)
        n_job += int(is_job.sum())
    assert n_job > 0
    all_idle = np.full(2048, -1, dtype=np.int64)
    d = model.draw(np.random.default_rng(0), 3600.0 * 1e6, temps, 8, all_idle)
    assert d.n_events > 0 and not np.isin(d.cause, list(job_causes)).any()


def test_config_options_and_validation() -> None:
    base = FailureModel().expected_rate_per_hour(1000, 8)
    doubled = FailureModel(FailureConfig(rate_scale=2.0)).expected_rate_per_hour(1000, 8)
    np.testing.assert_allclose(doubled, 2.0 * base)
    no_planned = FailureModel(FailureConfig(include_planned=False)).expected_rate_per_hour(1000, 8)
    assert no_planned[cause_index("planned_maintenance")] == 0.0
    for kwargs, fld in (
        ({"rate_scale": -1.0}, "rate_scale"),
        ({"activation_energy_ev": 5.0}, "activation_energy_ev"),
        ({"max_temp_c": 50.0}, "max_temp_c"),
    ):
        with pytest.raises(InputError, match=fld):
            FailureConfig(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="did you mean"):
        FailureConfig(disabled_causes=("faulty_gpus",))


def test_config_and_model_pickle() -> None:
    cfg = FailureConfig(rate_scale=3.0, disabled_causes=("nic",))
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    model = pickle.loads(pickle.dumps(FailureModel(cfg)))
    np.testing.assert_array_equal(model.rates_per_unit_hour, FailureModel(cfg).rates_per_unit_hour)


def test_draw_rejects_mismatched_shapes() -> None:
    temps, jobs = _fleet(16)
    with pytest.raises(InputError, match="job_of_gpu"):
        FailureModel().draw(np.random.default_rng(0), 1.0, temps, 8, jobs[:8])
    with pytest.raises(InputError, match="gpus_per_node"):
        FailureModel().draw(np.random.default_rng(0), 1.0, temps, 0, jobs)


@settings(max_examples=60, deadline=None)
@given(
    n_gpus=st.integers(1, 3000),
    gpus_per_node=st.integers(1, 16),
    temp_lo=st.floats(-20.0, 140.0),
    temp_span=st.floats(0.0, 60.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_draw_indices_always_in_range(
    n_gpus: int, gpus_per_node: int, temp_lo: float, temp_span: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    temps = rng.uniform(temp_lo, temp_lo + temp_span, n_gpus)
    jobs = rng.integers(-1, 3, n_gpus)
    model = FailureModel()
    d = model.draw(rng, 3600.0 * 1e5, temps, gpus_per_node, jobs)
    assert d.gpu.dtype == np.int64 and d.cause.dtype == np.int16
    assert d.gpu.shape == d.cause.shape
    assert np.all((d.gpu >= 0) & (d.gpu < n_gpus))
    assert np.all((d.cause >= 0) & (d.cause < N_CAUSES))


def test_stragglers() -> None:
    speed = draw_stragglers(np.random.default_rng(1), 10_000, 0.05, (0.6, 0.8))
    slow = speed < 1.0
    assert speed.dtype == np.float32 and 350 < slow.sum() < 650
    assert np.all((speed[slow] >= 0.6) & (speed[slow] <= 0.8))
    np.testing.assert_array_equal(speed, draw_stragglers(np.random.default_rng(1), 10_000, 0.05, (0.6, 0.8)))
    assert np.all(draw_stragglers(np.random.default_rng(1), 100, 0.0) == 1.0)
    with pytest.raises(InputError, match="slowdown_range"):
        draw_stragglers(np.random.default_rng(1), 100, 0.1, (0.9, 0.5))


@pytest.mark.parametrize("kind", ["spike", "drift"])
def test_sdc_signature_starts_at_onset(kind: str) -> None:
    sig = sdc_loss_signature(np.random.default_rng(2), 2000, 700, 0.5, kind=kind)  # type: ignore[arg-type]
    assert np.all(sig.loss[:700] == 0.0) and np.all(sig.grad_norm[:700] == 0.0)
    assert sig.loss[700:].min() > 0.0 and sig.loss.max() == pytest.approx(0.5, rel=1e-5)
    if kind == "spike":
        assert int(np.argmax(sig.grad_norm)) == 700
    else:
        assert np.all(np.diff(sig.loss[700:]) >= 0.0)
    again = sdc_loss_signature(np.random.default_rng(2), 2000, 700, 0.5, kind=kind)  # type: ignore[arg-type]
    np.testing.assert_array_equal(sig.grad_norm, again.grad_norm)


def test_baseline_loss_curve_decreases_and_repeats() -> None:
    a = baseline_loss_curve(5000, seed=4)
    assert a.loss[:50].mean() > 10.0 > a.loss[-500:].mean() * 3
    assert a.grad_norm[:50].mean() > 2.0 * a.grad_norm[-500:].mean()
    np.testing.assert_array_equal(a.loss, baseline_loss_curve(5000, seed=4).loss)
    assert not np.array_equal(a.loss, baseline_loss_curve(5000, seed=5).loss)
