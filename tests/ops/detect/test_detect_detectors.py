"""Each detector finds steps and drifts, stays quiet on noise, and is safe on NaN, gaps, flapping and skew."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.base import REGISTRY, Detector, make_detector

load_variants()
VECTORIZED = sorted(n for n, c in REGISTRY.items() if c.vectorized)
ALL = sorted(REGISTRY)
# The seasonal detector gets a 10-minute "day" so that tests stay short.
PARAMS: dict[str, dict[str, Any]] = {"seasonal": {"period_s": 600.0, "n_buckets": 10, "min_bucket_s": 60.0}}
#: Detectors that are silent on a series without a strong cycle (by design: they leave it to the profile's other
#: detectors) see the test's noise with a cycle of this many samples added (amplitude 3 sigma), and a "day" of that
#: many seconds at 1 s sampling.
CYCLE_SAMPLES = {"phase_z": 50}
PARAMS["phase_z"] = {"periods_s": (50.0,), "cycles": 4, "phase_halfwidth_s": 2.0, "refresh_s": 25.0}


def with_cycle(name: str, x: np.ndarray) -> np.ndarray:
    """``x`` (T, n) plus the cycle a periodic-only detector needs to be awake (unchanged for the others)."""
    if name not in CYCLE_SAMPLES:
        return x
    phase = 2 * np.pi * np.arange(x.shape[0]) / CYCLE_SAMPLES[name]
    return x + 6.0 * np.sin(phase)[:, None]


def make(name: str, **kw: Any) -> Detector[Any]:
    return make_detector(name, **{**PARAMS.get(name, {}), **kw})


def run(det: Detector[Any], ts: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Alarms (T, n) for samples x (T, n) at times ts."""
    return np.stack([det.update(float(t), row) for t, row in zip(ts, x, strict=True)])


def noise(seed: int, t: int, n: int, sigma: float = 2.0, level: float = 60.0) -> np.ndarray:
    return level + sigma * np.random.default_rng(seed).standard_normal((t, n))


def first_alarm(alarms: np.ndarray, start: int) -> np.ndarray:
    """Samples from ``start`` to each entity's first alarm at/after it (-1 = none)."""
    after = alarms[start:]
    hit = after.any(axis=0)
    return np.where(hit, after.argmax(axis=0), -1)


@pytest.mark.parametrize("name", ALL)
def test_step_found_within_30_s_at_1_s_sampling(name: str) -> None:
    n = 8 if REGISTRY[name].vectorized else 3
    t = 700 if name == "seasonal" else 400
    x = with_cycle(name, noise(1, t, n))
    x[t - 100 :, : n - 1] += 20.0  # a 10 sigma step on all but the last entity
    alarms = run(make(name), np.arange(t, dtype=float), x)
    latency = first_alarm(alarms, t - 100)
    assert (latency[: n - 1] >= 0).all(), latency
    assert (latency[: n - 1] < 30).all(), latency
    assert not alarms[:, n - 1].any()
    assert not alarms[: t - 100].any()


@pytest.mark.parametrize("name", [n for n in VECTORIZED if n not in CYCLE_SAMPLES])
def test_drift_found(name: str) -> None:
    """(A same-phase baseline lags a drift by its cycles' span, so a slow drift is a constant offset to it: the
    periodic-only detectors leave drifts to their profile's novelty z and CUSUM.)"""
    t, n = 900, 4
    x = noise(2, t, n)
    ramp = np.clip(np.arange(t) - 500, 0, None) * 0.1  # 0.05 sigma per second from t=500
    x += ramp[:, None]
    alarms = run(make(name), np.arange(t, dtype=float), x)
    latency = first_alarm(alarms, 500)
    assert (latency >= 0).all() and (latency < 250).all(), latency


@pytest.mark.parametrize("name", VECTORIZED)
def test_false_alarms_bounded_on_long_stationary_noise(name: str) -> None:
    t, n = 10_000, 16
    rng = np.random.default_rng(7)
    iid = 100.0 + 3.0 * rng.standard_normal((t, n))
    ar = np.zeros((t, n))
    e = np.zeros(n)
    for i in range(t):  # AR(1), phi 0.9: telemetry is autocorrelated
        e = 0.9 * e + 0.44 * rng.standard_normal(n)
        ar[i] = 100.0 + 3.0 * e
    ts = np.arange(t, dtype=float)
    for series in (iid, ar):
        alarms = run(make(name), ts, series)
        onsets = np.count_nonzero(alarms[1:] & ~alarms[:-1]) + np.count_nonzero(alarms[0])
        assert onsets <= 4, f"{onsets} false alarms in {t * n} samples"


@pytest.mark.parametrize("name", ALL)
def test_nan_bursts_do_not_fire_and_are_counted(name: str) -> None:
    n = 6 if REGISTRY[name].vectorized else 2
    t = 600
    x = noise(3, t, n)
    x[200:230, 0] = np.nan  # a burst
    x[300:400:3, 1] = np.nan  # scattered
    x[450:460, :] = np.nan  # everything at once
    det = make(name)
    alarms = run(det, np.arange(t, dtype=float), x)
    assert not alarms.any()
    assert det.nan_count[0] == 40
    assert det.nan_count[1] == np.count_nonzero(np.isnan(x[:, 1]))


@pytest.mark.parametrize("name", ["ewma_zscore", "cusum", "page_hinkley", "seasonal"])
def test_nan_sample_leaves_state_unchanged(name: str) -> None:
    t, n = 200, 3
    x = noise(4, t, n)
    with_nan = x.copy()
    with_nan[120, 0] = np.nan
    a, b = make(name), make(name)
    for i in range(t):
        a.update(float(i), with_nan[i])
        # b never sees entity 0's sample 120: it gets entity 0's previous value path only via a's rule.
        if i != 120:
            b.update(float(i), x[i])
    # Entity 0's state in ``a`` equals that of ``b`` (which skipped the whole step 120).
    probe = x[-1] + np.array([1.0, 0.0, 0.0])
    a.update(float(t), probe)
    b.update(float(t), probe)
    assert a.score[0] == pytest.approx(b.score[0], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", VECTORIZED)
def test_gap_rewarms_instead_of_alarming(name: str) -> None:
    n = 4
    before = noise(5, 300, n)
    after = noise(6, 300, n, level=80.0)  # the level moved by 10 sigma while nothing was reported
    ts = np.concatenate([np.arange(300.0), 420.0 + np.arange(300.0)])
    alarms = run(make(name), ts, np.vstack([before, after]))
    assert not alarms.any()


@pytest.mark.parametrize("name", ALL)
def test_flapping_sensor_does_not_fire(name: str) -> None:
    n = 4 if REGISTRY[name].vectorized else 2
    t = 700
    rng = np.random.default_rng(8)
    x = noise(9, t, n)
    state = np.zeros(n, dtype=bool)
    left = np.zeros(n, dtype=int)
    for i in range(300, t):  # toggles by 15 sigma with runs of 1-3 samples
        left -= 1
        flip = left <= 0
        state = np.where(flip, ~state, state)
        left = np.where(flip, rng.integers(1, 4, n), left)
        x[i] += np.where(state, 30.0, 0.0)
    dropout = noise(10, t, n)
    dropout[300::7] = 0.0  # a sensor that reads 0 now and then
    for series in (x, dropout):
        assert not run(make(name), np.arange(t, dtype=float), series).any()


@pytest.mark.parametrize("name", ALL)
def test_clock_skew_jitter_and_reordering_do_not_fire(name: str) -> None:
    n = 4 if REGISTRY[name].vectorized else 2
    t = 600
    rng = np.random.default_rng(11)
    ts = np.arange(t, dtype=float) + rng.uniform(-0.3, 0.3, t)
    ts[100::50] -= 2.5  # a source whose clock steps back: these samples arrive out of order
    det = make(name)
    alarms = run(det, ts, noise(12, t, n))
    assert not alarms.any()
    assert det.out_of_order_count >= 10
    assert det.dt_s == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize("name", VECTORIZED)
def test_parameters_in_seconds_adapt_to_the_sampling_interval(name: str) -> None:
    """The same defaults on 1-minute data: warm-up/persistence in seconds become fewer samples."""
    t = 400
    x = with_cycle(name, noise(13, t, 3))
    x[300:, :2] += 20.0
    per_minute = {
        "seasonal": {"period_s": 6000.0, "n_buckets": 5, "min_bucket_s": 600.0},
        "phase_z": {"periods_s": (3000.0,), "phase_halfwidth_s": 120.0, "refresh_s": 1500.0},
    }
    det = make(name, **per_minute.get(name, {}))
    alarms = run(det, 60.0 * np.arange(t), x)
    assert det.dt_s == pytest.approx(60.0)
    latency = first_alarm(alarms, 300)
    assert (latency[:2] >= 0).all() and (latency[:2] <= 15).all(), latency
    assert not alarms[:300].any()


def test_bad_parameters_are_input_errors() -> None:
    with pytest.raises(InputError, match="warmup_s"):
        make_detector("cusum", warmup_s=-1.0)
    with pytest.raises(InputError, match="threshold"):
        make_detector("ewma_zscore", threshold=0.0)
    with pytest.raises(InputError, match="no_such"):
        make_detector("cusum", no_such=1.0)
    with pytest.raises(InputError, match="did you mean cusum"):
        make_detector("cusun")


def test_entity_count_is_fixed() -> None:
    det = make_detector("ewma_zscore")
    det.update(0.0, np.zeros(3))
    with pytest.raises(InputError, match="entities"):
        det.update(1.0, np.zeros(4))


def test_robust_option_finds_a_step() -> None:
    x = noise(14, 400, 4)
    x[300:, :3] += 20.0
    alarms = run(make_detector("ewma_zscore", robust=True), np.arange(400.0), x)
    latency = first_alarm(alarms, 300)
    assert (latency[:3] >= 0).all() and (latency[:3] < 30).all()
    assert not alarms[:, 3].any()
