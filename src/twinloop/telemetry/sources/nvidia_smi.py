"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -lms N`` output, live or from a file.

Any ``--query-gpu`` column set is read. Column order comes from a header line when there is one
(``--format=csv``) or else from ``columns`` (the ``--query-gpu`` list used). Known columns
(:data:`QUERY_FIELDS`, :data:`LABEL_COLUMNS`) are mapped to fields and labels; any other column
(``pstate``, ``fan.speed`` ...) is reported once as ``unknown_column`` and skipped, and the rest of the row
still comes through. Units are read from the header (``power.draw [W]``, ``memory.used [MiB]``,
``clocks.sm [MHz]``, ``utilization.gpu [%]``, ``temperature.gpu [C]``) and from the cells (``250.50 W``,
``1.98 GHz``) and converted to the field's unit; a unit that does not convert is a ``parse_error`` naming the
column. ``[N/A]``/``[Not Supported]`` cells are counted as ``unavailable``; lines with too few cells are
``truncated``; anything unparsable is a ``parse_error`` naming the line. nvidia-smi prints local time
(``YYYY/MM/DD HH:MM:SS.mmm``): ``utc_offset_h`` says which zone the file was recorded in (``None`` = this
machine's zone).

The GPU of a line is its ``index`` column; a query without one (``--query-gpu=timestamp,power.draw,...``, the
common hand-written logging command) identifies a GPU by its ``uuid`` or ``pci.bus_id`` (numbered in the order
they first appear, which is nvidia-smi's index order), and with neither by its place in the sweep: nvidia-smi
writes every GPU once per sweep, in index order, within a few milliseconds, and sweeps are at least 100 ms
apart (:data:`SWEEP_S`).

A recorded ``nvidia-smi dmon`` log (its ``# gpu pwr ...`` header before any CSV header or sample) is read by
:class:`~twinloop.telemetry.sources.nvidia_smi_dmon.DmonParser` through the same source, so ``ingest nvidia-smi``,
``detect`` and ``watch nvidia-smi:FILE`` take it as they take the CSV; ``dcgmi dmon`` output (no time at all) is
refused in one line.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from twinloop.errors import InputError
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,
    DCGM_FI_DEV_DEC_UTIL,
    DCGM_FI_DEV_ECC_DBE_AGG_TOTAL,
    DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
    DCGM_FI_DEV_ECC_SBE_AGG_TOTAL,
    DCGM_FI_DEV_ECC_SBE_VOL_TOTAL,
    DCGM_FI_DEV_ENC_UTIL,
    DCGM_FI_DEV_FB_FREE,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEM_CLOCK,
    DCGM_FI_DEV_MEM_COPY_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_POWER_USAGE_INSTANT,
    DCGM_FI_DEV_ROW_REMAP_FAILURE,
    DCGM_FI_DEV_ROW_REMAP_PENDING,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig, default_node_prefix
from twinloop.telemetry.sources.files import parse_ts
from twinloop.telemetry.sources.nvidia_smi_dmon import DmonParser, is_dmon_header
from twinloop.telemetry.sources.rows import Rows

#: nvidia-smi query name → field (values are already in the field's unit: W, C, MHz, %, MiB, counts).
QUERY_FIELDS: dict[str, str] = {
    "power.draw": DCGM_FI_DEV_POWER_USAGE,
    "power.limit": DCGM_FI_DEV_POWER_MGMT_LIMIT,
    "temperature.gpu": DCGM_FI_DEV_GPU_TEMP,
    "temperature.memory": DCGM_FI_DEV_MEMORY_TEMP,
    "power.draw.average": DCGM_FI_DEV_POWER_USAGE,
    "power.draw.instant": DCGM_FI_DEV_POWER_USAGE_INSTANT,
    "enforced.power.limit": DCGM_FI_DEV_POWER_MGMT_LIMIT,
    "clocks.sm": DCGM_FI_DEV_SM_CLOCK,
    "clocks.current.sm": DCGM_FI_DEV_SM_CLOCK,
    "clocks.mem": DCGM_FI_DEV_MEM_CLOCK,
    "clocks.current.memory": DCGM_FI_DEV_MEM_CLOCK,
    "utilization.encoder": DCGM_FI_DEV_ENC_UTIL,
    "utilization.decoder": DCGM_FI_DEV_DEC_UTIL,
    "clocks_event_reasons.active": DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    "clocks_throttle_reasons.active": DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    "utilization.gpu": DCGM_FI_DEV_GPU_UTIL,
    "utilization.memory": DCGM_FI_DEV_MEM_COPY_UTIL,
    "memory.used": DCGM_FI_DEV_FB_USED,
    "memory.free": DCGM_FI_DEV_FB_FREE,
    "ecc.errors.corrected.volatile.total": DCGM_FI_DEV_ECC_SBE_VOL_TOTAL,
    "ecc.errors.uncorrected.volatile.total": DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
    "ecc.errors.corrected.aggregate.total": DCGM_FI_DEV_ECC_SBE_AGG_TOTAL,
    "ecc.errors.uncorrected.aggregate.total": DCGM_FI_DEV_ECC_DBE_AGG_TOTAL,
    "remapped_rows.correctable": DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,
    "remapped_rows.uncorrectable": DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
    "remapped_rows.pending": DCGM_FI_DEV_ROW_REMAP_PENDING,
    "remapped_rows.failure": DCGM_FI_DEV_ROW_REMAP_FAILURE,
}
LABEL_COLUMNS = {"uuid": "UUID", "name": "modelName", "gpu_name": "modelName", "pci.bus_id": "pci_bus_id",
                 "gpu_bus_id": "pci_bus_id", "gpu_uuid": "UUID"}  # fmt: skip
KNOWN_COLUMNS = {"timestamp", "index", *LABEL_COLUMNS, *QUERY_FIELDS}

#: field unit → unit spelled in a header or cell (lower case) → factor to the field's unit.
UNIT_FACTORS: dict[str, dict[str, float]] = {
    "W": {"w": 1.0, "mw": 1e-3, "kw": 1e3},
    "MHz": {"mhz": 1.0, "ghz": 1e3, "khz": 1e-3, "hz": 1e-6},
    "MiB": {"mib": 1.0, "gib": 1024.0, "kib": 1.0 / 1024.0, "b": 1.0 / 2**20, "mb": 1e6 / 2**20, "gb": 1e9 / 2**20},
    "%": {"%": 1.0},
    "C": {"c": 1.0, "°c": 1.0, "degc": 1.0},
}
_HEADER_CELL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\[([^\]]*)\])?\s*$")

DEFAULT_COLUMNS: tuple[str, ...] = (
    "timestamp", "index", "uuid", "name", "power.draw", "power.limit", "temperature.gpu", "temperature.memory",
    "clocks.sm", "clocks.mem", "clocks_event_reasons.active", "utilization.gpu", "utilization.memory",
    "memory.used", "memory.free", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
)  # fmt: skip

_UNAVAILABLE = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]", "[no data]"}
_NUMBER = re.compile(r"^\s*(0x[0-9a-fA-F]+|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%/°]+)?\s*$")
_BOOL = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0, "active": 1.0, "not active": 0.0}


class NvidiaSmiConfig(SourceConfig):
    """nvidia-smi source options.

    Attributes:
        path: a file of recorded output (``None`` = run ``nvidia-smi`` live).
        columns: the ``--query-gpu`` list, in order (used when the output has no header).
        period_ms: live sampling period, ms (>= 100).
        samples: live: number of sweeps to read (``None`` = until ``duration_s`` or interrupted).
        duration_s: live: stop after this many seconds.
        node_prefix: entity prefix; GPU ``i`` is ``<node_prefix>/gpu<i>``.
        utc_offset_h: time zone of the timestamps, hours east of UTC (``None`` = this machine's zone).
        batch_rows: file mode: lines per emitted frame.
        start_date: an ``nvidia-smi dmon -o T`` log (time of day, no date column): the day of its first row.
    """

    path: str | None = None
    columns: tuple[str, ...] = DEFAULT_COLUMNS
    period_ms: int = Field(default=1000, ge=100)
    samples: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    node_prefix: str | None = None
    utc_offset_h: float | None = None
    batch_rows: int = Field(default=50_000, ge=1)
    start_date: date | None = None


def parse_cell(text: str) -> tuple[float | None, str | None]:
    """A number and its unit (lower case, ``None`` when absent) from an nvidia-smi cell.

    Returns ``(None, None)`` for a not-available marker.

    Raises:
        ValueError: the cell is neither a number, a yes/no, nor a not-available marker.
    """
    t = text.strip()
    low = t.lower()
    if low in _UNAVAILABLE:
        return None, None
    if low in _BOOL:
        return _BOOL[low], None
    m = _NUMBER.match(t)
    if not m:
        raise ValueError(f"not a number: {text[:40]!r}")
    num, unit = m.group(1), m.group(2)
    value = float(int(num, 16)) if num.lower().startswith("0x") else float(num)
    return value, (unit.lower() if unit else None)


def parse_value(text: str) -> float | None:
    """A number from an nvidia-smi cell (units and hex allowed, not converted); ``None`` when not available.

    Raises:
        ValueError: the cell is neither a number, a yes/no, nor a not-available marker.
    """
    return parse_cell(text)[0]


def unit_factor(field: str, unit: str | None) -> float | None:
    """Factor from ``unit`` to ``field``'s unit (1 when no unit is given); ``None`` when it does not convert."""
    if unit is None:
        return 1.0
    return UNIT_FACTORS.get(_unit_of(field), {}).get(unit.lower())


def _unit_of(field: str) -> str:
    from twinloop.telemetry.fields import FIELD_BY_NAME

    spec = FIELD_BY_NAME.get(field)
    return spec.unit if spec is not None else ""


#: Lines less than this apart (s) are one sweep over the GPUs (nvidia-smi's shortest period, ``-lms 100``, is
#: 0.1 s); used to number the GPUs of a file with no index, UUID or bus id column.
SWEEP_S = 0.05

#: Columns that name one GPU for good, used in this order when there is no ``index`` column.
ID_COLUMNS = ("uuid", "gpu_uuid", "pci.bus_id", "gpu_bus_id")


def parse_header(line: str) -> list[tuple[str, str | None]] | None:
    """``[(column, unit)]`` when ``line`` is an nvidia-smi CSV header (it names ``index``, or ``timestamp`` and a
    query column such as ``power.draw``), else ``None``.
    """
    out: list[tuple[str, str | None]] = []
    for cell in line.rstrip("\r\n").split(","):
        m = _HEADER_CELL.match(cell)
        if m is None:
            return None
        out.append((m.group(1).lower(), m.group(2).strip() if m.group(2) else None))
    names = {name for name, _ in out}
    return out if "index" in names or ("timestamp" in names and names & QUERY_FIELDS.keys()) else None


_SMI_TIME = re.compile(r"^\s*\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s*$")


def is_headerless_row(line: str) -> bool:
    """Whether ``line`` is an nvidia-smi data line (``--format=csv,noheader``): a first cell in nvidia-smi's time
    format (``2024/05/01 12:00:00.123``) and more cells after it.
    """
    cells = line.split(",")
    return len(cells) >= 2 and _SMI_TIME.match(cells[0].removeprefix("\ufeff")) is not None


#: The query this reader is meant for, shown where a file is some other nvidia-smi output.
QUERY_HINT = (
    "nvidia-smi --query-gpu=timestamp,index,power.draw,temperature.gpu,clocks.sm,utilization.gpu,"
    "clocks_event_reasons.active --format=csv -lms 1000"
)


def check_not_dcgmi_dmon(line: str, source: str, lineno: int) -> None:
    """Refuse ``dcgmi dmon`` output (``#Entity  POWER ...``) in one line.

    Raises:
        InputError: ``line`` is a ``dcgmi dmon`` header: one ``GPU 0  312.45  51`` line per GPU, no time at all.
    """
    if line.removeprefix("\ufeff").startswith("#Entity"):
        raise InputError(
            source, f"line {lineno}", f"dcgmi dmon output is not read (no time); record with `{QUERY_HINT}`"
        )


class NvidiaSmiParser:
    """Parses output lines one at a time into samples (state: column order, pending rows)."""

    def __init__(self, cfg: NvidiaSmiConfig, source: str) -> None:
        self.source = source
        # A recorded file's rows keep their own time; only live output may be stamped on arrival.
        self.recorded = cfg.path is not None
        self.columns: list[str] = []
        self.units: list[str | None] = []
        self.header_line: int | None = None
        self._set_columns([(c.lower(), None) for c in cfg.columns])
        self.prefix = (cfg.node_prefix or default_node_prefix()).rstrip("/")
        offset = cfg.utc_offset_h
        self.tz = datetime.now().astimezone().tzinfo if offset is None else timezone(timedelta(hours=offset))
        self.header_seen = False
        self.rows = Rows(source)
        self.labels = self.rows.labels
        self.last_index: int | None = None
        self._ids: dict[str, int] = {}
        self._sweep: tuple[float, int] | None = None  # (first time, last place) of the current sweep
        self.start_date = cfg.start_date
        # An `nvidia-smi dmon` log (its name header before any CSV header or sample) is read by its own parser.
        self._dmon: DmonParser | None = None
        self._sampled = False

    def _set_columns(self, cols: list[tuple[str, str | None]]) -> None:
        self.columns = [c for c, _ in cols]
        self.units = [u for _, u in cols]
        self._columns_checked = False

    def _unknown(self, report: IngestReport, lineno: int) -> None:
        """Report each column that is neither mapped nor a label once (it is skipped, the row is kept)."""
        if self._columns_checked:
            return
        self._columns_checked = True
        for col in dict.fromkeys(self.columns):
            if col not in KNOWN_COLUMNS:
                where = self.header_line if self.header_line is not None else lineno
                msg = f"column {col!r} is not mapped to a field; skipped (the other columns are read)"
                report.add("unknown_column", self.source, where, msg)

    def _parse_time(self, text: str) -> float:
        t = text.strip()
        try:
            dt = datetime.strptime(t, "%Y/%m/%d %H:%M:%S.%f")
        except ValueError:
            try:
                dt = datetime.strptime(t, "%Y/%m/%d %H:%M:%S")
            except ValueError:
                return parse_ts(t)
        return dt.replace(tzinfo=self.tz).astimezone(UTC).timestamp()

    def feed(self, line: str, lineno: int, report: IngestReport) -> int | None:
        """Parse one output line; returns the GPU index of the sample (``None`` for headers and bad lines)."""
        if self._dmon is not None:
            return self._dmon.feed(line, lineno, report)
        if not line.strip():
            return None
        if not self.header_seen and not self._sampled:
            check_not_dcgmi_dmon(line, self.source, lineno)
            if is_dmon_header(line):
                self._dmon = DmonParser(self.source, self.prefix, self.tz, self.start_date)
                return self._dmon.feed(line, lineno, report)
        header = parse_header(line)
        if header is not None:
            self.header_line = lineno
            self._set_columns(header)
            self.header_seen = True
            self._unknown(report, lineno)
            return None
        self._unknown(report, lineno)
        cells = [c.strip() for c in line.rstrip("\r\n").split(",")]
        if len(cells) != len(self.columns):
            # With no header line the columns are the `columns` option's: say so, that is the usual cause.
            why = "" if self.header_seen else " (no header line: record with --format=csv, or name the " \
                "--query-gpu columns in the `columns` option)"  # fmt: skip
            kind, what = ("truncated", "of") if len(cells) < len(self.columns) else ("parse_error", "cells, expected")
            report.add(kind, self.source, lineno, f"{len(cells)} {what} {len(self.columns)} columns{why}")
            return None
        row = dict(zip(self.columns, cells, strict=True))
        if self.recorded and "timestamp" not in row:
            msg = "no timestamp column: a recorded row's time is unknown (put timestamp first in --query-gpu)"
            report.add("parse_error", self.source, lineno, msg)
            return None
        try:
            ts = self._parse_time(row["timestamp"]) if "timestamp" in row else time.time()
            index = self._index(row, ts)
        except (ValueError, OverflowError, OSError) as exc:
            report.add("parse_error", self.source, lineno, f"bad index or timestamp: {exc}")
            return None
        if not math.isfinite(ts) or index < 0:
            report.add("parse_error", self.source, lineno, f"bad index or timestamp: {row.get('timestamp')!r}")
            return None
        entity = f"{self.prefix}/gpu{index}"
        labels = self.labels.setdefault(entity, {"gpu": str(index), "device": f"nvidia{index}",
                                                  "Hostname": self.prefix.rsplit("/", 1)[-1]})  # fmt: skip
        for col, label in LABEL_COLUMNS.items():
            if col in row and row[col].lower() not in _UNAVAILABLE:
                labels[label] = row[col]
        for k, (col, cell) in enumerate(zip(self.columns, cells, strict=True)):
            field = QUERY_FIELDS.get(col)
            if field is None:
                continue
            try:
                v, cell_unit = parse_cell(cell)
            except ValueError as exc:
                report.add("parse_error", self.source, lineno, f"{col}: {exc}")
                continue
            if v is None:
                report.add("unavailable", self.source, lineno, f"{col} is {cell}")
                continue
            unit = cell_unit or self.units[k]
            factor = unit_factor(field, unit)
            if factor is None:
                allowed = ", ".join(UNIT_FACTORS.get(_unit_of(field), {})) or "none"
                msg = f"{col}: unit {unit!r} does not convert to {field} (allowed: {allowed})"
                report.add("parse_error", self.source, lineno, msg)
                continue
            v *= factor
            self._sampled = True
            self.rows.add(ts, entity, field, v, lineno)
        return index

    def _index(self, row: dict[str, str], ts: float) -> int:
        """The GPU a line is about: its ``index``, else its UUID / bus id in order of appearance, else its place
        in the sweep (see the module docstring). ValueError when the index is not a number.
        """
        if "index" in row:
            return int(row["index"])
        ident = next((row[c] for c in ID_COLUMNS if c in row and row[c].lower() not in _UNAVAILABLE), None)
        if ident is not None:
            return self._ids.setdefault(ident, len(self._ids))
        if self._sweep is not None and abs(ts - self._sweep[0]) < SWEEP_S:
            self._sweep = (self._sweep[0], self._sweep[1] + 1)
        else:
            self._sweep = (ts, 0)
        return self._sweep[1]

    def peek_index(self, line: str) -> int | None:
        """The GPU index a data line is about, without parsing the rest (``None`` if unreadable)."""
        cells = line.split(",")
        try:
            return int(cells[self.columns.index("index")])
        except (ValueError, IndexError):
            return None

    def pending(self) -> int:
        """Samples parsed but not yet taken by :meth:`flush`."""
        return self._dmon.pending() if self._dmon is not None else len(self.rows)

    def flush(self) -> Frame:
        """The parsed samples as one frame; resets the buffer."""
        return self._dmon.flush() if self._dmon is not None else self.rows.flush()


class NvidiaSmiSource(Source):
    """GPU samples from ``nvidia-smi --query-gpu`` output (recorded file or live process)."""

    name: ClassVar[str] = "nvidia-smi"
    config_type: ClassVar[type[SourceConfig]] = NvidiaSmiConfig
    target_field: ClassVar[str | None] = "path"

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """File: one frame per ``batch_rows`` lines. Live: one frame per sweep over the GPUs."""
        cfg = self.config
        assert isinstance(cfg, NvidiaSmiConfig)
        if cfg.path is not None:
            yield from self._file(cfg, report)
        else:
            yield from self._live(cfg, report)

    def _file(self, cfg: NvidiaSmiConfig, report: IngestReport) -> Iterator[Frame]:
        assert cfg.path is not None
        if not Path(cfg.path).is_file():
            raise FileNotFoundError(2, "no such file", cfg.path)
        parser = NvidiaSmiParser(cfg, cfg.path)
        with open(cfg.path, encoding="utf-8-sig", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                parser.feed(line, lineno, report)
                if parser.pending() >= cfg.batch_rows:
                    yield parser.flush()
        if parser.pending():
            yield parser.flush()

    def _live(self, cfg: NvidiaSmiConfig, report: IngestReport) -> Iterator[Frame]:
        exe = shutil.which("nvidia-smi")
        if exe is None:
            raise InputError("nvidia-smi source", "path", "nvidia-smi is not installed; give a recorded file")
        cmd = [exe, f"--query-gpu={','.join(cfg.columns)}", "--format=csv,noheader,nounits", f"-lms={cfg.period_ms}"]
        parser = NvidiaSmiParser(cfg, "nvidia-smi")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        sweeps, t0, last = 0, time.monotonic(), -1
        try:
            assert proc.stdout is not None
            for lineno, line in enumerate(proc.stdout, start=1):
                peek = parser.peek_index(line)
                if peek is not None and peek <= last and parser.pending():
                    # A new sweep starts: the GPUs of the last one form a frame.
                    yield parser.flush()
                    sweeps += 1
                index = parser.feed(line, lineno, report)
                if index is not None:
                    last = index
                done = cfg.samples is not None and sweeps >= cfg.samples
                if done or (cfg.duration_s is not None and time.monotonic() - t0 >= cfg.duration_s):
                    break
        finally:
            proc.terminate()
            proc.wait(timeout=5)
        if parser.pending() and (cfg.samples is None or sweeps < cfg.samples):
            yield parser.flush()
