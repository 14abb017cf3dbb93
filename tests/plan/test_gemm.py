"""GEMM efficiency from shape and dtype: the roofline form, the power cap counted once, the shape effects' signs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import REF_GEMM_ACTIVITY, REF_GEMM_TEMP_C, GpuPowerModel
from twinloop.plan import gemm


@pytest.mark.parametrize(("dtype", "band"), [("bf16", 0.08), ("fp8", 0.20)])
def test_power_capped_gemm_reproduced_once(dtype: str, band: float) -> None:
    """Clock-normalised curve × the clock the shared power model allows at 700 W ≈ the measured H100 8192³ rate.

    Guards against counting the power cap twice (in the fitted efficiency and again in DVFS): that chain came out
    ~30 % low. The bands are the in-sample misses of the shipped curves with a margin (BF16 −4 %, FP8 −17 %:
    the FP8 curve is pulled down by the H200's mid-size FP8 cells; docs/calibration.md, GEMM part)."""
    gpu = get_gpu("h100-sxm")
    model = GpuPowerModel(gpu)
    tensor, sm, dram = REF_GEMM_ACTIVITY
    weight = float(model.tensor_weight(1.0 if dtype == "fp8" else 0.0))
    clock = float(model.max_clock_for_power(700.0, tensor * weight, sm, dram, REF_GEMM_TEMP_C))
    machine = gemm.GemmMachine(gpu.tflops("bf16") * 1e12 * clock / gpu.peak_clock_mhz, 0.9 * 3.35e12)
    predicted = float(gemm.shape_efficiency(dtype, 8192, 8192, 8192, machine)) * gpu.tflops(dtype) * clock
    predicted /= gpu.peak_clock_mhz
    measured = next(t for d, n, t, _ in gemm.H100_SQUARE_GEMMS if d == dtype and n == 8192)
    assert predicted == pytest.approx(measured, rel=band)


def test_skinny_gemm_is_bandwidth_bound() -> None:
    """At 64 tokens a 4096×4096 BF16 GEMM takes its bytes over the usable bandwidth (plus the fixed time), and a
    GPU with more bandwidth runs it faster while a large GEMM does not move."""
    m = gemm.REFERENCE_MACHINE
    t = float(gemm.gemm_time_s("bf16", 64, 4096, 4096, m))
    moved = 2 * (64 * 4096 + 4096 * 4096 + 64 * 4096)
    assert t == pytest.approx(moved / m.hbm_bytes_per_s + gemm.CURVES["bf16"].fixed_s, rel=1e-9)
    faster = gemm.GemmMachine(m.bf16_flops_per_s, 2 * m.hbm_bytes_per_s)
    assert float(gemm.gemm_time_s("bf16", 64, 4096, 4096, faster)) < t
    big = float(gemm.gemm_time_s("bf16", 8192, 8192, 8192, m))
    assert float(gemm.gemm_time_s("bf16", 8192, 8192, 8192, faster)) == pytest.approx(big)


def test_reference_is_one_on_any_gpu() -> None:
    for name in ("a100-sxm-80gb", "h100-sxm", "h200-sxm"):
        g = get_gpu(name)
        machine = gemm.GemmMachine(g.tflops("bf16") * 1e12, 0.9 * g.hbm_bandwidth_bytes_per_s)
        assert float(gemm.relative_efficiency("bf16", 8192, 8192, 8192, machine=machine)) == pytest.approx(1.0)


def test_fp8_share_of_peak_below_bf16() -> None:
    for n in (2048, 4096, 8192):
        assert float(gemm.relative_efficiency("fp8", n, n, n)) < float(gemm.relative_efficiency("bf16", n, n, n))
    assert float(gemm.relative_efficiency("fp8", 4096, 4096, 4096, "block")) < float(
        gemm.relative_efficiency("fp8", 4096, 4096, 4096)
    )


def test_per_expert_token_count_matters() -> None:
    """An expert GEMM at 128 tokens (DeepSeek-V3, EP=1) is far less efficient than at 8,192 (EP=64): it is
    bandwidth-bound (the weights are read for few tokens)."""
    small = float(gemm.relative_efficiency("fp8", 128, 4096, 7168))
    large = float(gemm.relative_efficiency("fp8", 8192, 4096, 7168))
    assert small < 0.5 * large


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["bf16", "fp16", "fp8", "int8"]),
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
)
def test_efficiency_bounded_and_monotone_in_m(dtype: str, m: int, n: int, k: int) -> None:
    """Never above the compute share's ceiling; more tokens never take less time."""
    e = float(gemm.shape_efficiency(dtype, m, n, k))
    assert 0.0 < e <= gemm.CURVES[gemm.curve_name(dtype)].e_inf
    assert float(gemm.gemm_time_s(dtype, m + 1, n, k)) >= float(gemm.gemm_time_s(dtype, m, n, k)) * (1 - 1e-12)
