"""kill -9 in the middle of writing loses at most the batch in flight and never corrupts the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from twinloop.telemetry.store import DuckDBStore

WRITER = r"""
import sys, numpy as np
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store import DuckDBStore
path, marks = sys.argv[1], sys.argv[2]
store = DuckDBStore(path, threads=1)
ents = [f"s/r/k/n{i // 8}/gpu{i % 8}" for i in range(512)]
k = 0
while True:
    # Batch k: 512 GPUs x 100 timestamps, every value equal to k so a torn batch would show.
    ts = 1000.0 * k + np.arange(100, dtype=float)
    frame = Frame.from_dense(ts, ents, {"DCGM_FI_DEV_POWER_USAGE": np.full((100, 512), float(k))})
    store.append(frame)
    with open(marks, "a") as fh:
        fh.write(f"{k}\n")
    k += 1
"""


def test_kill_9_mid_write_keeps_every_committed_batch(tmp_path: Path) -> None:
    db, marks = tmp_path / "crash.duckdb", tmp_path / "committed.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(marks)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if marks.exists() and len(marks.read_text().split()) >= 8:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    committed = [int(x) for x in marks.read_text().split()]
    assert len(committed) >= 8, "writer did not get going"
    store = DuckDBStore(db)
    table = store.query("DCGM_FI_DEV_POWER_USAGE")
    batch = np.floor(table.column("ts").to_numpy() / 1000.0)
    values = table.column("value").to_numpy()
    assert np.array_equal(batch, values), "a row landed in the wrong batch"
    ids, counts = np.unique(values, return_counts=True)
    # Every acknowledged batch is complete; at most one more (committed before the mark was written).
    assert set(committed) <= set(ids.astype(int).tolist())
    assert len(ids) - len(committed) in (0, 1)
    assert (counts == 512 * 100).all(), "a batch was stored partially"
    # The store is still writable after recovery.
    from twinloop.telemetry.frame import Frame

    store.append(Frame.from_dense(1e9, ["s/r/k/n0/gpu0"], {"DCGM_FI_DEV_POWER_USAGE": np.array([1.0])}))
    assert store.count() == int(counts.sum()) + 1
