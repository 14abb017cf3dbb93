"""Window scoring for labelled anomaly series (NAB's scorer: probationary period, scaled sigmoid, standard profile)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.lab.nab_windows import load_windows, pooled_nab_score, probation_rows, scaled_sigmoid, score_alarms

DAY = 86400.0
ROWS = np.arange(0.0, 30 * DAY + 1, 3600.0)  # 721 hourly rows: the first 108 (4.5 days) are probationary
WINDOWS = [(10 * DAY, 11 * DAY), (20 * DAY, 21 * DAY)]


def test_probationary_length_is_nab_s() -> None:
    # NAB's sweeper: min(floor(0.15 * rows), 0.15 * 5000).
    assert [probation_rows(n) for n in (0, 6, 100, 721, 4032, 5000, 5001, 22695)] == [0, 0, 15, 108, 604, 750, 750, 750]


def test_scaled_sigmoid_matches_nab_s_documented_values() -> None:
    # nab/sweeper.py's docstring: -1 -> 0.98661, -0.5 -> 0.84828, 0 -> 0, 1 -> -0.98661; beyond 3, -1.
    got = [scaled_sigmoid(x) for x in (-1.0, -0.5, 0.0, 1.0, 3.5)]
    assert got == pytest.approx([0.98661, 0.84828, 0.0, -0.98661, -1.0], abs=1e-5)


def test_hand_computed_score_with_probation_early_detection_and_false_positives() -> None:
    """100 rows 300 s apart (probation: rows 0-14), windows on rows 40-49 and 80-89, detections on rows 5, 20, 42,
    45 and 60. By hand, NAB's standard profile:
    row 5 is probationary (ignored); row 42 is the window's first detection: x = -(49 - 42 + 1) / 10 = -0.8,
    sigma = 2 / (1 + e^-4) - 1 = 0.964028, / sigma(-1) = 0.986614 -> +0.977107 (row 45 adds nothing); row 20 precedes
    every window: -0.11; row 60 is 11 rows after a 10-row window: x = 11 / 9, sigma = 2 / (1 + e^6.1111) - 1 =
    -0.995574, x 0.11 -> -0.109513; the second window is missed: -1. Raw -0.242406; null -2, perfect +2:
    100 * (-0.242406 + 2) / 4 = 43.94."""
    rows = np.arange(100) * 300.0
    windows = [(40 * 300.0, 49 * 300.0), (80 * 300.0, 89 * 300.0)]
    s = score_alarms([r * 300.0 for r in (5, 20, 42, 45, 60)], windows, rows)
    assert (s.found, s.windows, s.false_alarms, s.probation_alarms) == (1, 2, 2, 1)
    assert s.raw == pytest.approx(-0.242406, abs=1e-6)
    assert s.nab_score == pytest.approx(43.94, abs=0.005)
    assert s.days == pytest.approx(84 * 300.0 / DAY)  # rows 15 .. 99


def test_a_window_inside_the_probation_is_not_scored_and_files_pool_like_nab_s_corpus() -> None:
    rows = np.arange(100) * 300.0
    early, late = (2 * 300.0, 6 * 300.0), (50 * 300.0, 59 * 300.0)
    s = score_alarms([3 * 300.0, 50 * 300.0], [early, late], rows)
    assert (s.windows, s.found, s.false_alarms, s.probation_alarms) == (1, 1, 0, 1)
    assert s.nab_score == pytest.approx(100.0)
    missed = score_alarms([], [late], rows)
    assert missed.nab_score == pytest.approx(0.0)
    assert pooled_nab_score([s, missed]) == pytest.approx(50.0)  # (1 - 1 + 2) / 4
    assert math.isnan(score_alarms([10 * 300.0], [early], rows).nab_score)  # nothing left to score


def test_silence_scores_zero_and_early_perfect_detection_scores_100() -> None:
    assert score_alarms([], WINDOWS, ROWS).nab_score == pytest.approx(0.0)
    s = score_alarms([10 * DAY, 20 * DAY], WINDOWS, ROWS)
    assert (s.found, s.false_alarms, s.nab_score) == (2, 0, pytest.approx(100.0))


def test_late_detection_scores_less_than_early_and_false_alarms_cost() -> None:
    early = score_alarms([10 * DAY + 3600], WINDOWS, ROWS)
    late = score_alarms([11 * DAY - 3600], WINDOWS, ROWS)
    noisy = score_alarms([10 * DAY + 3600, 5 * DAY, 6 * DAY, 7 * DAY], WINDOWS, ROWS)
    assert early.nab_score > late.nab_score > 0.0
    assert noisy.false_alarms == 3 and noisy.false_alarms_per_day == pytest.approx(3 / 25.5)
    assert noisy.nab_score < early.nab_score
    # A false positive just after a window (a late real alarm) costs less than one far from any window.
    just_after = score_alarms([10 * DAY, 11 * DAY + 3600], WINDOWS, ROWS)
    far = score_alarms([10 * DAY, 15 * DAY], WINDOWS, ROWS)
    assert early.nab_score > just_after.nab_score > far.nab_score


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 30 * DAY, allow_nan=False), max_size=40))
def test_score_is_bounded_and_counts_are_consistent(alarms: list[float]) -> None:
    s = score_alarms(alarms, WINDOWS, ROWS)
    assert 0 <= s.found <= s.windows == 2
    assert 0 <= s.false_alarms + s.probation_alarms <= len(alarms)
    assert s.nab_score <= 100.0 + 1e-9


def test_load_windows_reads_nab_labels_and_rejects_bad_ones(tmp_path: Path) -> None:
    p = tmp_path / "w.json"
    p.write_text(json.dumps({"a/b.csv": [["2014-03-14 03:31:00.000000", "2014-03-14 14:41:00.000000"]]}))
    ((a, b),) = load_windows(p, "a/b.csv")
    assert b - a == pytest.approx(11 * 3600 + 10 * 60)
    with pytest.raises(InputError):
        load_windows(p, "missing.csv")
    p.write_text(json.dumps({"a/b.csv": [["2014-03-14", "yesterday"]]}))
    with pytest.raises(InputError):
        load_windows(p, "a/b.csv")
