"""Print the model-layer calibration tables: parameters predicted vs published, compute, KV cache, routing.

Every number in docs/sections/calibration-model.md comes from this script:

    .venv/bin/python benchmarks/model_counts.py
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from twinloop.model.arch import ModelArch, catalog_model_names, load_config_file, load_model
from twinloop.model.flops import forward_flops_per_token, model_flops_per_token, training_flops_per_token
from twinloop.model.kv_cache import kv_cache_bytes_per_token
from twinloop.model.moe import route_tokens
from twinloop.model.params import param_counts

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "model" / "fixtures"
HF_CONFIGS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf_configs"

# (field of ParamCounts, published figure, where it is published)
PUBLISHED: dict[str, list[tuple[str, float, str]]] = {
    "llama-3-8b": [("total", 8.03e9, "Hugging Face model page")],
    "llama-3-70b": [("total", 70.55e9, "Hugging Face model page")],
    "llama-3-405b": [("total", 405.85e9, "Hugging Face model page")],
    "mixtral-8x7b": [("total", 46.7e9, "Mixtral paper"), ("active", 12.9e9, "Mixtral paper")],
    "deepseek-v3": [
        ("total", 671e9, "DeepSeek-V3 report"),
        ("active_no_embedding", 37e9, "DeepSeek-V3 report (2 digits)"),
        ("mtp_stored", 14e9, "DeepSeek-V3 report (2 digits)"),
    ],
    "gpt-22b": [("total", 22e9, "Korthikanti et al. model name")],
    "gpt-175b": [("total", 175e9, "GPT-3 paper")],
    "gpt-530b": [("total", 529.6e9, "Narayanan et al. 2021, Table 1")],
    "gpt-1t": [("total", 1008.0e9, "Narayanan et al. 2021, Table 1")],
    "gpt2": [("total", 124_439_808, "Hugging Face")],
    "pythia-160m": [("total", 162_322_944, "Pythia paper")],
    "llama-2-7b": [("total", 6_738_415_616, "Hugging Face")],
    "mistral-7b": [("total", 7_241_732_096, "Hugging Face")],
    "qwen2-0.5b": [("total", 494_032_768, "Hugging Face")],
    "qwen1.5-moe-a2.7b": [("total", 14.3e9, "Qwen model card"), ("active", 2.7e9, "Qwen model card")],
    "qwen3-30b-a3b": [("total", 30.5e9, "Qwen model card"), ("active", 3.3e9, "Qwen model card")],
    "deepseek-v2-lite": [
        ("total", 15.7e9, "DeepSeek-V2 model card"),
        ("active_no_embedding", 2.4e9, "DeepSeek-V2 model card"),
    ],
}


def _arch(name: str) -> ModelArch:
    return load_model(name) if name in catalog_model_names() else load_config_file(FIXTURES / f"{name}.json")


def params_table() -> None:
    print("| model | count | predicted | published | error | source |")
    print("|---|---|---:|---:|---:|---|")
    for name, rows in PUBLISHED.items():
        counts = param_counts(_arch(name))
        for field, published, source in rows:
            value = getattr(counts, field)
            err = 100 * (value - published) / published
            print(f"| {name} | {field} | {value:,} | {published:,.0f} | {err:+.2f} % | {source} |")


def families_table() -> None:
    """Real configs of the families added for issue 15 against tests/fixtures/hf_configs/published.json."""
    rows = json.loads((HF_CONFIGS / "published.json").read_text())["rows"]
    print("| config | count | predicted | published | printed as | error | source |")
    print("|---|---|---:|---:|---|---:|---|")
    for r in rows:
        p = param_counts(load_config_file(HF_CONFIGS / f"{r['name']}.json"))
        field = r["field"]
        value = (
            p.total - p.embedding - p.lm_head - p.position_embedding if field == "non_embedding" else getattr(p, field)
        )
        printed = {"exact": "exact", "nominal": "a name"}.get(r["kind"], f"to {r.get('unit', 0) / 1e9:g}B")
        err = 100 * (value - r["published"]) / r["published"]
        print(
            f"| {r['name']} | {field} | {value:,} | {r['published']:,.0f} | {printed} | {err:+.2f} % | {r['source']} |"
        )


def sliding_window_checks() -> None:
    g2 = load_config_file(HF_CONFIGS / "gemma-2-9b.json")
    scout = load_config_file(HF_CONFIGS / "llama-4-scout-17b-16e.json")
    print("KV cache per token (bf16) with sliding-window / chunked layers, by sequence length:")
    print("| model | upper bound (all layers global) | 8k | 32k | 128k |")
    print("|---|---:|---:|---:|---:|")
    for name, arch in (("gemma-2-9b", g2), ("llama-4-scout", scout)):
        cells = " | ".join(f"{kv_cache_bytes_per_token(arch, context_len=c):,.0f}" for c in (8192, 32768, 131072))
        print(f"| {name} | {kv_cache_bytes_per_token(arch):,.0f} | {cells} |")


def catalog_table() -> None:
    print("| model | total | active | active w/o embedding | MTP (unique) | MTP as stored | KV bytes/token (bf16) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in catalog_model_names():
        arch = load_model(name)
        p = param_counts(arch)
        print(
            f"| {name} | {p.total / 1e9:.3f}B | {p.active / 1e9:.3f}B | {p.active_no_embedding / 1e9:.3f}B "
            f"| {p.mtp / 1e9:.3f}B | {p.mtp_stored / 1e9:.3f}B | {kv_cache_bytes_per_token(arch):,.0f} |"
        )


def compute_checks() -> None:
    arch = load_model("llama-3-405b")
    tokens = 15.6e12
    fl = training_flops_per_token(arch, 8192)
    matmul = (fl.total - fl.attn_core) * tokens
    full = model_flops_per_token(arch, 8192) * tokens
    print("Llama 3 405B, 15.6T tokens, sequence 8192 (published 3.8e25 FLOPs):")
    print(f"  matmul FLOPs only (6·N·D convention): {matmul:.4e}  ({100 * (matmul / 3.8e25 - 1):+.2f} %)")
    print(f"  plus causal attention core (ctx 4096):  {full:.4e}  ({100 * (full / 3.8e25 - 1):+.2f} %)")
    print("Narayanan et al. model / hardware (full recompute) FLOPs, s = 2048, V = 51200, ratio ours/formula:")
    for name in ("gpt-22b", "gpt-175b", "gpt-530b", "gpt-1t"):
        g = load_model(name)
        s, v, n_layers, h = 2048, g.vocab, g.n_layers, g.hidden
        model = 72 * s * n_layers * h**2 * (1 + s / (6 * h) + v / (12 * n_layers * h)) / s
        hw = 96 * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h)) / s
        ours = training_flops_per_token(g, s, causal=False).total
        ours_hw = training_flops_per_token(g, s, "full", causal=False).total
        print(f"  {name}: model {ours / model:.6f}, hardware {ours_hw / hw:.6f}")


def kv_checks() -> None:
    l70, v3 = load_model("llama-3-70b"), load_model("deepseek-v3")
    print(f"KV cache llama-3-70b bf16: {kv_cache_bytes_per_token(l70):,.0f} B/token (2·80·8·128·2 = 327,680)")
    print(f"KV cache deepseek-v3 bf16: {kv_cache_bytes_per_token(v3):,.0f} B/token (61·576·2 = 70,272)")
    mha = dataclasses.replace(v3, attention="mha")
    cut = 1 - kv_cache_bytes_per_token(v3) / kv_cache_bytes_per_token(mha)
    print(f"  vs the same model with MHA (128 heads, K 192 + V 128): {kv_cache_bytes_per_token(mha):,.0f} B/token,")
    print(f"  MLA cuts {100 * cut:.1f} % (DeepSeek-V2 reports 93.3 % against DeepSeek 67B, a different model)")
    f = forward_flops_per_token(v3, 4096)
    print(f"DeepSeek-V3 forward GFLOP/token at ctx 4096: {f.total / 1e9:.2f} (attn core {f.attn_core / 1e9:.2f})")


def routing_checks() -> None:
    v3 = load_model("deepseek-v3")
    print("DeepSeek-V3 routing, 16384 tokens over EP 64 (8 nodes of 8), seed 0:")
    print("| zipf_s | node limit | capacity | imbalance | dropped | remote ranks/token | remote nodes/token | time |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for zipf_s, limit, cf in ((0.0, 0, None), (0.0, 4, None), (0.5, 4, None), (1.0, 4, None), (1.0, 4, 1.25)):
        start = time.perf_counter()
        r = route_tokens(v3, 16384, 64, zipf_s=zipf_s, node_limit=limit, capacity_factor=cf, seed=0)
        dt = time.perf_counter() - start
        print(
            f"| {zipf_s} | {limit or '—'} | {cf or '—'} | {r.imbalance:.3f} | {r.dropped} "
            f"| {r.remote_ranks_per_token:.2f} | {r.remote_nodes_per_token:.2f} | {dt * 1e3:.0f} ms |"
        )


def main() -> None:
    params_table()
    print()
    families_table()
    print()
    sliding_window_checks()
    print()
    catalog_table()
    print()
    compute_checks()
    print()
    kv_checks()
    print()
    routing_checks()


if __name__ == "__main__":
    main()
