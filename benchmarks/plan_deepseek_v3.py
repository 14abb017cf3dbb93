"""DeepSeek-V3 on 2,048 H800s: GPU-hours per trillion tokens and where the search ranks the published layout.

    python benchmarks/plan_deepseek_v3.py

Published (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §3.1-3.3 and Table 1): 2,048 H800 GPUs, EP=64
over 8 nodes, PP=16 with DualPipe, ZeRO-1 data parallelism, no TP; FP8 with block-wise scaling; sequence 4K;
batch ramped to 15,360 sequences; 180K H800 GPU-hours per trillion tokens. All *predicted* (nothing here
was fitted on DeepSeek-V3). Last, the published layout under the ``deepseek-v3`` profile per recompute mode
and ZeRO stage (memory per GPU, step time, GPU-hours), and the activation bytes per token of each scheme.
"""

from __future__ import annotations

import numpy as np

from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.search import search
from twinloop.plan.train import evaluate_one, plan_train
from twinloop.plan.train_request import make_request, resolve

PUBLISHED_GPU_H_PER_T = 180_000.0
BASE = dict(
    model="deepseek-v3", gpu="h800-sxm", gpus=2048, precision="deepseek-v3-fp8", seq_len=4096, global_batch=15360
)


def gpu_h_per_t(step_s: float, gpus: int, tokens_step: float) -> float:
    return gpus * step_s / 3600.0 / tokens_step * 1e12


def main() -> None:
    tokens_step = 4096.0 * 15360
    for fw in ("megatron-core-2024", "deepseek-v3"):
        plan = plan_train(make_request(**BASE, framework=fw, tp=1, pp=16, ep=64, cp=1))
        g = gpu_h_per_t(plan.step_time_s, 2048, tokens_step)
        err = 100 * (g / PUBLISHED_GPU_H_PER_T - 1)
        print(
            f"{fw:20s} published layout (tp1 pp16 ep64): {g:9,.0f} GPU-h/T tokens ({err:+.1f} % vs 180K), "
            f"MFU {100 * plan.mfu:.1f} %, chosen zero {plan.config.zero} recompute {plan.config.recompute}"
        )
        ctx = resolve(make_request(**BASE, framework=fw))
        res = search(ctx, "throughput")
        c = res.ranked.configs
        step = res.ranked.time.step_s
        top_eps = [int(e) for e in c.ep[:10]]
        published = np.flatnonzero((c.tp == 1) & (c.pp == 16) & (c.ep == 64) & (c.cp == 1))
        rank = int(published[0]) + 1 if published.size else -1
        best_g = gpu_h_per_t(float(step[0]), 2048, tokens_step)
        share = float(step[0] / step[published[0]]) if published.size else float("nan")
        print(
            f"{'':20s} search: {res.fitting:,} fitting configs; best {best_g:,.0f} GPU-h/T; EP of the top 10 "
            f"{top_eps}; published layout ranks #{rank} ({100 * share:.0f} % of the best's throughput)"
        )
    published_layout_modes()


def published_layout_modes() -> None:
    """Memory and time of tp1 pp16 dp128 ep64 per recompute mode and ZeRO stage (deepseek-v3 profile)."""
    ctx = resolve(make_request(**BASE, framework="deepseek-v3"))
    w = ctx.workload
    mega = (w.act_repl_bytes + w.act_shard_bytes) / 1e3
    ds = (w.ds.stored_repl_bytes + w.ds.stored_shard_bytes) / 1e3
    print(f"\nactivation bytes per token per layer: Megatron (none / selective with flash) {mega:.1f} KB, "
          f"DeepSeek-V3 scheme {ds:.1f} KB; recomputed element-wise: norm outputs "
          f"{w.ds.recompute_repl_bytes / 1e3:.1f} KB, SwiGLU outputs {w.ds.recompute_shard_bytes / 1e3:.1f} KB; "
          f"recomputed GEMMs {w.ds.recompute_gemm_flops / 1e9:.2f} GFLOP per token "
          f"({100 * w.ds.recompute_gemm_flops / w.fwd_model_flops:.1f} % of the forward)")  # fmt: skip
    print(f"published layout, deepseek-v3 profile, GB per GPU of {w.hbm_capacity_bytes / 1e9:.0f}:")
    for rc in ("none", "selective", "full"):
        row = []
        for zero in (1, 2):
            cfg = ParallelConfig(tp=1, pp=16, dp=128, ep=64, cp=1, zero=zero, recompute=rc)
            a = evaluate_one(ctx, ConfigArrays.from_configs([cfg]))
            row.append(f"ZeRO-{zero} {float(a.memory.total[0]) / 1e9:6.1f} GB")
        step = float(a.time.step_s[0])
        print(f"  {rc:9s} {'  '.join(row)}  activations {float(a.memory.activations[0]) / 1e9:5.1f} GB  "
              f"compute {float(a.time.compute_s[0]):5.2f} s  ZeRO-2 step {step:5.2f} s  "
              f"{gpu_h_per_t(step, 2048, 4096.0 * 15360):9,.0f} GPU-h/T")  # fmt: skip


if __name__ == "__main__":
    main()
