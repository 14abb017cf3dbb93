"""Llama 3 405B at the published layout (tp8 pp16 cp1, 16M-token batch): memory and MFU per recompute mode and
interleave, to show what the memory model allows (issue 20 part 4 diagnostic).

    python benchmarks/plan_llama3_memory.py
"""

from __future__ import annotations

from twinloop.errors import InputError
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request


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


if __name__ == "__main__":
    main()
