"""Issue 19, data safety: a writer killed with SIGKILL leaves a readable store; a second writer, an ingest into a
foreign file and a ``sim --out`` over a store another process holds are refused in one line, and lose nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from twinloop.errors import InputError
from twinloop.telemetry.store.duckdb_store import DuckDBStore

from .helpers import env, start_writer, wait_batches

SCENARIO = """
name: reliability
site: dc1
duration_s: 30s
rows: [{racks: 1, nodes_per_rack: 2}]
jobs: [{name: t, kind: training, gpus: 8}]
"""


def _count(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM samples").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "twinloop.cli.main", *args]
    return subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=timeout, check=False)


def test_kill_9_mid_write_leaves_a_readable_store_and_no_stale_lock(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    proc = start_writer(db)
    try:
        wait_batches(proc, 5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    n = _count(db)  # the WAL replays: every committed batch, and no half batch
    assert n >= 5000 and n % 1000 == 0
    with DuckDBStore(db, lock_timeout_s=1.0) as store:  # the kernel dropped the dead writer's gate
        assert store.count() == n


def test_a_second_writer_is_refused_while_the_first_holds_the_store(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    proc = start_writer(db)
    try:
        wait_batches(proc, 2)
        with pytest.raises(InputError, match="in use by another process"):
            _ = DuckDBStore(db, lock_timeout_s=0.3).con
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert _count(db) % 1000 == 0


def test_sim_out_refuses_to_replace_a_store_another_process_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    db = out / "telemetry.duckdb"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    proc = start_writer(db, batches=10**9)
    try:
        wait_batches(proc, 3)
        res = _cli("sim", str(scenario), "--out", str(out))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip().splitlines()
    assert len(line) == 1 and "in use by another process" in line[0]
    n = _count(db)
    assert n >= 3000 and n % 1000 == 0  # the writer's committed batches are all still there


def test_two_sims_into_one_directory_one_refused_or_both_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    cmd = [sys.executable, "-m", "twinloop.cli.main", "sim", str(scenario), "--out", str(out), "--json"]
    procs = [subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    results = [p.communicate(timeout=180) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), results
    # whatever happened, the store on disk is one whole run, readable
    assert _count(out / "telemetry.duckdb") > 0


def test_ingest_refuses_a_foreign_duckdb_file_without_force(tmp_path: Path) -> None:
    db = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE invoices(id INTEGER)")
    con.close()
    csv = tmp_path / "t.csv"
    csv.write_text("ts,entity,DCGM_FI_DEV_POWER_USAGE\n1700000000,dc/r/k/n/g0,300\n")
    res = _cli("ingest", "file", str(csv), "--db", str(db))
    assert res.returncode == 2
    assert "not a twinloop store" in res.stderr and "--force" in res.stderr
    con = duckdb.connect(str(db), read_only=True)
    assert {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()} == {"invoices"}
    con.close()
    res = _cli("ingest", "file", str(csv), "--db", str(db), "--force")
    assert res.returncode == 0, res.stderr
    assert _count(db) == 1
