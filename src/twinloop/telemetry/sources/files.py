"""CSV and Parquet files, in long or wide layout.

* long: columns ``ts, entity, field, value`` (one sample per row);
* wide: columns ``ts, entity, <FIELD>, <FIELD>, ...`` (one row per entity and time; an empty cell or null
  is "not sampled", not an error).

``ts`` is epoch seconds (UTC) or ISO-8601 text (naive times are UTC) or an Arrow timestamp column. Every
CSV line is parsed on its own so that a truncated or garbled line is counted with its line number and the
lines around it still land.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig
from twinloop.telemetry.sources.rows import Rows
from twinloop.telemetry.sources.sampler_csv import SamplerCsvConfig, SamplerCsvSource, is_sampler_csv

LONG_COLUMNS = ("ts", "entity", "field", "value")


class FileConfig(SourceConfig):
    """File source options.

    Attributes:
        path: the CSV or Parquet file.
        format: ``auto`` (by suffix: ``.parquet``/``.pq`` → parquet, else csv), ``csv`` or ``parquet``.
        batch_rows: samples per emitted frame.
    """

    path: str = "telemetry.csv"
    format: Literal["auto", "csv", "parquet"] = "auto"
    batch_rows: int = 100_000


def parse_ts(text: str) -> float:
    """Epoch seconds (UTC) from a number or ISO-8601 text; raises ValueError when it is neither."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_float(text: str) -> float:
    """A float from text; ``nan``/``inf`` spellings are accepted (the validator then counts them)."""
    return float(text.strip())


def _names(header: list[str], most: int = 6, width: int = 40) -> str:
    """A header as an error shows it: the first ``most`` names, each cut at ``width`` characters."""
    shown = [h if len(h) <= width else f"{h[:width]}..." for h in header[:most]]
    more = f" and {len(header) - most} more" if len(header) > most else ""
    return f"{shown}{more}"


def read_csv(path: str, report: IngestReport, batch_rows: int) -> Iterator[Frame]:
    """Frames from a long or wide CSV file; bad lines are counted in ``report``."""
    rows = Rows(path)
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            return
        except csv.Error as exc:
            report.add("parse_error", path, 1, f"bad header: {exc}")
            return
        if len(header) < 3 or header[0] != "ts" or header[1] != "entity":
            raise InputError(
                path, "header", f"expected 'ts,entity,field,value' or 'ts,entity,<FIELD>...', got {_names(header)}"
            )
        long = tuple(header) == LONG_COLUMNS
        width = len(header)
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                report.add("parse_error", path, reader.line_num, str(exc))
                continue
            line = reader.line_num
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue
            if len(cells) < width:
                report.add("truncated", path, line, f"{len(cells)} of {width} columns")
                continue
            if len(cells) > width:
                report.add("parse_error", path, line, f"{len(cells)} columns, header has {width}")
                continue
            try:
                ts = parse_ts(cells[0])
            except ValueError:
                report.add("parse_error", path, line, f"bad timestamp {cells[0]!r}")
                continue
            entity = cells[1].strip()
            if not entity:
                report.add("parse_error", path, line, "empty entity")
                continue
            if long:
                try:
                    rows.add(ts, entity, cells[2].strip(), parse_float(cells[3]), line)
                except ValueError:
                    report.add("parse_error", path, line, f"bad value {cells[3]!r}")
            else:
                for name, cell in zip(header[2:], cells[2:], strict=True):
                    if not cell.strip():
                        continue
                    try:
                        rows.add(ts, entity, name, parse_float(cell), line)
                    except ValueError:
                        report.add("parse_error", path, line, f"bad value {cell!r} for {name}")
            if len(rows) >= batch_rows:
                yield rows.flush()
    if len(rows):
        yield rows.flush()


def _ts_array(col: pa.ChunkedArray | pa.Array) -> NDArray[np.float64]:
    if pa.types.is_timestamp(col.type):
        micros = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy()
        return np.asarray(micros, dtype=np.float64) / 1e6
    return np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _cast(batch: pa.RecordBatch, name: str, to: pa.DataType, path: str) -> pa.Array:
    """Column ``name`` cast to ``to``, or one :class:`InputError` naming the column and its type (a value column
    of strings, lists or structs would otherwise end in a pyarrow traceback).
    """
    col = batch.column(name)
    try:
        return col.cast(to)
    except (pa.ArrowException, ValueError) as exc:
        allowed = "numbers" if pa.types.is_floating(to) else "text"
        detail = str(exc).splitlines()[0][:120]
        msg = f"column of type {col.type} cannot be read as {to} ({detail}; allowed: {allowed})"
        raise InputError(path, name, msg) from None


def read_parquet(path: str, report: IngestReport, batch_rows: int) -> Iterator[Frame]:
    """Frames from a long or wide Parquet file; null cells count as missing (wide) or parse errors (long)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, "", f"not a readable Parquet file: {exc}") from None
    names = pf.schema_arrow.names
    if names[:2] != ["ts", "entity"]:
        raise InputError(path, "columns", f"expected ts, entity, then field/value or field columns, got {names}")
    long = set(LONG_COLUMNS) <= set(names)
    offset = 0
    for batch in pf.iter_batches(batch_size=batch_rows):
        n = batch.num_rows
        line = np.arange(offset + 1, offset + n + 1, dtype=np.int64)
        offset += n
        try:
            ts = _ts_array(batch.column("ts"))
        except (pa.ArrowException, ValueError) as exc:
            report.add("parse_error", path, int(line[0]), f"bad ts column: {exc}", count=n)
            continue
        entity = np.asarray(_cast(batch, "entity", pa.string(), path).to_pylist(), dtype=object)
        if long:
            value = _cast(batch, "value", pa.float64(), path).to_numpy(zero_copy_only=False)
            field = np.asarray(_cast(batch, "field", pa.string(), path).to_pylist(), dtype=object)
            nulls = np.asarray(batch.column("value").is_null()) | (entity == None) | (field == None)  # noqa: E711
            nulls |= np.isnan(ts)
            if nulls.any():
                first = int(line[np.flatnonzero(nulls)[0]])
                report.add("parse_error", path, first, "null ts, entity, field or value", count=int(nulls.sum()))
            ok = ~nulls
            yield Frame.from_long(ts[ok], entity[ok], field[ok], value[ok], source=path, lines=line[ok])
            continue
        parts = []
        for name in names[2:]:
            col = batch.column(name)
            vals = _cast(batch, name, pa.float64(), path).to_numpy(zero_copy_only=False)
            present = ~np.asarray(col.is_null()) & (entity != None) & ~np.isnan(ts)  # noqa: E711
            parts.append(Frame.from_long(ts[present], entity[present], [name] * int(present.sum()), vals[present],
                                         source=path, lines=line[present]))  # fmt: skip
        yield Frame.concat(parts)


class FileSource(Source):
    """Samples from a CSV or Parquet file (long or wide layout; the NVML sampler's CSV, ``t,power_mw,...``, too)."""

    name: ClassVar[str] = "file"
    config_type: ClassVar[type[SourceConfig]] = FileConfig
    target_field: ClassVar[str | None] = "path"

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield frames of up to ``batch_rows`` samples."""
        cfg = self.config
        assert isinstance(cfg, FileConfig)
        if not Path(cfg.path).is_file():
            raise FileNotFoundError(2, "no such file", cfg.path)
        fmt = cfg.format
        if fmt == "auto":
            fmt = "parquet" if Path(cfg.path).suffix.lower() in (".parquet", ".pq") else "csv"
        if fmt == "csv" and is_sampler_csv(cfg.path):  # NVML's raw units, one GPU: its own reader converts them
            yield from SamplerCsvSource(SamplerCsvConfig(path=cfg.path, batch_rows=max(1, cfg.batch_rows))).frames(
                report
            )
            return
        reader = read_parquet if fmt == "parquet" else read_csv
        yield from reader(cfg.path, report, max(1, cfg.batch_rows))
