"""The sweep's self-contained HTML report: the intervals as tables and, per metric, each seed's value with the
mean and 95 % interval per loop setting (charts through :mod:`twinloop.report.charts`, ECharts inlined).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from twinloop.report.charts import chart_div
from twinloop.report.html import Section, table, write_report
from twinloop.sweep.summary import Stat, by_scenario, fmt_interval

# The chart script's palette (assets/twinloop-charts.js): a loop setting's dots, mean and interval share a colour.
PALETTE_HINT = ("#2463eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2")


def interval_chart(scenario: str, metric: str, stats: Sequence[Stat]) -> dict[str, Any]:
    """A line-kind chart spec: x = seed; per loop setting its seeds' values (dots) and the interval (dashed)."""
    series: list[dict[str, Any]] = []
    for i, s in enumerate(stats):
        seeds = [float(seed) for seed, _ in s.values]
        color = PALETTE_HINT[i % len(PALETTE_HINT)]
        series.append({"name": f"{s.loop}", "x": seeds, "y": [v for _, v in s.values], "dots": True, "color": color})
        lo, hi = min(seeds), max(seeds)
        # Same name: one legend entry per loop setting toggles its dots, mean (solid) and interval (dashed) together.
        series.append({"name": s.loop, "x": [lo, hi], "y": [s.mean, s.mean], "color": color})
        if s.half_width is not None:
            for y in (s.mean - s.half_width, s.mean + s.half_width):
                series.append({"name": s.loop, "x": [lo, hi], "y": [y, y], "dash": True, "color": color})
    title = f"{scenario}: {metric} by seed (solid: mean, dashed: 95 % interval)"
    return {"kind": "line", "title": title, "x": {"unit": ""}, "y": {"unit": ""},
            "series": series, "marks": [], "bands": [], "rules": []}  # fmt: skip


def write_sweep_report(
    path: str | Path, name: str, summary: Sequence[Stat], failed: Sequence[dict[str, Any]], subtitle: str = ""
) -> Path:
    """Write the report: one section per scenario (table of intervals, then a chart per metric)."""
    loops = list(dict.fromkeys(s.loop for s in summary))
    sections = []
    for sc, by_metric in by_scenario(summary).items():
        rows = [[m, *(fmt_interval(d[lp]) if lp in d else "—" for lp in loops), max(x.n for x in d.values())]
                for m, d in by_metric.items()]  # fmt: skip
        body = table(["metric", *(f"{lp}: mean ± 95% CI" for lp in loops), "seeds"], rows)
        charts = [
            chart_div(interval_chart(sc, m, [d[lp] for lp in loops if lp in d]))
            for m, d in by_metric.items()
            if any(x.n > 1 or len(d) > 1 for x in d.values())
        ]
        sections.append(Section(sc, body + "".join(charts), "mean ± half width of the 95 % Student-t interval"))
    if failed:
        frows = [[r["cell"], r["scenario"], r["seed"], r["loop"], r["attempts"], r["error"]] for r in failed]
        sections.append(Section("Failed runs", table(["cell", "scenario", "seed", "loop", "attempts", "error"], frows)))
    return write_report(path, f"twinloop sweep: {name}", sections, subtitle)
