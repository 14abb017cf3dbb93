"""Serving under MoE routing: each router's routed slowest-rank decode/prefill step, TPOT and TTFT (p50/p99 over
the routing steps) beside the serving planner's static imbalance factor 1.0.

Cases: Mixtral 8x7B (BF16) on 8 H100 SXM, EP 8 (one node); DeepSeek-V3 (FP8 weights and KV) on 32 H100 SXM,
TP = EP = 32 (four nodes). Offline continuous batching with up to 1024 sequences; 32 routing steps with the
``plan moe`` stream (drifting topics, a hot-expert burst over steps 16-23 taking 20 % of the tokens).

Run: ``PYTHONPATH=src python benchmarks/moe_serving.py`` (about 2 min on a loaded 2-core machine; ``--quick``: 8
steps). One case from the CLI: ``twinloop plan serve --model deepseek-v3 --gpus 32 --tp 32 --ep 32
--weight-dtype fp8 --kv-dtype fp8 --max-seqs 1024 --router adaptive``.
"""

from __future__ import annotations

import sys
from typing import Any

from twinloop.model.routing import router_names
from twinloop.plan.serve import build_request, plan_serve

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("mixtral-8x7b (BF16) on 8 h100-sxm, TP 8, EP 8", dict(model="mixtral-8x7b", gpus=8, tp=8, ep=8), ["contiguous"]),
    (
        "deepseek-v3 (FP8) on 32 h100-sxm, TP 32, EP 32 (4 nodes)",
        dict(model="deepseek-v3", gpus=32, tp=32, ep=32, weight_dtype="fp8", kv_dtype="fp8"),
        ["contiguous", "affinity"],
    ),
]


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def main(argv: list[str]) -> None:
    steps = 8 if "--quick" in argv else 32
    for title, cfg, placements in CASES:
        rows: list[str] = []
        static: dict[str, Any] = {}
        for placement in placements:
            for router in router_names():
                req = build_request(**cfg, max_seqs=1024, router=router, placement=placement, routing_steps=steps)
                plan = plan_serve(req)
                r = plan.moe_routing
                assert r is not None
                static = r["static"]
                ro, d = r["routed"], r["decode"]
                rows.append(
                    f"| {router} | {placement} | {d['load_factor_max']['p99']:.2f} | {100 * d['dropped_share']:.1f} | "
                    f"{d['quality']:.2f} | {_ms(ro['decode_step_s']['p50'])} / {_ms(ro['decode_step_s']['p99'])} | "
                    f"{_ms(ro['tpot_s']['p50'])} / {_ms(ro['tpot_s']['p99'])} | "
                    f"{_ms(ro['prefill_step_s']['p99'])} | {_ms(ro['ttft_s']['p99'])} | "
                    f"{d['a2a_inter_bytes_slowest_rank']['p99'] / 1e6:.2f} |"
                )
        print(f"\n#### {title}, decode batch {plan.decode_batch_per_replica:.0f}, {steps} routing steps\n")
        print(
            "| router | placement | decode hottest-rank load p99 | dropped % | quality | decode step ms p50 / p99 | "
            "TPOT ms p50 / p99 | prefill step ms p99 | TTFT ms p99 | network a2a MB p99 |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(
            f"| static factor 1.0 | — | 1.00 | 0 | 1 | {_ms(static['decode_step_s'])} | {_ms(static['tpot_s'])} | "
            f"{_ms(static['prefill_step_s'])} | {_ms(static['ttft_s'])} | — |"
        )
        print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
