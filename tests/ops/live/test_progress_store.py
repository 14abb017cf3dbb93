"""`twinloop watch --job-heartbeats --db`: the jobs' own progress (their step fields, each rank's step time) lands in
the store at the sample times the rules saw it, with the values they saw, once even when a watcher is started again
over the same data; `twinloop query` reads it back.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.job_progress import JobProgress
from twinloop.ops.live.jobs import load_job_file
from twinloop.ops.live.kinds import build_source
from twinloop.ops.live.progress_rows import progress_frame
from twinloop.ops.live.row_keys import gpu_rows_source_key
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.ops.ports import Sample
from twinloop.ops.records import LiveRecords
from twinloop.ops.respond.adapters.heartbeats import record, record_rank
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
    TWINLOOP_FI_RANK_STEP_TIME,
)
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.store.session import SessionStore

T0 = 1_795_430_000.0
GPUS = tuple(f"dc/row0/rack0/node0{n}/gpu{g}" for n in (1, 2) for g in range(4))
JOB = "dc/jobs/7"
runner = CliRunner()


def _cluster(tmp: Path, seconds: int = 60) -> tuple[Path, Path, Path]:
    """A recording of 8 GPUs, 1 s apart; job 7 over both nodes reports its steps from 5 s on (every 0.8 s) and each
    rank its own step time (GPU 6 slower), naming its GPU by host and index. Returns (recording, jobs, heartbeats).
    """
    rec = tmp / "gpus.csv"
    with open(rec, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ts", "entity", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK",
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT"])  # fmt: skip
        for k in range(seconds):
            w.writerows([T0 + k, g, 600.0, 60.0, 1980.0, 700.0] for g in GPUS)
    beats = tmp / "beats"
    rng = np.random.default_rng(3)
    for step, t in enumerate(np.arange(5.0, seconds, 0.8)):
        own = np.where(np.arange(len(GPUS)) == 6, 0.75, 0.6) * (1 + 0.01 * rng.standard_normal(len(GPUS)))
        record(beats, "7", "step", T0 + t, {"step": step, "step_time_s": 0.8, "tokens_per_s": 40_000.0 + step})
        for g, d in enumerate(own):
            node, index = GPUS[g].split("/")[-2:]
            record_rank(beats, "7", {"step": step, "step_time_s": float(d)}, ts=T0 + t, host=node,
                        gpu_index=int(index[3:]))  # fmt: skip
    jobs = tmp / "jobs.yaml"
    jobs.write_text("'7': [node01, node02]\n")
    return rec, jobs, beats


def _watch(spec: str, jobs: Path, beats: Path, db: Path) -> list[Sample]:
    """Watch ``spec`` as `twinloop watch --jobs --job-heartbeats --db` does; the samples its rules were handed."""
    built = build_source(spec)
    store = SessionStore(db)
    key = gpu_rows_source_key(spec, built)
    cluster = SourceCluster(built.source, NoActuator(), LiveOptions(cadence_s=built.cadence_s),
                            jobs=lambda gpus, _labels: load_job_file(jobs, gpus), progress=JobProgress(beats),
                            on_frame=lambda f: store.append(f, source_key=key))  # fmt: skip
    watcher = Watcher(cluster, LiveRecords(store), config=WatchConfig(mode="observe"), telemetry=store)
    watcher.start()
    seen: list[Sample] = []
    step = watcher.loop.step

    def spy(sample: Sample) -> object:
        seen.append(sample)
        return step(sample)

    watcher.loop.step = spy  # type: ignore[method-assign]
    watcher.run()
    return seen


def _rows(db: Path, field: str, entity: str = "") -> list[tuple[float, str, float]]:
    with DuckDBStore(db, read_only=True) as store:
        tab = store.query(field, entity)
    return sorted(zip(tab.column("ts").to_pylist(), tab.column("entity").to_pylist(), tab.column("value").to_pylist(),
                      strict=True))  # fmt: skip


def _saw_job(seen: list[Sample], field: str) -> list[tuple[float, str, float]]:
    """What the rules saw of a job field: (ts, job entity, value) where the job had reported one."""
    out = []
    for s in seen:
        assert s.job_fields is not None
        out += [(s.ts, f"dc/jobs/{j}" if "/" not in j else j, float(v))
                for j, v in zip(s.job_ids, s.job_fields[field], strict=True) if math.isfinite(v)]  # fmt: skip
    return sorted(out)


def _saw_ranks(seen: list[Sample]) -> list[tuple[float, str, float]]:
    out = []
    for s in seen:
        got = s.gpu.get(TWINLOOP_FI_RANK_STEP_TIME)
        if got is not None:
            out += [(s.ts, g, float(v)) for g, v in zip(GPUS, got, strict=True) if math.isfinite(v)]
    return sorted(out)


def test_the_jobs_and_ranks_progress_is_stored_as_the_rules_saw_it_and_once_only(tmp_path: Path) -> None:
    rec, jobs, beats = _cluster(tmp_path)
    db = tmp_path / "watch.duckdb"
    seen = _watch(f"replay:{rec}", jobs, beats, db)
    for field in (TWINLOOP_FI_JOB_STEP_TIME, TWINLOOP_FI_JOB_TOKENS_PER_S, TWINLOOP_FI_JOB_PROGRESS):
        saw = _saw_job(seen, field)
        assert len(saw) >= 50 and saw[0][0] >= T0 + 5.0  # the job reported from 5 s on: no row before
        assert _rows(db, field) == saw
    ranks = _saw_ranks(seen)
    assert len(ranks) >= 50 * len(GPUS) and {g for _, g, _ in ranks} == set(GPUS)
    assert _rows(db, TWINLOOP_FI_RANK_STEP_TIME) == ranks
    slow = [v for _, g, v in ranks if g == GPUS[6]]
    assert min(slow) > 0.7  # GPU 6's own time, not its peers'
    gpu_rows = len(_rows(db, DCGM_FI_DEV_SM_CLOCK))
    # A second watcher over the same data on the same store adds none of these rows again.
    _watch(f"replay:{rec}", jobs, beats, db)
    for field in (TWINLOOP_FI_JOB_STEP_TIME, TWINLOOP_FI_JOB_TOKENS_PER_S, TWINLOOP_FI_RANK_STEP_TIME):
        rows = _rows(db, field)
        assert not [k for k, n in Counter((t, e) for t, e, _ in rows).items() if n > 1]
    assert _rows(db, TWINLOOP_FI_JOB_STEP_TIME) == _saw_job(seen, TWINLOOP_FI_JOB_STEP_TIME)
    assert _rows(db, TWINLOOP_FI_RANK_STEP_TIME) == ranks
    assert len(_rows(db, DCGM_FI_DEV_SM_CLOCK)) == gpu_rows  # nor the GPUs' own rows


def test_without_heartbeats_no_progress_is_written(tmp_path: Path) -> None:
    rec, jobs, _ = _cluster(tmp_path, seconds=20)
    db = tmp_path / "watch.duckdb"
    res = runner.invoke(app, ["watch", f"replay:{rec}", "--jobs", str(jobs), "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    with DuckDBStore(db, read_only=True) as store:
        assert store.field_id(TWINLOOP_FI_JOB_STEP_TIME) is None and store.field_id(TWINLOOP_FI_RANK_STEP_TIME) is None
        assert not [e for e in store.labels() if "/jobs/" in e]


def test_twinloop_query_reads_the_jobs_step_time_back(tmp_path: Path) -> None:
    rec, jobs, beats = _cluster(tmp_path, seconds=20)
    db = tmp_path / "watch.duckdb"
    res = runner.invoke(app, ["watch", f"replay:{rec}", "--jobs", str(jobs), "--job-heartbeats", str(beats), "--db",
                              str(db), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["query", "--field", TWINLOOP_FI_JOB_STEP_TIME, "--db", str(db), "--entity", JOB,
                              "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["unit"] == "s" and doc["count"] >= 10
    assert {r["entity"] for r in doc["rows"]} == {JOB} and {r["value"] for r in doc["rows"]} == {0.8}
    res = runner.invoke(app, ["query", "--field", TWINLOOP_FI_RANK_STEP_TIME, "--db", str(db), "--entity", GPUS[6],
                              "--aggregate", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["rows"]
    assert row["entity"] == GPUS[6] and row["min"] > 0.7


@given(
    st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), min_size=0, max_size=3),
    st.lists(st.one_of(st.none(), st.floats(0.0, 1e3)), min_size=len(GPUS), max_size=len(GPUS)),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_the_rows_are_exactly_the_finite_values_the_sample_carries(
    losses: list[float | None], ranks: list[float | None], with_ranks: bool
) -> None:
    jobs = tuple(f"j{k}" for k in range(len(losses)))
    nan = float("nan")
    loss = np.array([nan if v is None else v for v in losses])
    rank = np.array([nan if v is None else v for v in ranks])
    gpu = {DCGM_FI_DEV_SM_CLOCK: np.full(len(GPUS), 1980.0)} | (
        {TWINLOOP_FI_RANK_STEP_TIME: rank} if with_ranks else {}
    )
    sample = Sample(ts=T0, gpu=gpu, job_ids=jobs, job_fields={TWINLOOP_FI_JOB_LOSS: loss})
    frame = progress_frame(sample, GPUS, "dc")
    got = sorted(zip(frame.entity_names().tolist(), frame.field_names().tolist(), frame.value.tolist(), strict=True))
    want = [(f"dc/jobs/{j}", TWINLOOP_FI_JOB_LOSS, v) for j, v in zip(jobs, losses, strict=True) if v is not None]
    if with_ranks:
        want += [(g, TWINLOOP_FI_RANK_STEP_TIME, v) for g, v in zip(GPUS, ranks, strict=True) if v is not None]
    assert got == sorted(want) and set(frame.ts_s.tolist()) <= {T0}
    assert set(frame.entities) == {e for e, _, _ in want}  # no entity without a row (the GPU clock is not progress)
