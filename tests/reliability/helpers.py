"""Subprocesses that write a store, for kill -9 and concurrency tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Appends batches of 1,000 samples to the store named in argv[1] forever (or argv[2] batches), printing each.
WRITER = """
import sys
import numpy as np
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

store = DuckDBStore(sys.argv[1], lock_timeout_s=float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10**9
for i in range(n):
    ts = np.arange(1000, dtype=float) + i * 1000.0 + 1.7e9
    store.append(Frame.from_long(ts, ["dc/r/k/n/g0"] * 1000, ["DCGM_FI_DEV_POWER_USAGE"] * 1000, np.ones(1000)))
    print(i, flush=True)
store.close()
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def start_writer(db: Path, batches: int | None = None, lock_timeout_s: float = 10.0) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", WRITER, str(db), str(batches or 10**9), str(lock_timeout_s)]
    return subprocess.Popen(args, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_batches(proc: subprocess.Popen[str], n: int, timeout_s: float = 60.0) -> None:
    """Block until the writer reports ``n`` committed batches."""
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    seen = 0
    while seen < n:
        assert time.monotonic() < deadline, "writer too slow"
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "writer ended"
        seen += 1
