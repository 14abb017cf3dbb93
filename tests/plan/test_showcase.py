from collections.abc import Callable
from typing import Any

from twinloop.plan.showcase import showcase


def test_mla_moe_vs_dense_gqa_trade_offs() -> None:
    rows = showcase(cases=[("llama-3-70b", "h100-sxm", "bf16"), ("deepseek-v3", "h200-sxm", "fp8-mixed")])
    llama, dsv3 = rows
    # MLA: a much smaller KV cache per token; MoE: far fewer active than total parameters.
    assert dsv3.kv_cache_bytes_per_token < llama.kv_cache_bytes_per_token / 4
    assert dsv3.params_active < dsv3.params_total / 10 and llama.params_active == llama.params_total
    assert llama.serve["gpus"] == 8 and dsv3.serve["gpus"] == 8  # FP8 DeepSeek-V3 fits one 8x H200 node
    for r in rows:
        assert 0 < r.train["mfu"] < 1 and r.train["memory_per_gpu_bytes"] > 0
        assert r.serve["energy_per_token_j"] > 0 and r.serve["tpot_s"] > 0


def test_fp8_is_faster_and_cheaper_than_bf16() -> None:
    bf16, fp8 = showcase(cases=[("llama-3-70b", "h200-sxm", "bf16"), ("llama-3-70b", "h200-sxm", "fp8-mixed")])
    assert fp8.train["tokens_per_s"] > bf16.train["tokens_per_s"]
    assert fp8.serve["energy_per_token_j"] < bf16.serve["energy_per_token_j"]


def test_bf16_deepseek_on_h100_needs_several_nodes() -> None:
    (row,) = showcase(cases=[("deepseek-v3", "h100-sxm", "bf16")])
    assert row.serve["gpus"] * 80e9 > 671e9 * 2  # the smallest deployment that holds BF16 weights


def test_plan_compare_prints_the_showcase_as_json(cli_json: Callable[..., Any]) -> None:
    doc = cli_json("plan", "compare")
    assert len(doc["cases"]) == 8
    assert {c["model"] for c in doc["cases"]} == {"llama-3-70b", "deepseek-v3"}
    assert all({"train", "serve", "kv_cache_bytes_per_token"} <= set(c) for c in doc["cases"])


def test_plan_compare_rejects_tiny_cluster(cli: Callable[..., Any]) -> None:
    result = cli("plan", "compare", "--train-gpus", "2")
    assert result.exit_code == 2
