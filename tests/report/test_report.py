"""Self-contained HTML reports: no network reference, only inline scripts (the vendored chart library and its
renderer), escaped data, chart specs that follow the data, colour levels with a meaning."""

from __future__ import annotations

import itertools
import json
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
from twinloop.report.charts import ASSETS_DIR, chart_script
from twinloop.report.levels import (
    POWER_FRACTION_LEVELS,
    TEMP_HEADROOM_LEVELS,
    gpu_spec_of,
    level_index,
    slowdown_temps_c,
)


class _Refs(HTMLParser):
    """Collects src/href of every tag, the scripts' text, and the chart specs."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []
        self.scripts: list[str] = []
        self.specs: list[dict] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")
        self.refs += [(tag, v or "") for k, v in attrs if k in ("src", "href", "xlink:href")]
        self.specs += [json.loads(v or "") for k, v in attrs if k == "data-chart"]

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


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
    assert refs.refs == [] and "<link" not in text  # nothing loaded from anywhere: no src, no href
    lib = (ASSETS_DIR / "echarts.min.js").read_text()
    assert len(refs.scripts) == 2 and refs.scripts[0] == lib and "twinloopCharts.renderAll" in refs.scripts[1]
    assert "fetch(" not in refs.scripts[1] and "XMLHttpRequest" not in refs.scripts[1]
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
    kinds = [sp["kind"] for sp in refs.specs]
    assert kinds.count("line") == 2 and kinds.count("heatmap") == 1 and kinds.count("timeline") == 2
    assert hot_rack in text and "cdu_setpoint" in text
    timelines = [sp for sp in refs.specs if sp["kind"] == "timeline"]
    assert [t["title"].split(":")[0] for t in timelines] == ["loop-off", "loop-on"]
    # one time axis: both runs' charts span the same range, in the stored (absolute) seconds
    assert timelines[0]["x0"] == timelines[1]["x0"] and timelines[0]["x1"] == timelines[1]["x1"]
    assert timelines[0]["x0"] >= 1e9


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


def test_heatmap_colours_by_headroom_to_each_gpus_slowdown(store: Path, hot_rack: str) -> None:
    """The hot rack's GPUs (h100-sxm, slowdown 89 °C) reach ~85 °C: under 5 °C of headroom; the others ~25+."""
    from twinloop.report.sim import rack_headroom
    from twinloop.telemetry.store.duckdb_store import DuckDBStore

    with DuckDBStore(store, read_only=True) as s:
        t0, t1 = s.time_range()
        assert t0 is not None and t1 is not None
        _, racks, head, unknown = rack_headroom(s, t0, (t1 - t0) / 10)
    assert unknown == 0
    hot = racks.index(hot_rack)
    levels = level_index(head[:, -1], TEMP_HEADROOM_LEVELS)
    assert TEMP_HEADROOM_LEVELS[levels[hot]].label == "< 5 °C to slowdown"
    assert all(TEMP_HEADROOM_LEVELS[k].min >= 20 for i, k in enumerate(levels) if i != hot)


def test_levels_are_fixed_and_ordered() -> None:
    for levels in (TEMP_HEADROOM_LEVELS, POWER_FRACTION_LEVELS):
        assert all(a.max == b.min for a, b in itertools.pairwise(levels))
    assert level_index([-3.0, 0.0, 4.9, 5.0, 19.9, 20.0, 80.0, np.nan], TEMP_HEADROOM_LEVELS).tolist() == [
        0, 1, 1, 2, 3, 4, 4, -1
    ]  # fmt: skip
    assert level_index([0.1, 0.96, 1.5], POWER_FRACTION_LEVELS).tolist() == [0, 3, 4]


def test_gpu_model_from_labels() -> None:
    assert gpu_spec_of({"gpu_kind": "h100-sxm"}).slowdown_temp_c == 89  # type: ignore[union-attr]
    assert gpu_spec_of({"modelName": "NVIDIA H100 80GB HBM3"}).name == "h100-sxm"  # type: ignore[union-attr]
    assert gpu_spec_of({"modelName": "Some Future GPU"}) is None and gpu_spec_of(None) is None
    temps, unknown = slowdown_temps_c({"a": {"gpu_kind": "a100-sxm-80gb"}}, ["a", "b"])
    assert unknown == 1 and temps[0] == 89 and np.isfinite(temps[1])


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
    assert "<script>alert" not in text
    refs = refs_of(text)
    assert evil in [sp["title"] for sp in refs.specs]  # the spec carries the text; the page never parses it as HTML
    assert all(evil not in sc for sc in refs.scripts)


def test_write_report_creates_the_file(tmp_path: Path) -> None:
    out = write_report(
        tmp_path / "a" / "b.html", "t", [Section("s", timeseries_chart("c", [0, 1, 2], {"x": [1, 2, 3]}))]
    )
    assert out.is_file() and out.read_text().startswith("<!doctype html>")


def test_empty_inputs_render_placeholders() -> None:
    specs = refs_of(
        timeseries_chart("c", [], {"x": []}) + heatmap("h", [], [], np.zeros((0, 0))) + timeline("t", [])
    ).specs
    assert [s["kind"] for s in specs] == ["line", "heatmap", "timeline"]
    assert specs[0]["series"][0]["y"] == [] and specs[1]["rows"] == [] and specs[2]["items"] == []


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.none()), max_size=30))
@settings(max_examples=50)
def test_chart_specs_are_strict_json_for_any_values(values: list[float | None]) -> None:
    """NaN and ±inf become null (JSON has no NaN: the browser's JSON.parse would reject the whole chart)."""
    ys = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    html = timeseries_chart("t", np.arange(ys.size, dtype=np.float64), {"y": ys})
    spec = refs_of(html).specs[0]
    got = spec["series"][0]["y"]
    assert len(got) == ys.size
    assert all((g is None) == (not np.isfinite(v)) for g, v in zip(got, ys, strict=True))
    json.dumps(spec, allow_nan=False)


def test_chart_script_inlines_the_vendored_files() -> None:
    script = chart_script()
    assert script.count("<script>") == 2 and "Apache" in script
    assert (ASSETS_DIR / "LICENSE-echarts").is_file() and (ASSETS_DIR / "NOTICE-echarts").is_file()
