"""Scoring detections against labelled anomaly windows (the Numenta Anomaly Benchmark's way, simplified).

A window is found when at least one alarm falls inside it; alarms outside every window are false alarms. The
NAB-style score uses the standard profile's weights (true positive ``A_TP = 1``, false positive
``A_FP = -0.11``, missed window ``A_FN = -1``) and NAB's scaled sigmoid of the first alarm's position in its
window (``y = -1`` at the window's start, ``0`` at its end: ``2 / (1 + e^{5y}) - 1``, ≈ 0.99 at the start and 0
at the end), normalised to 0 (no alarm at all) .. 100 (every window caught at its start, no false alarm).
Simplification, documented: NAB weights a false alarm by the sigmoid of its distance after the preceding window
(an alarm just after a window costs less); here every false alarm costs the full ``A_FP``, so scores are a
little lower than NAB's own for the same alarms.
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

A_TP, A_FP, A_FN = 1.0, -0.11, -1.0


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
    """How a detector's alarms on one series score against its labelled anomaly windows.

    Attributes:
        found: windows with at least one alarm.
        windows: all windows.
        false_alarms: alarms outside every window.
        days: span of the series, days.
        nab_score: the normalised NAB-style score (0 = no alarms, 100 = perfect; negative = worse than silence).
    """

    found: int
    windows: int
    false_alarms: int
    days: float
    nab_score: float

    @property
    def false_alarms_per_day(self) -> float:
        """False alarms per day of series."""
        return self.false_alarms / self.days if self.days > 0 else math.nan


def _sigmoid(y: float) -> float:
    return 2.0 / (1.0 + math.exp(5.0 * y)) - 1.0


def score_alarms(
    alarm_ts: Sequence[float], windows: Sequence[tuple[float, float]], start_s: float, end_s: float
) -> WindowScore:
    """Score alarm times against windows over a series spanning ``start_s .. end_s`` (s)."""
    ts = np.sort(np.asarray(alarm_ts, dtype=np.float64))
    raw = 0.0
    found = 0
    inside = np.zeros(ts.size, dtype=bool)
    for a, b in windows:
        hit = (ts >= a) & (ts <= b)
        inside |= hit
        if hit.any():
            found += 1
            first = float(ts[hit][0])
            y = (first - b) / (b - a) if b > a else 0.0
            raw += A_TP * _sigmoid(y)
        else:
            raw += A_FN
    false_alarms = int(np.count_nonzero(~inside))
    raw += A_FP * false_alarms
    null, perfect = A_FN * len(windows), A_TP * _sigmoid(-1.0) * len(windows)
    nab = 100.0 * (raw - null) / (perfect - null) if perfect > null else math.nan
    return WindowScore(found, len(windows), false_alarms, max(end_s - start_s, 0.0) / 86400.0, nab)
