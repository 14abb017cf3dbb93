"""Achieved GEMM throughput from shape and dtype, instead of one efficiency constant.

The model (a fitted form, not a kernel simulator) for a GEMM ``C[M,N] = A[M,K]·B[K,N]``::

    S_dtype(M, N, K) = E_inf(dtype) · tile(M, N, K) / (1 + a_dtype · (1/M + 1/N + 1/K))

* ``E_inf``: the share of the dtype's dense peak a very large GEMM reaches;
* ``a_dtype`` (elements): the small-dimension penalty. Each dimension pays a fixed pipeline fill/drain
  (prologue, epilogue, scale handling) worth ``a`` elements of work, so a dimension of ``a`` elements halves
  the throughput. FP8 pays more (its tiles are twice as deep in K and its per-GEMM scaling work is fixed);
* ``tile``: tile quantization, ``d / (tile·⌈d/tile⌉)`` per dimension (128 in M and N, 64 in K, the CUTLASS /
  cuBLAS Hopper tile shapes), which matters for per-expert GEMMs at a few hundred tokens.

**Clock-normalised.** The measured H100 SXM square GEMMs of ``shared/data/h100/precision_bf16_fp8.json``
(torch.matmul BF16 and ``torch._scaled_mm`` FP8 with per-tensor scales; 2048³, 4096³, 8192³) ran at the 700 W
limit, power-capped: BF16 8192³ at 1,380 MHz, FP8 8192³ at 1,260 MHz, 2048³ near 1,900 MHz. Their TFLOP/s
therefore contain the power cap. The curve is fitted on the share of the peak *at the clock each ran at*::

    share = achieved TFLOP/s / (peak TFLOP/s · f_measured / f_peak)

where ``f_peak`` is the clock at which the datasheet peak is stated (``GpuSpec.peak_clock_mhz``: 1,830 MHz for
989 TFLOP/s on the H100 SXM, not its 1,980 MHz f_max). The planner then runs the GPU at
``peak · f/f_peak · efficiency`` with ``f`` the clock its power limit allows, from the shared power model
(:mod:`twinloop.plan.train_power`): DVFS applies once. (Before this, the power-capped TFLOP/s were used as
if at full clock and DVFS slowed the same work a second time.) Reproduced by ``benchmarks/calibrate_gemm.py``:
BF16 within 0.4 %, FP8 within 9.7 %. Dimensions above 8192 count as 8192; below 2048 the curve extrapolates
(per-expert GEMMs at ~128 tokens: GUESS, likely pessimistic).

The planner uses it *relative to the training calibration*: the efficiency of a GEMM is
``GEMM_EFFICIENCY · S_dtype(M,N,K) / S_bf16(8192³)``, so ``GEMM_EFFICIENCY`` (fitted on Korthikanti's A100
table, where the A100's 312 TFLOP/s are stated at its f_max of 1,410 MHz and a GEMM at 400 W holds it) is the
clock-normalised large-BF16-GEMM efficiency, and the shape and dtype only move it by what the H100
measurements show: per clock, FP8 reaches 0.99× BF16's share of peak at 8192³, 0.81× at 4096³ and 0.66× at
2048³ (the FP8 GEMM's lower clock at the same power is the power model's ``fp8_tensor_power``, not this
curve's). A GPU other than the H100 uses the same shape curve (GUESS: no other measurements were at hand).
Known limit: the planner's DVFS takes one clock for a step's compute phase, from its GEMM time share; it does
not give small GEMMs (lower tensor activity, higher clock at the same power) their own clock.

FP8 scaling granularity: per-tensor (Transformer Engine delayed scaling; what the measurements used) or
block-wise (DeepSeek-V3's 1×128 activation tiles and 128×128 weight blocks, promoted to FP32 every 128 K
elements on CUDA cores). Block-wise costs :data:`FP8_BLOCKWISE_FACTOR` (GUESS, see there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
Fp8Scaling = Literal["tensor", "block"]

#: The measurements the curves are fitted on: (dtype, n for an n×n×n GEMM, achieved TFLOP/s, dense peak
#: TFLOP/s of the catalog). Source: shared/data/h100/precision_bf16_fp8.json (H100 SXM 80GB, this project's
#: own measurement, 700 W power limit).
H100_SQUARE_GEMMS: tuple[tuple[str, int, float, float], ...] = (
    ("bf16", 8192, 673.74, 989.0),
    ("bf16", 4096, 636.92, 989.0),
    ("bf16", 2048, 590.80, 989.0),
    ("fp8", 8192, 1216.87, 1979.0),
    ("fp8", 4096, 1076.09, 1979.0),
    ("fp8", 2048, 726.23, 1979.0),
)

#: Mean SM clock (MHz) during each of :data:`H100_SQUARE_GEMMS`, same order (``sm_mhz`` in the same file). At
#: the 700 W limit every cell was power-capped, and smaller GEMMs (less tensor activity) ran faster.
H100_SQUARE_GEMM_CLOCKS_MHZ: tuple[float, ...] = (1380.0, 1530.0, 1860.0, 1260.0, 1440.0, 1905.0)

#: SM clock at which the H100 SXM's datasheet TFLOP/s hold: 989.4 TFLOP/s = 132 SMs × 4,096 dense BF16 FLOP per
#: SM per clock × 1,830 MHz (NVIDIA's boost clock; the GPU's f_max is 1,980 MHz). Catalog
#: ``peak_tflops_clock_mhz``.
H100_PEAK_CLOCK_MHZ = 1830.0


def clock_normalised_share(tflops: float, peak_tflops: float, clock_mhz: float, peak_clock_mhz: float) -> float:
    """Achieved TFLOP/s over the peak *at the clock it ran at*: ``tflops / (peak · clock / peak_clock)``.

    This is the share of the tensor cores' per-cycle capacity a GEMM uses, independent of the power limit:
    the clock is the power model's business (:mod:`twinloop.hardware.power`), applied once by the planner.
    """
    return tflops / (peak_tflops * clock_mhz / peak_clock_mhz)


def h100_points(dtype: str) -> list[tuple[int, float]]:
    """``[(n, clock-normalised share of peak)]`` of the measured H100 GEMMs of one curve."""
    return [
        (n, clock_normalised_share(t, p, f, H100_PEAK_CLOCK_MHZ))
        for (d, n, t, p), f in zip(H100_SQUARE_GEMMS, H100_SQUARE_GEMM_CLOCKS_MHZ, strict=True)
        if d == dtype
    ]


@dataclass(frozen=True)
class GemmCurve:
    """One dtype's fitted curve: ``e_inf`` and ``penalty_elems`` (``a``, elements).

    ``e_inf`` is a fit parameter, not a reachable share: dimensions count as at most :data:`MAX_FITTED_DIM`, so
    the largest share the curve gives is ``S(8192³)`` (BF16 0.91, FP8 0.90 of the clock-normalised peak)."""

    e_inf: float
    penalty_elems: float


#: FITTED on the clock-normalised :data:`H100_SQUARE_GEMMS` (:func:`h100_points`) by :func:`fit_curve`
#: (``benchmarks/calibrate_gemm.py``): BF16 within 0.4 %, FP8 within 9.7 % (the measured FP8 curve falls
#: faster from 4096³ to 2048³ than this two-parameter form allows; minimax puts ±9.7 % on all three cells).
CURVES: dict[str, GemmCurve] = {
    "bf16": GemmCurve(e_inf=1.1062, penalty_elems=602.0),
    "fp8": GemmCurve(e_inf=1.6215, penalty_elems=2181.0),
}

#: Largest dimension measured; larger dimensions count as this one in the penalty (no extrapolation).
MAX_FITTED_DIM = 8192

#: Reference shape at which ``GEMM_EFFICIENCY`` is taken to hold (BF16).
REFERENCE_DIM = 8192

#: Tile sizes for tile quantization (M, N, K): Hopper WGMMA kernels of cuBLAS/CUTLASS use 128×128 or
#: 128×256 output tiles and K steps of 64 (BF16) / 128 (FP8); 128/128/64 is the common smallest.
TILE_M, TILE_N, TILE_K = 128, 128, 64

#: GUESS. Block-wise FP8 scaling (DeepSeek-V3 §3.3.2: fine-grained quantization, FP32 promotion every 128 K
#: elements) costs time on CUDA cores beside the tensor cores; DeepGEMM's published H800 results reach
#: roughly 1,350-1,550 of 1,979 TFLOP/s on large dense shapes, i.e. comparable to per-tensor cuBLAS FP8 at
#: the best shapes; 0.95 charges a small residual cost.
FP8_BLOCKWISE_FACTOR = 0.95

#: (FP8 casts, amax and transposes are memory-bound work beside the GEMM: :mod:`twinloop.plan.fp8_casts`.)

#: Dtypes that use each curve (narrower-than-FP8 formats use the FP8 curve: GUESS).
_CURVE_OF = {"fp8": "fp8", "int8": "fp8", "fp4": "fp8", "fp6": "fp8"}


def curve_name(dtype: str) -> str:
    """The curve a dtype uses: ``fp8`` for 8-bit and narrower formats, ``bf16`` otherwise."""
    return _CURVE_OF.get(dtype, "bf16")


def _tile(d: F64, t: int) -> F64:
    return d / (t * np.ceil(d / t))


def shape_efficiency(dtype: str, m: F64 | float, n: F64 | float, k: F64 | float) -> F64:
    """``S_dtype(M, N, K)``: absolute share of the dtype's dense peak (the H100-fitted curve)."""
    c = CURVES[curve_name(dtype)]
    mm, nn, kk = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    tile = _tile(mm, TILE_M) * _tile(nn, TILE_N) * _tile(kk, TILE_K)
    # No extrapolation above the largest measured dimension: the FP8 curve's e_inf would otherwise let FP8
    # reach a larger share of its peak than BF16 does, which no measurement shows.
    pm, pn, pk = (np.minimum(x, MAX_FITTED_DIM) for x in (mm, nn, kk))
    penalty = c.penalty_elems * (1 / pm + 1 / pn + 1 / pk)
    return np.asarray(c.e_inf * tile / (1.0 + penalty), dtype=np.float64)


def relative_efficiency(
    dtype: str, m: F64 | float, n: F64 | float, k: F64 | float, fp8_scaling: Fp8Scaling = "tensor"
) -> F64:
    """``S_dtype(M,N,K) / S_bf16(8192³)``: the factor on the calibrated large-BF16 ``GEMM_EFFICIENCY``."""
    ref = shape_efficiency("bf16", REFERENCE_DIM, REFERENCE_DIM, REFERENCE_DIM)
    r = shape_efficiency(dtype, m, n, k) / ref
    if curve_name(dtype) == "fp8" and fp8_scaling == "block":
        r = r * FP8_BLOCKWISE_FACTOR
    return np.asarray(r, dtype=np.float64)


def fit_curve(points: list[tuple[int, float]]) -> tuple[GemmCurve, float]:
    """Fit ``(e_inf, a)`` to square GEMMs ``[(n, achieved share of peak)]``: grid over ``a`` (1-element
    steps), ``e_inf`` the geometric-mean match; returns the curve and the worst |relative error|."""
    n = np.asarray([p[0] for p in points], dtype=np.float64)
    e = np.asarray([p[1] for p in points], dtype=np.float64)
    best: tuple[float, float, float] | None = None
    for a in np.arange(0.0, 4000.0, 1.0):
        s = n / (n + 3 * a)  # tile quantization is 1 for these power-of-two squares
        e_inf = float(np.exp(np.mean(np.log(e / s))))
        worst = float(np.max(np.abs(e_inf * s / e - 1)))
        if best is None or worst < best[0]:
            best = (worst, float(a), e_inf)
    assert best is not None
    return GemmCurve(e_inf=round(best[2], 4), penalty_elems=best[1]), best[0]
