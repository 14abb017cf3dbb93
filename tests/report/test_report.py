"""Self-contained HTML reports: no network reference, escaped data, charts that follow the data."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.report import (
    Section,
    TimelineItem,
    comparison_table,
    heatmap,
    render_report,
    sim_report,
    table,
    timeline,
    timeseries_chart,
    write_report,
)
from twinloop.report.svg import heat_color, value_range


class _Refs(HTMLParser):
    """Collects src/href of every tag, and whether any <script> exists."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.refs += [(tag, v or "") for k, v in attrs if k in ("src", "href", "xlink:href")]


def refs_of(text: str) -> _Refs:
    p = _Refs()
    p.feed(text)
    return p


def test_sim_report_is_self_contained_and_has_every_part(store: Path, tmp_path: Path, hot_rack: str) -> None:
    out = sim_report(
        store,
        tmp_path / "r" / "report.html",
        summary={
            "energy": {"facility_kwh": 1.5},
            "pue": 1.2,
            "jobs": [{"name": "train-a", "kind": "training", "gpus": 48, "ettr": 0.9}],
        },
        comparison=({"energy_kwh": 10.0, "ettr": 0.8}, {"energy_kwh": 9.0, "ettr": 0.9}),
    )
    text = out.read_text()
    refs = refs_of(text)
    assert refs.scripts == 0 and not [r for r in refs.refs if "http" in r[1] or r[1].startswith("//")]
    assert "http://" not in text and "https://" not in text and "<link" not in text
    for title in (
        "Loop off vs loop on",
        "Summary",
        "Facility power",
        "PUE",
        "GPU temperature by rack",
        "Incident timeline",
        "Action log",
    ):
        assert f"<h2>{title}</h2>" in text
    assert text.count("<svg") >= 4 and hot_rack in text
    assert "loop-on · thermal_throttle" in text and "cdu_setpoint" in text


def test_heatmap_marks_the_hot_rack_hottest(store: Path, hot_rack: str) -> None:
    from twinloop.report.sim import rack_temperature
    from twinloop.telemetry.store.duckdb_store import DuckDBStore

    with DuckDBStore(store, read_only=True) as s:
        t0, t1 = s.time_range()
        assert t0 is not None and t1 is not None
        ts, racks, grid = rack_temperature(s, t0, (t1 - t0) / 10)
    assert len(racks) == 6 and grid.shape == (6, ts.size)
    hot = racks.index(hot_rack)
    assert np.nanargmax(grid[:, -1]) == hot and grid[hot, -1] > grid[hot, 0] + 15


def test_comparison_table_colors_by_direction() -> None:
    html = comparison_table(
        {"energy_kwh": 10.0, "goodput": 5.0, "incidents": 3.0},
        {"energy_kwh": 9.0, "goodput": 4.0, "incidents": 3.0},
        higher_is_better=["goodput"],
    )
    rows = dict(re.findall(r"<tr><td>([a-z_]+)</td>.*?class=\"num ([a-z]*)\"", html))
    assert rows == {"energy_kwh": "better", "goodput": "worse", "incidents": ""}
    assert "-10.0%" in html and "-20.0%" in html


def test_data_is_escaped() -> None:
    evil = '<script>alert(1)</script>"'
    text = render_report(
        evil,
        [
            Section(
                evil,
                table([evil], [[evil, 1.5]])
                + timeline(evil, [TimelineItem(evil, 0, 5, evil)])
                + heatmap(evil, [0, 1], [evil], [[1.0, 2.0]], unit=evil),
                note=evil,
            )
        ],
    )
    assert "<script>" not in text and refs_of(text).scripts == 0


def test_write_report_creates_the_file(tmp_path: Path) -> None:
    out = write_report(
        tmp_path / "a" / "b.html", "t", [Section("s", timeseries_chart("c", [0, 1, 2], {"x": [1, 2, 3]}))]
    )
    assert out.is_file() and out.read_text().startswith("<!doctype html>")


def test_empty_inputs_render_placeholders() -> None:
    assert "No data" in timeseries_chart("c", [], {"x": []})
    assert "No data" in heatmap("h", [], [], np.zeros((0, 0)))
    assert "Nothing recorded" in timeline("t", [])


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=False, width=32), st.none()), max_size=30))
@settings(max_examples=50)
def test_charts_never_crash_and_stay_finite(values: list[float | None]) -> None:
    ys = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    xs = np.arange(ys.size, dtype=np.float64)
    svg = timeseries_chart("t", xs, {"y": ys})
    assert "nan" not in svg.split("<svg", 1)[-1].lower().replace("aria-label", "")
    lo, hi = value_range(ys)
    assert np.isfinite(lo) and np.isfinite(hi) and lo < hi
    finite = ys[np.isfinite(ys)]
    if finite.size:
        assert lo <= finite.min() and hi >= finite.max()


def test_heat_colors_hit_the_stops_and_clip() -> None:
    colors = heat_color(np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan])).tolist()
    assert colors == ["#3b82f6", "#3b82f6", "#facc15", "#dc2626", "#dc2626", "#e5e7eb"]
