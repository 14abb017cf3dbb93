"""Real Hugging Face configs of every family: parameter totals against the published figures, and the
features that change parameters, FLOPs and the KV cache (sources: tests/fixtures/hf_configs/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch, from_hf_config, load_config_file, load_model
from twinloop.model.flops import forward_flops_per_token
from twinloop.model.kv_cache import kv_cache_bytes_per_token, kv_cache_elements_per_token
from twinloop.model.params import ParamCounts, param_counts

HF = Path(__file__).parents[1] / "fixtures" / "hf_configs"


def hf(name: str) -> ModelArch:
    return load_config_file(HF / f"{name}.json")


def non_embedding(p: ParamCounts) -> int:
    return p.total - p.embedding - p.position_embedding - p.lm_head


def _figure(p: ParamCounts, field: str) -> int:
    return non_embedding(p) if field == "non_embedding" else int(getattr(p, field))


PUBLISHED = json.loads((HF / "published.json").read_text())["rows"]


def _rows(kind: str) -> list[Any]:
    return [pytest.param(r, id=f"{r['name']}-{r['field']}") for r in PUBLISHED if r["kind"] == kind]


@pytest.mark.parametrize("row", _rows("exact"))
def test_exact_published_counts(row: dict[str, Any]) -> None:
    assert _figure(param_counts(hf(row["name"])), row["field"]) == row["published"]


@pytest.mark.parametrize("row", _rows("rounded"))
def test_rounded_published_counts(row: dict[str, Any]) -> None:
    # publishers round or truncate to the digits they print (Qwen3-30B-A3B: 3.35B printed "3.3B")
    value = _figure(param_counts(hf(row["name"])), row["field"])
    published, unit = row["published"], row["unit"]
    assert published - unit / 2 <= value < published + unit, f"{value:,}"


@pytest.mark.parametrize("row", _rows("nominal"))
def test_nominal_sizes_within_stated_gap(row: dict[str, Any]) -> None:
    total = _figure(param_counts(hf(row["name"])), row["field"])
    assert total / row["published"] - 1 == pytest.approx(row["gap"], abs=0.001)


def test_every_config_has_a_published_figure() -> None:
    configs = {p.stem for p in HF.glob("*.json")} - {"published", "mamba-130m-hf", "jamba-v0.1"}
    assert configs == {r["name"] for r in PUBLISHED}
    assert len(_rows("exact")) + len(_rows("rounded")) + len(_rows("nominal")) == len(PUBLISHED)


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the computed column of tests/fixtures/hf_configs/README.md (run with -s)."""
    rows = []
    for path in sorted(HF.glob("*.json")):
        if path.stem == "published":
            continue
        try:
            p = param_counts(load_config_file(path))
        except InputError:
            continue
        rows.append(f"{path.stem:28s} total {p.total:>18,} active {p.active:>16,} non-emb {non_embedding(p):>18,}")
    print("\n".join(rows))
    assert len(rows) == 29


# --- features that change parameters ------------------------------------------------------------------


def test_falcon_7b_by_hand() -> None:
    a = hf("falcon-7b")  # multi-query, fused QKV of (71 + 2) heads of 64, one LayerNorm per parallel block
    assert (a.n_kv_heads, a.norms_per_layer, a.parallel_block, a.tied_embeddings) == (1, 1, True, True)
    per_layer = 4544 * 73 * 64 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    assert param_counts(a).total == 32 * per_layer + 65024 * 4544 + 2 * 4544
    assert hf("falcon-40b").norms_per_layer == 2  # new_decoder_architecture: ln_attn + ln_mlp


def test_phi35_moe_biases_and_layernorm() -> None:
    a = hf("phi-3.5-moe-instruct")
    p = param_counts(a)
    assert a.norm == "layernorm" and a.lm_head_bias and a.qkv_bias and a.o_bias
    assert p.lm_head == 32064 * 4096 + 32064
    attention = 2 * (4096 * 4096 + 4096) + 2 * (4096 * 1024 + 1024)
    assert p.attention == 32 * attention


def test_qk_norm_widths() -> None:
    olmo = param_counts(hf("olmo-2-1124-7b"))  # post-norms only + q_norm/k_norm over all heads
    assert olmo.norms == 32 * (2 * 4096 + 4096 + 4096) + 4096
    plus = param_counts(hf("c4ai-command-r-plus"))  # one bias-free LayerNorm + per-head q/k norm weights
    assert plus.norms == 64 * (12288 + 96 * 128 + 8 * 128) + 12288
    g3 = param_counts(hf("gemma-3-1b-it"))  # 4 norms a block + one head_dim vector each for q and k
    assert g3.norms == 26 * (4 * 1152 + 2 * 256) + 1152


def test_gemma_tied_and_softcap_without_parameters() -> None:
    a = hf("gemma-2-9b")
    p = param_counts(a)
    assert a.tied_embeddings and p.lm_head == 0
    assert (a.attn_logit_softcap, a.final_logit_softcap) == (50.0, 30.0)
    no_cap = json.loads((HF / "gemma-2-9b.json").read_text())
    no_cap.pop("attn_logit_softcapping")
    no_cap.pop("final_logit_softcapping")
    assert param_counts(from_hf_config(no_cap, "x")).total == p.total


def test_nested_text_config_with_class_defaults() -> None:
    a = hf("gemma-3-4b-it")  # the published text_config lists only what differs from Gemma3TextConfig
    assert a.text_only_of == "gemma3" and a.model_type == "gemma3_text"
    assert (a.n_heads, a.n_kv_heads, a.head_dim, a.vocab, a.sliding_window) == (8, 4, 256, 262_208, 1024)
    assert a.n_sliding_layers == 34 - 34 // 6 and a.qk_norm and a.tied_embeddings


def test_wrapper_without_inner_model_type() -> None:
    base = json.loads((Path(__file__).parent / "fixtures" / "llama-2-7b.json").read_text())
    base.pop("model_type")
    wrapped = {"model_type": "llava", "text_config": base, "vision_config": {"model_type": "clip_vision_model"}}
    a = from_hf_config(wrapped, "llava")
    assert a.text_only_of == "llava" and param_counts(a).total == 6_738_415_616


def test_llama4_interleaved_moe_and_shared_expert() -> None:
    mav = hf("llama-4-maverick-17b-128e")
    assert (mav.n_moe_layers, mav.n_dense_layers, mav.n_shared_experts) == (24, 24, 1)
    assert mav.ffn_hidden == 16384 and mav.moe_ffn_hidden == mav.shared_ffn_hidden == 8192
    scout = hf("llama-4-scout-17b-16e")
    assert (scout.n_moe_layers, scout.n_dense_layers, scout.n_sliding_layers) == (48, 0, 36)
    p = param_counts(scout)
    assert p.shared_experts == 48 * 3 * 5120 * 8192 and p.router == 48 * 5120 * 16


@pytest.mark.parametrize("name", ["mamba-130m-hf", "jamba-v0.1"])
def test_state_space_models_refused_in_one_line(name: str) -> None:
    with pytest.raises(InputError) as exc:
        hf(name)
    text = str(exc.value)
    assert "\n" not in text and "model_type" in text and "state-space" in text and f"{name}.json" in text


def test_text_config_must_be_an_object() -> None:
    with pytest.raises(InputError, match="text_config"):
        from_hf_config({"model_type": "gemma3", "text_config": [1, 2]}, "x")


# --- features that change FLOPs and the KV cache ---------------------------------------------------------


def test_sliding_window_bounds_kv_cache() -> None:
    a = hf("gemma-2-9b")  # 21 of 42 layers keep 4096 tokens; 8 KV heads of 256 (K and V)
    per_layer = 8 * 2 * 256
    assert kv_cache_elements_per_token(a) == 42 * per_layer  # no context: every layer counted (upper bound)
    assert kv_cache_elements_per_token(a, context_len=4096) == 42 * per_layer
    assert kv_cache_elements_per_token(a, context_len=8192) == (21 + 21 * 0.5) * per_layer
    short, long = (kv_cache_bytes_per_token(a, context_len=c) for c in (8192, 131072))
    assert long < short  # per token, the sliding layers' share falls with context
    mistral = load_model(str(Path(__file__).parent / "fixtures" / "mistral-7b.json"))
    if mistral.sliding_window:
        assert kv_cache_elements_per_token(mistral, context_len=2 * mistral.sliding_window) == pytest.approx(
            kv_cache_elements_per_token(mistral) / 2
        )


def test_sliding_window_bounds_attention_flops() -> None:
    a = hf("gemma-2-9b")
    core = forward_flops_per_token(a, 8192).attn_core
    assert core == 2.0 * (21 * 8192 + 21 * 4096) * 16 * (256 + 256)
    dense = forward_flops_per_token(a, 2048).attn_core  # below the window nothing changes
    assert dense == 2.0 * 42 * 2048 * 16 * 512


def test_llama4_chunked_attention_kv_cache() -> None:
    a = hf("llama-4-scout-17b-16e")  # 36 chunked layers keep 8192 tokens, 12 global (NoPE) layers keep all
    per_layer = 8 * 2 * 128
    assert kv_cache_elements_per_token(a, context_len=81920) == pytest.approx((12 + 36 * 0.1) * per_layer)


def test_catalog_has_the_new_families() -> None:
    types: dict[str, Any] = {name: load_model(name).model_type for name in (
        "gemma-2-9b", "gemma-3-27b", "phi-3.5-moe", "llama-4-scout", "llama-4-maverick", "falcon-40b",
        "falcon-180b", "olmo-2-13b", "granite-3-8b", "command-r-plus", "qwen3-235b-a22b", "qwen3-30b-a3b",
        "mixtral-8x22b", "deepseek-v2", "glm-4.5", "glm-4.5-air",
    )}  # fmt: skip
    assert types["llama-4-scout"] == "llama4_text" and types["command-r-plus"] == "cohere"
    for name in types:
        assert param_counts(load_model(name)).total > 1e9


def test_glm45_attention_router_and_mtp_by_hand() -> None:
    a = hf("glm-4.5")  # 96 query heads of 128 over a 5120 model: Q/K/V biased, output not; per-head QK-norm
    p = param_counts(a)
    attention = 5120 * 12288 + 12288 + 2 * (5120 * 1024 + 1024) + 12288 * 5120
    assert p.attention == 92 * attention
    assert p.norms == 92 * (2 * 5120 + 2 * 128) + 5120
    assert p.router == 89 * (160 * 5120 + 160)  # DeepSeek-V3's router: a score-correction bias per expert
    assert (a.n_dense_layers, a.n_moe_layers, a.n_shared_experts, a.rotary_fraction) == (3, 89, 1, 0.5)
    assert p.mtp > 0 and p.total_with_mtp == p.total + p.mtp  # one MTP module, apart from the main model
    air = hf("glm-4.5-air")  # no QK-norm; one dense layer
    assert not air.qk_norm and (air.n_dense_layers, air.n_moe_layers) == (1, 45)


def test_old_falcon_model_types() -> None:
    """Pre-2023 Hub revisions: falcon-7b as RefinedWebModel, falcon-40b as RefinedWeb with n_head_kv."""
    new = json.loads((HF / "falcon-40b.json").read_text())
    old = {k: v for k, v in new.items() if k not in ("new_decoder_architecture", "num_kv_heads", "model_type")}
    old.update(model_type="RefinedWeb", n_head_kv=8)
    assert param_counts(from_hf_config(old, "x")).total == param_counts(hf("falcon-40b")).total
    seven = json.loads((HF / "falcon-7b.json").read_text())
    seven.update(model_type="RefinedWebModel")
    assert param_counts(from_hf_config(seven, "x")).total == 6_921_720_704
