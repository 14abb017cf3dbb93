"""FLOPs per token, training FLOPs with recompute, weight bytes."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.arch import load_config_file, load_model
from twinloop.model.flops import (
    FlopBreakdown,
    decode_weight_bytes,
    expected_experts_touched,
    forward_flops_per_token,
    model_flops_per_token,
    training_flops_per_token,
    weight_bytes,
)
from twinloop.model.params import param_counts
from twinloop.model.precision import OP_CLASSES, get_policy

FIXTURES = Path(__file__).parent / "fixtures"


def test_tiny_llama_forward_by_hand() -> None:
    arch = load_config_file(FIXTURES / "tiny-llama.json")  # h 8, 2 layers, 2x4 heads, 1 KV head, FFN 16
    f = forward_flops_per_token(arch, context_len=10)
    assert f.attn_proj == 2 * 2 * (64 + 32 + 32 + 64)
    assert f.dense_ffn == 2 * 2 * 3 * 8 * 16
    assert f.attn_core == 2 * 2 * 10 * 2 * (4 + 4)  # 2·2·L·ctx·heads·d_head
    assert f.lm_head == 2 * 10 * 8
    assert (f.expert_ffn, f.router) == (0, 0)
    assert f.total == sum(f.by_op_class().values())
    assert set(f.by_op_class()) <= set(OP_CLASSES)


def test_tiny_deepseek_forward_by_hand() -> None:
    arch = load_config_file(FIXTURES / "tiny-deepseek-v3.json")
    f = forward_flops_per_token(arch, context_len=5)
    assert f.attn_proj == 2 * 3 * 512
    assert f.attn_core == 2 * 3 * 5 * 2 * (6 + 4)  # MLA: qk dim nope+rope 6, v dim 4
    assert f.expert_ffn == 2 * 2 * (2 + 1) * 384  # 2 MoE layers, top-2 + 1 shared
    assert f.router == 2 * 2 * 16 * 4
    everything = forward_flops_per_token(arch, 5, active_only=False)
    assert everything.expert_ffn == 2 * 2 * (4 + 1) * 384
    with_mtp = forward_flops_per_token(arch, 5, include_mtp=True)
    assert with_mtp.total - f.total == pytest.approx(
        2 * 512 + 2 * 5 * 2 * 10 + 2 * 3 * 384 + 2 * 16 * 4 + 2 * 32 * 16 + 2 * 20 * 16
    )


def test_matmul_flops_are_twice_active_weights() -> None:
    for name in ("llama-3-70b", "mixtral-8x7b", "deepseek-v3"):
        arch = load_model(name)
        p = param_counts(arch)
        f = forward_flops_per_token(arch, 0)
        router_bias = arch.n_moe_layers * arch.n_routed_experts if arch.router_bias else 0
        assert f.total == 2 * (p.active_no_embedding - p.norms - router_bias)


def test_llama_3_405b_compute_budget() -> None:
    # Llama 3 paper: 405B on 15.6T tokens = 3.8e25 FLOPs, Meta's 6·N·D budget (no attention core).
    arch = load_model("llama-3-405b")
    tokens = 15.6e12
    matmul_only = training_flops_per_token(arch, 8192).total - training_flops_per_token(arch, 8192).attn_core
    assert matmul_only * tokens == pytest.approx(3.8e25, rel=0.03)
    with_attention = model_flops_per_token(arch, 8192) * tokens  # causal seq 8192 adds ~4 %
    assert with_attention == pytest.approx(3.8e25, rel=0.05)
    assert with_attention > matmul_only * tokens


GPT = {"gpt-22b": (48, 6144), "gpt-175b": (96, 12288), "gpt-530b": (105, 20480), "gpt-1t": (128, 25600)}


@pytest.mark.parametrize("name", sorted(GPT))
def test_narayanan_formulas(name: str) -> None:
    layers, h = GPT[name]
    s, v, batch = 2048, 51200, 8
    model = 72 * batch * s * layers * h**2 * (1 + s / (6 * h) + v / (12 * layers * h))
    hardware = 96 * batch * s * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    arch = load_model(name)
    assert training_flops_per_token(arch, s, causal=False).total * batch * s == pytest.approx(model, rel=0.02)
    full = training_flops_per_token(arch, s, "full", causal=False).total * batch * s
    assert full == pytest.approx(hardware, rel=0.02)


def test_recompute_ordering() -> None:
    arch = load_model("llama-3-70b")
    none, sel, full = (training_flops_per_token(arch, 4096, m).total for m in ("none", "selective", "full"))
    assert none < sel < full
    fwd = forward_flops_per_token(arch, 2048)
    assert sel - none == pytest.approx(fwd.attn_core)
    assert full - none == pytest.approx(fwd.total - fwd.lm_head)
    with pytest.raises(InputError, match="selective"):
        training_flops_per_token(arch, 4096, "partial")  # type: ignore[arg-type]


def test_by_dtype_follows_policy() -> None:
    f = forward_flops_per_token(load_model("deepseek-v3"), 4096)
    fp8 = f.by_dtype(get_policy("fp8-mixed"))
    assert fp8["fp8"] == pytest.approx(f.attn_proj + f.dense_ffn + f.expert_ffn)
    assert fp8["bf16"] == pytest.approx(f.attn_core + f.lm_head + f.router)
    assert f.by_dtype(get_policy("bf16")) == {"bf16": pytest.approx(f.total)}
    assert pickle.loads(pickle.dumps(f)) == f
    assert f.scaled(2.0).total == pytest.approx(2 * f.total)


def test_weight_bytes() -> None:
    arch = load_model("llama-3-8b")
    p = param_counts(arch)
    bf16 = weight_bytes(arch, get_policy("bf16"))
    assert bf16 == 2 * (p.total - p.norms) + 4 * p.norms
    fp8 = weight_bytes(arch, get_policy("fp8-mixed"))
    assert fp8 == pytest.approx(p.attention + p.dense_ffn + 2 * (p.embedding + p.lm_head) + 4 * p.norms)
    # one decode token reads the active weights (one embedding row)
    v3 = load_model("deepseek-v3")
    q = param_counts(v3)
    one = decode_weight_bytes(v3, get_policy("bf16"), 1)
    assert one == pytest.approx(2 * (q.active_no_embedding - q.norms) + 4 * q.norms + 2 * v3.hidden, rel=1e-3)
    assert decode_weight_bytes(v3, get_policy("bf16"), 4096) > 15 * one


@given(batch=st.floats(0, 1e6))
def test_experts_touched_bounded(batch: float) -> None:
    arch = load_model("deepseek-v3")
    touched = expected_experts_touched(arch, batch)
    assert 0 <= touched <= arch.n_routed_experts
    assert expected_experts_touched(arch, batch + 1) >= touched


@given(ctx=st.integers(0, 10**6), extra=st.integers(1, 10**5))
def test_attention_flops_linear_in_context(ctx: int, extra: int) -> None:
    arch = load_model("llama-3-8b")
    a, b = forward_flops_per_token(arch, ctx), forward_flops_per_token(arch, ctx + extra)
    assert b.attn_core - a.attn_core == pytest.approx(4 * arch.n_layers * extra * arch.n_heads * arch.head_dim)
    assert dataclasses.replace(b, attn_core=0) == dataclasses.replace(a, attn_core=0)


def test_bad_context() -> None:
    with pytest.raises(InputError):
        forward_flops_per_token(load_model("llama-3-8b"), -1)
    assert FlopBreakdown().total == 0
