"""Telemetry ingest speed: samples per second into the DuckDB store, on one core, in batched frames.

Frames are shaped like the twin's: every GPU × every field at each timestamp (``--frame-s`` timestamps per
frame), rows field-major. Two figures:

* ``store.append`` alone (Arrow → DuckDB, one transaction per frame), and
* the whole ingest pipeline (``ingest``: validation of every row — unknown fields, NaN/inf, ranges,
  duplicates, order — then the store, one transaction per ``--batch-rows``).

The process is pinned to one core and DuckDB runs with one thread.

    python benchmarks/telemetry_ingest.py [--gpus 16384] [--fields 4] [--seconds 60] [--frame-s 10]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import ingest
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource
from twinloop.telemetry.store.duckdb_store import DuckDBStore

FIELDS = (
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
)


def make_frames(n_gpus: int, n_fields: int, seconds: int, frame_s: int, seed: int = 0) -> list[Frame]:
    """Deterministic frames: ``seconds / frame_s`` frames of ``frame_s`` × ``n_gpus`` × ``n_fields`` samples."""
    rng = np.random.default_rng(seed)
    ents = [f"site0/row{i // 4096}/rack{i // 64}/node{i // 8}/gpu{i % 8}" for i in range(n_gpus)]
    frames = []
    for k in range(seconds // frame_s):
        ts = 1.7e9 + np.arange(k * frame_s, (k + 1) * frame_s, dtype=np.float64)
        cols = {f: rng.uniform(20.0, 90.0, (frame_s, n_gpus)).round(2) for f in FIELDS[:n_fields]}
        frames.append(Frame.from_dense(ts, ents, cols, source="bench"))
    return frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--fields", type=int, default=4, choices=range(1, len(FIELDS) + 1))
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--frame-s", type=int, default=10)
    ap.add_argument("--batch-rows", type=int, default=1_000_000)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    frames = make_frames(args.gpus, args.fields, args.seconds, args.frame_s)
    n = sum(len(f) for f in frames)
    print(f"{len(frames)} frames x {len(frames[0]):,} samples = {n:,} samples "
          f"({args.gpus} GPUs x {args.fields} fields x {args.seconds} s)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        store = DuckDBStore(Path(tmp) / "append.duckdb", threads=1)
        store.append(frames[0])  # creates the schema and the entity ids (one-time)
        t0 = time.perf_counter()
        for f in frames[1:]:
            store.append(f)
        dt = time.perf_counter() - t0
        m = n - len(frames[0])
        print(f"store.append: {m:,} samples in {dt:.2f} s = {m / dt / 1e6:.2f} M samples/s (one core)")
        store.close()

        store = DuckDBStore(Path(tmp) / "pipeline.duckdb", threads=1)
        t0 = time.perf_counter()
        report = ingest(TwinSource(TwinConfig(), frames=frames), store, batch_rows=args.batch_rows)
        dt = time.perf_counter() - t0
        assert report.rows_stored == n and report.ok, report.to_dict()
        print(f"ingest (validate + store, batch {args.batch_rows:,}): {n:,} samples in {dt:.2f} s = "
              f"{n / dt / 1e6:.2f} M samples/s (one core)")  # fmt: skip
        store.close()


if __name__ == "__main__":
    main()
