import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.learn.forecast import HeatLoadForecaster, LoadHistory, evaluate, features, persistence


def synthetic_run(seed: int, hours: float = 6.0, dt_s: float = 10.0) -> LoadHistory:
    """A hall with jobs starting and ending on a schedule, a diurnal serving load and noise."""
    rng = np.random.default_rng(seed)
    ts = np.arange(0, hours * 3600, dt_s)
    n = len(ts)
    delta = np.zeros(n)
    for _ in range(12):
        start = rng.integers(0, n - 200)
        end = min(n - 1, start + rng.integers(100, 1500))
        power = rng.uniform(50e3, 400e3)
        delta[start] += power
        delta[end] -= power
    # Jobs ramp over ~2 minutes (init, then kernel launch): the load follows the schedule with a lag.
    ramp = np.ones(12) / 12
    load = 300e3 + np.convolve(np.cumsum(delta), ramp)[:n]
    load += 40e3 * np.sin(2 * np.pi * ts / 86400) + rng.normal(0, 5e3, n)
    return LoadHistory(ts, load, delta)


def test_forecaster_beats_persistence_by_30_percent_on_held_apart_runs() -> None:
    train = [synthetic_run(s) for s in range(6)]
    test = [synthetic_run(s) for s in range(100, 104)]
    for horizon in (300.0, 600.0, 900.0):
        score = evaluate(HeatLoadForecaster(horizon).fit(train), test)
        assert score.improvement >= 0.30, (horizon, score)


def test_persistence_is_the_current_load() -> None:
    run = synthetic_run(0, hours=1.0)
    assert np.array_equal(persistence(run, 600), run.load_w)


def test_bad_histories_are_rejected() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        LoadHistory(np.array([0.0, 0.0]), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="equal length"):
        LoadHistory(np.array([0.0, 1.0]), np.zeros(3), np.zeros(2))
    with pytest.raises(RuntimeError, match="fit"):
        HeatLoadForecaster(600).predict(synthetic_run(0, hours=1.0))


@settings(max_examples=30, deadline=None)
@given(st.integers(10, 400), st.floats(1.0, 60.0), st.floats(1.0, 3600.0))
def test_features_are_finite_for_any_series(n: int, dt: float, horizon: float) -> None:
    rng = np.random.default_rng(n)
    ts = np.arange(n) * dt
    x = features(LoadHistory(ts, rng.normal(1e5, 1e4, n), rng.normal(0, 1e3, n)), horizon)
    assert x.shape == (n, 7) and np.isfinite(x).all()
