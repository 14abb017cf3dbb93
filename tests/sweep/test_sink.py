"""Rows into Parquet and the store: what goes in comes back; a rerun replaces; side-table names are checked."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from twinloop.errors import InputError
from twinloop.sweep.cell import row
from twinloop.sweep.sink import TABLE, RowSink, read_runs
from twinloop.sweep.spec import Cell
from twinloop.telemetry.store.duckdb_store import DuckDBStore


def _cell(i: int) -> Cell:
    return Cell(i, "twin", "s", i, "off", False, "", {}, "x.yaml", "", None, "{}")


def test_rows_round_trip_and_rerun_replaces(tmp_path: Path) -> None:
    rows = [row(_cell(i), "t", "ok", 1, None, 0.5, "w", {"pue": 1.0 + i, "m": 2.0}, {"incidents": 1.0})
            for i in range(5)]  # fmt: skip
    for _ in range(2):
        with RowSink(tmp_path, batch=2) as sink:
            for r in rows:
                sink(r)
        assert read_runs(tmp_path / "runs.parquet") == rows
        with DuckDBStore(tmp_path / "sweep.duckdb") as store:
            assert store.read_table(TABLE).num_rows == 5


def test_side_table_names_are_checked(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "x.duckdb") as store:
        for bad in ("samples", "x; DROP TABLE samples"):
            with pytest.raises(InputError):
                store.append_table(bad, pa.table({"a": [1]}))
        assert store.append_table("extra", pa.table({"a": [1, 2]})) == 2
        assert store.read_table("extra").column("a").to_pylist() == [1, 2]
