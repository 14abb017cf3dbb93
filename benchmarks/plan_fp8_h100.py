"""FP8 vs BF16 training on H100: the planner's search, and the published FP8 figures at their own layouts.

    python benchmarks/plan_fp8_h100.py              # ~10 s
    python benchmarks/plan_fp8_h100.py --fit-stack  # + the fit of NEMO_2024_FP8_STEP_STRETCH on the fitted cell

1. Llama-3-8B on 8 H100 and Llama-3-70B on 64 H100 at the 700 W limit, default framework profile, the planner's
   search choosing the layout for each precision: TFLOP/s per GPU (model FLOPs), compute-phase clock, FP8/BF16
   speedup, and how much of the FP8 step is quantisation work (the same step with no casts: "GEMM-only"; the
   default profile's fitted FP8 step stretch applies to both).
   For scale: the measured FP8/BF16 GEMM ratio at 8192³ and 700 W is 1.81 (shared/data/h100/
   precision_bf16_fp8.json); whole steps gain less (attention, element-wise work, communication, casts).
2. Every published point of ``catalog/fp8_training.yaml`` (NeMo / Megatron-Bridge / torchtitan on H100) at its
   published layout, tokens/s per GPU, with its role (fitted / predicted, fixed before the errors were seen).
"""

from __future__ import annotations

import argparse
import dataclasses

from twinloop.lab import fp8_anchors
from twinloop.plan.fp8_casts import Fp8CastElems
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.train import evaluate_one, plan_train
from twinloop.plan.train_request import make_request, resolve

CASES = (("llama-3-8b", 8, 128), ("llama-3-70b", 64, 512))


def _gemm_only_rate(req: object, config: ParallelConfig) -> float:
    """Tokens/s of the same plan with no FP8 quantisation work (casts, transposes, weight copies' casts)."""
    ctx = resolve(req)  # type: ignore[arg-type]
    cfgs = ConfigArrays.from_configs([config])
    bare = dataclasses.replace(ctx, workload=dataclasses.replace(ctx.workload, fp8=Fp8CastElems()))
    return float(evaluate_one(bare, cfgs).tokens_per_s[0])


def search_rows() -> None:
    print(f"{'model':12s} {'GPUs':>5s} {'precision':10s} {'TFLOP/s':>8s} {'MFU':>6s} {'clock MHz':>9s}  layout")
    for model, gpus, batch in CASES:
        rates = {}
        for precision in ("bf16", "fp8-mixed"):
            req = make_request(model=model, gpu="h100-sxm", gpus=gpus, precision=precision, seq_len=8192,
                               global_batch=batch)  # fmt: skip
            plan = plan_train(req)
            clock = next(p.clock_mhz for p in plan.phases.phases if p.name == "compute")
            rates[precision] = plan.tflops_per_gpu
            c = plan.config
            layout = f"tp{c.tp} pp{c.pp} dp{c.dp} zero{c.zero} recompute {c.recompute}"
            extra = ""
            if precision != "bf16":
                bare = _gemm_only_rate(req, c)
                cost = 100 * (1 - plan.tokens_per_s / bare)
                extra = f"  (GEMM-only FP8 {bare / gpus:,.0f} tok/s/GPU; quantisation costs {cost:.1f} %)"
            print(
                f"{model:12s} {gpus:5d} {precision:10s} {plan.tflops_per_gpu:8.1f} {100 * plan.mfu:5.1f}% "
                f"{clock:9.0f}  {layout}{extra}"
            )
        print(f"{'':12s} {'':5s} FP8/BF16 speedup {rates['fp8-mixed'] / rates['bf16']:.2f}x")


def published_rows() -> None:
    print("\npublished FP8 training on H100 at the published layouts (catalog/fp8_training.yaml), tokens/s per GPU:")
    print(f"  {'id':32s} {'role':9s} {'profile':21s} {'published':>9s} {'planner':>8s} {'error':>7s}  BF16 same layout")
    for p in fp8_anchors.points():
        c = fp8_anchors.compare_point(p)
        bf16 = fp8_anchors.plan_point(p, precision="bf16").tokens_per_s / p.gpus
        head = f"  {p.id:32s} {p.role:9s} {p.framework:21s} {c.published:9,.0f} {c.predicted:8,.0f}"
        print(f"{head} {100 * c.error:+6.1f}%  {bf16:8,.0f} (FP8/BF16 {c.predicted / bf16:.2f}x)")
    print("FP8/BF16 speedups published on other H100 systems (ratio; planner at the stated setting):")
    for r in fp8_anchors.ratios():
        c = fp8_anchors.compare_ratio(r)
        print(
            f"  {r.id:32s} {r.role:9s} published {c.published:.3f}x  planner {c.predicted:.3f}x  {100 * c.error:+.1f}%"
        )


def fit_stack() -> None:
    """The bisection that chose ``NEMO_2024_FP8_STEP_STRETCH`` (efficiency.py) on the fitted-role cell."""
    (p,) = [p for p in fp8_anchors.points() if p.role == "fitted"]
    print(f"\nFP8 step stretch that meets {p.id} ({p.framework}): {fp8_anchors.fit_step_stretch(p):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit-stack", action="store_true", help="also fit the 2024 stack's FP8 step stretch")
    args = parser.parse_args()
    search_rows()
    published_rows()
    if args.fit_stack:
        fit_stack()


if __name__ == "__main__":
    main()
