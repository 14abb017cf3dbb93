"""Llama 3 405B at the published layout (tp8 pp16 cp1, 16M-token batch): memory and MFU per recompute mode and
interleave, to show what the memory model allows (issue 20 part 4 diagnostic); then the same schedule at both
scales whether or not it fits, with the step's bubble and data-parallel sync, to show why the 8K and 16K errors
have opposite signs.

    python benchmarks/plan_llama3_memory.py
"""

from __future__ import annotations

from twinloop.errors import InputError
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.train import evaluate_one, plan_train
from twinloop.plan.train_request import make_request, resolve

PUBLISHED_MFU = {8192: 0.43, 16384: 0.41}  # Dubey et al. 2024, Table 4


def main() -> None:
    for gpus, dp in ((8192, 64), (16384, 128)):
        for recompute, interleave in (("none", 1), ("none", 2), ("selective", 4), ("full", 4)):
            try:
                p = plan_train(
                    make_request(model="llama-3-405b", gpu="h100-sxm", gpus=gpus, tp=8, pp=16, dp=dp, cp=1,
                                 micro_batch=1, tokens_per_batch=16_777_216, recompute=recompute,
                                 interleave=interleave, sequence_parallel=True)
                )  # fmt: skip
                mem = p.memory_per_gpu_bytes["total"] / 1e9
                print(f"{gpus:6d} GPUs  {recompute:9s} v={interleave}  MFU {100 * p.mfu:5.1f} %  {mem:6.1f} GB")
            except InputError as exc:
                need = str(exc).split("needs ")[-1].split(" per GPU")[0]
                print(f"{gpus:6d} GPUs  {recompute:9s} v={interleave}  does not fit: needs {need} per GPU")
    print("\nSame schedule at both scales (no recompute, SP, ZeRO-2), fitting or not:")
    for interleave in (1, 2, 4):
        for gpus, dp in ((8192, 64), (16384, 128)):
            ctx = resolve(make_request(model="llama-3-405b", gpu="h100-sxm", gpus=gpus, tp=8, pp=16, dp=dp, cp=1,
                                       micro_batch=1, tokens_per_batch=16_777_216))  # fmt: skip
            cfg = ParallelConfig(tp=8, pp=16, dp=dp, cp=1, zero=2, recompute="none", sequence_parallel=True,
                                 micro_batch=1, interleave=interleave)  # fmt: skip
            a = evaluate_one(ctx, ConfigArrays.from_configs([cfg]))
            t, mfu = a.time, float(a.mfu[0])
            print(
                f"  v={interleave} {gpus:6d} GPUs  m={ctx.global_batch // dp:3d}  MFU {100 * mfu:5.1f} % "
                f"({100 * (mfu / PUBLISHED_MFU[gpus] - 1):+6.1f} % vs {100 * PUBLISHED_MFU[gpus]:.0f} %)  "
                f"bubble {100 * float(t.bubble_s[0] / t.step_s[0]):4.1f} % of {float(t.step_s[0]):5.2f} s  "
                f"DP sync {float(t.dp_sync_s[0]):.2f} s ({float(t.dp_exposed_s[0]):.2f} exposed)  "
                f"{float(a.memory.total[0]) / 1e9:6.1f} GB {'fits' if bool(a.fits[0]) else 'does not fit'}"
            )


if __name__ == "__main__":
    main()
