"""Self-contained HTML reports (charts by the vendored Apache ECharts, inlined; no network): building blocks,
``sim_report`` (a twin run) and ``store_report`` (any store, a live watcher's included: ``twinloop report``).

The names below load on first use (PEP 562), so the dashboard can import ``report.charts``/``report.levels``
without the store and loop-record code ``sim_report`` needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinloop.lazy import lazy_exports

if TYPE_CHECKING:
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
    from twinloop.report.jobs import job_sections
    from twinloop.report.sim import loop_sections, sim_report, summary_section, telemetry_sections
    from twinloop.report.store import store_report

_WHERE = {
    "TimelineItem": "charts",
    "Section": "html",
    "comparison_table": "html",
    "heatmap": "html",
    "render_report": "html",
    "table": "html",
    "timeline": "html",
    "timeseries_chart": "html",
    "write_report": "html",
    "job_sections": "jobs",
    "loop_sections": "sim",
    "sim_report": "sim",
    "summary_section": "sim",
    "telemetry_sections": "sim",
    "store_report": "store",
}
__all__ = [
    "Section",
    "TimelineItem",
    "comparison_table",
    "heatmap",
    "job_sections",
    "loop_sections",
    "render_report",
    "sim_report",
    "store_report",
    "summary_section",
    "table",
    "telemetry_sections",
    "timeline",
    "timeseries_chart",
    "write_report",
]


__getattr__ = lazy_exports(__name__, _WHERE)
