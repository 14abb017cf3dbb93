"""phase_z: the same-phase robust z for strongly periodic series (daily / weekly counts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.lab.nab_windows import load_windows, score_alarms
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import SeriesBlock, read_series
from twinloop.ops.detect.phase_z import PhaseZ, PhaseZParams, autocorr, has_strong_cycle, ranks, slotted, strong_period
from twinloop.ops.detect.profiles import PROFILES, detect_with_profile, select_profile

DT = 300.0
DAY = int(86400 / DT)
ROOT = Path(__file__).resolve().parents[3]
NAB = ROOT / "benchmarks" / "data" / "nab"
sys.path.insert(0, str(ROOT / "benchmarks"))
from detect_nab import score_series  # noqa: E402  (the benchmark's own scoring, not a copy of it)


def traffic(days: int, seed: int = 0, weekly: bool = True) -> np.ndarray:
    """Poisson counts with a daily cycle (quiet nights) and, if ``weekly``, quiet weekends (days 5 and 6)."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY) * DT
    rate = 50.0 * (1.5 + np.sin(2 * np.pi * t / 86400.0))
    if weekly:
        rate *= np.where((t // 86400) % 7 >= 5, 0.5, 1.0)
    return rng.poisson(rate).astype(float)


def run(x: np.ndarray, ts: np.ndarray | None = None, **params: Any) -> tuple[np.ndarray, PhaseZ]:
    det = PhaseZ(dt_s=DT, **params)
    ts = np.arange(x.size) * DT if ts is None else ts
    alarms = np.array([det.update(float(t), np.array([v]))[0] for t, v in zip(ts, x, strict=True)])
    return alarms, det


def test_period_from_the_series_own_history() -> None:
    hist = traffic(21)[:, None]
    assert strong_period(hist, (DAY, 7 * DAY), 0.25)[0] == 7 * DAY  # weekends differ: a week beats a day
    assert strong_period(traffic(10, weekly=False)[:, None], (DAY, 7 * DAY), 0.25)[0] == DAY
    rng = np.random.default_rng(1)
    noise, walk = rng.standard_normal((21 * DAY, 1)), np.cumsum(rng.standard_normal((21 * DAY, 1)), axis=0)
    assert strong_period(noise, (DAY, 7 * DAY), 0.25)[0] == 0  # no cycle
    assert strong_period(walk, (DAY, 7 * DAY), 0.25)[0] == 0  # high acf at every lag is no cycle


def test_rank_autocorrelation_ignores_a_burst_and_handles_ties_and_nan() -> None:
    x = traffic(4, weekly=False)
    burst = x.copy()
    burst[500:510] = 1e6  # a news burst: ranks cap its weight
    r0, r1 = autocorr(ranks(x[:, None]), DAY)[0], autocorr(ranks(burst[:, None]), DAY)[0]
    assert r0 > 0.9 and r1 > 0.75  # the cycle still shows through ten samples at a million
    assert abs(autocorr(burst[:, None], DAY)[0]) < 0.1  # where the plain (Pearson) autocorrelation loses it
    tied = ranks(np.array([[1.0], [1.0], [np.nan], [3.0]]))
    np.testing.assert_array_equal(tied[:, 0], [1.5, 1.5, np.nan, 3.0])
    assert np.isnan(autocorr(np.ones((10, 1)), 3)[0])  # no variance: no correlation
    assert np.isnan(autocorr(np.ones((10, 1)), 10)[0])  # lag beyond the history


def test_holiday_dip_in_a_weekly_series_is_caught_and_routine_weeks_are_quiet() -> None:
    x = traffic(35)
    dip = slice(30 * DAY + DAY // 4, 30 * DAY + 3 * DAY // 4)  # a Wednesday's daytime at a third of its usual
    x[dip] *= 0.3
    alarms, det = run(x, poisson_floor=1.0)
    assert det._period[0] == 7 * DAY
    assert alarms[dip].any()
    assert not alarms[15 * DAY : 30 * DAY].any()  # two routine weeks once the weekly cycle is known
    # The same level at night is routine: phase matters, not the level.
    assert x[dip].min() < np.percentile(x[: 28 * DAY], 50)


def test_silent_on_aperiodic_noise_and_a_random_walk() -> None:
    rng = np.random.default_rng(2)
    for x in (50 + 5 * rng.standard_normal(10 * DAY), 50 + np.cumsum(rng.standard_normal(10 * DAY))):
        alarms, det = run(x)
        assert not alarms.any()
        assert det._period[0] == 0


def test_short_series_nan_and_gaps_are_safe() -> None:
    alarms, _ = run(np.array([1.0, 2.0, np.nan, 4.0]))
    assert not alarms.any()
    x = traffic(21, weekly=False)
    x[np.random.default_rng(3).random(x.size) < 0.05] = np.nan
    alarms, det = run(x)
    assert det._period[0] == DAY
    assert not (alarms & ~np.r_[False, alarms[:-1]])[np.isnan(x)].any()  # no alarm starts on a missing sample
    # Half a day missing (rows absent, not NaN): the phase is kept by time slots, so the next day is no anomaly.
    keep = np.ones(x.size, dtype=bool)
    keep[10 * DAY : 10 * DAY + DAY // 2] = False
    y = np.nan_to_num(x, nan=75.0)
    alarms, det = run(y[keep], np.arange(x.size)[keep] * DT)
    assert det._period[0] == DAY
    assert not alarms[10 * DAY :].any()


def test_bad_parameters_are_refused() -> None:
    for bad in ({"cycles": 1}, {"min_acf": 1.0}, {"periods_s": ()}, {"poisson_floor": -1.0}, {"threshold": 0.0}):
        with pytest.raises(InputError):
            PhaseZ(**bad)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-3, 0.5, 7.0, 1e4, -2.0]))
def test_alarms_do_not_depend_on_the_unit_or_the_sign(seed: int, scale: float) -> None:
    """Ranks, the median/MAD z and the relative floor are all unit-free: scaling (or flipping) the series moves
    no alarm; a missing sample never starts an alarm."""
    x = traffic(9, seed=seed, weekly=False)
    x[5 * DAY : 5 * DAY + 24] *= 3.0  # two hours at three times the usual
    x[np.random.default_rng(seed).random(x.size) < 0.02] = np.nan
    a, det_a = run(x, min_std_abs=0.0)
    b, det_b = run(scale * x, min_std_abs=0.0)
    np.testing.assert_array_equal(a, b)
    assert det_a._period[0] == det_b._period[0] == DAY
    onset = a & ~np.r_[False, a[:-1]]
    assert not onset[np.isnan(x)].any()
    assert a[5 * DAY : 5 * DAY + 24].any()


def test_counts_get_generic_by_name_and_count_is_quiet_where_there_is_no_cycle() -> None:
    """``auto`` gives counts and traffic ``generic`` (the count profile lost to it on the held-out tweet series, so
    it is opt-in); NAB's ELB request count (14 days) has no strong daily cycle, so even ``--profile count`` runs
    generic's detectors on it and the score stays at the documented 1/2 windows with no false alarm (NAB 45.8)."""
    for name in ("elb_request_count_8c0756.csv", "Twitter_volume_AAPL.csv", "nyc_taxi.csv", "http_requests"):
        assert select_profile("auto", [name, "value"]).name == "generic"
    assert select_profile("auto", ["ec2_request_latency_system_failure.csv"]).name == "latency"
    load_variants()
    key = "realAWSCloudwatch/elb_request_count_8c0756.csv"
    blocks, _ = read_series(NAB / Path(key).name, ["value"])
    count = detect_with_profile(blocks, PROFILES["count"])
    generic = detect_with_profile(blocks, PROFILES["generic"])
    assert [(d.ts, d.detector) for d in count] == [(d.ts, d.detector) for d in generic]
    ts = blocks[0].ts
    score = score_alarms([d.ts for d in count], load_windows(NAB / "combined_windows.json", key), ts)
    assert (score.found, score.false_alarms) == (1, 0) and score.nab_score > 40.0


def test_block_cycle_check_keeps_phase_across_missing_rows() -> None:
    x = traffic(10, weekly=False)
    ts = np.arange(x.size) * DT
    keep = np.ones(x.size, dtype=bool)
    keep[3 * DAY : 3 * DAY + DAY // 3] = False  # eight hours of rows absent
    grid = slotted(ts[keep], x[keep, None], DT)
    assert grid.shape == (x.size, 1) and np.isnan(grid[3 * DAY, 0]) and grid[-1, 0] == x[-1]
    assert has_strong_cycle(ts[keep], x[keep, None], DT, PhaseZParams())
    noise = np.random.default_rng(4).standard_normal((x.size, 1))
    assert not has_strong_cycle(ts, noise, DT, PhaseZParams())
    assert not has_strong_cycle(ts[:1], x[:1, None], DT, PhaseZParams())


def test_count_profile_runs_phase_z_and_novelty_on_a_periodic_series() -> None:
    load_variants()
    x = traffic(21)
    x[17 * DAY + DAY // 4 : 17 * DAY + 3 * DAY // 4] *= 0.3  # a holiday-like dip on a weekday
    block = SeriesBlock("", np.arange(x.size) * DT, ("requests",), x[:, None])
    found = detect_with_profile([block], PROFILES["count"])
    assert {d.detector for d in found} <= {"phase_z", "novelty_z"}  # no CUSUM: generic's set is replaced
    assert any(17 * DAY * DT <= d.ts <= 18 * DAY * DT and d.detector == "phase_z" for d in found)


#: NAB tweet series under ``--profile count`` (docs/sections/calibration-detect.md): windows, found, most false
#: alarms, least NAB score. AAPL fitted on (2/2, 9 false alarms in 55 days, NAB 71.9; generic 9 and 70.4); GOOG held
#: out for the first design and fitted on for the second (2/3, 2, 58.5; the 03-13 burst that phase_z's hour misses is
#: novelty z's); IBM held out for the second (2/3, 3, 56.5; generic 3/3, 6, 84.3: why ``auto`` gives counts generic).
#: The bands leave room for a small change, not for losing a window or doubling the false alarms. (Old scorer's
#: figures; NAB's scorer: AAPL 8 false alarms, 74.8; GOOG 1, 60.4; IBM 3, 56.5.)
TWEET_BANDS = [
    ("realTweets/Twitter_volume_AAPL.csv", 2, 2, 12, 60.0),
    ("realTweets/Twitter_volume_GOOG.csv", 3, 2, 4, 50.0),
    ("realTweets/Twitter_volume_IBM.csv", 3, 2, 6, 45.0),
]


@pytest.mark.parametrize(("key", "windows", "found", "max_false", "min_nab"), TWEET_BANDS)
def test_count_profile_on_the_tweet_series_stays_in_its_band(
    key: str, windows: int, found: int, max_false: int, min_nab: float
) -> None:
    ran, score = score_series(NAB / Path(key).name, NAB / "combined_windows.json", key, "count")
    assert ran == "count"
    assert (score.windows, score.found) == (windows, found)
    assert score.false_alarms <= max_false
    assert score.nab_score > min_nab
