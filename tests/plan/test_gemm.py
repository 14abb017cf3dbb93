"""GEMM efficiency from shape and dtype: the fitted cells stay in band, and the shape effects go the right way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.plan import gemm


def test_fitted_cells_in_band() -> None:
    """The shipped curves reproduce every measured H100 square GEMM within 6 % (the fitted cells)."""
    for dtype, n, tflops, peak in gemm.H100_SQUARE_GEMMS:
        predicted = float(gemm.shape_efficiency(dtype, n, n, n)) * peak
        assert abs(predicted / tflops - 1) < 0.06, (dtype, n, predicted, tflops)


def test_shipped_curves_are_the_fit() -> None:
    """The constants in gemm.CURVES are what fit_curve returns on the data (no hand edits)."""
    for dtype in ("bf16", "fp8"):
        pts = [(n, t / p) for d, n, t, p in gemm.H100_SQUARE_GEMMS if d == dtype]
        curve, worst = gemm.fit_curve(pts)
        assert abs(curve.penalty_elems - gemm.CURVES[dtype].penalty_elems) <= 40
        assert abs(curve.e_inf / gemm.CURVES[dtype].e_inf - 1) < 0.02
        assert worst < 0.06


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
