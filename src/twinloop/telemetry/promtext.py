"""The Prometheus text exposition format (0.0.4): parse a scrape (the exporter renders with prometheus_client).

OpenMetrics text (what an exporter answers when asked for ``application/openmetrics-text``, and what
``curl -H 'Accept: application/openmetrics-text'`` saves) is read too: a text that ends with ``# EOF`` has its
timestamps in seconds (the 0.0.4 format's are integer milliseconds; a timestamp with a fraction is seconds in
either), and an exemplar after a sample (`` # {trace_id="..."} 1.0``) is skipped. A UTF-8 byte-order mark
before the first line is dropped.

The parser never raises on bad input: a line it cannot read is counted as ``parse_error`` with its line
number and the other lines still come through. (It is hand-written rather than prometheus_client's, whose
parser stops at the first bad line and would lose the rest of a scrape.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from twinloop.telemetry.report import IngestReport

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|(?=\}))')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class PromSample:
    """One sample line: metric name, labels, value, optional timestamp (ms)."""

    name: str
    labels: Mapping[str, str]
    value: float
    ts_ms: int | None = None


def _unescape(text: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], text)


def parse_value(text: str) -> float:
    """A Prometheus sample value (``NaN``, ``+Inf``, ``-Inf`` allowed); ValueError otherwise."""
    t = text.strip()
    special = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
    return special[t.lower()] if t.lower() in special else float(t)


def parse_timestamp_ms(text: str, openmetrics: bool = False) -> int:
    """A sample's timestamp in ms: 0.0.4's integer milliseconds, or seconds in OpenMetrics or with a fraction."""
    if not openmetrics and text.lstrip("+-").isdigit():
        return int(text)
    seconds = float(text)
    if not math.isfinite(seconds):
        raise ValueError(f"timestamp {text!r} is not finite")
    return round(seconds * 1000.0)


def parse_line(line: str, openmetrics: bool = False) -> PromSample | None:
    """Parse one sample line (``None`` for blank and comment lines); ValueError when malformed.

    ``openmetrics``: the line comes from an OpenMetrics text (timestamps in seconds).
    """
    s = line.strip()
    if not s or s.startswith("#"):
        return None
    m = _NAME.match(s)
    if not m:
        raise ValueError("no metric name")
    name, pos = m.group(0), m.end()
    labels: dict[str, str] = {}
    if pos < len(s) and s[pos] == "{":
        pos += 1
        while True:
            while pos < len(s) and s[pos] == " ":
                pos += 1
            if pos < len(s) and s[pos] == "}":
                pos += 1
                break
            lm = _LABEL.match(s, pos)
            if not lm:
                raise ValueError(f"bad label set at column {pos + 1}")
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
    rest = s[pos:].split(" # ", 1)[0].split()  # an OpenMetrics exemplar follows " # "
    if not rest or len(rest) > 2:
        raise ValueError("expected 'value [timestamp]' after the labels")
    value = parse_value(rest[0])
    ts_ms = parse_timestamp_ms(rest[1], openmetrics) if len(rest) == 2 else None
    return PromSample(name, labels, value, ts_ms)


def parse_text(text: str, source: str, report: IngestReport) -> list[PromSample]:
    """All samples of an exposition; malformed lines are counted in ``report`` with their number."""
    out = []
    # Lines end at "\n" only (str.splitlines would also split a label value at "\x85" or "\u2028").
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    openmetrics = any(line.strip() == "# EOF" for line in lines[-3:])
    for lineno, line in enumerate(lines, start=1):
        try:
            sample = parse_line(line, openmetrics)
        except (ValueError, OverflowError) as exc:
            report.add("parse_error", source, lineno, f"{exc}: {line[:80]!r}")
            continue
        if sample is not None:
            out.append(sample)
    return out
