"""The published FP8 H100 cells of ``catalog/fp8_training.yaml`` at their layouts, using only the planner's public API.

    python benchmarks/plan_fp8_layouts.py [--profile NAME] [--catalog PATH]

Prints tokens/s per GPU (BF16 and FP8 at the published layout) and the FP8 error, and the torchtitan FP8/BF16
ratios. It imports nothing newer than ``plan_train``/``make_request``, so it also runs against an older tree
(how the "main (before)" column of docs/sections/calibration-plan-train.md was made: a worktree of main at
1ca56fe, ``PYTHONPATH=<that tree>/src python benchmarks/plan_fp8_layouts.py --profile megatron-core-2024
--catalog src/twinloop/catalog/fp8_training.yaml``; main had only that profile). ``--profile`` forces one
framework profile for every cell; by default each cell uses the profile the catalog names.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request

DEFAULT_CATALOG = Path(__file__).resolve().parents[1] / "src" / "twinloop" / "catalog" / "fp8_training.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=None, help="framework profile for every cell (default: the catalog's)")
    ap.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    args = ap.parse_args()
    raw = yaml.safe_load(args.catalog.read_text())
    for p in raw["points"]:
        lay = p["layout"]
        dp = p["gpus"] // (lay["tp"] * lay["pp"] * lay["cp"])
        rates = []
        for precision in ("bf16", "fp8-mixed"):
            req = make_request(
                model=p["model"], gpu="h100-sxm", gpus=p["gpus"], precision=precision,
                framework=args.profile or p["framework"], seq_len=p["seq_len"], global_batch=p["global_batch"],
                micro_batch=p["micro_batch"], tp=lay["tp"], pp=lay["pp"], cp=lay["cp"], dp=dp, ep=1,
                zero=lay["zero"], interleave=lay["interleave"], recompute="none", sequence_parallel=lay["tp"] > 1,
            )  # fmt: skip
            rates.append(plan_train(req).tokens_per_s / p["gpus"])
        err = 100 * (rates[1] / p["tokens_per_s_gpu"] - 1)
        print(f"{p['id']:32s} {p['role']:9s} published {p['tokens_per_s_gpu']:7,.0f}  BF16 {rates[0]:7,.0f}  "
              f"FP8 {rates[1]:7,.0f}  {err:+.1f} %")  # fmt: skip
    for r in raw["ratios"]:
        s = dict(r["setting"])
        if args.profile:
            s["framework"] = args.profile
        bf16, fp8 = (
            plan_train(make_request(model=r["model"], gpu="h100-sxm", gpus=r["gpus"], precision=pr, **s)).tokens_per_s
            for pr in ("bf16", "fp8-mixed")
        )
        pub = r["fp8_tokens_per_s_gpu"] / r["bf16_tokens_per_s_gpu"]
        print(f"{r['id']:32s} {r['role']:9s} published {pub:.3f}x  planner {fp8 / bf16:.3f}x  "
              f"{100 * (fp8 / bf16 / pub - 1):+.1f} %")  # fmt: skip


if __name__ == "__main__":
    main()
