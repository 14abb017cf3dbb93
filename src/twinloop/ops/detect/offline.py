"""Run the detectors offline on a CSV or Parquet time series (``twinloop detect FILE``).

Two layouts are read (with pyarrow):

* **wide** — a timestamp column (``ts``, ``timestamp``, ``time``, ``t``, ``t_s``, ``time_s``, ``date``,
  ``datetime``; or the first column if it has a timestamp type) and one or more numeric value columns; every
  value column is one entity. A time column that only numbers the samples (Yahoo S5's ``timestamp`` 1, 2, 3 ...,
  a pandas index), no time column, or no header at all (one value per line) is a *sample index*
  (:mod:`~twinloop.ops.detect.time_axis`): samples ``interval_s`` apart;
* **long** — the telemetry schema ``(ts, entity, field, value)``; every (field, entity) pair is one series and
  the detectors run per field, vectorized across entities. Files whose first columns are exactly ``ts, entity``
  (long, or wide per entity: ``ts, entity, <FIELD>...``) are read by the telemetry layer's file source
  (:mod:`twinloop.telemetry.sources.files`), which counts bad lines instead of stopping (``problems``).
  When the entities are GPU ids and the fields are DCGM fields, the full
  :class:`~twinloop.ops.detect.pipeline.DetectionPipeline` (rules + grouping) also runs and its incidents are
  reported.

* **prometheus** — a saved Prometheus ``/api/v1/query_range`` answer (``.json``,
  :mod:`~twinloop.telemetry.sources.prometheus_saved`): one series
  per label set, mapped to entities and fields as ``watch prometheus`` maps them;
* **store** — a twinloop DuckDB store (``twinloop ingest`` / ``watch`` recordings, known by the file's header,
  not its name), read as ``watch replay`` reads it;
* **nvidia-smi** — ``nvidia-smi --query-gpu=timestamp,index,... --format=csv`` output (a header naming ``index``
  and at least one mapped query column), read by the telemetry layer's nvidia-smi parser: any column set,
  unknown columns counted in ``problems`` and skipped, units converted. GPU ``i`` becomes
  ``site0/row0/rack0/<host>/gpu<i>`` (this machine's host name; timestamps in this machine's zone).

Per-entity timestamps of one sweep are aligned: nvidia-smi stamps every GPU's line separately, a few
milliseconds apart, and a dcgm or Prometheus export can do the same. On such a file every timestamp would hold
one GPU and the others would be missing, so no detector saw a series (a 30 s, 40 % power drop went unseen).
Timestamps closer together than half the series' own sampling interval (the median per-series step) are one
sweep and take its first timestamp; ``InputReport.aligned_max_shift_s`` says how far a sample was moved.

Timestamps are seconds (numbers) or dates (ISO 8601 strings or timestamp columns → UNIX seconds). Rows out of
time order are sorted (and counted), duplicate timestamps keep the last row (counted), NaNs and empty cells are
counted; a malformed file, a missing timestamp column or a non-numeric value is an :class:`InputError` naming
the file, the column and the line. Detectors adapt to the series' own sampling interval (the median ``dt``).
A cumulative counter (an energy or byte total: never falls but to reset, rises all through the file) is analysed as
its rate per second (:mod:`~twinloop.ops.detect.counters`; ``InputReport.counters``).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.detect.base import Detector, make_detector
from twinloop.ops.detect.counters import as_rates, counter_mask
from twinloop.ops.detect.time_axis import ASSUMED_INTERVAL_S, INDEX_NAMES, epoch_unit, is_sample_index
from twinloop.ops.events import Detection, EventClass, Incident
from twinloop.safeio import check_regular_file
from twinloop.telemetry.sources.prometheus_saved import is_prometheus_json, is_prometheus_text
from twinloop.telemetry.store.duckdb_store import is_duckdb_file

F64 = NDArray[np.float64]

TS_NAMES = ("ts", "timestamp", "time", "t", "t_s", "time_s", "date", "datetime")
LONG_COLUMNS = ("ts", "entity", "field", "value")
DEFAULT_DETECTORS = ("ewma_zscore", "cusum")


#: Largest magnitude a sample may have (above: counted as ``absurd_value`` and treated as missing). Far above any
#: physical reading or counter (a GPU's lifetime energy in mJ is ~1e13), far below where squares overflow (1e154).
MAX_ABS_VALUE = 1e18
#: Largest input file detect reads.
MAX_FILE_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class SeriesBlock:
    """One field's series on a common time axis.

    Attributes:
        field: the field (wide files: ``""``, the columns are the series).
        ts: sample times, s, strictly increasing (n_samples,).
        names: series names (wide: column names; long: entity ids).
        values: (n_samples, n_series), NaN = missing.
    """

    field: str
    ts: F64
    names: tuple[str, ...]
    values: F64


@dataclass
class InputReport:
    """What was read and what was wrong with it (counted, not fatal)."""

    source: str
    layout: str = "wide"
    rows: int = 0
    out_of_order: int = 0
    duplicates: int = 0
    nan_count: dict[str, int] = field(default_factory=dict)
    problems: dict[str, int] = field(default_factory=dict)
    dt_s: float = math.nan
    aligned_max_shift_s: float = 0.0
    skipped_columns: dict[str, str] = field(default_factory=dict)
    time_axis: str = "clock"
    interval_s: float | None = None
    interval_assumed: bool = False
    counters: list[str] = field(default_factory=list)
    time_unit: str = "s"


def align_sweeps(ts: F64, series: NDArray[np.int64]) -> tuple[F64, float]:
    """Snap per-series timestamps of one sweep onto one time.

    Args:
        ts: (n,) sample times, s.
        series: (n,) series id per sample (entity, or entity × field).

    Returns:
        (aligned times, largest shift in s). Distinct times less than half the median per-series sampling
        interval apart are one sweep and all take its earliest time; a file whose series share their
        timestamps comes back unchanged.
    """
    if ts.size < 2:
        return ts, 0.0
    order = np.lexsort((ts, series))
    s_ts, s_ser = ts[order], series[order]
    same = s_ser[1:] == s_ser[:-1]
    steps = np.diff(s_ts)[same]
    steps = steps[steps > 0]
    if steps.size == 0:
        return ts, 0.0
    tol = 0.5 * float(np.median(steps))
    times = np.unique(ts)
    start = np.r_[True, np.diff(times) >= tol]
    sweep_t = times[start][np.cumsum(start) - 1]
    aligned = sweep_t[np.searchsorted(times, ts)]
    return aligned, float(np.max(ts - aligned))


def _read_table(path: Path) -> pa.Table:
    if not path.exists():
        raise FileNotFoundError(2, "No such file", str(path))
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".pq"):
        _not_semicolons(path)
    try:
        if suffix in (".parquet", ".pq"):
            return pq.read_table(path)
        table = pacsv.read_csv(path)
        return _headerless(path, table) if _all_numbers(table.column_names) else table
    except (pa.ArrowException, UnicodeDecodeError, ValueError) as exc:
        try:
            msg = (str(exc).splitlines() or ["unreadable"])[0]
        except UnicodeDecodeError:
            msg = "not UTF-8 text"
        line = _bad_csv_line(path) if suffix not in (".parquet", ".pq") else None
        raise InputError(str(path), f"line {line}" if line else "", f"malformed file: {msg}") from None
    except OSError as exc:
        raise InputError(str(path), "", f"cannot read: {exc.strerror or exc}") from None


#: The times a generic CSV's time column may hold (said where one is not read).
TIME_FORMATS = "epoch seconds, ms, µs or ns; ISO 8601 such as 2024-05-01 12:00:00 or 2024-05-01T12:00:00Z"


def _not_semicolons(path: Path) -> None:
    """Refuse a ';'-separated file (a spreadsheet's CSV in a locale with decimal commas) in one line: read as CSV it
    is one text column, or "Expected 1 columns, got 3" where a decimal comma splits a value.
    """
    with path.open(encoding="utf-8-sig", errors="replace") as fh:
        head = fh.readline(65536)
    if head.count(";") >= 1 and "," not in head:
        raise InputError(
            str(path), "line 1", "fields separated by ';' (a spreadsheet export with decimal commas); allowed: ',' "
            "between fields and '.' as the decimal point",
        )  # fmt: skip


def _all_numbers(names: Sequence[str]) -> bool:
    """Whether every header name reads as a number: the file has no header (its first line is data)."""
    try:
        [float(n) for n in names]
    except ValueError:
        return False
    return bool(names)


def _headerless(path: Path, table: pa.Table) -> pa.Table:
    """A CSV without a header (the UCR anomaly archive: one value per line) read again with its first line as
    data; its columns are named ``value`` (one) or ``value_1``, ``value_2`` ...
    """
    opts = pacsv.ReadOptions(autogenerate_column_names=True)
    table = pacsv.read_csv(path, read_options=opts)
    n = table.num_columns
    return table.rename_columns(["value"] if n == 1 else [f"value_{i + 1}" for i in range(n)])


def _bad_csv_line(path: Path) -> int | None:
    """The first line whose field count differs from the header's (pyarrow does not say)."""
    try:
        with path.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return 1
            for row in reader:
                if row and len(row) != len(header):
                    return reader.line_num
    except csv.Error:
        return None
    return None


def _column_floats(table: pa.Table, name: str, source: str) -> F64:
    col = table.column(name)
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        secs = pc.cast(pc.cast(col, pa.timestamp("us")), pa.int64()).to_numpy(zero_copy_only=False)
        return np.asarray(secs, dtype=np.float64) / 1e6
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
        # Unsafe: an int64 beyond 2^53 (a clock in ns) loses its last digits as a float, not the whole column.
        return np.asarray(pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)
    if pa.types.is_null(col.type):
        return np.full(len(col), np.nan)
    values = col.to_pylist()
    out = np.empty(len(values))
    for i, v in enumerate(values):
        if v is None or (isinstance(v, str) and v.strip() in ("", "nan", "NaN", "NA", "null")):
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise InputError(source, f"{name}: line {i + 2}", f"non-numeric value {v!r} (allowed: numbers)") from None
    return out


def _ts_column(table: pa.Table) -> str | None:
    """The time column: a clock name (:data:`TS_NAMES`), an index name (:data:`~.time_axis.INDEX_NAMES`), or a
    first column of timestamp type; None when there is none (the rows are then the samples, in file order).
    """
    lower: dict[str, str] = {c.strip().lower(): c for c in table.column_names}
    for name in TS_NAMES:
        if name in lower:
            return lower[name]
    for name in INDEX_NAMES:  # an index column is the time axis only where it numbers the samples
        col = lower.get(name)
        if col is not None and is_sample_index(col, _numbers_or_nan(table, col)):
            return col
    first: str | None = table.column_names[0] if table.column_names else None
    if first is not None and pa.types.is_timestamp(table.column(first).type):
        return first
    return None


def _numbers_or_nan(table: pa.Table, name: str) -> F64:
    """A column's values as numbers, all NaN when one is not a number."""
    try:
        return _column_floats(table, name, "")
    except InputError:
        return np.full(table.num_rows, np.nan)


def _parse_ts(table: pa.Table, name: str, source: str, report: InputReport | None = None) -> F64:
    """The time column as UNIX seconds: dates parsed, a numeric clock in ms, µs or ns (by its magnitude,
    :func:`~.time_axis.epoch_unit`) scaled to seconds and its unit noted in ``report.time_unit``.
    """
    col = table.column(name)
    numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        try:
            parsed = pc.cast(col, pa.timestamp("us"))
        except pa.ArrowInvalid:
            parsed = None  # maybe numbers in a string column; _column_floats names the bad line otherwise
        if parsed is not None:
            table = table.set_column(table.column_names.index(name), name, parsed)
    try:
        ts = _column_floats(table, name, source)
    except InputError as exc:  # a time no reader takes unambiguously (05/01/2024: May 1st or January 5th?)
        what = exc.message.partition(" (allowed")[0].replace("non-numeric value", "a time not read:")
        raise InputError(source, exc.field, f"{what} (allowed: {TIME_FORMATS})") from None
    bad = ~np.isfinite(ts)
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 2
        raise InputError(source, f"{name}: line {line}", "missing timestamp (allowed: seconds or ISO 8601 dates)")
    if numeric:
        unit, scale = epoch_unit(ts)
        if report is not None:
            report.time_unit = unit
        ts = ts * scale
    return ts


def _order(ts: F64, report: InputReport) -> tuple[F64, NDArray[np.int64]]:
    report.out_of_order += int(np.count_nonzero(np.diff(ts) < 0)) if ts.size > 1 else 0
    order = np.argsort(ts, kind="stable")
    return ts[order], order


def read_series(
    path: str | Path, fields: Sequence[str] | None = None, interval_s: float | None = None
) -> tuple[list[SeriesBlock], InputReport]:
    """Read a wide or long CSV/Parquet file into per-field blocks on a common, increasing time axis.

    A wide file whose time column only numbers its samples, or has none (:mod:`~.time_axis`), is put on a clock
    ``interval_s`` apart (:data:`~.time_axis.ASSUMED_INTERVAL_S` when None; ``report.time_axis`` = ``"index"``).

    Args:
        path: the file (``.csv`` or ``.parquet``).
        fields: value columns (wide) or field names (long) to keep; ``None`` = all.
        interval_s: seconds between the samples of a sample-indexed file (``--interval-s``); refused for a file
            that has a clock.

    Returns:
        (blocks, report): one block for a wide file, one per field for a long file.

    Raises:
        InputError: malformed file, no timestamp column, non-numeric values, unknown ``fields``.
        FileNotFoundError: no such file.
    """
    p = Path(path)
    if p.exists():
        # A directory, /dev/zero or a FIFO would hang or crash the readers below.
        check_regular_file(p, max_bytes=MAX_FILE_BYTES)
    try:
        blocks, report = _read_series(p, fields)
    except UnicodeDecodeError:
        raise InputError(str(p), "", "not UTF-8 text (allowed: a UTF-8 CSV or a Parquet file)") from None
    blocks = _on_interval(blocks, report, interval_s)
    return [_counter_rates(_drop_absurd(b, report), report) for b in blocks], report


def _on_interval(blocks: list[SeriesBlock], report: InputReport, interval_s: float | None) -> list[SeriesBlock]:
    """A sample-indexed file's blocks with its samples ``interval_s`` apart (the assumed interval when None)."""
    if interval_s is not None and not (math.isfinite(interval_s) and interval_s > 0):
        raise InputError("--interval-s", "", f"{interval_s} (allowed: seconds > 0)")
    if report.time_axis != "index":
        if interval_s is not None:
            raise InputError(
                report.source, "--interval-s", "the file keeps time (allowed only without a time column or with "
                "a time column that numbers the samples 0/1, 2, 3 ...)",
            )  # fmt: skip
        return blocks
    report.interval_assumed = interval_s is None
    report.interval_s = ASSUMED_INTERVAL_S if interval_s is None else interval_s
    report.dt_s *= report.interval_s
    return [dataclasses.replace(b, ts=b.ts * report.interval_s) for b in blocks]


def _drop_absurd(block: SeriesBlock, report: InputReport) -> SeriesBlock:
    """The block with infinite and absurd values (|v| > :data:`MAX_ABS_VALUE`) as missing, counted in
    ``report.problems``: ±1e300 overflowed the detectors' squares into inf/NaN and silenced every alarm.
    """
    v = block.values
    with np.errstate(invalid="ignore"):
        inf = np.isinf(v)
        absurd = np.isfinite(v) & (np.abs(v) > MAX_ABS_VALUE)
    n_inf, n_abs = int(inf.sum()), int(absurd.sum())
    if not n_inf and not n_abs:
        return block
    if n_inf:
        report.problems["non_finite_value"] = report.problems.get("non_finite_value", 0) + n_inf
    if n_abs:
        report.problems["absurd_value"] = report.problems.get("absurd_value", 0) + n_abs
    report.rows -= n_inf + n_abs
    clean = np.where(inf | absurd, np.nan, v)
    return SeriesBlock(block.field, block.ts, block.names, clean)


def _counter_rates(block: SeriesBlock, report: InputReport) -> SeriesBlock:
    """The block with its cumulative counters (:mod:`~.counters`) as per-second rates, named in ``report.counters``."""
    mask = counter_mask(block.values)
    if not mask.any():
        return block
    report.counters += [f"{block.field}:{n}" if block.field else n for n, m in zip(block.names, mask, strict=True) if m]
    return dataclasses.replace(block, values=as_rates(block.ts, block.values, mask))


def _header(p: Path) -> list[str]:
    """Column names without reading the data (``[]`` when the file has none or cannot be read)."""
    if not p.exists():
        raise FileNotFoundError(2, "No such file", str(p))
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            return list(pq.read_schema(p).names)
        with p.open(newline="", encoding="utf-8-sig") as fh:
            return [h.strip() for h in next(csv.reader(fh), [])]
    except (pa.ArrowException, OSError, csv.Error, ValueError):
        return []


def _counted(blocks: list[SeriesBlock], report: InputReport) -> tuple[list[SeriesBlock], InputReport]:
    """``blocks`` and ``report`` with the samples read and the sampling interval counted (telemetry-layer reads)."""
    report.rows = sum(int(np.count_nonzero(np.isfinite(b.values))) for b in blocks)
    _set_dt(blocks, report)
    return blocks, report


def _read_series(p: Path, fields: Sequence[str] | None) -> tuple[list[SeriesBlock], InputReport]:
    source = str(p)
    if is_prometheus_json(p):
        from twinloop.telemetry.sources.prometheus import read_saved_answer  # httpx: only for this layout

        report = InputReport(source, layout="prometheus")
        frame, report.problems = read_saved_answer(p)
        return _counted(_frame_blocks(frame, fields, report), report)
    if is_prometheus_text(p):  # a saved exporter page with exposition timestamps
        from twinloop.telemetry.sources.prometheus import read_saved_scrape

        report = InputReport(source, layout="prometheus")
        frame, report.problems = read_saved_scrape(p)
        return _counted(_frame_blocks(frame, fields, report), report)
    if is_duckdb_file(p):
        from twinloop.telemetry.sources.replay import ReplayConfig, load_recording

        report = InputReport(source, layout="store")
        return _counted(_frame_blocks(load_recording(ReplayConfig(path=source)), fields, report), report)
    header = _header(p)
    if _is_nvidia_smi(p):
        report = InputReport(source, layout="nvidia-smi")
        return _counted(_read_nvidia_smi(p, fields, report), report)
    if header[:2] == ["ts", "entity"] and len(header) >= 3:
        # The telemetry schema (long, or wide per entity): read it the way `twinloop ingest` does.
        report = InputReport(source, layout="long" if set(LONG_COLUMNS) <= set(header) else "wide-entity")
        return _counted(_read_telemetry(p, fields, report), report)
    table = _read_table(p)
    report = InputReport(source, rows=table.num_rows)
    seen: set[str] = set()
    for name in table.column_names:
        if name in seen:
            raise InputError(source, f"column {name!r}", "appears twice in the header (allowed: unique names)")
        seen.add(name)
    if table.num_rows == 0:
        raise InputError(source, "", "no rows (allowed: a header and at least two samples)")
    lower: dict[str, str] = {c.lower(): c for c in table.column_names}
    if all(c in lower for c in LONG_COLUMNS):
        report.layout = "long"
        blocks = _read_long(table, lower, fields, report)
    else:
        blocks = [_read_wide(table, fields, report)]
    _set_dt(blocks, report)
    return blocks, report


def _set_dt(blocks: Sequence[SeriesBlock], report: InputReport) -> None:
    all_ts = np.concatenate([b.ts for b in blocks]) if blocks else np.zeros(0)
    if all_ts.size > 1:
        dts = np.diff(np.unique(all_ts))
        report.dt_s = float(np.median(dts)) if dts.size else math.nan


#: Columns a labelled benchmark file carries beside its values (NAB's ``label``/``notes``, Yahoo's
#: ``is_anomaly``): ground truth or annotations, never analysed unless ``--field`` names them.
LABEL_COLUMNS = frozenset({"label", "labels", "is_anomaly", "anomaly", "is_anomalous", "notes", "note", "comment",
                           "comments"})  # fmt: skip


def _is_text_column(table: pa.Table, name: str) -> bool:
    """Whether no non-empty value of a string column reads as a number (a notes or tag column, not a typo)."""
    col = table.column(name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return False
    for v in col.to_pylist():
        if v is None or not v.strip():
            continue
        try:
            float(v)
        except ValueError:
            continue
        return False
    return True


_WITH_UNIT = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*[^\d\s.,;]{1,6}\s*$")


def _with_unit(table: pa.Table, name: str) -> str | None:
    """The first value of a text column when it is a number with a unit (``60 °C``, ``312.4 W``), else None."""
    first = next((v for v in table.column(name).to_pylist() if v is not None and v.strip()), None)
    return first if first is not None and _WITH_UNIT.match(first) else None


def _value_columns(
    table: pa.Table, ts_name: str | None, fields: Sequence[str] | None, report: InputReport
) -> list[str]:
    """The columns to analyse: ``fields`` when given, else every column but the timestamp, label / annotation
    columns and text columns (each skipped one is named in ``report.skipped_columns`` with why).
    """
    value_cols = [c for c in table.column_names if c != ts_name]
    if fields:
        missing = [f for f in fields if f not in value_cols]
        if missing:
            raise InputError("--field", "", f"unknown column {missing[0]!r} (allowed: {', '.join(value_cols)})")
        return list(fields)
    kept = []
    for c in value_cols:
        if c.strip().lower() in LABEL_COLUMNS:
            report.skipped_columns[c] = "label or annotation column (name it with --field to analyse it)"
        elif _is_text_column(table, c):
            unit = _with_unit(table, c)
            report.skipped_columns[c] = (
                "text column (no value reads as a number)" if unit is None else f"values carry a unit, e.g. {unit!r} "
                "(export the numbers alone: Grafana's 'Formatted data' off, nvidia-smi --format=csv,nounits)"
            )  # fmt: skip
        else:
            kept.append(c)
    return kept


def _read_wide(table: pa.Table, fields: Sequence[str] | None, report: InputReport) -> SeriesBlock:
    source = report.source
    ts_name = _ts_column(table)
    value_cols = _value_columns(table, ts_name, fields, report)
    if not value_cols:
        why = next(iter(report.skipped_columns.items()), None)
        skipped = f"; skipped: {', '.join(report.skipped_columns)}; {why[0]}: {why[1]}" if why else ""
        raise InputError(
            source, "", f"no value column (allowed: a timestamp column and one or more numeric columns{skipped})"
        )
    ts = np.arange(table.num_rows, dtype=np.float64) if ts_name is None else _parse_ts(table, ts_name, source, report)
    if ts_name is None or is_sample_index(ts_name, ts):
        report.time_axis = "index"
    values = np.column_stack([_column_floats(table, c, source) for c in value_cols])
    ts, order = _order(ts, report)
    values = values[order]
    keep = np.append(ts[1:] != ts[:-1], True)  # duplicates: the last row wins
    report.duplicates += int(np.count_nonzero(~keep))
    ts, values = ts[keep], values[keep]
    for j, c in enumerate(value_cols):
        report.nan_count[c] = int(np.count_nonzero(np.isnan(values[:, j])))
    return SeriesBlock("", ts, tuple(value_cols), values)


def _read_long(
    table: pa.Table, lower: dict[str, str], fields: Sequence[str] | None, report: InputReport
) -> list[SeriesBlock]:
    source = report.source
    ts = _parse_ts(table, lower["ts"], source, report)
    entity = np.asarray([str(e) for e in table.column(lower["entity"]).to_pylist()], dtype=object)
    fld = np.asarray([str(f) for f in table.column(lower["field"]).to_pylist()], dtype=object)
    value = _column_floats(table, lower["value"], source)
    known = sorted(set(fld.tolist()))
    wanted = list(fields) if fields else known
    missing = [f for f in wanted if f not in known]
    if missing:
        raise InputError("--field", "", f"unknown field {missing[0]!r} (allowed: {', '.join(known)})")
    ts_sorted, order = _order(ts, report)
    entity, fld, value = entity[order], fld[order], value[order]
    _, ent_id = np.unique(entity.astype(str), return_inverse=True)
    ts_sorted, report.aligned_max_shift_s = align_sweeps(ts_sorted, ent_id.astype(np.int64))
    times, t_idx = np.unique(ts_sorted, return_inverse=True)
    blocks = []
    for f in wanted:
        sel = fld == f
        names, e_idx = np.unique(entity[sel], return_inverse=True)
        grid = np.full((times.size, names.size), np.nan)
        ti = t_idx[sel]
        dup = np.zeros(ti.size, dtype=bool)
        key = ti.astype(np.int64) * names.size + e_idx
        _, first = np.unique(key[::-1], return_index=True)
        dup[:] = True
        dup[ti.size - 1 - first] = False
        report.duplicates += int(np.count_nonzero(dup))
        grid[ti, e_idx] = value[sel]  # later rows overwrite earlier ones: the last wins
        for j, name in enumerate(names.tolist()):
            report.nan_count[f"{name}:{f}"] = int(np.count_nonzero(np.isnan(grid[:, j])))
        blocks.append(SeriesBlock(f, times, tuple(str(n) for n in names.tolist()), grid))
    return blocks


def _read_telemetry(p: Path, fields: Sequence[str] | None, report: InputReport) -> list[SeriesBlock]:
    """Blocks from a file in the telemetry schema via ``twinloop.telemetry``'s file source, which counts bad
    lines (truncated, unparseable, empty entity) instead of stopping at the first one.
    """
    from twinloop.telemetry.frame import Frame
    from twinloop.telemetry.report import IngestReport
    from twinloop.telemetry.sources.files import FileConfig, FileSource

    ingest = IngestReport()
    frames = list(FileSource(FileConfig(path=str(p))).frames(ingest))
    frame = Frame.concat(frames) if frames else Frame.empty(str(p))
    report.problems = dict(ingest.problems)
    if len(frame) == 0:
        raise InputError(str(p), "", "no valid samples (allowed: ts, entity, field, value rows)")
    return _frame_blocks(frame, fields, report)


def _is_nvidia_smi(p: Path) -> bool:
    """Whether the file starts with an nvidia-smi ``--format=csv`` header (``index`` and a mapped column) or is an
    ``nvidia-smi dmon`` log (its ``# gpu pwr ...`` header).

    Raises:
        InputError: the file is nvidia-smi output without its header line (``--format=csv,noheader``): its first
            row would be taken for column names and every value column read as text.
    """
    from twinloop.telemetry.sources.nvidia_smi import (
        QUERY_FIELDS,
        check_not_dcgmi_dmon,
        is_headerless_row,
        parse_header,
    )
    from twinloop.telemetry.sources.nvidia_smi_dmon import is_dmon_header

    if p.suffix.lower() in (".parquet", ".pq") or not p.is_file():
        return False
    try:
        with p.open(encoding="utf-8-sig", errors="replace") as fh:
            first = fh.readline(65536)
    except OSError:
        return False
    check_not_dcgmi_dmon(first, str(p), 1)
    if is_dmon_header(first):  # `nvidia-smi dmon` logs are read by the nvidia-smi source too
        return True
    if is_headerless_row(first):
        raise InputError(
            str(p), "line 1", "nvidia-smi output with no header line (--format=csv,noheader): detect needs the "
            "column names; record with --format=csv, or put the --query-gpu list as the first line",
        )  # fmt: skip
    cols = parse_header(first)
    return cols is not None and any(name in QUERY_FIELDS for name, _ in cols)


def _read_nvidia_smi(p: Path, fields: Sequence[str] | None, report: InputReport) -> list[SeriesBlock]:
    """Blocks from nvidia-smi CSV through the telemetry layer's parser (bad lines counted, not fatal)."""
    from twinloop.telemetry.frame import Frame
    from twinloop.telemetry.ingest import validated_frames
    from twinloop.telemetry.report import IngestReport
    from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiSource

    ingest = IngestReport()
    frames = list(validated_frames(NvidiaSmiSource(NvidiaSmiConfig(path=str(p))), ingest))
    frame = Frame.concat(frames) if frames else Frame.empty(str(p))
    report.problems = dict(ingest.problems)
    if len(frame) == 0:
        first = next(iter(ingest.examples.values()), [""])[0]
        raise InputError(str(p), "", f"no valid nvidia-smi samples (first problem: {first or 'no data rows'})")
    return _frame_blocks(frame, fields, report)


def _frame_blocks(frame: Any, fields: Sequence[str] | None, report: InputReport) -> list[SeriesBlock]:
    """Per-field blocks of a telemetry frame, with each sweep's per-entity timestamps aligned."""
    from dataclasses import replace

    # Per series in file order: an export that writes one series after another is not out of order.
    key = frame.entity_idx.astype(np.int64) * max(len(frame.fields), 1) + frame.field_idx
    order = np.argsort(key, kind="stable")
    back = (np.diff(frame.ts_s[order]) < 0) & (np.diff(key[order]) == 0)
    report.out_of_order = int(np.count_nonzero(back))
    aligned, report.aligned_max_shift_s = align_sweeps(frame.ts_s, frame.entity_idx.astype(np.int64))
    frame = replace(frame, ts_s=aligned)
    known = sorted(frame.fields)
    wanted = list(fields) if fields else known
    missing = [f for f in wanted if f not in known]
    if missing:
        raise InputError("--field", "", f"unknown field {missing[0]!r} (allowed: {', '.join(known)})")
    blocks = []
    for f in wanted:
        ts, names, grid = frame.to_dense(f)
        sel = frame.field_idx == frame.fields.index(f)
        cells = np.unique(np.stack([frame.ts_s[sel], frame.entity_idx[sel].astype(np.float64)]), axis=1).shape[1]
        report.duplicates += int(np.count_nonzero(sel)) - int(cells)
        for j, name in enumerate(names):
            report.nan_count[f"{name}:{f}"] = int(np.count_nonzero(np.isnan(grid[:, j])))
        blocks.append(SeriesBlock(f, ts, tuple(names), grid))
    return blocks


#: Units of fields that are codes, not measurements: no statistical detector applies (the rules read them).
CODE_UNITS = frozenset({"bitmask", "xid", "state", "bool"})


def _for_detectors(block: SeriesBlock) -> SeriesBlock | None:
    """The block as the statistical detectors should see it: counters as rates, code fields skipped."""
    from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field

    name = canonical_field(block.field) if block.field else None
    spec = FIELD_BY_NAME.get(name) if name else None
    if spec is None:
        return block
    if spec.unit in CODE_UNITS:
        return None
    if spec.kind == "counter" and block.ts.size > 1:
        dt = np.diff(block.ts)[:, None]
        rate = np.vstack([np.full((1, block.values.shape[1]), np.nan), np.diff(block.values, axis=0) / dt])
        return SeriesBlock(f"rate({block.field})", block.ts, block.names, rate)
    return block


def detect_blocks(
    blocks: Sequence[SeriesBlock],
    detectors: Sequence[str] = DEFAULT_DETECTORS,
    progress: Callable[[int], None] | None = None,
    chunked: bool = True,
    **params: Any,
) -> list[Detection]:
    """Run each detector over each block (vectorized across its series); alarms' onsets as detections.

    Known telemetry fields are prepared first: counters (energy, ECC totals) become per-second rates and code
    fields (clock-event bitmask, XID, PSU state) are left to the rules. With ``chunked``, a long, regularly
    sampled block runs as overlapping time chunks side by side (:func:`chunk_layout`) for the detectors of
    :data:`CHUNKABLE`; otherwise one time step at a time.

    Args:
        blocks: from :func:`read_series`.
        detectors: registered detector names.
        progress: called with the number of time steps done since the last call (for a progress bar); the total
            is :func:`detect_steps`.
        chunked: allow the chunked layout.
        **params: parameter overrides passed to every detector.

    Returns:
        Detections sorted by time, one per alarm onset (an anomaly that lasts is reported once).
    """
    out: list[Detection] = []
    for raw in blocks:
        block = _for_detectors(raw)
        if block is None:
            continue
        for name in detectors:
            det = make_detector(name, **params)
            layout = chunk_layout(block, det) if chunked and name in CHUNKABLE else None
            run = _run_chunked if layout is not None else _run_sequential
            out.extend(run(block, det, name, layout, progress))
    out.sort(key=lambda d: (d.ts, d.entity, d.detector))
    return out


def _detection(block: SeriesBlock, det: Detector[Any], name: str, ts: float, j: int, s: int) -> Detection:
    return Detection(
        ts=ts, entity=block.names[s], source=block.field or block.names[s], score=float(det.score[j]),
        kind=det.kind, event_class=EventClass.UNCLASSIFIED, detector=name,
    )  # fmt: skip


def _run_sequential(
    block: SeriesBlock, det: Detector[Any], name: str, _: ChunkLayout | None, progress: Callable[[int], None] | None
) -> list[Detection]:
    out: list[Detection] = []
    prev = np.zeros(len(block.names), dtype=bool)
    for i in range(block.ts.size):
        alarm = det.update(float(block.ts[i]), block.values[i])
        onset = alarm & ~prev if det.kind == "anomaly" else alarm
        prev = alarm
        if progress is not None and (i + 1) % _PROGRESS_EVERY == 0:
            progress(_PROGRESS_EVERY)
        out.extend(_detection(block, det, name, float(block.ts[i]), j, j) for j in np.flatnonzero(onset).tolist())
    if progress is not None:
        progress(block.ts.size % _PROGRESS_EVERY)
    return out


#: Detectors whose state depends only on the recent past at a regular cadence (not on the time of day), so a
#: long series can run as overlapping chunks side by side; their half-lives bound how far back the past matters.
#: Not Page-Hinkley: its cumulative sum remembers the whole series (chunked, its alarms move by a few steps).
CHUNKABLE = frozenset({"ewma_zscore", "cusum"})
#: Burn-in of a chunk, in the detector's longest time constant (after 10 half-lives the start-up state weighs
#: 2^-10 = 0.1 %).
BURN_IN_TIME_CONSTANTS = 10.0
#: The detectors' shortest baseline half-life in samples (:func:`~twinloop.ops.detect.base.alpha_for`'s floor).
MIN_HALF_LIFE_SAMPLES = 30.0
#: Fewest own steps per chunk, in burn-ins (so the overlap costs at most 25 % more steps).
MIN_CHUNK_BURN_INS = 4
#: Most columns (series x chunks) one chunked run holds.
MAX_CHUNK_COLUMNS = 4096


@dataclass(frozen=True)
class ChunkLayout:
    """A block cut into ``n_chunks`` chunks of ``own`` steps, each after 1 preceded by ``burn_in`` steps of the one
    before (chunk 0 owns its first ``own + burn_in`` rows); ``dt_s`` is the block's regular cadence.
    """

    n_chunks: int
    own: int
    burn_in: int
    dt_s: float


def chunk_layout(block: SeriesBlock, det: Detector[Any]) -> ChunkLayout | None:
    """How to run ``block`` in chunks, or None where stepping through it is as fast (short, irregular or wide).

    Each chunk after the first starts ``burn_in`` steps early so the detector's baseline has converged by the
    chunk's own first step; alarms are reported only in a chunk's own steps. Results equal the sequential run's
    except where an anomaly spans a chunk's burn-in (its baseline then starts inside the anomaly, as after a
    restart).
    """
    n = block.ts.size
    if n < 2:
        return None
    dt = np.diff(block.ts)
    dt_s = float(np.median(dt))
    if not dt_s > 0 or not np.allclose(dt, dt_s, rtol=1e-6, atol=1e-9):
        return None
    longest_s = max(
        (
            float(v)
            for k, v in dataclasses.asdict(det.params).items()
            if k.endswith("_s") and isinstance(v, int | float)
        ),
        default=0.0,
    )
    burn_in = int(np.ceil(BURN_IN_TIME_CONSTANTS * max(longest_s / dt_s, MIN_HALF_LIFE_SAMPLES)))
    series = len(block.names)
    own = max(MIN_CHUNK_BURN_INS * burn_in, int(np.ceil(n * series / MAX_CHUNK_COLUMNS)))
    n_chunks = int(np.ceil((n - burn_in) / own))
    if n_chunks < 2:
        return None
    return ChunkLayout(n_chunks, own, burn_in, dt_s)


def _run_chunked(
    block: SeriesBlock,
    det: Detector[Any],
    name: str,
    layout: ChunkLayout | None,
    progress: Callable[[int], None] | None,
) -> list[Detection]:
    assert layout is not None
    n, series = block.values.shape
    k, own, burn = layout.n_chunks, layout.own, layout.burn_in
    steps = own + burn
    # Row r of chunk c is block row c*own + r (missing past the block's end); chunk c > 0 owns r >= burn.
    rows = np.arange(k)[None, :] * own + np.arange(steps)[:, None]
    inside = rows < n
    grid = np.where(inside[:, :, None], block.values[np.minimum(rows, n - 1)], np.nan).reshape(steps, k * series)
    first_own = np.where(np.arange(k) == 0, 0, burn)
    prev = np.zeros(k * series, dtype=bool)
    out: list[Detection] = []
    t0 = float(block.ts[0])
    told = 0
    for i in range(steps):
        if progress is not None and i % _PROGRESS_EVERY == 0:
            progress(n * i // steps - told)
            told = n * i // steps
        alarm = det.update(t0 + i * layout.dt_s, grid[i])
        onset = alarm & ~prev if det.kind == "anomaly" else alarm
        prev = alarm
        for j in np.flatnonzero(onset).tolist():
            c = j // series
            if i >= first_own[c] and rows[i, c] < n:
                out.append(_detection(block, det, name, float(block.ts[rows[i, c]]), j, j % series))
    if progress is not None:
        progress(n - told)
    return out


_PROGRESS_EVERY = 1000


def detect_steps(blocks: Sequence[SeriesBlock], n_detectors: int) -> int:
    """Time steps :func:`detect_blocks` walks (the total of its ``progress`` calls)."""
    return n_detectors * sum(b.ts.size for b in blocks if _for_detectors(b) is not None)


def pipeline_incidents(blocks: Sequence[SeriesBlock]) -> list[Incident]:
    """Run the full pipeline on long-layout GPU telemetry (entities ``site/row/rack/node/gpu``).

    Returns the final state of every incident (closed, merged or still open at the end), or ``[]`` when the
    blocks are not GPU telemetry (no DCGM field, or entities that are not 5-component ids).
    """
    from twinloop.ops.detect.pipeline import DetectionPipeline

    gpu_blocks = [b for b in blocks if b.field.startswith("DCGM_FI_")]
    if not gpu_blocks:
        return []
    entities = sorted({n for b in gpu_blocks for n in b.names})
    if not all(e.count("/") == 4 for e in entities):
        return []
    pos = {e: i for i, e in enumerate(entities)}
    times = np.unique(np.concatenate([b.ts for b in gpu_blocks]))
    grids = {}
    for b in gpu_blocks:
        grid = np.full((times.size, len(entities)), np.nan)
        cols = np.fromiter((pos[n] for n in b.names), dtype=np.int64, count=len(b.names))
        rows = np.searchsorted(times, b.ts)
        grid[np.ix_(rows, cols)] = b.values
        grids[b.field] = grid
    pipe = DetectionPipeline(entities)
    final: dict[int, Incident] = {}
    for i, t in enumerate(times.tolist()):
        for inc in pipe.step(t, {f: g[i] for f, g in grids.items()}):
            final[inc.incident_id] = inc
    for inc in pipe.open_incidents:
        final[inc.incident_id] = inc
    return sorted(final.values(), key=lambda x: (x.start_ts, x.incident_id))
