"""Cumulative counters in a user's file are analysed as their rates (`ops/detect/counters.py`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from twinloop.ops.detect.counters import as_rates, counter_mask
from twinloop.ops.detect.offline import read_series


def _counter(n: int = 400, every: int = 1) -> np.ndarray:
    """An energy counter in mJ at 300 W for 200 samples, then 700 W, updated every ``every`` samples (1 s apart)."""
    watts = np.where(np.arange(n) < 200, 300.0, 700.0)
    total = np.cumsum(watts * 1000.0)
    return total[(np.arange(n) // every) * every]


def test_a_counter_read_faster_than_it_updates_is_still_a_counter() -> None:
    gauge_steps = np.repeat([480.0, 24_000.0, 24_500.0], [100, 200, 100])  # memory used: up now and then
    values = np.column_stack([_counter(), _counter(every=2), gauge_steps, 60 + np.sin(np.arange(400.0))])
    assert counter_mask(values).tolist() == [True, True, False, False]


def test_rates_recover_the_power_and_a_reset_is_no_negative_rate() -> None:
    ts = np.arange(400.0)
    v = _counter()
    v[300:] -= v[299] - 5.0  # the exporter restarted: the counter starts again near zero
    assert counter_mask(v[:, None]).tolist() == [True]
    rate = as_rates(ts, v[:, None], np.array([True]))[:, 0]
    assert np.isnan(rate[0]) and np.isnan(rate[300])
    assert np.allclose(rate[1:200], 300_000.0) and np.allclose(rate[201:300], 700_000.0)


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=30, max_size=200))
def test_a_series_with_an_ordinary_fall_is_never_a_counter(xs: list[float]) -> None:
    v = np.abs(np.asarray(xs)) + 1.0
    v[len(v) // 2] = v[len(v) // 2 - 1] * 0.5  # a fall to half: not a reset
    assert not counter_mask(v[:, None])[0]


def test_detect_reports_the_counter_and_alarms_on_its_rate(tmp_path: Path, cli: Callable[..., Any]) -> None:
    p = tmp_path / "gpu.csv"
    t0 = 1_764_244_800
    rows = [f"{t0 + i},{e:.0f},{45 + (i % 3)}" for i, e in enumerate(_counter(n=1200))]
    p.write_text("t,energy_mj,gpu_temp_c\n" + "\n".join(rows) + "\n")
    (block,), report = read_series(p)
    assert report.counters == ["energy_mj"]
    assert np.allclose(block.values[1:150, 0], 300_000.0)
    res = cli("detect", str(p), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["counters_as_rates"] == ["energy_mj"]
    hits = [d["ts"] - t0 for d in doc["detections"] if d["entity"] == "energy_mj"]
    assert hits and all(200 <= h <= 215 for h in hits), hits


@given(st.lists(st.integers(1, 399), max_size=40, unique=True))
def test_missing_samples_neither_break_a_counter_nor_its_rate(holes: list[int]) -> None:
    ts = np.arange(400.0)
    v = _counter()[:, None].copy()
    v[holes, 0] = np.nan
    assert counter_mask(v).tolist() == [True]
    rate = as_rates(ts, v, np.array([True]))[:, 0]
    ok = np.isfinite(rate)
    assert set(np.flatnonzero(~ok).tolist()) == {0, *holes}
    # across a hole, the increase over the whole gap per second of it: the power of the seconds in between
    assert np.all((rate[ok] >= 300_000.0 - 1e-6) & (rate[ok] <= 700_000.0 + 1e-6))
