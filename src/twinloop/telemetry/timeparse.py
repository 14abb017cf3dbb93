"""Durations (``100ms``, ``10s``, ``5m``, ``1h``, ``2d``) and points in time for queries."""

from __future__ import annotations

import re
import time

from twinloop.errors import InputError
from twinloop.telemetry.sources.files import parse_ts

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)?\s*$")
_RELATIVE = re.compile(r"^\s*(now|latest)?\s*-\s*(.+)$")


def parse_duration(text: str, flag: str = "--every") -> float:
    """Seconds from ``10s``/``5m``/``1h``/``100ms``/``2d`` (a bare number is seconds).

    Raises:
        InputError: not a positive duration.
    """
    m = _DURATION.match(text)
    if not m:
        raise InputError("query", flag, f"expected a duration like 10s, 5m, 1h, 100ms, got {text!r}")
    value = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if value <= 0:
        raise InputError("query", flag, f"duration must be > 0, got {text!r}")
    return value


def parse_time(text: str, newest_s: float | None, flag: str = "--since") -> float:
    """Epoch seconds from a point in time.

    Accepted: epoch seconds (``1716000000``), ISO-8601 (``2024-05-18T12:00:00Z``, naive = UTC),
    ``now-1h`` (wall clock), ``latest-10m`` (the newest stored sample), or a bare duration ``1h`` / ``-1h``,
    which means ``latest-1h`` so that it works on simulated clocks too.

    Raises:
        InputError: none of the above.
    """
    t = text.strip()
    if t in ("now", "latest"):
        return time.time() if t == "now" or newest_s is None else newest_s
    m = _RELATIVE.match(t)
    anchor, dur_text = (m.group(1) or "latest", m.group(2)) if m else ("latest", t)
    if m is None:
        try:
            return parse_ts(t)
        except ValueError:
            pass
    try:
        dur = parse_duration(dur_text, flag)
    except InputError:
        raise InputError(
            "query", flag, f"expected epoch seconds, ISO-8601, now-1h, latest-10m or 1h, got {text!r}"
        ) from None
    base = time.time() if anchor == "now" or newest_s is None else newest_s
    return base - dur
