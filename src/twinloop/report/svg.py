"""Inline SVG charts rendered in Python: line charts, heat maps, timelines. No script, no external reference, so
a report that embeds them works offline and from a file.

Every text that comes from data is escaped. Arrays are NumPy; the only loops are over series, rows and
ticks, never over samples (paths are built with vectorized string formatting).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

PALETTE = ("#2463eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4b5563")
SEVERITY_COLORS = {"critical": "#dc2626", "major": "#d97706", "minor": "#eab308", "info": "#64748b"}

Fmt = Callable[[float], str]


def esc(text: object) -> str:
    """HTML/XML-escape ``text``."""
    return html.escape(str(text), quote=True)


def fmt_si(value: float, unit: str = "") -> str:
    """``value`` with a k/M/G prefix (``1.2 MW``)."""
    if not math.isfinite(value):
        return "—"
    a = abs(value)
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{value / scale:.2f} {prefix}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def fmt_minutes(seconds: float) -> str:
    """Elapsed time as ``m:ss`` or ``h:mm``."""
    s = round(seconds)
    sign, s = ("-" if s < 0 else ""), abs(s)
    if s >= 3600:
        return f"{sign}{s // 3600}:{(s % 3600) // 60:02d} h"
    return f"{sign}{s // 60}:{s % 60:02d}"


def _empty(title: str, text: str) -> str:
    return f'<div class="chart"><div class="chart-title">{esc(title)}</div><p class="muted">{esc(text)}</p></div>'


def value_range(values: NDArray[np.float64]) -> tuple[float, float]:
    """A padded (lo, hi) over the finite values; never below 0 for non-negative data."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    if hi - lo <= 1e-9 * max(abs(lo), abs(hi), 1e-12):
        d = abs(hi) * 0.05 or 1.0
        lo, hi = lo - d, hi + d
    pad = (hi - lo) * 0.06
    return (max(0.0, lo - pad) if finite.min() >= 0 else lo - pad), hi + pad


def _path(x: NDArray[np.float64], y: NDArray[np.float64]) -> str:
    """An SVG path through the finite points (gaps are bridged, as the web charts do)."""
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return ""
    pts = np.char.add(np.char.add(np.char.mod("%.1f", x[ok]), ","), np.char.mod("%.1f", y[ok]))
    cmds = np.full(pts.size, "L", dtype="<U1")
    cmds[0] = "M"
    return "".join(np.char.add(cmds, pts).tolist())


def line_chart(
    x: ArrayLike,
    series: Mapping[str, ArrayLike],
    title: str = "",
    y_fmt: Fmt = lambda v: f"{v:.3g}",
    x_fmt: Fmt = fmt_minutes,
    height: int = 220,
    width: int = 760,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """A line chart of several series over a shared x axis (``marks``: vertical lines with labels)."""
    xs = np.asarray(x, dtype=np.float64)
    if xs.size == 0:
        return _empty(title, "No data.")
    ys = {k: np.asarray(v, dtype=np.float64) for k, v in series.items()}
    left, right, top, bottom = 64, 14, 10, 26
    x0, x1 = float(np.nanmin(xs)), float(np.nanmax(xs))
    xspan = (x1 - x0) or 1.0
    lo, hi = value_range(np.concatenate(list(ys.values())) if ys else np.zeros(0))

    def sx(v: NDArray[np.float64] | float) -> NDArray[np.float64] | float:
        return left + (np.asarray(v) - x0) / xspan * (width - left - right)

    def sy(v: NDArray[np.float64] | float) -> NDArray[np.float64] | float:
        return top + (1 - (np.asarray(v) - lo) / ((hi - lo) or 1.0)) * (height - top - bottom)

    parts = []
    for k in range(5):
        v = lo + k / 4 * (hi - lo)
        y = float(sy(v))
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(y_fmt(v))}</text>')
        xv = x0 + k / 4 * xspan
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(f'<text x="{float(sx(xv)):.1f}" y="{height - 7}" text-anchor="{anchor}">{esc(x_fmt(xv))}</text>')
    keys = []
    for i, (name, values) in enumerate(ys.items()):
        color = PALETTE[i % len(PALETTE)]
        d = _path(np.asarray(sx(xs)), np.asarray(sy(values)))
        parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        keys.append(
            f'<span class="key"><svg width="14" height="4"><rect width="14" height="4" fill="{color}"/></svg>'
            f"{esc(name)}</span>"
        )
    for xv, label in marks:
        px = float(sx(xv))
        parts.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{height - bottom}" stroke="#111827" '
            f'stroke-dasharray="3 3"/><text x="{px + 4:.1f}" y="{top + 12}">{esc(label)}</text>'
        )
    return (
        f'<div class="chart"><div class="chart-title">{esc(title)}</div><div>{"".join(keys)}</div>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">{"".join(parts)}</svg></div>'
    )


def heat_color(t: NDArray[np.float64]) -> NDArray[np.str_]:
    """Colors (blue → yellow → red) for ``t`` in [0, 1]; NaN → light grey."""
    stops = np.array([[59, 130, 246], [250, 204, 21], [220, 38, 38]], dtype=np.float64)
    tt = np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0) * 2.0
    k = np.minimum(tt.astype(np.int64), 1)
    u = (tt - k)[..., None]
    rgb = np.rint(stops[k] + (stops[k + 1] - stops[k]) * u).astype(np.int64)
    hexes = np.char.add(
        "#",
        np.char.add(
            np.char.mod("%02x", rgb[..., 0]),
            np.char.add(np.char.mod("%02x", rgb[..., 1]), np.char.mod("%02x", rgb[..., 2])),
        ),
    )
    return np.where(np.isnan(t), "#e5e7eb", hexes)


def heatmap_svg(
    x: ArrayLike,
    rows: Sequence[str],
    values: ArrayLike,
    title: str = "",
    unit: str = "",
    x_fmt: Fmt = fmt_minutes,
    width: int = 760,
) -> str:
    """A heat map: one band per row, one cell per x bucket, colored by ``values`` (rows × x)."""
    xs = np.asarray(x, dtype=np.float64)
    grid = np.asarray(values, dtype=np.float64).reshape(len(rows), xs.size)
    if xs.size == 0 or not rows:
        return _empty(title, "No data.")
    left, top, bottom, right = 110, 6, 40, 10
    cell_h = max(6, min(18, 360 // len(rows)))
    height = top + cell_h * len(rows) + bottom
    finite = grid[np.isfinite(grid)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    colors = heat_color((grid - lo) / ((hi - lo) or 1.0))
    cell_w = (width - left - right) / xs.size
    cx = np.char.mod("%.2f", left + np.arange(xs.size) * cell_w)
    parts = []
    for r, name in enumerate(rows):
        y = top + r * cell_h
        tips = np.char.mod(esc(name).replace("%", "%%") + ": %.1f " + esc(unit).replace("%", "%%"), grid[r])
        cells = np.char.add(
            np.char.add(
                np.char.add(f'<rect y="{y}" height="{cell_h}" width="{cell_w + 0.3:.2f}" x="', cx),
                np.char.add('" fill="', colors[r]),
            ),
            np.char.add('"><title>', tips),
        )
        parts.append("".join(np.char.add(cells, "</title></rect>").tolist()))
        if len(rows) <= 40 or r % max(1, len(rows) // 40) == 0:
            parts.append(f'<text x="{left - 6}" y="{y + cell_h - 2}" text-anchor="end">{esc(name)}</text>')
    for k in range(5):
        i = min(xs.size - 1, round(k / 4 * (xs.size - 1)))
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(
            f'<text x="{left + (i + 0.5) * cell_w:.1f}" y="{height - bottom + 14}" text-anchor="{anchor}">'
            f"{esc(x_fmt(float(xs[i])))}</text>"
        )
    legend_x = left
    ramp = heat_color(np.linspace(0, 1, 21))
    for j, c in enumerate(ramp.tolist()):
        parts.append(f'<rect x="{legend_x + 40 + j * 8}" y="{height - 16}" width="8" height="8" fill="{c}"/>')
    parts.append(f'<text x="{legend_x + 36}" y="{height - 8}" text-anchor="end">{esc(f"{lo:.1f} {unit}")}</text>')
    parts.append(f'<text x="{legend_x + 40 + 21 * 8 + 4}" y="{height - 8}">{esc(f"{hi:.1f} {unit}")}</text>')
    return (
        f'<div class="chart"><div class="chart-title">{esc(title)}</div>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">{"".join(parts)}</svg></div>'
    )


@dataclass(frozen=True)
class TimelineItem:
    """One bar on a timeline.

    Attributes:
        lane: the row it is drawn in (e.g. the incident class).
        start_s / end_s: when, seconds on the report's time axis.
        label: tooltip text.
        color: fill color (e.g. by severity).
    """

    lane: str
    start_s: float
    end_s: float
    label: str = ""
    color: str = "#2463eb"


def timeline_svg(
    items: Sequence[TimelineItem],
    title: str = "",
    t0: float | None = None,
    t1: float | None = None,
    x_fmt: Fmt = fmt_minutes,
    width: int = 760,
) -> str:
    """Bars in lanes over time (instants get a minimum width so they stay visible)."""
    if not items:
        return _empty(title, "Nothing recorded.")
    lanes = list(dict.fromkeys(i.lane for i in items))
    lo = min(i.start_s for i in items) if t0 is None else t0
    hi = max(i.end_s for i in items) if t1 is None else t1
    span = (hi - lo) or 1.0
    left, right, lane_h, top, bottom = 160, 10, 20, 6, 24
    height = top + lane_h * len(lanes) + bottom
    plot_w = width - left - right
    parts = []
    for r, lane in enumerate(lanes):
        y = top + r * lane_h
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{plot_w}" height="{lane_h - 4}" fill="#f1f5f9"/>')
        parts.append(f'<text x="{left - 6}" y="{y + lane_h - 6}" text-anchor="end">{esc(lane)}</text>')
    for it in items:
        y = top + lanes.index(it.lane) * lane_h
        x = left + (it.start_s - lo) / span * plot_w
        w = max(3.0, (it.end_s - it.start_s) / span * plot_w)
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{lane_h - 6}" fill="{esc(it.color)}" '
            f'rx="2"><title>{esc(it.label)}</title></rect>'
        )
    for k in range(5):
        v = lo + k / 4 * span
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(
            f'<text x="{left + k / 4 * plot_w:.1f}" y="{height - 7}" text-anchor="{anchor}">{esc(x_fmt(v))}</text>'
        )
    return (
        f'<div class="chart"><div class="chart-title">{esc(title)}</div>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">{"".join(parts)}</svg></div>'
    )
