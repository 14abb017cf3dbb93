"""KV-cache bytes and precision policies."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.arch import load_config_file, load_model
from twinloop.model.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token, kv_cache_elements_per_token
from twinloop.model.precision import OP_CLASSES, PRECISION_POLICIES, bytes_per_element, get_policy

FIXTURES = Path(__file__).parent / "fixtures"


def test_llama_3_70b_kv() -> None:
    assert kv_cache_bytes_per_token(load_model("llama-3-70b")) == 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv_cache_bytes_per_token(load_model("llama-3-70b"), "fp8") == 163_840


def test_deepseek_v3_mla_kv() -> None:
    v3 = load_model("deepseek-v3")
    assert kv_cache_elements_per_token(v3) == 61 * (512 + 64)
    assert kv_cache_bytes_per_token(v3) == 61 * 576 * 2
    assert kv_cache_elements_per_token(v3, include_mtp=True) == 62 * 576


def test_mla_cut_against_mha_baseline() -> None:
    v3 = load_model("deepseek-v3")
    mha = dataclasses.replace(v3, attention="mha")  # same heads, K = nope+rope (192), V = 128
    assert kv_cache_elements_per_token(mha) == 61 * 128 * (192 + 128)
    cut = 1 - kv_cache_bytes_per_token(v3) / kv_cache_bytes_per_token(mha)
    assert cut > 0.98  # 576 vs 40960 elements per layer


def test_tiny_configs_by_hand() -> None:
    assert kv_cache_elements_per_token(load_config_file(FIXTURES / "tiny-llama.json")) == 2 * 2 * 1 * 4
    assert kv_cache_elements_per_token(load_config_file(FIXTURES / "tiny-deepseek-v3.json")) == 3 * (4 + 2)


@given(tokens=st.integers(0, 10**7), more=st.integers(0, 10**7))
def test_kv_linear_in_tokens(tokens: int, more: int) -> None:
    arch = load_model("llama-3-8b")
    per = kv_cache_bytes_per_token(arch)
    assert kv_cache_bytes(arch, tokens + more) == pytest.approx(kv_cache_bytes(arch, tokens) + more * per)
    assert kv_cache_bytes(arch, tokens) == tokens * per


def test_bytes_per_element() -> None:
    assert [bytes_per_element(d) for d in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")] == [
        4, 4, 2, 2, 1, 1, 0.5,
    ]  # fmt: skip
    with pytest.raises(InputError, match="fp8"):
        bytes_per_element("fp9")


@pytest.mark.parametrize("name", sorted(PRECISION_POLICIES))
def test_policy_conformance(name: str) -> None:
    policy = get_policy(name)
    assert policy.name == name
    assert set(policy.as_dict()) == set(OP_CLASSES)
    assert pickle.loads(pickle.dumps(policy)) == policy
    hash(policy)
    for op in OP_CLASSES:
        assert policy.bytes(op) == bytes_per_element(policy.dtype(op))
    assert policy.dtype("accumulate") == "fp32" and policy.dtype("master_weights") == "fp32"


def test_fp8_mixed_follows_deepseek_v3() -> None:
    p = get_policy("fp8-mixed")
    assert {op: p.dtype(op) for op in ("expert_ffn", "attn_proj", "dense_ffn", "moe_dispatch")} == dict.fromkeys(
        ("expert_ffn", "attn_proj", "dense_ffn", "moe_dispatch"), "fp8"
    )
    assert {p.dtype(op) for op in ("attn_core", "lm_head", "embedding", "moe_combine", "gradients")} == {"bf16"}
    assert {p.dtype(op) for op in ("accumulate", "norm", "master_weights", "optimizer_states")} == {"fp32"}
    exact = get_policy("deepseek-v3-fp8")
    assert (exact.dtype("optimizer_states"), exact.dtype("gradients")) == ("bf16", "fp32")


def test_unknown_policy_and_overrides() -> None:
    with pytest.raises(InputError, match="fp8-mixed"):
        get_policy("fp8mixed")
    custom = get_policy("bf16").with_overrides({"expert_ffn": "fp8"}, name="bf16-fp8-experts")
    assert custom.dtype("expert_ffn") == "fp8" and custom.dtype("attn_proj") == "bf16"
    with pytest.raises(InputError, match="dtype"):
        get_policy("bf16").with_overrides({"expert_ffn": "fp7"})
    with pytest.raises(InputError, match="op class"):
        get_policy("bf16").with_overrides({"experts": "fp8"})
    with pytest.raises(InputError, match="op class"):
        get_policy("bf16").dtype("softmax")
