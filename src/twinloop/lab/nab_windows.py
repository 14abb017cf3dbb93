"""Scoring detections against labelled anomaly windows, the way the Numenta Anomaly Benchmark scores them.

This follows NAB's own scorer (``nab/sweeper.py`` of numenta/NAB, v1.x), row by row:

* **Probationary period.** The first ``min(floor(0.15 · rows), 0.15 · 5000 = 750)`` rows of a file are not scored:
  a detection there is neither a true nor a false positive (detectors learn during it), and a window with no row
  after it is not counted.
* **A window** covers the rows whose timestamps lie in ``[start, end]``; it is found when a scored detection falls
  on one of them. Its score is the earliest such detection's position, weighted by NAB's scaled sigmoid
  ``σ(x) = 2 / (1 + e^{5x}) − 1`` (``x > 3`` gives −1) at ``x = −(R − i + 1) / W`` (row ``i``, right edge ``R``,
  width ``W`` rows: ≈ 0.987 on the window's first row, ≈ 0 on its last), divided by ``σ(−1)`` so that the first
  row scores exactly ``A_TP``; a missed window scores ``−A_FN``.
* **A false positive** is a scored detection outside every window. Before any window it costs the full ``A_FP``;
  after one it costs ``A_FP · −σ((i − R_prev) / (W_prev − 1))``, so a detection just after a window (a late but
  real alarm) costs almost nothing and one several window widths later the full weight.
* **Standard profile** (``config/profiles.json``): ``A_TP = 1``, ``A_FP = 0.11``, ``A_FN = 1``.
* **Normalised score** (NAB's ``runner.normalize``): ``100 · (raw − null) / (perfect − null)`` with ``null`` the
  null detector's score (no detection: ``−A_FN`` per window) and ``perfect = A_TP`` per window. NAB normalises
  the sum over its corpus; :func:`score_alarms` normalises one file and :func:`pooled_nab_score` a set of files
  the way NAB does its corpus.

A detection is the row on or after an alarm's time; several alarms on one row count once (NAB thresholds one
anomaly score per row).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinloop.errors import InputError

#: NAB's standard profile (``config/profiles.json``): weights of a true positive, a false positive, a missed window.
A_TP, A_FP, A_FN = 1.0, 0.11, 1.0
#: NAB's probationary period: this share of a file's rows, capped at ``PROBATION_FRACTION · 5000`` rows.
PROBATION_FRACTION = 0.15
PROBATION_CAP_ROWS = 5000


def _parse_time(text: str, source: str) -> float:
    try:
        return dt.datetime.fromisoformat(text.strip()).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        raise InputError(source, "window", f"bad time {text!r} (allowed: ISO 8601, e.g. 2014-03-14 03:31:00)") from None


def load_windows(path: str | Path, key: str) -> list[tuple[float, float]]:
    """The windows of one series from a NAB ``combined_windows.json`` (UTC seconds; ``key`` is the series'
    path inside NAB's ``data/``, e.g. ``realKnownCause/ec2_request_latency_system_failure.csv``).
    """
    p = Path(path)
    try:
        labels = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(str(p), "", f"unreadable labels: {exc}") from None
    if not isinstance(labels, dict) or key not in labels:
        raise InputError(str(p), key, "no such series in the labels (allowed: a key of the JSON object)")
    out = []
    for w in labels[key]:
        if not (isinstance(w, list) and len(w) == 2 and all(isinstance(x, str) for x in w)):
            raise InputError(str(p), key, "window is not [start, end] (allowed: two ISO 8601 strings)")
        a, b = _parse_time(w[0], str(p)), _parse_time(w[1], str(p))
        if b < a:
            raise InputError(str(p), key, f"window ends before it starts ({w[0]} .. {w[1]})")
        out.append((a, b))
    return sorted(out)


@dataclass(frozen=True)
class WindowScore:
    """How a detector's alarms on one series score against its labelled anomaly windows (NAB's way).

    Attributes:
        found: scored windows with at least one scored detection.
        windows: scored windows (those with a row after the probationary period).
        false_alarms: scored detections outside every window.
        days: scored span of the series (after the probationary period), days.
        nab_score: the normalised NAB score (0 = no detection, 100 = every window caught on its first row and no
            false positive; negative = worse than silence).
        raw: the unnormalised NAB score (sum of window and false-positive scores), for pooling files.
        probation_alarms: detections in the probationary period (not scored).
    """

    found: int
    windows: int
    false_alarms: int
    days: float
    nab_score: float
    raw: float = 0.0
    probation_alarms: int = 0

    @property
    def false_alarms_per_day(self) -> float:
        """False alarms per scored day of series."""
        return self.false_alarms / self.days if self.days > 0 else math.nan


def scaled_sigmoid(x: float) -> float:
    """NAB's weight of a relative position: ≈ 0.987 at −1 (a window's start), 0 at its end, −1 beyond 3."""
    return -1.0 if x > 3.0 else 2.0 / (1.0 + math.exp(5.0 * x)) - 1.0


def probation_rows(n_rows: int) -> int:
    """Rows NAB leaves unscored at the start of a file of ``n_rows`` rows: ``min(floor(0.15 n), 750)``."""
    return int(min(math.floor(PROBATION_FRACTION * n_rows), PROBATION_FRACTION * PROBATION_CAP_ROWS))


def normalised(raw: float, windows: int) -> float:
    """NAB's 0–100 normalisation of a raw score over ``windows`` windows.

    Null: every window missed; perfect: every window caught on its first row.
    """
    null, perfect = -A_FN * windows, A_TP * windows
    return 100.0 * (raw - null) / (perfect - null) if windows > 0 else math.nan


def pooled_nab_score(scores: Sequence[WindowScore]) -> float:
    """The normalised score of a set of files scored together, as NAB scores its corpus (raw scores summed)."""
    return normalised(sum(s.raw for s in scores), sum(s.windows for s in scores))


def _window_rows(rows: np.ndarray, windows: Sequence[tuple[float, float]]) -> list[tuple[int, int]]:
    # (first, last) row index of each window that holds at least one row, in time order.
    out = []
    for a, b in sorted(windows):
        lo, hi = int(np.searchsorted(rows, a, "left")), int(np.searchsorted(rows, b, "right")) - 1
        if hi >= lo:
            out.append((lo, hi))
    return out


def _false_positive_cost(i: int, spans: Sequence[tuple[int, int]]) -> float:
    # NAB weights a false positive by its distance after the closest preceding window, in that window's widths.
    before = [(lo, hi) for lo, hi in spans if hi < i]
    if not before:
        return -A_FP
    lo, hi = before[-1]
    # A one-row window has no width to measure by (NAB would divide by zero; its corpus has none): full cost.
    x = (i - hi) / (hi - lo) if hi > lo else math.inf
    return A_FP * scaled_sigmoid(x)


def score_alarms(
    alarm_ts: Sequence[float], windows: Sequence[tuple[float, float]], row_ts: Sequence[float]
) -> WindowScore:
    """Score alarm times (s) against windows (s) on a series whose rows are stamped ``row_ts`` (s), as NAB does."""
    rows = np.sort(np.asarray(row_ts, dtype=np.float64))
    n = rows.size
    start = probation_rows(n)
    hits = np.unique(np.searchsorted(rows, np.asarray(alarm_ts, dtype=np.float64), "left"))
    hits = hits[hits < n]  # an alarm after the last row has no row to fall on
    scored = hits[hits >= start]
    spans = _window_rows(rows, windows)
    in_window = np.zeros(n, dtype=bool)
    raw, found, counted = 0.0, 0, 0
    max_tp = scaled_sigmoid(-1.0)
    for lo, hi in spans:
        in_window[lo : hi + 1] = True
        if hi < start:
            continue  # the whole window is probationary: NAB does not count it
        counted += 1
        inside = scored[(scored >= lo) & (scored <= hi)]
        if inside.size:
            found += 1
            raw += A_TP * scaled_sigmoid(-(hi - int(inside[0]) + 1) / (hi - lo + 1)) / max_tp
        else:
            raw -= A_FN
    false_pos = [int(i) for i in scored if not in_window[i]]
    raw += sum(_false_positive_cost(i, spans) for i in false_pos)
    days = float(rows[-1] - rows[start]) / 86400.0 if start < n else 0.0
    return WindowScore(
        found, counted, len(false_pos), days, normalised(raw, counted), raw, int(hits.size - scored.size)
    )
