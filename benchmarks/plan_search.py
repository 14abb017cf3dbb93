"""Benchmark: rank every valid parallelism configuration of llama-3-405b on 16,384 h100-sxm, on one core.

    python benchmarks/plan_search.py [--model llama-3-405b] [--gpu h100-sxm] [--gpus 16384] [--repeat 3]

Prints the number of configurations enumerated, how many fit, and the wall time of the whole search
(enumeration, routing for MoE models, memory for all, time/power/energy/cost for the fitting ones, ranking).
The process is pinned to one CPU core (os.sched_setaffinity) and NumPy's BLAS threads are limited to one.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import sys
import time

from twinloop.plan.search import describe, search
from twinloop.plan.train_request import make_request, resolve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3-405b")
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument("--objective", default="throughput", choices=("throughput", "energy", "cost"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    best = float("inf")
    result = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        ctx = resolve(make_request(model=args.model, gpu=args.gpu, gpus=args.gpus))
        result = search(ctx, args.objective)
        best = min(best, time.perf_counter() - start)
    assert result is not None
    top = result.rows(1)
    print(f"model {args.model}, {args.gpus} x {args.gpu}, objective {args.objective}, 1 core")
    print(f"configurations evaluated: {result.evaluated}")
    print(f"configurations that fit:  {result.fitting}")
    print(f"search wall time (best of {args.repeat}): {best:.3f} s")
    if top:
        print(f"best: {describe(top[0])}  {top[0]['tokens_per_s']:,.0f} tokens/s, MFU {100 * top[0]['mfu']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
