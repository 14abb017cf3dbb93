"""The summary's intervals: Student t across seeds, loop settings kept apart, failed rows left out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from twinloop.sweep.summary import summarize, t_interval


def test_t_interval_matches_scipy() -> None:
    x = [1.0, 2.5, 2.0, 4.0, 3.1]
    mean, hw = t_interval(x)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert mean == pytest.approx(np.mean(x)) and hw is not None
    assert (mean - hw, mean + hw) == pytest.approx((lo, hi))


def test_one_seed_has_no_interval() -> None:
    assert t_interval([3.0]) == (3.0, None)


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30))
def test_interval_is_centred_and_non_negative(x: list[float]) -> None:
    mean, hw = t_interval(x)
    assert hw is not None and hw >= 0 and math.isfinite(hw)
    assert min(x) - 1e-6 * (1 + abs(mean)) <= mean <= max(x) + 1e-6 * (1 + abs(mean))


def _row(cell: int, seed: int, loop: str, value: float, status: str = "ok") -> dict:
    return {"cell": cell, "scenario": "s", "seed": seed, "loop": loop, "status": status,
            "metrics": [("pue", value)], "detection": [("incidents", 2.0)]}  # fmt: skip


def test_summary_groups_by_loop_and_skips_failed() -> None:
    rows = [_row(0, 0, "off", 1.2), _row(1, 0, "on-auto", 1.1), _row(2, 1, "off", 1.4),
            _row(3, 1, "on-auto", 1.1), _row(4, 2, "off", 99.0, status="failed")]  # fmt: skip
    by = {(s.loop, s.metric): s for s in summarize(rows)}
    off = by[("off", "pue")]
    assert off.n == 2 and off.mean == pytest.approx(1.3) and off.values == ((0, 1.2), (1, 1.4))
    assert by[("on-auto", "pue")].half_width == 0.0
    assert by[("off", "detection.incidents")].mean == 2.0
