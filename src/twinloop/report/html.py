"""Self-contained HTML reports: one file with inline CSS, the chart library inlined (Apache ECharts, vendored in
``report/assets``) and no network reference, so it opens offline, from a file, in any browser.

Build a report from :class:`Section` objects whose bodies come from the building blocks here
(:func:`timeseries_chart`, :func:`heatmap`, :func:`timeline`, :func:`table`, :func:`comparison_table`) and
write it with :func:`write_report`. Charts are specs (``twinloop.report.charts``) the same renderer draws in
the dashboard; times are shown as stored (UTC clock for epoch seconds, ``h:mm:ss`` for simulation seconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from numpy.typing import ArrayLike

from twinloop import __version__
from twinloop.report import charts
from twinloop.report.charts import ECHARTS_VERSION, TimelineItem, chart_div, chart_script, esc
from twinloop.report.levels import TEMP_HEADROOM_LEVELS, Level

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:14px;color:#1d2430;background:#f6f7f9;
margin:0}main{max-width:1100px;margin:0 auto;padding:18px 22px 40px}h1{font-size:22px;margin:6px 0 2px}
h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #dfe3ea;padding-bottom:4px}.muted{color:#6b7383}
.chart{background:#fff;border:1px solid #dfe3ea;border-radius:8px;padding:8px 10px;margin:10px 0}
.chart-title{font-weight:600;font-size:13px;margin:2px 0 4px}.chart-empty{color:#6b7383;padding:6px 0}
.series-key{display:inline-flex;align-items:center;gap:4px;margin-right:12px;font-size:12px;color:#6b7383}
.series-key i{width:10px;height:10px;display:inline-block;border-radius:2px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #dfe3ea}th{background:#f1f4f8;font-size:12px;
color:#6b7383}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}.better{color:#15803d}
.worse{color:#b91c1c}.note{font-size:12px;color:#6b7383;margin:4px 0}
footer{font-size:12px;color:#6b7383;margin-top:30px}.tw{overflow-x:auto;max-width:100%}
@media (max-width:700px){main{padding:10px 8px 30px}th,td{padding:3px 5px}}
"""


@dataclass(frozen=True)
class Section:
    """One titled part of a report.

    Attributes:
        title: the heading.
        body_html: HTML from the building blocks (trusted: it is inserted as is).
        note: a plain-text line shown under the heading (escaped).
    """

    title: str
    body_html: str
    note: str = ""


def timeseries_chart(
    title: str,
    ts_s: ArrayLike,
    series: Mapping[str, ArrayLike],
    unit: str = "",
    marks: Sequence[tuple[float, str]] = (),
    bands: Sequence[tuple[float, float, str, str]] = (),
    rules: Sequence[tuple[float, str]] = (),
) -> str:
    """A line chart over time, on the stored time axis.

    Args:
        title: chart title.
        ts_s: timestamps, s (epoch or simulation seconds).
        series: name → values aligned with ``ts_s`` (NaN = missing).
        unit: unit of the values (``W``, ``°C``, ``s``, ``J``, ``B``, ``%`` or any label); ticks are rounded.
        marks: (timestamp s, label) vertical markers.
        bands: (start s, end s, label, colour) shaded spans.
        rules: (value, label) horizontal limits (e.g. slowdown temperature).
    """
    return chart_div(charts.line(title, ts_s, series, unit, marks, bands, rules))


def heatmap(
    title: str,
    ts_s: ArrayLike,
    rows: Sequence[str],
    values: ArrayLike,
    unit: str = "",
    levels: Sequence[Level] = TEMP_HEADROOM_LEVELS,
    levels_of: ArrayLike | None = None,
    levels_label: str = "",
) -> str:
    """A heat map of ``values`` (len(rows) × len(ts_s)) coloured by fixed ``levels`` of ``levels_of``
    (default: the values themselves).
    """
    if not len(rows) or not len(ts_s):  # type: ignore[arg-type]
        return chart_div({"kind": "heatmap", "title": title, "x": [], "rows": [], "values": []})
    return chart_div(charts.heatmap(title, ts_s, rows, values, unit, levels, levels_of, levels_label, unit))


def timeline(title: str, items: Sequence[TimelineItem], t0_s: float | None = None, t1_s: float | None = None) -> str:
    """Bars in lanes (incidents by class, phases by job) over time, from ``t0_s`` to ``t1_s`` when given."""
    return chart_div(charts.timeline(title, items, t0_s, t1_s))


def _cell(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return f"<td>{'—' if v is None else esc(v)}</td>"
    if isinstance(v, int):
        return f'<td class="num">{v:,}</td>'
    if isinstance(v, float):
        if not math.isfinite(v):
            return '<td class="num">—</td>'
        text = f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:,.1f}" if abs(v) >= 100 else f"{v:.4g}"
        return f'<td class="num">{text}</td>'
    return f"<td>{esc(v)}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    """An HTML table (numbers right-aligned, every cell escaped)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    caption = f'<div class="chart-title">{esc(title)}</div>' if title else ""
    return f'{caption}<div class="tw"><table><tr>{head}</tr>{body}</table></div>'


def comparison_table(
    loop_off: Mapping[str, float | None],
    loop_on: Mapping[str, float | None],
    higher_is_better: Sequence[str] = (),
    title: str = "Loop off vs loop on",
) -> str:
    """Metric by metric: loop off, loop on, relative change, colored by whether it improved.

    Metrics are lower-is-better (energy, throttling, incidents) unless named in ``higher_is_better``
    (goodput, ETTR). Metrics missing on either side show "—".
    """
    rows = []
    for name in dict.fromkeys([*loop_off, *loop_on]):
        off, on = loop_off.get(name), loop_on.get(name)
        change, cls = "—", ""
        if off is not None and on is not None and math.isfinite(off) and math.isfinite(on):
            delta = on - off
            change = f"{delta / abs(off):+.1%}" if off else f"{delta:+.4g}"
            if delta:
                better = (delta > 0) == (name in higher_is_better)
                cls = "better" if better else "worse"
        rows.append(f'<tr><td>{esc(name)}</td>{_cell(off)}{_cell(on)}<td class="num {cls}">{esc(change)}</td></tr>')
    return (
        f'<div class="chart-title">{esc(title)}</div><div class="tw"><table><tr><th>metric</th>'
        f'<th class="num">loop off</th><th class="num">loop on</th><th class="num">change</th></tr>'
        f"{''.join(rows)}</table></div>"
    )


def render_report(title: str, sections: Sequence[Section], subtitle: str = "") -> str:
    """The whole report as one HTML string."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = []
    for s in sections:
        note = f'<p class="note">{esc(s.note)}</p>' if s.note else ""
        body.append(f"<section><h2>{esc(s.title)}</h2>{note}{s.body_html}</section>")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f'<h1>{esc(title)}</h1><p class="muted">{esc(subtitle)}</p>{"".join(body)}'
        f"<footer>twinloop {esc(__version__)} · generated {now} · self-contained: charts by Apache ECharts "
        f"{ECHARTS_VERSION} (Apache-2.0), inlined; no network</footer></main>{chart_script()}</body></html>\n"
    )


def write_report(path: str | Path, title: str, sections: Sequence[Section], subtitle: str = "") -> Path:
    """Write one self-contained HTML report to ``path`` (parent directories created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(title, sections, subtitle), encoding="utf-8")
    return out
