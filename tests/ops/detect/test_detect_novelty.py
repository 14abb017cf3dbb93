"""The novelty-gated robust z (``novelty_z``): quiet on excursions the series has shown, loud on new ones.

Properties (hypothesis): the record and hold levels equal a brute-force computation; the score is finite wherever
a sample is; alarms do not depend on where the series sits in time; the gate only removes alarms of the plain
robust z with the same parameters. Behaviour: a burst that recurs is paged once, a longer or higher one again,
and a level shift is caught as by the plain robust z.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.base import make_detector
from twinloop.ops.detect.novelty_z import hold_levels, records

load_variants()

#: Parameters for 5 min data (the utilisation profile's, in samples): a day's robust window refreshed hourly,
#: a week's record, holds up to a day.
DT_S = 300.0
PARAMS: dict[str, Any] = {
    "threshold": 6.0, "window_s": 86400.0, "refresh_s": 3600.0, "warmup_s": 21600.0, "min_persistence": 2,
    "persistence_s": 0.0, "smooth_s": 0.0, "step_floor": 1.0, "min_std_abs": 0.5, "flap_jumps": 1e9,
    "record_window_s": 7 * 86400.0, "max_hold_s": 86400.0, "novelty_margin": 2.0,
}  # fmt: skip
#: The same parameters for the plain robust ``ewma_zscore`` (no record).
PLAIN = {k: v for k, v in PARAMS.items() if k not in ("record_window_s", "max_hold_s", "novelty_margin")}


def _brute_records(h: np.ndarray, d: int) -> tuple[float, float]:
    up, down = -np.inf, np.inf
    for i in range(h.shape[0] - d + 1):
        w = h[i : i + d]
        if np.isfinite(w).any():
            up, down = max(up, float(np.nanmin(w))), min(down, float(np.nanmax(w)))
    return up, down


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.floats(-1e3, 1e3), st.just(float("nan"))), min_size=1, max_size=40),
    st.integers(0, 5),
)
def test_records_and_hold_levels_equal_brute_force(values: list[float], k: int) -> None:
    h = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    holds = tuple(1 << i for i in range(k + 1))
    up, down = records(h, holds)
    for i, d in enumerate(holds):
        assert (up[i, 0], down[i, 0]) == _brute_records(h, d)
    usable = tuple(d for d in holds if d <= h.shape[0])
    if usable:
        lo, hi = hold_levels(h[::-1], usable)
        for i, d in enumerate(usable):
            last = h[-d:, 0]
            expected = (np.nanmin(last), np.nanmax(last)) if np.isfinite(last).any() else (np.nan, np.nan)
            np.testing.assert_array_equal([lo[i, 0], hi[i, 0]], expected)


def _feed(name: str, x: np.ndarray, t0: float, **params: Any) -> tuple[np.ndarray, np.ndarray]:
    det = make_detector(name, **params)
    alarms, scores = [], []
    for i, row in enumerate(x):
        alarms.append(det.update(t0 + DT_S * i, row))
        scores.append(det.score.copy())
    return np.array(alarms), np.array(scores)


def _bursty(seed: int, n: int, bursts: int) -> np.ndarray:
    """Two entities: an idle VM at 2-3 % with ``bursts`` random 3-sample bursts to 40-90 %, NaNs sprinkled in."""
    rng = np.random.default_rng(seed)
    x = 2.5 + 0.3 * rng.standard_normal((n, 2))
    for _ in range(bursts):
        i, e = int(rng.integers(0, n - 3)), int(rng.integers(0, 2))
        x[i : i + 3, e] = rng.uniform(40.0, 90.0, 3)
    x[rng.random((n, 2)) < 0.02] = np.nan
    return x


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 30), st.floats(0.0, 3e9), st.integers(1, 8))
def test_no_nan_time_shift_invariance_and_the_gate_only_removes(seed: int, bursts: int, t0: float, k: int) -> None:
    x = _bursty(seed, 600, bursts)
    shift = k * 86400.0 + 0.5 * DT_S * (seed % 3)
    alarms, scores = _feed("novelty_z", x, t0, **PARAMS)
    moved, moved_scores = _feed("novelty_z", x, t0 + shift, **PARAMS)
    valid = np.isfinite(x)
    assert np.isfinite(scores[valid]).all() and np.isnan(scores[~valid]).all()
    np.testing.assert_array_equal(alarms, moved)
    np.testing.assert_array_equal(scores, moved_scores)
    z_alarms, _ = _feed("ewma_zscore", x, t0, robust=True, **PLAIN)
    assert not (alarms & ~z_alarms).any()


def _onsets(alarms: np.ndarray) -> list[int]:
    a = alarms[:, 0]
    return [i for i in range(len(a)) if a[i] and (i == 0 or not a[i - 1])]


def test_recurring_burst_pages_once_a_longer_or_higher_one_again() -> None:
    """A week of an idle VM with the same 15 min burst to 60 % 3 h and 15 h into every day. The record ends a
    day (the longest hold) before now, so the bursts of the first day and a bit page; from then on none does. A
    2 h plateau at the same 60 % on day 5 pages (no hold that long before), and so does a 15 min burst to 95 % on
    day 6 (no level that high before)."""
    n = 7 * 288
    rng = np.random.default_rng(4)
    x = 2.5 + 0.3 * rng.standard_normal((n, 1))
    for day in range(7):
        for hour in (3, 15):
            x[day * 288 + hour * 12 : day * 288 + hour * 12 + 3] = 60.0
    plateau = 5 * 288 + 8 * 12
    x[plateau : plateau + 24] = 60.0
    high = 6 * 288 + 8 * 12
    x[high : high + 3] = 95.0
    onsets = _onsets(_feed("novelty_z", x, 1.7e9, **PARAMS)[0])
    # The plateau is novel from its 4th sample (a 4-sample hold at 60 %: the bursts held 3) and alarms on its 5th
    # (2-sample persistence); the high burst alarms on its 2nd sample.
    assert all(i < 2 * 288 for i in onsets if i < plateau)
    assert [i for i in onsets if i >= 2 * 288] == [plateau + 4, high + 1]
    z_onsets = _onsets(_feed("ewma_zscore", x, 1.7e9, robust=True, **PLAIN)[0])
    assert len(z_onsets) >= 12  # the plain robust z pages on every burst


def test_level_shift_is_caught_as_by_the_robust_z() -> None:
    rng = np.random.default_rng(5)
    x = 6.0 + 0.3 * rng.standard_normal((4 * 288, 1))
    x[3 * 288 :] += 8.0  # a service stuck at 14 % from day 3 on (NAB rds_cpu_utilization_cc0c53's failure)
    onsets = _onsets(_feed("novelty_z", x, 1.7e9, **PARAMS)[0])
    assert onsets == [3 * 288 + 1]  # once, on the second sample (2-sample persistence), not again later


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(InputError, match="robust"):
        make_detector("novelty_z", robust=False)
    with pytest.raises(InputError, match="novelty_margin"):
        make_detector("novelty_z", novelty_margin=-1.0)
    with pytest.raises(InputError, match="record_window_s"):
        make_detector("novelty_z", record_window_s=0.0)
