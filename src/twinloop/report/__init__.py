"""Self-contained HTML reports (charts by the vendored Apache ECharts, inlined; no network): building blocks and
``sim_report``."""

from __future__ import annotations

from twinloop.report.charts import TimelineItem
from twinloop.report.html import (
    Section,
    comparison_table,
    heatmap,
    render_report,
    table,
    timeline,
    timeseries_chart,
    write_report,
)
from twinloop.report.sim import loop_sections, sim_report, summary_section, telemetry_sections

__all__ = [
    "Section",
    "TimelineItem",
    "comparison_table",
    "heatmap",
    "loop_sections",
    "render_report",
    "sim_report",
    "summary_section",
    "table",
    "telemetry_sections",
    "timeline",
    "timeseries_chart",
    "write_report",
]
