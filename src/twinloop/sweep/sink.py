"""Where a sweep's rows go as they arrive: ``DIR/runs.parquet`` and the DuckDB store (``DIR/sweep.duckdb``).

Rows are buffered and written in small batches (one Parquet row group and one store transaction per batch), so
an interrupted sweep keeps the runs that finished up to the last batch.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from twinloop.sweep.cell import ROW_SCHEMA
from twinloop.telemetry.store.duckdb_store import DuckDBStore

TABLE = "sweep_runs"


class RowSink:
    """Streams rows into Parquet and the store. Opens its files on the first write, not in the constructor.

    Args:
        out_dir: the sweep's output directory.
        batch: rows per write.
    """

    def __init__(self, out_dir: str | Path, batch: int = 8) -> None:
        self.out_dir = Path(out_dir)
        self.batch = batch
        self.parquet_path = self.out_dir / "runs.parquet"
        self.store_path = self.out_dir / "sweep.duckdb"
        self._buf: list[dict[str, Any]] = []
        self._writer: pq.ParquetWriter | None = None
        self._store: DuckDBStore | None = None
        self.written = 0

    def __call__(self, row: dict[str, Any]) -> None:
        """Take one run's row; every ``batch`` rows are written out."""
        self._buf.append(row)
        if len(self._buf) >= self.batch:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows (a no-op when there are none)."""
        if not self._buf:
            return
        table = pa.Table.from_pylist(self._buf, schema=ROW_SCHEMA)
        if self._writer is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            for stale in (self.parquet_path, self.store_path):
                stale.unlink(missing_ok=True)  # a rerun into the same directory replaces, never mixes
            self._writer = pq.ParquetWriter(self.parquet_path, ROW_SCHEMA, compression="zstd")
            self._store = DuckDBStore(self.store_path)
        assert self._store is not None
        self._writer.write_table(table)
        self._store.append_table(TABLE, table)
        self.written += table.num_rows
        self._buf.clear()

    def close(self) -> None:
        """Flush and close both files."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> RowSink:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def read_runs(path: str | Path) -> list[dict[str, Any]]:
    """Rows back from ``runs.parquet`` (maps as sorted (key, value) lists, as the runner produced them)."""
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        for k in ("metrics", "detection"):
            r[k] = sorted(r[k])
    return sorted(rows, key=lambda r: r["cell"])
