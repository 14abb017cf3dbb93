"""Holes in the time axis under the named profiles: a hole shorter than a day keeps the detectors' baselines.

NAB's road series (and any exporter that stops at night) have holes of 25 min to a few hours every few hours. The
stock rule (re-warm after 5 missing intervals, made for 1 s GPU telemetry) left the profiles' detectors warming up
for 6-24 h after each, so a failure soon after a hole was not seen (docs/sections/calibration-detect.md, "Holes in
the time axis").
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import SeriesBlock
from twinloop.ops.detect.profiles import PROFILES, detect_with_profile

STEP_S = 300.0
DAY = 288  # samples of 5 min in a day
T0 = 1.7e9


def _series(hole_at: int, hole_s: float, shift_at: int, n: int = 4 * DAY, seed: int = 3) -> tuple[SeriesBlock, float]:
    """``n`` samples at 5 min around 50 (σ 1), a hole of ``hole_s`` before row ``hole_at`` and a step to 70 for 4 h
    from row ``shift_at``; the block and the step's first time."""
    rng = np.random.default_rng(seed)
    t = T0 + STEP_S * np.arange(n, dtype=np.float64)
    t[hole_at:] += hole_s - STEP_S
    v = 50.0 + rng.normal(0.0, 1.0, n)
    v[shift_at : shift_at + 48] += 20.0
    return SeriesBlock("value", t, ("s",), v.reshape(-1, 1)), float(t[shift_at])


@pytest.mark.parametrize("profile", ["generic", "utilisation", "latency"])
def test_a_shift_an_hour_after_a_nightly_hole_is_found(profile: str) -> None:
    """Two-hour holes every night (01:00-03:00); on the fourth day the level steps up by 20 σ at 04:00, an hour after
    the data resume. With the stock rule the hole re-warmed every detector (6 h of silence) and the step was missed;
    the profiles keep their day-long baselines across it and page within half an hour."""
    load_variants()
    rng = np.random.default_rng(7)
    days = 4
    keep = np.ones(days * DAY, dtype=bool)
    for d in range(days):
        keep[d * DAY + 12 : d * DAY + 36] = False  # 01:00 to 03:00 missing
    t = T0 + STEP_S * np.arange(days * DAY, dtype=np.float64)
    v = 50.0 + rng.normal(0.0, 1.0, days * DAY)
    shift = 3 * DAY + 48  # 04:00 on the fourth day
    v[shift : shift + 48] += 20.0
    block = SeriesBlock("value", t[keep], ("road",), v[keep].reshape(-1, 1))
    found = [d.ts for d in detect_with_profile([block], PROFILES[profile]) if t[shift] <= d.ts < t[shift] + 1800.0]
    assert found


@pytest.mark.parametrize("profile", ["generic", "latency"])
def test_a_level_that_moved_across_a_short_hole_is_paged(profile: str) -> None:
    """The rule keeps the baseline whether or not the level across the hole is continuous: a series that resumes
    20 σ higher after a 2 h hole (a service back in a bad state after a restart) is paged on its first samples. With
    the stock rule the hole re-warmed the detectors, which then learnt the new level as normal and never paged."""
    load_variants()
    rng = np.random.default_rng(11)
    n = 4 * DAY
    t = T0 + STEP_S * np.arange(n, dtype=np.float64)
    t[2 * DAY :] += 7200.0 - STEP_S
    v = 50.0 + rng.normal(0.0, 1.0, n)
    v[2 * DAY :] += 20.0
    block = SeriesBlock("value", t, ("s",), v.reshape(-1, 1))
    alarms = [d.ts for d in detect_with_profile([block], PROFILES[profile])]
    assert alarms and t[2 * DAY] <= alarms[0] < t[2 * DAY] + 1800.0


def test_a_hole_longer_than_a_day_still_rewarms() -> None:
    """Across a two-day hole the old baseline says nothing about the series: the detectors re-warm, and a step an
    hour after the data resume and lasts 4 h falls in the 6 h warm-up (no page while it lasts)."""
    load_variants()
    block, shift_ts = _series(hole_at=2 * DAY, hole_s=2 * 86400.0, shift_at=2 * DAY + 12)
    during = [d for d in detect_with_profile([block], PROFILES["generic"]) if shift_ts <= d.ts < shift_ts + 4 * 3600.0]
    assert not during


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hole_h=st.floats(min_value=0.5, max_value=20.0),
    start=st.integers(min_value=DAY + 10, max_value=2 * DAY),
    lag=st.integers(min_value=1, max_value=36),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_any_hole_shorter_than_a_day_keeps_the_step_visible(hole_h: float, start: int, lag: int, seed: int) -> None:
    """Property: wherever a hole of 30 min to 20 h falls after the first day, a 20 σ step that starts 5 min to 3 h
    after the data resume is paged within half an hour by ``generic`` (the profile ``auto`` gives unnamed series),
    and no page falls before the step."""
    load_variants()
    block, shift_ts = _series(hole_at=start, hole_s=hole_h * 3600.0, shift_at=start + lag, seed=seed)
    alarms = [d.ts for d in detect_with_profile([block], PROFILES["generic"])]
    assert [a for a in alarms if shift_ts <= a < shift_ts + 1800.0]
    assert not [a for a in alarms if a < shift_ts]
