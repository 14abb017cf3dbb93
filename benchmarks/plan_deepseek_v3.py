"""DeepSeek-V3 on 2,048 H800s: GPU-hours per trillion tokens and where the search ranks the published layout.

    python benchmarks/plan_deepseek_v3.py

Published (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §3.1-3.3 and Table 1): 2,048 H800 GPUs, EP=64
over 8 nodes, PP=16 with DualPipe, ZeRO-1 data parallelism, no TP; FP8 with block-wise scaling; sequence 4K;
batch ramped to 15,360 sequences; 180K H800 GPU-hours per trillion tokens. All *predicted* (nothing here
was fitted on DeepSeek-V3).
"""

from __future__ import annotations

import numpy as np

from twinloop.plan.search import search
from twinloop.plan.train import plan_train
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
            f"MFU {100 * plan.mfu:.1f} %, chosen zero {plan.config['zero']} recompute {plan.config['recompute']}"
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


if __name__ == "__main__":
    main()
