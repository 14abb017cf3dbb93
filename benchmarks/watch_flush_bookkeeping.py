"""A watcher's flush cost after a day of 1 s flushes: the store's per-source bookkeeping, one row per flush vs one.

``twinloop watch --db`` appends its keyed rows once a second (:class:`~twinloop.telemetry.store.session.SessionStore`:
open the store, append, close). Each keyed append looks up its source in the ``ingests`` table and records what it
wrote. One row per batch made that table grow by 86,400 rows a day, filtered on every flush; one row per source,
updated in place, keeps it at one. This script builds the store a day of flushes leaves behind (``--gpus`` ×
``--fields`` samples per second for ``--hours``, written in one go, and the ``ingests`` table either layout would
hold), then times ``--flushes`` further 1 s flushes, each as the watcher does it (open, keyed append, close), and
the keyed append alone on an open store; medians, ms.

``--old-module`` names a copy of ``duckdb_store.py`` from before the change, e.g.
``git show 9290717:src/twinloop/telemetry/store/duckdb_store.py > /tmp/old_store.py``: it is timed on the one-row-per-
flush table it wrote. Without it, the current code is timed on its own table only (and once on the old table, where
its first flush merges the day's rows into one).

    python benchmarks/watch_flush_bookkeeping.py [--gpus 8] [--fields 4] [--hours 24] [--flushes 200]
        [--bookkeeping-days 1] [--old-module /tmp/old_store.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

FIELDS = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
          "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED")  # fmt: skip
KEY = "live:nvml:"
T0 = 1_795_430_000.0


def _frame(ents: list[str], fields: tuple[str, ...], t0: float, seconds: int, rng: np.random.Generator) -> Frame:
    ts = T0 + t0 + np.arange(seconds, dtype=np.float64)
    cols = {f: rng.uniform(20.0, 90.0, (seconds, len(ents))).round(2) for f in fields}
    return Frame.from_dense(ts, ents, cols, source="bench")


def _day_store(path: Path, ents: list[str], fields: tuple[str, ...], seconds: int) -> None:
    """The samples of ``seconds`` 1 s flushes, and no bookkeeping yet."""
    rng = np.random.default_rng(0)
    with DuckDBStore(path, threads=1) as store:
        chunk = 3600
        for t in range(0, seconds, chunk):
            store.append(_frame(ents, fields, float(t), min(chunk, seconds - t), rng))


def _bookkeeping(path: Path, seconds: int, per_flush: bool, end: float) -> None:
    """The ``ingests`` rows ``seconds`` 1 s flushes left: one per flush (the layout before) or one for the source.

    The flushes are taken to end where the samples end (a store kept ``--hours`` of samples by retention).
    """
    with DuckDBStore(path, threads=1) as store:
        con = store.con
        con.execute("DELETE FROM ingests")
        if per_flush:
            con.execute("INSERT INTO ingests SELECT ?, ? + i, ? + i, ? FROM range(?) t(i)",
                        [KEY, end - seconds, end - seconds, 4, seconds])  # fmt: skip
        else:
            con.execute("INSERT INTO ingests VALUES (?, ?, ?, ?)", [KEY, end - seconds, end - 1, 4 * seconds])


def _time_flushes(runs: list[tuple[Any, Path]], frames: list[Frame]) -> list[tuple[float, float, float]]:
    """Per run (store class, file): (first flush, median open+append+close, median append on an open store), ms.

    The runs take turns flush by flush, so a busy machine slows them alike.
    """
    half = len(frames) // 2
    walls: list[list[float]] = [[] for _ in runs]
    for f in frames[:half]:
        for k, (cls, path) in enumerate(runs):
            t = time.perf_counter()
            with cls(path, threads=1) as store:
                store.append(f, source_key=KEY)
            walls[k].append(time.perf_counter() - t)
    appends: list[list[float]] = [[] for _ in runs]
    stores = [cls(path, threads=1) for cls, path in runs]
    try:
        for f in frames[half:]:
            for k, store in enumerate(stores):
                t = time.perf_counter()
                store.append(f, source_key=KEY)
                appends[k].append(time.perf_counter() - t)
    finally:
        for store in stores:
            store.close()
    return [
        (1e3 * w[0], 1e3 * statistics.median(w[1:]), 1e3 * statistics.median(a))
        for w, a in zip(walls, appends, strict=True)
    ]


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("twinloop_old_duckdb_store", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows_in_ingests(path: Path) -> int:
    with DuckDBStore(path, read_only=True) as store:
        row = store.con.execute("SELECT count(*) FROM ingests").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--fields", type=int, default=4, choices=range(1, len(FIELDS) + 1))
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--flushes", type=int, default=200)
    ap.add_argument("--bookkeeping-days", type=float, default=1.0, help="days of 1 s flushes in ingests")
    ap.add_argument("--old-module", default=None, help="duckdb_store.py from before the change")
    args = ap.parse_args()
    seconds = int(args.hours * 3600)
    if not args.bookkeeping_days * 86_400 >= seconds:
        ap.error("--bookkeeping-days must cover --hours (the flushes that wrote the samples)")
    ents = [f"site0/row0/rack0/node{i // 8}/gpu{i % 8}" for i in range(args.gpus)]
    fields = FIELDS[: args.fields]
    rng = np.random.default_rng(1)
    flushes = [_frame(ents, fields, float(seconds + k), 1, rng) for k in range(args.flushes)]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "day.duckdb"
        t = time.perf_counter()
        _day_store(base, ents, fields, seconds)
        print(f"store: {seconds:,} s × {args.gpus} GPUs × {args.fields} fields = "
              f"{seconds * args.gpus * args.fields:,} samples, built in {time.perf_counter() - t:.1f} s")  # fmt: skip
        runs: list[tuple[str, Any, bool]] = [("one row per source (now)", DuckDBStore, False),
                                             ("now, on a per-flush table", DuckDBStore, True)]  # fmt: skip
        if args.old_module:
            runs.insert(0, ("one row per flush (before)", _load(args.old_module).DuckDBStore, True))
        paths, before = [], []
        for k, (_, _, per_flush) in enumerate(runs):
            paths.append(Path(tmp) / f"run{k}.duckdb")
            shutil.copy(base, paths[-1])
            _bookkeeping(paths[-1], int(args.bookkeeping_days * 86_400), per_flush, T0 + seconds)
            before.append(_rows_in_ingests(paths[-1]))
        times = _time_flushes([(cls, path) for (_, cls, _), path in zip(runs, paths, strict=True)], flushes)
        for (label, _, _), path, n, (first, wall, append) in zip(runs, paths, before, times, strict=True):
            print(f"{label:28s} ingests rows {n:>9,} → {_rows_in_ingests(path):>9,}: first flush {first:6.1f} ms, "
                  f"flush (open+append+close) {wall:6.2f} ms, append alone {append:6.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
