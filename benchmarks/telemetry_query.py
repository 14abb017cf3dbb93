"""Telemetry query speed: per-GPU aggregate of one field over 1 hour at 1 s for 16,384 GPUs (59 M samples).

Builds a DuckDB store (kept at ``--db`` for reruns) holding ``--fields`` fields of 16,384 GPUs every second for
an hour, written as the twin writes it (one frame per ``--frame-s`` seconds, field-major rows), then times:

* ``aggregate``: min/mean/max/last/count per GPU over the hour for one field (the target: < 1 s), over the
  whole store and over a range whose ends cut minutes (raw samples are read at both edges);
* ``downsample``: 1-minute buckets per GPU for one field (16,384 × 60 rows out);
* ``query``: raw samples of one node (8 GPUs) for the hour, by entity prefix.

Each query runs ``--repeat`` times on a freshly opened store; the best and the median are printed.
DuckDB uses all cores (2 on the reference machine) for queries.

    python benchmarks/telemetry_query.py [--gpus 16384] [--seconds 3600] [--fields 2] [--db /tmp/tq.duckdb]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_UTIL")


def build(path: Path, n_gpus: int, seconds: int, n_fields: int, frame_s: int) -> float:
    """Write the store; returns the seconds it took."""
    rng = np.random.default_rng(0)
    ents = [f"site0/row{i // 4096}/rack{i // 64}/node{i // 8}/gpu{i % 8}" for i in range(n_gpus)]
    store = DuckDBStore(path)
    t0 = time.perf_counter()
    for k in range(seconds // frame_s):
        ts = 1.7e9 + np.arange(k * frame_s, (k + 1) * frame_s, dtype=np.float64)
        cols = {f: rng.uniform(100.0, 700.0, (frame_s, n_gpus)).round(1) for f in FIELDS[:n_fields]}
        store.append(Frame.from_dense(ts, ents, cols))
    store.close()
    return time.perf_counter() - t0


def timed(path: Path, fn: Callable[[DuckDBStore], int], repeat: int) -> tuple[float, float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        store = DuckDBStore(path, read_only=True)
        _ = store.con  # opening (and loading the entity ids) is outside the timing
        t0 = time.perf_counter()
        rows = fn(store)
        times.append(time.perf_counter() - t0)
        store.close()
    return min(times), statistics.median(times), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--fields", type=int, default=2, choices=range(1, len(FIELDS) + 1))
    ap.add_argument("--frame-s", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--db", default="/tmp/twinloop_query_bench.duckdb")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()
    path = Path(args.db)
    if args.rebuild or not path.exists():
        path.unlink(missing_ok=True)
        dt = build(path, args.gpus, args.seconds, args.fields, args.frame_s)
        n = args.gpus * args.seconds * args.fields
        print(f"built {n:,} samples ({args.gpus} GPUs x {args.seconds} s x {args.fields} fields) in {dt:.1f} s, "
              f"{path.stat().st_size / 2**20:.0f} MiB")  # fmt: skip
    field = FIELDS[0]
    node = "site0/row0/rack0/node0"
    cases: list[tuple[str, Callable[[DuckDBStore], int]]] = [
        ("aggregate per GPU, 1 h, 1 field", lambda s: s.aggregate(field).num_rows),
        (
            "aggregate per GPU, 1 h range not on minute edges (since 1.7e9+29.5 s, until +3570 s)",
            lambda s: s.aggregate(field, "", 1.7e9 + 29.5, 1.7e9 + 3570).num_rows,
        ),
        ("downsample 60 s per GPU, 1 h, 1 field", lambda s: s.downsample(field, 60.0).num_rows),
        (f"raw query {node} (8 GPUs), 1 h", lambda s: s.query(field, node).num_rows),
    ]
    for name, fn in cases:
        best, median, rows = timed(path, fn, args.repeat)
        print(f"{name}: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms ({rows:,} rows out)")


if __name__ == "__main__":
    main()
