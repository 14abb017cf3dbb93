"""``generic`` on a series with a strong daily cycle: judged against the same time of earlier days.

An hourly price (a cost per click or per thousand impressions) swings every day from its night low to its midday
high. A single hour at the night low in the middle of the day is a fault (a pricing pipeline that returned nothing,
an auction that cleared at zero), but it is inside the day's range, so a robust z against the last days (whose scale
is the daily swing) cannot see it; a z against the same hour of earlier days can. ``generic`` does not know the
signal is a count, so the same-phase scale has no Poisson floor (``sqrt`` of a price of 0.3 would be wider than the
swing). Series without a strong cycle keep generic's detectors. See docs/sections/calibration-detect.md, "A declared
change: generic judges a cyclic series against the same time of earlier days".
"""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import SeriesBlock
from twinloop.ops.detect.profiles import PROFILES, detect_with_profile

HOUR = 3600.0
DAYS = 24


@pytest.fixture(autouse=True, scope="module")
def _variants() -> None:
    load_variants()


def _hourly_price(fault_day: int, fault_hour: int, fault_value: float, seed: int = 0) -> tuple[SeriesBlock, float]:
    """Hourly cost: 0.2 at 03:00, 0.6 at 15:00 (a cosine), 3 % noise; one hour replaced by ``fault_value``."""
    rng = np.random.default_rng(seed)
    n = DAYS * 24
    t = 1.3e9 + np.arange(n) * HOUR
    hour = np.arange(n) % 24
    v = 0.4 - 0.2 * np.cos(2 * np.pi * (hour - 3) / 24)
    v = v * (1 + 0.03 * rng.standard_normal(n))
    i = fault_day * 24 + fault_hour
    v[i] = fault_value
    return SeriesBlock("", t, ("cpm",), v.reshape(-1, 1)), float(t[i])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_night_low_at_midday_is_paged(seed: int) -> None:
    # 0.2 is the daily minimum, but at 14:00 the same hour of earlier days is ~0.59: a fault only the same-phase
    # baseline sees (generic's day-window robust z has the swing as its scale). Fails without the periodic branch.
    block, t_fault = _hourly_price(fault_day=16, fault_hour=14, fault_value=0.2, seed=seed)
    found = detect_with_profile([block], PROFILES["generic"])
    assert any(t_fault <= d.ts <= t_fault + 2 * HOUR for d in found)
    # and nothing before it: the ordinary days are quiet
    assert not [d for d in found if d.ts < t_fault]


def test_no_poisson_floor_for_an_unknown_unit() -> None:
    # the count profile floors the scale at sqrt(baseline) (counts); on a price of ~0.6 that floor (0.77) is wider than
    # the whole daily swing, so count misses what generic (no Poisson floor) pages
    block, t_fault = _hourly_price(fault_day=16, fault_hour=14, fault_value=0.2)
    count = detect_with_profile([block], PROFILES["count"])
    assert not any(t_fault <= d.ts <= t_fault + 2 * HOUR for d in count)
    generic = detect_with_profile([block], PROFILES["generic"])
    assert any(t_fault <= d.ts <= t_fault + 2 * HOUR for d in generic)


def test_a_series_without_a_cycle_keeps_generic_detectors() -> None:
    # white noise around a level, one 20-sigma hour: generic's novelty z and CUSUM, as before the periodic branch
    rng = np.random.default_rng(3)
    n = DAYS * 24
    t = 1.3e9 + np.arange(n) * HOUR
    v = 0.4 * (1 + 0.03 * rng.standard_normal(n))
    v[16 * 24 + 14 : 16 * 24 + 17] = 0.4 * 1.6
    found = detect_with_profile([SeriesBlock("", t, ("cpm",), v.reshape(-1, 1))], PROFILES["generic"])
    assert {d.detector for d in found} <= {"novelty_z", "cusum"}
    assert found
