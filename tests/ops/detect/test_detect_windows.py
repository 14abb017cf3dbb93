"""Window scoring for labelled anomaly series (NAB-style)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.lab.nab_windows import load_windows, score_alarms

DAY = 86400.0
WINDOWS = [(10 * DAY, 11 * DAY), (20 * DAY, 21 * DAY)]


def test_silence_scores_zero_and_early_perfect_detection_scores_100() -> None:
    assert score_alarms([], WINDOWS, 0.0, 30 * DAY).nab_score == pytest.approx(0.0)
    s = score_alarms([10 * DAY, 20 * DAY], WINDOWS, 0.0, 30 * DAY)
    assert (s.found, s.false_alarms, s.nab_score) == (2, 0, pytest.approx(100.0))


def test_late_detection_scores_less_than_early_and_false_alarms_cost() -> None:
    early = score_alarms([10 * DAY + 3600], WINDOWS, 0.0, 30 * DAY)
    late = score_alarms([11 * DAY - 3600], WINDOWS, 0.0, 30 * DAY)
    noisy = score_alarms([10 * DAY + 3600, 1 * DAY, 2 * DAY, 3 * DAY], WINDOWS, 0.0, 30 * DAY)
    assert early.nab_score > late.nab_score > 0.0
    assert noisy.false_alarms == 3 and noisy.false_alarms_per_day == pytest.approx(0.1)
    assert noisy.nab_score < early.nab_score


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 30 * DAY, allow_nan=False), max_size=40))
def test_score_is_bounded_and_counts_are_consistent(alarms: list[float]) -> None:
    s = score_alarms(alarms, WINDOWS, 0.0, 30 * DAY)
    assert 0 <= s.found <= s.windows == 2
    assert 0 <= s.false_alarms <= len(alarms)
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
