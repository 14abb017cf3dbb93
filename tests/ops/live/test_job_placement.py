"""`twinloop watch --job-heartbeats --db`: which GPUs each job held over which time lands in the store as spans
(``loop_job_gpus``), once even when a watcher runs again over the same data (a real H200 job's recording,
``tests/fixtures/h200_job_progress``), a new span when the placement changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.placement_rows import JobPlacement, PlacementSpan
from twinloop.ops.ports import Sample
from twinloop.telemetry.fields import DCGM_FI_DEV_SM_CLOCK
from twinloop.telemetry.store.duckdb_store import DuckDBStore

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "h200_job_progress"
JOB = "site0/jobs/h200train"
GPU = "site0/row0/rack0/vm/gpu0"
runner = CliRunner()


def _watch(db: Path, heartbeats: bool = True) -> None:
    args = ["watch", f"replay:{FIX / 'watch_5s.parquet'}", "--jobs", str(FIX / "jobs.yaml"), "--db", str(db), "--json"]
    res = runner.invoke(app, args + (["--job-heartbeats", str(FIX)] if heartbeats else []))
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)


def _spans(db: Path) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {t for (t,) in con.execute("SHOW TABLES").fetchall()}
        if "loop_job_gpus" not in tables:
            return []
        return [tuple(r) for r in con.execute("SELECT * FROM loop_job_gpus ORDER BY job, first_ts, gpu").fetchall()]
    finally:
        con.close()


def test_the_h200_jobs_gpu_span_is_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "watch.duckdb"
    _watch(db)
    with DuckDBStore(db, read_only=True) as store:
        ts = store.query(DCGM_FI_DEV_SM_CLOCK, GPU).column("ts").to_numpy()
    # the job held its one GPU from the recording's first sample to its last
    assert _spans(db) == [("watch", JOB, GPU, pytest.approx(ts.min()), pytest.approx(ts.max()))]
    _watch(db)  # the same data again (a replay, a restart that re-reads it): no second span
    assert _spans(db) == [("watch", JOB, GPU, pytest.approx(ts.min()), pytest.approx(ts.max()))]


def test_without_heartbeats_no_placement_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "watch.duckdb"
    _watch(db, heartbeats=False)
    assert _spans(db) == []


GPUS = ("s/r/k/n1/gpu0", "s/r/k/n1/gpu1", "s/r/k/n2/gpu0", "s/r/k/n2/gpu1")


def _sample(ts: float, index: list[int], jobs: tuple[str, ...] = ("a", "b")) -> Sample:
    return Sample(ts, {}, np.asarray(index, dtype=np.int64), jobs)


def test_a_changed_placement_is_a_new_span_and_an_unchanged_one_grows() -> None:
    p = JobPlacement(GPUS, "s")
    for t in (0.0, 1.0, 2.0):
        p.observe(_sample(t, [0, 0, 1, -1]))
    assert p.take() == [PlacementSpan("s/jobs/a", GPUS[:2], 0.0, 2.0), PlacementSpan("s/jobs/b", GPUS[2:3], 0.0, 2.0)]
    assert p.take() == []  # nothing new
    p.observe(_sample(3.0, [0, 0, 1, 1]))  # b grows onto n2/gpu1: a new span for b, a's grows
    p.observe(_sample(4.0, [-1, -1, 0, 0], ("b",)))  # a left
    assert p.take() == [
        PlacementSpan("s/jobs/b", GPUS[2:3], 0.0, 2.0),
        PlacementSpan("s/jobs/a", GPUS[:2], 0.0, 3.0),
        PlacementSpan("s/jobs/b", GPUS[2:], 3.0, 4.0),
    ]
    p.observe(_sample(5.0, [-1, -1, 0, 0], ("b",)))
    assert p.take() == [PlacementSpan("s/jobs/b", GPUS[2:], 3.0, 5.0)]


def test_a_restarted_watcher_continues_the_stored_span_of_an_unchanged_placement() -> None:
    stored = {"s/jobs/a": (GPUS[:2], 0.0, 10.0), "s/jobs/b": (GPUS[2:3], 0.0, 10.0)}
    p = JobPlacement(GPUS, "s", stored)
    p.observe(_sample(20.0, [0, 0, 1, 1]))
    assert p.take() == [PlacementSpan("s/jobs/a", GPUS[:2], 0.0, 20.0), PlacementSpan("s/jobs/b", GPUS[2:], 20.0, 20.0)]
    p = JobPlacement(GPUS, "s", {"s/jobs/a": (GPUS[:2], 30.0, 40.0)})  # a later stored span: a replay from before it
    p.observe(_sample(5.0, [0, 0, -1, -1]))
    assert p.take() == [PlacementSpan("s/jobs/a", GPUS[:2], 5.0, 5.0)]
    p = JobPlacement(GPUS, "s")
    p.observe(Sample(1.0, {}))  # no scheduler: no placement
    assert p.take() == []
