"""Benchmark: the same 8-run sweep on 1 and 2 Ray workers, and Ray's own overhead per task.

    python benchmarks/sweep_scaling.py [--duration 1m] [--empty 300]
    python benchmarks/sweep_scaling.py --sizes     # only the bytes a cell, a row and the shared inputs take

The sweep is the packaged ``sweeps/loop-robustness.yaml`` narrowed to seed 0 with every scenario's duration
replaced (4 scenarios x loop off/on = 8 runs). One local Ray with 2 CPUs is started once (its start-up is
printed apart), a warm-up run lets both worker processes import twinloop, then the sweep runs with at most 1
task in flight and with 2. Ray's overhead is the round trip of an empty task (submit, schedule, run, return,
``ray.get``) one at a time, and the throughput of many empty tasks submitted at once. The load average is
printed before and after: the machine is shared, so figures move with it. It also prints the bytes one row
returns (pickled), the data a task sends back to the driver.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import statistics
import time
from pathlib import Path

import ray

from twinloop.sweep.cell import VOLATILE
from twinloop.sweep.runner import run_cells
from twinloop.sweep.spec import cells, load_sweep, narrowed

SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "loop-robustness.yaml"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@ray.remote(num_cpus=1)
def _empty() -> None:
    return None


def print_sizes() -> None:
    """Bytes (pickled) of what travels: a cell to a worker, and the shared inputs the chunked maps put once."""
    import numpy as np

    from twinloop.plan.evaluate import routing_imbalance
    from twinloop.plan.memory import memory_per_gpu
    from twinloop.plan.search import candidate_configs
    from twinloop.plan.train_request import make_request, resolve
    from twinloop.twin.reliability import _sample_events, job_failure_rates_per_h

    todo = cells(narrowed(load_sweep(SPEC), (0,), "1m"), str(SPEC))
    cell_b = [len(pickle.dumps(c)) for c in todo]
    print(f"cell sent to a worker (pickled): {min(cell_b):,}..{max(cell_b):,} bytes")
    ev = _sample_events(job_failure_rates_per_h(16384), 54 * 86400.0, 200, 0)
    print(f"reliability event sample, 16,384 GPUs x 54 days x 200 runs: {len(pickle.dumps(ev)) / 1e6:.1f} MB")
    ctx = resolve(make_request(model="deepseek-v3", gpu="h100-sxm", gpus=2048))
    c, w = candidate_configs(ctx), ctx.workload
    imb = routing_imbalance(ctx.arch, c.ep, ctx.gpu.gpus_per_node, ctx.request.moe_zipf_s, ctx.request.seed)
    fit = np.flatnonzero(memory_per_gpu(w, c, ctx.global_batch, imb).total <= w.hbm_capacity_bytes)
    shared = (w, c.select(fit), ctx.topology, ctx.power_model, ctx.global_batch, ctx.power_limit_w, ctx.prices,
              imb[fit])  # fmt: skip
    print(f"search shared inputs, deepseek-v3 on 2,048 h100-sxm ({fit.size:,} fitting): "
          f"{len(pickle.dumps(shared)) / 1e6:.1f} MB")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", default="1m", help="every scenario's simulated time")
    parser.add_argument("--empty", type=int, default=300, help="empty tasks for the overhead figures")
    parser.add_argument("--sizes", action="store_true", help="print only the sizes of what travels")
    args = parser.parse_args()
    if args.sizes:
        print_sizes()
        return 0
    print(f"cores: {os.cpu_count()}  load average (1/5/15 min) before: {_load()}")
    spec = narrowed(load_sweep(SPEC), (0,), args.duration)
    todo = cells(spec, str(SPEC))
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    print(f"ray {ray.__version__} local start-up: {time.perf_counter() - t0:.1f} s")
    try:
        ray.get([_empty.remote() for _ in range(20)])
        rtt = []
        for _ in range(args.empty):
            t = time.perf_counter()
            ray.get(_empty.remote())
            rtt.append(time.perf_counter() - t)
        t = time.perf_counter()
        ray.get([_empty.remote() for _ in range(args.empty)])
        batch_s = time.perf_counter() - t
        print(f"empty task round trip: median {statistics.median(rtt) * 1e3:.2f} ms, "
              f"p90 {sorted(rtt)[int(0.9 * len(rtt))] * 1e3:.2f} ms (one at a time, n={args.empty})")  # fmt: skip
        each_ms = batch_s / args.empty * 1e3
        print(f"empty tasks submitted at once: {args.empty / batch_s:,.0f} tasks/s ({each_ms:.2f} ms each)")
        run_cells(todo[:2], spec.name, workers=2)  # warm-up: both worker processes import twinloop
        runs = {}
        for w in (1, 2):
            runs[w] = run_cells(todo, spec.name, workers=w)
            task_s = sum(r["wall_s"] for r in runs[w].rows)
            print(f"{len(todo)}-run sweep, {w} worker(s): wall {runs[w].wall_s:.1f} s, sum of task times "
                  f"{task_s:.1f} s, failed {len(runs[w].failed)}, load average {_load()}")  # fmt: skip
        print(f"speed-up 2 vs 1 worker: {runs[1].wall_s / runs[2].wall_s:.2f}x")
        same = [{k: v for k, v in r.items() if k not in VOLATILE} for r in runs[1].rows] == [
            {k: v for k, v in r.items() if k not in VOLATILE} for r in runs[2].rows
        ]
        print(f"rows identical on 1 and 2 workers (wall time, worker and attempts aside): {same}")
        sizes = [len(pickle.dumps(r)) for r in runs[2].rows]
        print(f"data returned per task (pickled row): {min(sizes):,}..{max(sizes):,} bytes")
    finally:
        ray.shutdown()
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
