"""`twinloop gpus` and `twinloop models`: list the catalogs."""

from __future__ import annotations

from typing import Any

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stdout
from twinloop.cli.tables import Col, print_table


@app.command()
def gpus(json_out: bool = JSON_OPTION) -> None:
    """List the GPU catalog: power, memory, bandwidth, TFLOP/s, clocks and thermal limits."""
    from twinloop.hardware.gpu import gpu_catalog

    catalog = gpu_catalog()
    if json_out:
        print_json({"gpus": list(catalog.values())})
        return
    cols = [Col("name (--gpu)", "left"), Col("TDP\nW"), Col("idle\nW"), Col("HBM\nGB"), Col("HBM\nTB/s"),
            Col("BF16"), Col("FP8"), Col("SM clock\nMHz"), Col("slowdown\n°C")]  # fmt: skip
    rows = [
        [
            s.name,
            f"{s.tdp_w:.0f}",
            f"{s.idle_power_w:.0f}",
            f"{s.hbm_bytes / 1e9:.0f}",
            f"{s.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
            f"{s.tflops('bf16'):.0f}",
            f"{s.dense_tflops['fp8']:.0f}" if "fp8" in s.dense_tflops else "—",
            f"{s.sm_clock_min_mhz:.0f}-{s.sm_clock_max_mhz:.0f}",
            f"{s.slowdown_temp_c:.0f}",
        ]
        for s in catalog.values()
    ]
    print_table(stdout, "GPU catalog (dense TFLOP/s, no sparsity)", cols, rows)


def _model_row(name: str) -> dict[str, Any]:
    from twinloop.model.arch import load_model
    from twinloop.model.kv_cache import kv_cache_bytes_per_token
    from twinloop.model.params import param_counts

    arch = load_model(name)
    counts = param_counts(arch)
    return {
        "name": name,
        "model_type": arch.model_type,
        "n_layers": arch.n_layers,
        "hidden": arch.hidden,
        "attention": arch.attention,
        "n_heads": arch.n_heads,
        "n_kv_heads": arch.n_kv_heads,
        "vocab": arch.vocab,
        "n_routed_experts": arch.n_routed_experts,
        "n_shared_experts": arch.n_shared_experts,
        "experts_per_token": arch.experts_per_token,
        "params_total": counts.total,
        "params_active": counts.active,
        "params_active_no_embedding": counts.active_no_embedding,
        "params_mtp": counts.mtp,
        "params_mtp_stored": counts.mtp_stored,
        "kv_cache_bytes_per_token": kv_cache_bytes_per_token(arch, "bf16"),
    }


@app.command()
def models(json_out: bool = JSON_OPTION) -> None:
    """List the model catalog: architecture, parameters (total/active) and KV-cache bytes per token."""
    from twinloop.model.arch import catalog_model_names

    rows = guarded(lambda: [_model_row(name) for name in catalog_model_names()])
    if json_out:
        print_json({"models": rows})
        return
    cols = [Col("name (--model)", "left"), Col("type", "left"), Col("layers"), Col("hidden"),
            Col("attention\nheads/kv", "left"), Col("experts\nrouted+shared/k", "left"),
            Col("params B\ntotal"), Col("params B\nactive"), Col("KV cache\nB/token")]  # fmt: skip
    table = []
    for r in rows:
        experts = f"{r['n_routed_experts']}+{r['n_shared_experts']}/k{r['experts_per_token']}"
        table.append(
            [
                str(r["name"]),
                str(r["model_type"]),
                str(r["n_layers"]),
                str(r["hidden"]),
                f"{r['attention']} {r['n_heads']}/{r['n_kv_heads']}"
                if r["attention"] != "mla"
                else f"mla {r['n_heads']}",
                experts if r["n_routed_experts"] else "—",
                f"{r['params_total'] / 1e9:.2f}",
                f"{r['params_active'] / 1e9:.2f}",
                f"{r['kv_cache_bytes_per_token']:,.0f}",
            ]
        )
    print_table(stdout, "Model catalog (parameters in billions; KV cache bytes per token in BF16)", cols, table)
