"""KV cache per token, paged blocks, concurrency by memory, parallelism validation, offload tiers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.plan.kv_offload import (
    fragmentation_fraction,
    kv_capacity,
    offload_path,
    offload_read_s,
    padded_tokens,
)
from twinloop.plan.serve import build_request, plan_serve


def _plan(**kw: object):  # type: ignore[no-untyped-def]
    return plan_serve(build_request(**kw))


def test_kv_bytes_per_token_llama_3_70b_exact() -> None:
    # GQA: 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes (bf16)
    p = _plan(model="llama-3-70b", gpus=8, tp=8)
    assert p.kv_cache_bytes_per_token == 2 * 80 * 8 * 128 * 2
    # TP 8 splits the 8 KV heads: one head per GPU
    assert p.kv_cache_bytes_per_token_per_gpu == 2 * 80 * 1 * 128 * 2
    assert _plan(model="llama-3-70b", gpus=8, tp=8, kv_dtype="fp8").kv_cache_bytes_per_token == 2 * 80 * 8 * 128


def test_kv_bytes_per_token_deepseek_v3_exact() -> None:
    # MLA: 61 layers x (512 latent + 64 decoupled RoPE key) x 2 bytes; the latent is replicated over TP
    p = _plan(model="deepseek-v3", gpu="h200-sxm", gpus=8, tp=8, ep=8, weight_dtype="fp8")
    assert p.kv_cache_bytes_per_token == 61 * 576 * 2
    assert p.kv_cache_bytes_per_token_per_gpu == 61 * 576 * 2


def test_paged_blocks_round_up() -> None:
    assert padded_tokens(1.0, 16) == 16 and padded_tokens(16.0, 16) == 16 and padded_tokens(17.0, 16) == 32
    assert fragmentation_fraction(17.0, 16) == pytest.approx(15 / 32)
    with pytest.raises(InputError):
        padded_tokens(10.0, 0)
    # block rounding costs sequences: 1 token per block never fits more than 16 per block
    no_offload = offload_path("none", get_gpu("h100-sxm"), 0.0)
    fine = kv_capacity(1e9, 1000.0, np.array([1000.0]), 1, no_offload, 1)
    coarse = kv_capacity(1e9, 1000.0, np.array([1000.0]), 512, no_offload, 1)
    assert fine.hbm_sequences == 1000 and coarse.hbm_sequences == 1e9 // (1024 * 1000)


def test_mla_holds_far_more_sequences_than_gqa_at_equal_hbm() -> None:
    from twinloop.model.kv_cache import kv_cache_bytes_per_token

    none = offload_path("none", get_gpu("h100-sxm"), 0.0)
    lengths = np.array([4096.0])
    mla = kv_capacity(40e9, kv_cache_bytes_per_token(load_model("deepseek-v3")), lengths, 16, none, 1)
    gqa = kv_capacity(40e9, kv_cache_bytes_per_token(load_model("llama-3-70b")), lengths, 16, none, 1)
    assert mla.hbm_sequences >= 4 * gqa.hbm_sequences > 0


@settings(max_examples=25, deadline=None)
@given(st.integers(16, 6000), st.integers(1, 1500), st.integers(1, 1000))
def test_concurrency_non_increasing_in_prompt_length(prompt: int, extra: int, output: int) -> None:
    a = _plan(model="llama-3-8b", gpus=1, tp=1, prompt_tokens=prompt, output_tokens=output)
    b = _plan(model="llama-3-8b", gpus=1, tp=1, prompt_tokens=prompt + extra, output_tokens=output)
    assert b.max_concurrent_sequences <= a.max_concurrent_sequences


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["llama-3-70b", "llama-3-8b", "mixtral-8x7b"]), st.integers(64, 8000))
def test_more_tp_gpus_never_fewer_sequences(model: str, prompt: int) -> None:
    counts = []
    for tp in (2, 4, 8):
        try:
            counts.append(_plan(model=model, gpus=tp, tp=tp, prompt_tokens=prompt).max_concurrent_sequences)
        except InputError:
            counts.append(0)  # does not fit on so few GPUs
    assert counts == sorted(counts)
    assert counts[-1] > 0


def test_weights_that_do_not_fit_name_bytes_and_hbm() -> None:
    with pytest.raises(InputError) as err:
        _plan(model="llama-3-70b", gpus=1, tp=1)
    msg = str(err.value)
    assert "weights need" in msg and "141.1 GB" in msg and "HBM" in msg and "80 GB" in msg


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"model": "llama-3-70b", "gpus": 6, "tp": 6}, "does not divide the 64 attention heads"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 4, "pp": 3}, "not a multiple of tp"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 8, "ep": 2}, "has no experts"),
        ({"model": "mixtral-8x7b", "gpus": 8, "tp": 2, "ep": 4}, "must divide tp"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 8, "weight_dtype": "fp7"}, "unknown dtype"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 8, "batching": "magic"}, "unknown strategy"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 8, "kv_offload": "tape"}, "unknown tier"),
        ({"model": "llama-3-70b", "gpus": 8, "tp": 8, "kv_offload": "dram"}, "needs a capacity"),
        ({"model": "llama-3-8b", "gpus": 1, "tp": 1, "prompt_tokens": 2_000_000}, "prefill activations"),
        (
            {"model": "llama-3-8b", "gpus": 1, "tp": 1, "prompt_tokens": 2_000_000, "batching": "chunked"},
            "of KV per GPU",
        ),
    ],
)
def test_bad_configurations_raise_input_error(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        _plan(**kw)


def test_offload_tier_adds_sequences_and_costs_bandwidth() -> None:
    gpu = get_gpu("h100-sxm")
    dram = offload_path("dram", gpu, 100e9)
    nvme = offload_path("nvme", gpu, 100e9)
    assert nvme.read_bytes_per_s < dram.read_bytes_per_s
    cap = kv_capacity(10.24e9, 1e5, np.array([1024.0]), 16, dram, 1)
    assert cap.hbm_sequences == 100 and cap.offload_sequences == 976 and cap.max_sequences == 1076
    assert offload_read_s(100.0, 100, 1e9, dram) == 0.0
    assert offload_read_s(200.0, 100, 1e9, dram) == pytest.approx(0.5 * 1e9 / dram.read_bytes_per_s)
    assert offload_read_s(200.0, 100, 1e9, nvme) > offload_read_s(200.0, 100, 1e9, dram)
    p = _plan(model="llama-3-8b", gpus=1, tp=1, kv_offload="cxl", kv_offload_gb=200)
    q = _plan(model="llama-3-8b", gpus=1, tp=1)
    assert p.max_concurrent_sequences > q.max_concurrent_sequences == p.max_concurrent_sequences_hbm
