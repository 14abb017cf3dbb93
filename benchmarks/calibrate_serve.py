"""Compare `plan serve` throughput predictions with NVIDIA's published TensorRT-LLM figures.

Source: TensorRT-LLM docs/source/performance/perf-overview.md (NVIDIA/TensorRT-LLM, commit 00f37686aa85),
"Total Output Throughput (tokens/sec)" with trtllm-bench throughput (offline: every request queued at once),
synthetic fixed ISL/OSL, FP8 ModelOpt checkpoints, H100 SXM 80GB (DGX H100). The planner runs the same case
offline with FP8 weights and KV, chunked prefill with TensorRT-LLM's default 8192-token budget, and a batch cap
of 2048 sequences (the trtllm-bench CUDA-graph batch list goes to 8192; memory decides first).

Run: ``python benchmarks/calibrate_serve.py`` (add ``--speed`` to time planning over the full Azure traces).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from twinloop.plan.serve import build_request, plan_serve

DATA_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"

SOURCE = "TensorRT-LLM perf-overview.md @ 00f37686aa85 (H100 SXM, FP8, trtllm-bench throughput)"

# (model in our catalog, published model, tp, isl, osl, published output tokens/s for the whole TP group)
CASES: list[tuple[str, str, int, int, int, float]] = [
    ("llama-3-8b", "Llama 3.1 8B", 1, 128, 2048, 22_714),
    ("llama-3-8b", "Llama 3.1 8B", 1, 1000, 1000, 15_220),
    ("llama-3-8b", "Llama 3.1 8B", 1, 2048, 128, 3_450),
    ("llama-3-8b", "Llama 3.1 8B", 1, 2048, 2048, 9_305),
    ("llama-3-70b", "Llama 3.3 70B", 2, 128, 2048, 6_651),
    ("llama-3-70b", "Llama 3.3 70B", 2, 1000, 1000, 4_205),
    ("llama-3-70b", "Llama 3.3 70B", 2, 2048, 128, 762),
    ("llama-3-70b", "Llama 3.3 70B", 2, 2048, 2048, 3_082),
    ("llama-3-70b", "Llama 3.3 70B", 2, 5000, 500, 898),
    ("llama-3-405b", "Llama 3.1 405B", 8, 1000, 1000, 2_919),
    ("llama-3-405b", "Llama 3.1 405B", 8, 2048, 128, 453),
]


def predict(model: str, tp: int, isl: int, osl: int, batching: str = "chunked", kv_dtype: str = "fp8") -> float:
    """Predicted offline output tokens/s for one case."""
    req = build_request(
        model=model, gpu="h100-sxm", gpus=tp, tp=tp, weight_dtype="fp8", kv_dtype=kv_dtype, batching=batching,
        prompt_tokens=isl, output_tokens=osl, max_seqs=2048, chunk_tokens=8192,
    )  # fmt: skip
    return plan_serve(req).throughput_tokens_per_s


def speed() -> None:
    """Time `plan_serve` over the full Azure traces (library call, best and median of 5)."""
    print("Planning over the full Azure LLM inference traces (Microsoft Azure, CC BY 4.0), llama-3-70b, 16 x h100-sxm")
    for batching in ("continuous", "chunked", "disaggregated"):
        for name in ("conv", "code"):
            path = DATA_DIR / f"azure_llm_inference_{name}_2023.csv"
            if not path.exists():
                print(f"{path}: not present, skipped")
                continue
            req = build_request(model="llama-3-70b", gpus=16, tp=8, batching=batching, trace=str(path))
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                plan = plan_serve(req)
                times.append(time.perf_counter() - t0)
            times.sort()
            print(
                f"{batching:13s} {name}: {plan.workload['n_requests']} requests, best {times[0] * 1e3:.0f} ms, "
                f"median {times[2] * 1e3:.0f} ms"
            )


def main() -> int:
    if "--speed" in sys.argv[1:]:
        speed()
        return 0
    print(SOURCE)
    head = ("model", "tp", "ISL/OSL", "published", "chunked", "err", "continuous", "err")
    print("{:16s} {:>2s} {:>10s} {:>10s} {:>9s} {:>6s} {:>10s} {:>6s}".format(*head))
    errs: list[float] = []
    errs_cont: list[float] = []
    for ours, name, tp, isl, osl, published in CASES:
        chunked = predict(ours, tp, isl, osl, "chunked")
        cont = predict(ours, tp, isl, osl, "continuous")
        e1, e2 = chunked / published - 1, cont / published - 1
        errs.append(abs(e1))
        errs_cont.append(abs(e2))
        lengths = f"{isl}/{osl}"
        print(f"{name:16s} {tp:2d} {lengths:>10s} {published:10,.0f} {chunked:9,.0f} {e1:+6.0%} ", end="")
        print(f"{cont:10,.0f} {e2:+6.0%}")
    for label, e in (("chunked", sorted(errs)), ("continuous", sorted(errs_cont))):
        print(f"{label}: median |error| {e[len(e) // 2]:.0%}, worst {e[-1]:.0%} over {len(e)} cases")
    bf16 = sorted(
        (predict(ours, tp, isl, osl, "continuous", "bf16") / pub - 1 for ours, _, tp, isl, osl, pub in CASES),
        key=abs,
    )
    print(f"sensitivity, continuous with a BF16 KV cache: median |error| {abs(bf16[len(bf16) // 2]):.0%}, ", end="")
    print(f"worst {bf16[-1]:+.0%}")
    print()
    print("Per-phase power, H100 SXM (TDP 700 W), BF16, 4096-token prompts, 256 output tokens, offline continuous:")
    for model, tp in (("llama-3-8b", 1), ("llama-3-70b", 8)):
        p = plan_serve(build_request(model=model, gpus=tp, tp=tp, prompt_tokens=4096, output_tokens=256))
        print(
            f"{model} TP{tp}: prefill {p.prefill.power_w:.0f} W ({p.prefill.power_w / 700:.0%} of TDP), "
            f"decode {p.decode.power_w:.0f} W ({p.decode.power_w / 700:.0%}) at batch {p.decode_batch_per_replica:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
