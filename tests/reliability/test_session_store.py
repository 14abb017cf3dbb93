"""The watcher's session store: while another process holds the file, writes queue (the loop never blocks) and
go to the file in order at the next chance; nothing is lost."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.session import SessionStore

from .helpers import start_writer, wait_batches


def _frame(i: int) -> Frame:
    ts = np.arange(10, dtype=float) + 1.8e9 + i * 10
    return Frame.from_long(ts, ["dc/r/k/n/g1"] * 10, ["DCGM_FI_DEV_GPU_TEMP"] * 10, np.full(10, 40.0))


def test_writes_queue_while_another_process_holds_the_store_and_land_after(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    store = SessionStore(db, flush_s=0.0, busy_wait_s=0.05)
    proc = start_writer(db, batches=10**9)
    try:
        wait_batches(proc, 2)
        for i in range(5):
            store.append(_frame(i))
        store.write(lambda con: con.execute("CREATE TABLE IF NOT EXISTS notes(x INTEGER)"))
        store.write(lambda con: con.execute("INSERT INTO notes VALUES (7)"))
        assert store.flush() is False and store.queued == 7 and store.busy_since is not None
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert store.flush() is True and store.queued == 0 and store.busy_since is None
    con = duckdb.connect(str(db), read_only=True)
    try:
        temps = con.execute(
            "SELECT count(*) FROM samples s JOIN fields f USING (field_id) WHERE f.name = 'DCGM_FI_DEV_GPU_TEMP'"
        ).fetchone()
        notes = con.execute("SELECT x FROM notes").fetchall()
    finally:
        con.close()
    assert temps is not None and temps[0] == 50 and notes == [(7,)]
