"""Cells as Ray tasks: same rows on 1 worker or 2, one retry then a recorded failure, rows streamed to disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from twinloop.sweep.cell import VOLATILE, row
from twinloop.sweep.runner import run_cells
from twinloop.sweep.sink import TABLE, RowSink, read_runs
from twinloop.sweep.spec import Cell, cells, load_sweep
from twinloop.telemetry.store.duckdb_store import DuckDBStore

pytestmark = pytest.mark.usefixtures("ray_local")


def _stable(rows: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def _tiny(tmp_path: Path) -> list[Cell]:
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump({"name": "tiny", "overrides": {"duration_s": "40s"}, "scenarios": ["default"],
                                 "seeds": [0, 7], "loops": ["off", "on"]}))  # fmt: skip
    return cells(load_sweep(p), str(p))


def test_same_rows_on_one_worker_or_two(tmp_path: Path) -> None:
    todo = _tiny(tmp_path)
    one = run_cells(todo, "tiny", workers=1)
    two = run_cells(todo, "tiny", workers=2)
    assert one.workers == 1 and two.workers == 2 and not one.failed and not two.failed
    assert _stable(one.rows) == _stable(two.rows)
    assert [r["cell"] for r in one.rows] == [0, 1, 2, 3]
    metrics = dict(one.rows[1]["metrics"])
    assert {"pue", "peak_facility_power_w", "max_gpu_temp_c"} <= set(metrics)
    assert {"incidents", "false_alarms"} <= dict(one.rows[1]["detection"]).keys()
    assert all(r["wall_s"] > 0 and r["worker"] for r in one.rows)


def test_failed_cell_is_retried_once_then_reported(tmp_path: Path) -> None:
    todo = _tiny(tmp_path)

    def kernel(cell: Cell, sweep: str, attempt: int) -> dict[str, Any]:
        if cell.index == 1 or (cell.index == 2 and attempt == 1):
            raise RuntimeError(f"boom {cell.index}")
        return row(cell, sweep, "ok", attempt, None, 0.0, "w", {"x": float(cell.seed)}, {})

    seen: list[dict[str, Any]] = []
    res = run_cells(todo, "tiny", workers=2, on_row=seen.append, kernel=kernel)
    assert len(res.rows) == len(seen) == 4  # nothing dropped
    by_cell = {r["cell"]: r for r in res.rows}
    assert by_cell[1]["status"] == "failed" and by_cell[1]["attempts"] == 2
    assert "RuntimeError: boom 1" in by_cell[1]["error"]
    assert by_cell[2]["status"] == "ok" and by_cell[2]["attempts"] == 2
    assert by_cell[0]["attempts"] == 1
    assert [r["cell"] for r in res.failed] == [1]


def test_rows_stream_to_parquet_and_store(tmp_path: Path) -> None:
    todo = _tiny(tmp_path)

    def kernel(cell: Cell, sweep: str, attempt: int) -> dict[str, Any]:
        return row(cell, sweep, "ok", attempt, None, 0.5, "w", {"m": cell.seed * 2.0}, {"d": 1.0})

    with RowSink(tmp_path / "out", batch=3) as sink:
        res = run_cells(todo, "tiny", workers=2, on_row=sink, kernel=kernel)
    assert sink.written == 4
    assert read_runs(tmp_path / "out" / "runs.parquet") == list(res.rows)
    with DuckDBStore(tmp_path / "out" / "sweep.duckdb") as store:
        t = store.read_table(TABLE)
    assert sorted(t.column("cell").to_pylist()) == [0, 1, 2, 3]
    assert sorted(t.column("seed").to_pylist()) == [0, 0, 7, 7]
