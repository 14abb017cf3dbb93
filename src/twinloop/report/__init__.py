"""Self-contained HTML reports (inline SVG charts, no scripts, no network): building blocks and ``sim_report``."""

from __future__ import annotations

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
from twinloop.report.svg import TimelineItem

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
