"""MoE routing in motion: the docs/results.md figures, and routing steps/s for 64K tokens × 256 experts.

Run: ``PYTHONPATH=src python benchmarks/moe_routing.py [--quick]``. Prints one markdown table per case
(DeepSeek-V3 on 2,048 H100 with 64-way EP; Mixtral 8x7B on 8 H200 with 8-way EP), each under the same
seeded drifting stream with a hot-expert burst, then the routing speed.
"""

from __future__ import annotations

import sys
import time

from twinloop.model.routing import AffinityStream, DriftSpec, make_router, simulate
from twinloop.model.routing import placement as pl
from twinloop.plan.moe_study import run_study

CASES = [
    ("deepseek-v3", "h100-sxm", 2048, 64, 4096, 32),
    ("mixtral-8x7b", "h200-sxm", 8, 8, 4096, 32),
]


def table(study: object) -> None:
    s = study
    print(f"\n### {s.model} on {s.gpus} {s.gpu}, EP {s.ep}, {s.steps} steps × {s.tokens_per_step} tokens")  # type: ignore[attr-defined]
    print(f"planner config: {s.config}")  # type: ignore[attr-defined]
    print("| router | placement | imbalance max / mean | dropped % | redirected % | a2a intra MB | a2a inter MB |"
          " step s worst / mean | quality (top-k recall) | served by a true top-k % |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in s.rows:  # type: ignore[attr-defined]
        m = r.summary
        print(
            f"| {r.router} | {r.placement} | {m['imbalance_max']:.2f} / {m['imbalance_mean']:.2f} | "
            f"{100 * m['dropped_share']:.1f} | {100 * m['redirected_share']:.1f} | "
            f"{m['a2a_intra_bytes_mean'] / 1e6:.0f} | "
            f"{m['a2a_inter_bytes_mean'] / 1e6:.0f} | {m['step_s_max']:.2f} / {m['step_s_mean']:.2f} | "
            f"{m['quality']:.3f} | {100 * m['served_true']:.1f} |"
        )


def speed(tokens: int = 65_536, experts: int = 256, steps: int = 3) -> None:
    stream = AffinityStream.create(DriftSpec(tokens_per_step=tokens), experts, seed=0)
    place = pl.contiguous(experts, 64, 8)
    for name in ("topk", "adaptive"):
        t0 = time.perf_counter()
        simulate(make_router(name), stream, place, 8, steps, 4, 7168 * 3.0)
        dt = time.perf_counter() - t0
        print(f"routing speed, {name}: {steps / dt:.2f} steps/s ({tokens} tokens × {experts} experts, K=8, EP 64)")


def main() -> None:
    quick = "--quick" in sys.argv
    for model, gpu, gpus, ep, tokens, steps in CASES:
        if quick:
            tokens, steps = tokens // 4, steps // 4
        drift = DriftSpec(
            tokens_per_step=tokens, burst_start_step=steps // 2, burst_steps=steps // 4, drift_period_steps=steps
        )
        table(run_study(model, gpus, ep, gpu=gpu, steps=steps, drift=drift))
    speed(steps=1 if quick else 2)


if __name__ == "__main__":
    main()
