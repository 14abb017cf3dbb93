"""GEMM efficiency from shape and dtype: the fitted cells stay in band, and the shape effects go the right way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import REF_GEMM_ACTIVITY, REF_GEMM_TEMP_C, GpuPowerModel
from twinloop.plan import gemm


def test_fitted_cells_in_band() -> None:
    """At the clock each measured H100 GEMM ran at, the curves give its TFLOP/s: BF16 within 1 %, FP8 within
    10 % (the two-parameter form cannot follow FP8's drop from 4096³ to 2048³; see plan/gemm.py)."""
    cells = zip(gemm.H100_SQUARE_GEMMS, gemm.H100_SQUARE_GEMM_CLOCKS_MHZ, strict=True)
    for (dtype, n, tflops, peak), clock in cells:
        predicted = float(gemm.shape_efficiency(dtype, n, n, n)) * peak * clock / gemm.H100_PEAK_CLOCK_MHZ
        band = 0.01 if dtype == "bf16" else 0.10
        assert abs(predicted / tflops - 1) < band, (dtype, n, predicted, tflops)


def test_shipped_curves_are_the_fit() -> None:
    """The constants in gemm.CURVES are what fit_curve returns on the clock-normalised data (no hand edits)."""
    for dtype in ("bf16", "fp8"):
        curve, worst = gemm.fit_curve(gemm.h100_points(dtype))
        assert abs(curve.penalty_elems - gemm.CURVES[dtype].penalty_elems) <= 40
        assert abs(curve.e_inf / gemm.CURVES[dtype].e_inf - 1) < 0.02
        assert worst < 0.10


def test_clock_normalised_share_never_exceeds_peak() -> None:
    """Per clock, no measured GEMM exceeds the tensor cores' capacity (it would mean a wrong peak clock)."""
    for dtype in ("bf16", "fp8"):
        assert all(0.0 < share < 1.0 for _, share in gemm.h100_points(dtype))


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_power_capped_gemm_reproduced_once(dtype: str) -> None:
    """Clock-normalised curve × the clock the shared power model allows at 700 W = the measured 8192³ TFLOP/s.

    Guards against counting the power cap twice (in the fitted efficiency and again in DVFS): with the old,
    un-normalised curve this product came out ~30 % low."""
    gpu = get_gpu("h100-sxm")
    model = GpuPowerModel(gpu)
    tensor, sm, dram = REF_GEMM_ACTIVITY
    weight = float(model.tensor_weight(1.0 if dtype == "fp8" else 0.0))
    clock = float(model.max_clock_for_power(700.0, tensor * weight, sm, dram, REF_GEMM_TEMP_C))
    share = float(gemm.shape_efficiency(dtype, 8192, 8192, 8192))
    predicted = share * gpu.tflops(dtype) * clock / gpu.peak_clock_mhz
    measured = next(t for d, n, t, _ in gemm.H100_SQUARE_GEMMS if d == dtype and n == 8192)
    assert predicted == pytest.approx(measured, rel=0.03)


def test_fp8_share_of_peak_below_bf16_and_falls_faster() -> None:
    r = [float(gemm.relative_efficiency("fp8", n, n, n)) for n in (2048, 4096, 8192)]
    b = [float(gemm.relative_efficiency("bf16", n, n, n)) for n in (2048, 4096, 8192)]
    assert all(f < x for f, x in zip(r, b, strict=True))
    assert r[2] / r[0] > b[2] / b[0]
    assert float(gemm.relative_efficiency("bf16", 8192, 8192, 8192)) == 1.0
    assert float(gemm.relative_efficiency("fp8", 4096, 4096, 4096, "block")) < r[1]


def test_per_expert_token_count_matters() -> None:
    """An expert GEMM at 128 tokens (DeepSeek-V3, EP=1) is far less efficient than at 8,192 (EP=64)."""
    small = float(gemm.relative_efficiency("fp8", 128, 4096, 7168))
    large = float(gemm.relative_efficiency("fp8", 8192, 4096, 7168))
    assert small < 0.3 * large


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["bf16", "fp16", "fp8", "int8"]),
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
    st.integers(1, 1 << 16),
)
def test_efficiency_bounded_and_symmetric(dtype: str, m: int, n: int, k: int) -> None:
    e = float(gemm.shape_efficiency(dtype, m, n, k))
    assert 0.0 < e <= gemm.CURVES[gemm.curve_name(dtype)].e_inf
    # Tile quantization differs per dimension; without it the penalty is symmetric in (M, N, K).
    e2 = float(gemm.shape_efficiency(dtype, 128 * m, 128 * n, 128 * k))
    e3 = float(gemm.shape_efficiency(dtype, 128 * k, 128 * m, 128 * n))
    assert np.isclose(e2, e3)
