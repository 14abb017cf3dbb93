"""Prefill/decode roofline and per-phase power."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.plan.serve import build_request, plan_serve
from twinloop.plan.serve_roofline import build_roofline


@pytest.fixture(scope="module")
def llama70_h100():  # type: ignore[no-untyped-def]
    return build_roofline(load_model("llama-3-70b"), get_gpu("h100-sxm"), tp=8)


def test_llama_70b_h100_decode_memory_bound_prefill_compute_bound(llama70_h100) -> None:  # type: ignore[no-untyped-def]
    gpu = get_gpu("h100-sxm")
    ridge = gpu.tflops("bf16") * 1e12 / gpu.hbm_bandwidth_bytes_per_s
    for batch in (1, 16, 64, 256):
        d = llama70_h100.decode(batch, 1024)
        assert d.bound == "memory"
        assert d.arithmetic_intensity < ridge
        assert d.memory_s > d.compute_s
    for prompt in (1024, 4096):
        p = llama70_h100.prefill(prompt)
        assert p.bound == "compute"
        assert p.arithmetic_intensity > ridge
        assert p.compute_s > p.memory_s
    plan = plan_serve(build_request(model="llama-3-70b", gpu="h100-sxm", gpus=8, tp=8, rate_req_per_s=1.0))
    assert plan.prefill.bound == "compute" and plan.decode.bound == "memory"


def test_decode_time_grows_with_batch_and_context(llama70_h100) -> None:  # type: ignore[no-untyped-def]
    times = [float(llama70_h100.decode(b, 2048).time_s) for b in (1, 8, 64, 256)]
    assert times == sorted(times)
    assert float(llama70_h100.decode(64, 8192).time_s) > float(llama70_h100.decode(64, 512).time_s)
    # batch-1 decode streams every weight once per token: at least weights / HBM bandwidth per GPU
    gpu = get_gpu("h100-sxm")
    assert float(llama70_h100.decode(1, 128).time_s) > llama70_h100.weight_bytes / 8 / gpu.hbm_bandwidth_bytes_per_s


def test_prefill_vectorized_matches_scalar(llama70_h100) -> None:  # type: ignore[no-untyped-def]
    prompts = np.array([16.0, 500.0, 3000.0])
    vec = llama70_h100.prefill(prompts)
    for i, p in enumerate(prompts):
        assert float(vec.time_s[i]) == pytest.approx(float(llama70_h100.prefill(p).time_s))


def test_moe_decode_reads_only_touched_experts() -> None:
    r = build_roofline(load_model("deepseek-v3"), get_gpu("h200-sxm"), tp=8, ep=8, weight_dtype="fp8")
    one = float(r.weights_read_bytes(np.array(1.0)))
    many = float(r.weights_read_bytes(np.array(4096.0)))
    assert one < 0.1 * r.weight_bytes  # ~37B active of 671B
    assert many == pytest.approx(r.weight_bytes, rel=0.02)  # a big batch touches every expert


def test_prefill_power_near_tdp_decode_far_below() -> None:
    gpu = get_gpu("h100-sxm")
    plan = plan_serve(
        build_request(model="llama-3-8b", gpu="h100-sxm", gpus=1, tp=1, prompt_tokens=4096, rate_req_per_s=0.5)
    )
    assert plan.prefill.power_w >= 0.8 * gpu.tdp_w
    assert plan.prefill.power_w <= gpu.tdp_w + 1e-6  # DVFS keeps it under the limit
    assert plan.decode.power_w <= 0.6 * gpu.tdp_w
    assert 115.0 <= plan.idle_power_w <= 125.0  # idle with the engine's CUDA context (H100: 117-123 W)
    for phase in (plan.prefill, plan.decode):
        for v in (phase.tensor_active, phase.sm_active, phase.dram_active):
            assert 0.0 <= v <= 1.0
    assert plan.prefill.tensor_active > plan.decode.tensor_active
    assert plan.decode.dram_active > plan.prefill.dram_active


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 512), st.integers(1, 16_000))
def test_power_capped_at_tdp(batch: int, tokens: int) -> None:
    r = build_roofline(load_model("llama-3-8b"), get_gpu("h100-sxm"))
    for phase in (r.decode(batch, tokens), r.prefill(float(tokens))):
        assert float(phase.power_w) <= r.gpu.tdp_w + 1e-6
        assert float(phase.time_s) > 0
