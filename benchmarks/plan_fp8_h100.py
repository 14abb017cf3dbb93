"""FP8 vs BF16 training on H100 (predicted, not fitted): the planner's throughput and clock for both.

    python benchmarks/plan_fp8_h100.py

Llama-3-8B on 8 H100 and Llama-3-70B on 64 H100 at the 700 W limit, default framework profile, the planner's
search choosing the layout for each precision. Prints TFLOP/s per GPU (model FLOPs), the compute-phase clock
and the FP8/BF16 speedup. For scale: the measured FP8/BF16 GEMM ratio at 8192³ and 700 W is 1.81
(shared/data/h100/precision_bf16_fp8.json); whole-step speedups are smaller (attention, element-wise work,
communication and casts do not speed up).
"""

from __future__ import annotations

from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request

CASES = (("llama-3-8b", 8, 128), ("llama-3-70b", 64, 512))


def main() -> None:
    print(f"{'model':12s} {'GPUs':>5s} {'precision':10s} {'TFLOP/s':>8s} {'MFU':>6s} {'clock MHz':>9s}  layout")
    for model, gpus, batch in CASES:
        rates = {}
        for precision in ("bf16", "fp8-mixed"):
            plan = plan_train(
                make_request(model=model, gpu="h100-sxm", gpus=gpus, precision=precision, seq_len=8192,
                             global_batch=batch)
            )  # fmt: skip
            clock = next(p.clock_mhz for p in plan.phases.phases if p.name == "compute")
            rates[precision] = plan.tflops_per_gpu
            c = plan.config
            layout = f"tp{c.get('tp')} pp{c.get('pp')} dp{c.get('dp')} recompute {c.get('recompute')}"
            print(
                f"{model:12s} {gpus:5d} {precision:10s} {plan.tflops_per_gpu:8.1f} {100 * plan.mfu:5.1f}% "
                f"{clock:9.0f}  {layout}"
            )
        print(f"{'':12s} {'':5s} FP8/BF16 speedup {rates['fp8-mixed'] / rates['bf16']:.2f}x")


if __name__ == "__main__":
    main()
