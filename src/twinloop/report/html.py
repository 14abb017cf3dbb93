"""Self-contained HTML reports: one file with inline CSS and inline SVG charts, no script and no network reference,
so it opens offline, from a file, in any browser.

Build a report from :class:`Section` objects whose bodies come from the building blocks here
(:func:`timeseries_chart`, :func:`heatmap`, :func:`timeline`, :func:`table`, :func:`comparison_table`) and
write it with :func:`write_report`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from numpy.typing import ArrayLike

from twinloop import __version__
from twinloop.report.svg import Fmt, TimelineItem, esc, fmt_minutes, heatmap_svg, line_chart, timeline_svg

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:14px;color:#1d2430;background:#f6f7f9;
margin:0}main{max-width:1100px;margin:0 auto;padding:18px 22px 40px}h1{font-size:22px;margin:6px 0 2px}
h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #dfe3ea;padding-bottom:4px}.muted{color:#6b7383}
.chart{background:#fff;border:1px solid #dfe3ea;border-radius:8px;padding:8px 10px;margin:10px 0}
.chart svg{width:100%;height:auto}.chart-title{font-weight:600;font-size:13px;margin:2px 0 4px}
svg text{font-size:11px;fill:#475569}.key{display:inline-flex;align-items:center;gap:4px;margin-right:12px;
font-size:12px;color:#6b7383}table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #dfe3ea}th{background:#f1f4f8;font-size:12px;
color:#6b7383}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}.better{color:#15803d}
.worse{color:#b91c1c}.note{font-size:12px;color:#6b7383;margin:4px 0}
footer{font-size:12px;color:#6b7383;margin-top:30px}
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
    y_fmt: Fmt = lambda v: f"{v:.3g}",
    t0_s: float | None = None,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """A line chart over time; the x axis shows time since ``t0_s`` (default: the first timestamp).

    Args:
        title: chart title.
        ts_s: timestamps, s.
        series: name → values aligned with ``ts_s`` (NaN = missing).
        y_fmt: formats y tick values (e.g. ``lambda w: fmt_si(w, "W")``).
        t0_s: the time shown as 0:00.
        marks: (timestamp s, label) vertical markers.
    """
    import numpy as np

    ts = np.asarray(ts_s, dtype=np.float64)
    base = float(ts.min()) if t0_s is None and ts.size else (t0_s or 0.0)
    if ts.size:
        base = min(base, float(ts.min()))  # buckets may start just before the first sample
    return line_chart(ts - base, series, title, y_fmt, fmt_minutes, marks=[(t - base, lab) for t, lab in marks])


def heatmap(
    title: str, ts_s: ArrayLike, rows: Sequence[str], values: ArrayLike, unit: str = "", t0_s: float | None = None
) -> str:
    """A heat map of ``values`` (len(rows) × len(ts_s)) over time since ``t0_s`` (default: first timestamp)."""
    import numpy as np

    ts = np.asarray(ts_s, dtype=np.float64)
    base = float(ts.min()) if t0_s is None and ts.size else (t0_s or 0.0)
    if ts.size:
        base = min(base, float(ts.min()))
    return heatmap_svg(ts - base, rows, values, title, unit)


def timeline(title: str, items: Sequence[TimelineItem], t0_s: float | None = None, t1_s: float | None = None) -> str:
    """Bars in lanes (incidents by class, phases by job) over time since ``t0_s``."""
    base = t0_s if t0_s is not None else min((i.start_s for i in items), default=0.0)
    shifted = [TimelineItem(i.lane, i.start_s - base, i.end_s - base, i.label, i.color) for i in items]
    return timeline_svg(shifted, title, 0.0, None if t1_s is None else t1_s - base)


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
    return f"{caption}<table><tr>{head}</tr>{body}</table>"


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
        f'<div class="chart-title">{esc(title)}</div><table><tr><th>metric</th><th class="num">loop off</th>'
        f'<th class="num">loop on</th><th class="num">change</th></tr>{"".join(rows)}</table>'
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
        f"<footer>twinloop {esc(__version__)} · generated {now} · self-contained: no scripts, no network</footer>"
        "</main></body></html>\n"
    )


def write_report(path: str | Path, title: str, sections: Sequence[Section], subtitle: str = "") -> Path:
    """Write one self-contained HTML report to ``path`` (parent directories created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(title, sections, subtitle), encoding="utf-8")
    return out
