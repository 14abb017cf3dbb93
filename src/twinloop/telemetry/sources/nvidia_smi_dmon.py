"""``nvidia-smi dmon`` logs (``nvidia-smi dmon -s pucvmet -o DT > gpu.log``), read into DCGM fields.

dmon prints two ``#`` header lines, the column names and their units::

    #Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk ...
    #YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz ...
     20240501   12:00:00      0    312     51     60     98     45      0      0      -      -   2619   1980 ...

then one whitespace-separated row per GPU per interval, ``-`` where a value is not available, and the headers
again every screenful. ``-o D`` adds the date column (``YYYYMMDD``), ``-o T`` the time (``HH:MM:SS``), both in the
recording machine's zone (``utc_offset_h``, as for the CSV). ``-s`` picks the column groups (nvidia-smi(1),
"dmon"): ``p`` power and GPU/memory temperature, ``u`` SM/memory/encoder/decoder (and JPEG, OFA) utilization,
``c`` memory and processor clocks, ``v`` power and thermal violations, ``m`` frame buffer, BAR1 (and CC protected)
memory in MB, ``e`` aggregate single/double-bit ECC errors and PCIe replays, ``t`` PCIe rx/tx MB/s.

Columns are found by name in the header, so any ``-s`` selection and order is read. :data:`DMON_FIELDS` maps the
columns that are a DCGM field; the others (``jpg``, ``ofa``, ``pviol``, ``tviol``, ``bar1``, ``ccpm``,
``rxpci``, ``txpci``, ``--gpm-metrics`` columns) are reported once as ``unknown_column`` and skipped. A mapped
column whose unit line gives another unit than the one mapped is skipped the same way, not converted by guess.

A row's time is its date and time: a log recorded without ``-o T`` has none, and one with only ``-o T`` has no
day; neither is given a time twinloop would invent. ``start_date`` (the day of the first row) completes a
``-o T`` log; a time of day more than 12 h before the previous row's is the next day (dmon writes every interval,
so a log crosses midnight that way). Bad rows are counted like the CSV reader's: ``truncated`` (too few cells),
``parse_error`` (too many, a bad date, time, GPU index or number, naming the column), ``unavailable`` (``-``).
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta, tzinfo

from twinloop.errors import InputError
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_DEC_UTIL,
    DCGM_FI_DEV_ECC_DBE_AGG_TOTAL,
    DCGM_FI_DEV_ECC_SBE_AGG_TOTAL,
    DCGM_FI_DEV_ENC_UTIL,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEM_CLOCK,
    DCGM_FI_DEV_MEM_COPY_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.rows import Rows

#: dmon column → (field, the unit dmon prints for it, factor to the field's unit).
#: ``sm`` is NVML's GPU utilization (time at least one SM ran a kernel), the CSV's ``utilization.gpu``; ``pclk``
#: is the processor (graphics) clock, read as DCGM's SM clock as the CSV's ``clocks.sm`` is; ``temp`` is
#: ``gtemp`` as older drivers print it; ``fb`` is MB as printed (10^6 bytes) to the field's MiB.
DMON_FIELDS: dict[str, tuple[str, str, float]] = {
    "pwr": (DCGM_FI_DEV_POWER_USAGE, "W", 1.0),
    "gtemp": (DCGM_FI_DEV_GPU_TEMP, "C", 1.0),
    "temp": (DCGM_FI_DEV_GPU_TEMP, "C", 1.0),
    "mtemp": (DCGM_FI_DEV_MEMORY_TEMP, "C", 1.0),
    "sm": (DCGM_FI_DEV_GPU_UTIL, "%", 1.0),
    "mem": (DCGM_FI_DEV_MEM_COPY_UTIL, "%", 1.0),
    "enc": (DCGM_FI_DEV_ENC_UTIL, "%", 1.0),
    "dec": (DCGM_FI_DEV_DEC_UTIL, "%", 1.0),
    "mclk": (DCGM_FI_DEV_MEM_CLOCK, "MHz", 1.0),
    "pclk": (DCGM_FI_DEV_SM_CLOCK, "MHz", 1.0),
    "fb": (DCGM_FI_DEV_FB_USED, "MB", 1e6 / 2**20),
    "sbecc": (DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, "errs", 1.0),
    "dbecc": (DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, "errs", 1.0),
    "pci": (DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "errs", 1.0),
}

#: The recording command this reader is meant for, shown where a log lacks what it needs.
DMON_HINT = "nvidia-smi dmon -s pucvmet -o DT"

#: A time of day this much before the previous row's is the next day (``-o T`` logs across midnight).
MIDNIGHT_WRAP_S = 12 * 3600.0


def dmon_columns(line: str) -> list[str] | None:
    """The lower-case column names when ``line`` is an ``nvidia-smi dmon`` name header (``# gpu pwr ...``,
    ``#Date Time gpu ...``), else ``None``. The units line (``# Idx W C ...``) is not a name header.
    """
    text = line.removeprefix("\ufeff")
    if not text.startswith("#") or text.startswith("#Entity"):
        return None
    words = [w.lower() for w in text.lstrip("#").split()]
    return words if "gpu" in words and any(w in DMON_FIELDS for w in words) else None


def is_dmon_header(line: str) -> bool:
    """Whether ``line`` is an ``nvidia-smi dmon`` column-name header."""
    return dmon_columns(line) is not None


class DmonParser:
    """Parses ``nvidia-smi dmon`` log lines one at a time into samples (state: the columns, pending rows).

    Args:
        source: the file, for messages.
        prefix: entity prefix; GPU ``i`` is ``<prefix>/gpu<i>``.
        tz: the zone the log's times were recorded in (``None``: this machine's).
        start_date: the day of the first row of a ``-o T`` log (no date column); ``None`` when not given.
    """

    def __init__(self, source: str, prefix: str, tz: tzinfo | None, start_date: date | None = None) -> None:
        self.source = source
        self.prefix = prefix
        self.tz = tz
        self.start_date = start_date
        self.columns: list[str] = []
        self.skipped: set[int] = set()
        self._reported: set[tuple[str, ...]] = set()
        self._day: date | None = start_date
        self._last_tod_s: float | None = None
        self.rows = Rows(source)
        self.labels = self.rows.labels

    def _header(self, cols: list[str], lineno: int, report: IngestReport) -> None:
        """Take a name header's columns; refuse a log whose rows have no time of their own."""
        if "time" not in cols:
            what = "a date but no time of day (-o D)" if "date" in cols else "no date or time (recorded without -o DT)"
            raise InputError(
                self.source, f"line {lineno}", f"nvidia-smi dmon output with {what}: a recorded row's time is "
                f"unknown (allowed: a log with its Date and Time columns); record with `{DMON_HINT}`",
            )  # fmt: skip
        if "date" not in cols and self.start_date is None:
            raise InputError(
                self.source, f"line {lineno}", "nvidia-smi dmon -o T output has the time of day but no date "
                "(allowed: a log with its Date column, or the first row's day given as "
                f"`twinloop ingest nvidia-smi FILE --set start_date=YYYY-MM-DD`); record with `{DMON_HINT}`",
            )  # fmt: skip
        self.columns = cols
        self.skipped = set()
        key = tuple(cols)
        if key not in self._reported:
            self._reported.add(key)
            for col in dict.fromkeys(cols):
                if col not in DMON_FIELDS and col not in ("date", "time", "gpu"):
                    msg = f"column {col!r} is not mapped to a field; skipped (the other columns are read)"
                    report.add("unknown_column", self.source, lineno, msg)

    def _units(self, line: str, lineno: int, report: IngestReport) -> None:
        """Check the units line: a mapped column printed in another unit is skipped, not converted by guess."""
        units = line.lstrip("#").split()
        if len(units) != len(self.columns):
            return
        for k, (col, unit) in enumerate(zip(self.columns, units, strict=True)):
            spec = DMON_FIELDS.get(col)
            if spec is not None and unit != spec[1] and k not in self.skipped:
                self.skipped.add(k)
                msg = f"column {col!r} in {unit!r}, not {spec[1]!r} as mapped to {spec[0]}; skipped"
                report.add("unknown_column", self.source, lineno, msg)

    def feed(self, line: str, lineno: int, report: IngestReport) -> int | None:
        """Parse one log line; returns the GPU index of the row (``None`` for headers and bad lines).

        Raises:
            InputError: a name header of a log whose rows have no time (see the module docstring).
        """
        text = line.removeprefix("\ufeff").strip()
        if not text:
            return None
        if text.startswith("#"):
            cols = dmon_columns(text)
            if cols is not None:
                self._header(cols, lineno, report)
            elif self.columns and "idx" in text.lstrip("#").lower().split():
                self._units(text, lineno, report)
            else:
                report.add("parse_error", self.source, lineno, f"not a dmon header or row: {text[:60]!r}")
            return None
        if not self.columns:
            report.add("parse_error", self.source, lineno, "a row before the dmon header line (# gpu pwr ...)")
            return None
        cells = text.split()
        if len(cells) != len(self.columns):
            kind = "truncated" if len(cells) < len(self.columns) else "parse_error"
            report.add(kind, self.source, lineno, f"{len(cells)} cells, expected {len(self.columns)} columns")
            return None
        row = dict(zip(self.columns, cells, strict=True))
        try:
            ts = self._time(row)
            index = int(row["gpu"])
        except (ValueError, OverflowError) as exc:
            report.add("parse_error", self.source, lineno, f"bad gpu, date or time: {exc}")
            return None
        if index < 0:
            report.add("parse_error", self.source, lineno, f"bad gpu index {row['gpu']!r}")
            return None
        entity = f"{self.prefix}/gpu{index}"
        self.labels.setdefault(entity, {"gpu": str(index), "device": f"nvidia{index}",
                                        "Hostname": self.prefix.rsplit("/", 1)[-1]})  # fmt: skip
        for k, (col, cell) in enumerate(zip(self.columns, cells, strict=True)):
            spec = DMON_FIELDS.get(col)
            if spec is None or k in self.skipped:
                continue
            if cell == "-":
                report.add("unavailable", self.source, lineno, f"{col} is -")
                continue
            try:
                v = float(cell)
            except ValueError:
                v = math.nan
            if not math.isfinite(v):
                report.add("parse_error", self.source, lineno, f"{col}: not a number: {cell[:40]!r}")
                continue
            self.rows.add(ts, entity, spec[0], v * spec[2], lineno)
        return index

    def _time(self, row: dict[str, str]) -> float:
        """The row's time, epoch s: its date (or the running day of a ``-o T`` log) and time of day.

        Raises:
            ValueError: a date or time not in dmon's format.
        """
        tod = datetime.strptime(row["time"], "%H:%M:%S")
        tod_s = tod.hour * 3600.0 + tod.minute * 60.0 + tod.second
        if "date" in row:
            if len(row["date"]) != 8:
                raise ValueError(f"date {row['date'][:20]!r} is not YYYYMMDD")
            day = datetime.strptime(row["date"], "%Y%m%d").date()
        else:
            assert self._day is not None  # _header refused a -o T log without start_date
            if self._last_tod_s is not None and tod_s < self._last_tod_s - MIDNIGHT_WRAP_S:
                self._day += timedelta(days=1)
            self._last_tod_s = tod_s
            day = self._day
        stamp = datetime(day.year, day.month, day.day, tod.hour, tod.minute, tod.second, tzinfo=self.tz)
        return stamp.astimezone(UTC).timestamp()

    def pending(self) -> int:
        """Samples parsed but not yet taken by :meth:`flush`."""
        return len(self.rows)

    def flush(self) -> Frame:
        """The parsed samples as one frame; resets the buffer."""
        return self.rows.flush()
