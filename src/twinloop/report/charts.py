"""Chart specs for Apache ECharts (vendored in ``report/assets``), built in Python for the HTML reports.

A chart is a ``<div class="chart" data-chart="{spec}">``: the spec is the small JSON format that
``assets/twinloop-charts.js`` turns into an ECharts option, the same file and format the dashboard uses. Times
are seconds as stored: epoch seconds show as UTC clock times, simulation seconds as ``h:mm:ss`` from the start,
with ticks on round clock steps. Arrays are NumPy; NaN becomes JSON null (a gap the line bridges).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from twinloop.report.levels import Level

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
ECHARTS_VERSION = "6.1.0"
SEVERITY_COLORS = {"critical": "#dc2626", "major": "#b45309", "minor": "#eab308", "info": "#64748b"}


def esc(text: object) -> str:
    """HTML-escape ``text`` (quotes too: safe inside attributes)."""
    return html.escape(str(text), quote=True)


def fmt_si(value: float, unit: str = "") -> str:
    """``value`` with a k/M/G prefix (``1.2 MW``)."""
    if not math.isfinite(value):
        return "—"
    a = abs(value)
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{value / scale:.3g} {prefix}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def values(a: ArrayLike) -> list[float | None]:
    """A float array as a JSON-ready list (NaN/inf → None)."""
    arr = np.asarray(a, dtype=np.float64).ravel()
    return [None if not math.isfinite(v) else v for v in arr.tolist()]


def chart_div(spec: Mapping[str, Any]) -> str:
    """The HTML element the chart script fills (the spec travels escaped in an attribute)."""
    text = json.dumps(spec, separators=(",", ":"), allow_nan=False)
    return (
        f'<div class="chart" data-chart="{esc(text)}" role="img" aria-label="{esc(spec.get("title", "chart"))}"></div>'
    )


def line(
    title: str,
    ts_s: ArrayLike,
    series: Mapping[str, ArrayLike],
    unit: str = "",
    marks: Sequence[tuple[float, str]] = (),
    bands: Sequence[tuple[float, float, str, str]] = (),
    rules: Sequence[tuple[float, str]] = (),
) -> dict[str, Any]:
    """A line chart over time: ``series`` name → values aligned with ``ts_s``; ``marks`` (t, label) vertical
    lines; ``bands`` (t0, t1, label, colour) shaded spans; ``rules`` (y, label) horizontal limits.
    """
    ts = values(ts_s)
    return {
        "kind": "line",
        "title": title,
        "x": {"time": True},
        "y": {"unit": unit},
        "series": [{"name": k, "x": ts, "y": values(v)} for k, v in series.items()],
        "marks": [{"x": float(t), "label": lab} for t, lab in marks],
        "bands": [
            {"x0": float(a), "x1": float(b), "label": lab, "color": c, "label_visible": True} for a, b, lab, c in bands
        ],
        "rules": [{"y": float(y), "label": lab} for y, lab in rules],
    }


def heatmap(
    title: str,
    ts_s: ArrayLike,
    rows: Sequence[str],
    shown: ArrayLike,
    unit: str,
    levels: Sequence[Level],
    levels_of: ArrayLike | None = None,
    levels_label: str = "",
    levels_unit: str = "",
) -> dict[str, Any]:
    """A heat map (rows × time buckets) of ``shown``, coloured by ``levels`` of ``levels_of`` (default: shown)."""
    grid = np.asarray(shown, dtype=np.float64).reshape(len(rows), -1)
    spec: dict[str, Any] = {
        "kind": "heatmap",
        "title": title,
        "x": values(ts_s),
        "rows": list(rows),
        "values": [values(r) for r in grid],
        "unit": unit,
        "levels": [lv.as_dict() for lv in levels],
        "height": max(160, min(560, 90 + 22 * len(rows))),
    }
    if levels_of is not None:
        spec["levels_of"] = [values(r) for r in np.asarray(levels_of, dtype=np.float64).reshape(grid.shape)]
        spec["levels_label"], spec["levels_unit"] = levels_label, levels_unit
    return spec


@dataclass(frozen=True)
class TimelineItem:
    """One bar on a timeline.

    Attributes:
        lane: the row it is drawn in (e.g. the incident class).
        start_s / end_s: when, seconds (as stored: epoch or simulation time).
        label: tooltip text.
        color: fill colour (e.g. by severity).
    """

    lane: str
    start_s: float
    end_s: float
    label: str = ""
    color: str = "#2463eb"


def timeline(
    title: str, items: Sequence[TimelineItem], t0_s: float | None = None, t1_s: float | None = None
) -> dict[str, Any]:
    """Bars in lanes over time (instants get a minimum width so they stay visible)."""
    lanes = list(dict.fromkeys(i.lane for i in items))
    spec: dict[str, Any] = {
        "kind": "timeline",
        "title": title,
        "lanes": lanes,
        "items": [
            {"lane": i.lane, "start": float(i.start_s), "end": float(i.end_s), "label": i.label, "color": i.color}
            for i in items
        ],
        "height": 60 + 26 * len(lanes),
    }
    if t0_s is not None:
        spec["x0"] = float(t0_s)
    if t1_s is not None:
        spec["x1"] = float(t1_s)
    return spec


@lru_cache(maxsize=1)
def chart_script() -> str:
    """ECharts and the spec renderer, to inline at the end of a report's body."""
    lib = (ASSETS_DIR / "echarts.min.js").read_text(encoding="utf-8")
    ours = (ASSETS_DIR / "twinloop-charts.js").read_text(encoding="utf-8")
    for name, text in (("echarts.min.js", lib), ("twinloop-charts.js", ours)):
        if "</script" in text.lower():  # would end the inline element early
            raise ValueError(f"{name}: contains '</script' and cannot be inlined")
    return f"<script>{lib}</script>\n<script>{ours}\ntwinloopCharts.renderAll(document);</script>"
