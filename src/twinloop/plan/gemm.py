"""Achieved GEMM throughput from shape and dtype: a roofline with a fitted compute share, not one constant.

The model (a fitted form, not a kernel simulator) of a GEMM ``C[M,N] = A[M,K]·B[K,N]`` on a machine with dense
rate ``P_dtype`` (at the clock the GEMM runs at) and usable HBM bandwidth ``B``::

    t = max(t_compute, t_memory) + t_fixed(dtype)
    t_compute = 2·M·N·K / (P_dtype · S_c),   S_c = E(dtype) · tile(M,N,K) / (1 + a_K/K + a_MN·(1/M + 1/N))
    t_memory  = ((M·K + K·N)·in_bytes + M·N·out_bytes) / B

* ``E``: the share of the dtype's dense peak per clock that a very large GEMM reaches;
* ``a_K`` (elements): each output tile's K loop pays a fixed fill/drain (prologue, epilogue) worth ``a_K``
  elements of K; ``a_MN``: the same for the edges of M and N (what is left of small M and N once the memory
  term has taken the skinny GEMMs). Both act on the tile-padded dimensions, capped at :data:`MAX_FITTED_DIM`;
* ``tile``: tile quantization, ``d / (tile·⌈d/tile⌉)`` per dimension (128 in M and N, 64 in K);
* ``t_memory``: every operand read once and the output written once (BF16 output for FP8), at the usable HBM
  bandwidth: skinny GEMMs (per-expert GEMMs at a few hundred tokens, decode) are bandwidth-bound. Loads and
  tensor-core math overlap in Hopper's warp-specialised kernels, hence ``max`` (a roofline), not a sum;
* ``t_fixed``: per-kernel time that neither term covers (launch inside a stream, scale handling for FP8).

**Clock-normalised.** The measurements ran at the 700 W limit, power-capped, so the compute share is fitted at the
clock each GEMM ran at (``P = peak · f_measured / f_peak``; ``f_peak`` is ``GpuSpec.peak_clock_mhz``, 1,830 MHz
for the H100/H200's 989 TFLOP/s), and the planner applies DVFS once, through the shared power model
(:mod:`twinloop.plan.train_power`). The memory and fixed terms do not scale with the SM clock.

**Fitted on** (:mod:`twinloop.lab.gemm_fit`, ``benchmarks/calibrate_gemm.py``): the six H100 SXM squares of
``shared/data/h100/precision_bf16_fp8.json`` (2048³-8192³) and the H200 cells of three of the seven (N, K)
families ((4096, 4096), (14336, 4096), (2048, 7168); M from 64 to 16384) of ``tests/fixtures/h200/shapes.json``
(eager loop) and ``tests/fixtures/h200/gemm_graphs.json`` (CUDA graphs). **Held out** (predicted): the other four
families ((8192, 8192), (4096, 14336), (7168, 2048), (28672, 8192)) of both files and the graph file's 2048³ and
8192³: MAPE 12.0 % (eager, 72 cells) and 13.7 % (graphs, 24 cells), 5-6 % at M ≥ 2048. **Predicted on the H100**
(``tests/fixtures/h100_shapes/shapes.json``, measured after the fit: the same 126 cells on a real H100 SXM, the
GPU the planner targets; none fitted on): MAPE 13.5 %, 7.3 % at M ≥ 2048 (BF16 5.2 %, FP8 9.4 %: large FP8 GEMMs
10-17 % too slow, the known FP8 limit below). Adding the H100 cells of the three fit families to the fit moved the
held-out MAPE over both GPUs from 13.4 to 13.7 % (H100 families 14.7 → 14.2 %, H200 12.0 → 12.8 % eager and 13.7 →
15.2 % graphs), so the curves were not refitted. Figures:
``docs/calibration.md`` (GEMM part). What the H200 data answered:

* Below 2048 tokens the former curve (no memory term, a symmetric ``a·(1/M+1/N+1/K)`` penalty; its GUESS
  "likely pessimistic") was 40-90 % pessimistic at M = 64-256 (out-of-sample test of the H100-only curve on the
  H200 shapes: MAPE 26.7 %, 43-53 % at M ≤ 256). Skinny GEMMs are bandwidth-bound, not fill-bound; and M = 2048
  with N, K ≥ 4096 is about as efficient as 8192³, which the former curve charged ~20 %.
* The H100 FP8 2048³ cell (726 TFLOP/s, the "FP8 falls faster than the form allows" of the former fit) was
  host-bound: ``torch._scaled_mm`` in an eager loop costs about 24 µs per call on the host, and the 2048³ GEMM
  takes 17 µs on the GPU (CUDA-graph timing on the H200: 1,028 TFLOP/s). Cells measured in eager loops are
  fitted as ``max(t, floor_dtype)``, the floor a harness property (fitted, not used by the planner).
* Other GPUs: the H200 (same GH100 die, more bandwidth) is fitted with the H100's per-clock level × 1.018; its
  TFLOP/s at 700 W equal the H100's at large shapes, although NVML reports ~100 MHz more clock.
* Still GUESSes: GPUs other than the GH100 die (A100, B200, MI300X) use this curve with their own peak and
  bandwidth; formats narrower than FP8 use the FP8 curve; block-wise FP8 scaling (:data:`FP8_BLOCKWISE_FACTOR`).
* Known limits: FP8 8192³ on the H100 is −14 % in sample (the FP8 curve follows the H200's mid-size FP8 cells);
  with fewer output tiles than SMs (e.g. 128 × 2048 × 7168) cuBLAS reaches about half the bandwidth the memory
  term assumes (20-30 % too fast); cuBLAS's kernel choice is not smooth in shape (BF16 128 × 28672 × 8192 ran
  slower than 256 × 28672 × 8192); the planner takes one clock for a step's compute phase, so small GEMMs do not
  get their own higher clock.

The planner uses it *relative to the large-GEMM efficiency of the framework profile*: a GEMM's efficiency is
``gemm · S_dtype(M,N,K) / S_bf16(8192³)`` on the plan's GPU (its peak and usable HBM bandwidth,
:class:`GemmMachine`), where ``gemm`` is the profile's ``gemm_efficiency`` (:mod:`twinloop.plan.frameworks`):
measured on the H100 for today's stacks (``efficiency.H100_GEMM_EFFICIENCY``), fitted on Korthikanti's A100 table
for ``megatron-2022`` (``efficiency.GEMM_EFFICIENCY``). The shape and dtype only move it by what the measurements
show, per-expert GEMMs at their real token counts included.

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

#: The H100 measurements (fitted on): (dtype, n for an n×n×n GEMM, achieved TFLOP/s, dense peak TFLOP/s of the
#: catalog). Source: shared/data/h100/precision_bf16_fp8.json (H100 SXM 80GB, this project's own measurement,
#: 700 W power limit, torch eager loop of 10 calls per synchronisation).
H100_SQUARE_GEMMS: tuple[tuple[str, int, float, float], ...] = (
    ("bf16", 8192, 673.74, 989.0),
    ("bf16", 4096, 636.92, 989.0),
    ("bf16", 2048, 590.80, 989.0),
    ("fp8", 8192, 1216.87, 1979.0),
    ("fp8", 4096, 1076.09, 1979.0),
    ("fp8", 2048, 726.23, 1979.0),
)

#: SM clock (MHz) of each of :data:`H100_SQUARE_GEMMS`, same order (``sm_mhz`` in the same file: one NVML reading at
#: the end of each 15 s run). At the 700 W limit every cell was power-capped, and smaller GEMMs ran faster.
H100_SQUARE_GEMM_CLOCKS_MHZ: tuple[float, ...] = (1380.0, 1530.0, 1860.0, 1260.0, 1440.0, 1905.0)

#: SM clock at which the H100 SXM's datasheet TFLOP/s hold: 989.4 TFLOP/s = 132 SMs × 4,096 dense BF16 FLOP per
#: SM per clock × 1,830 MHz (NVIDIA's boost clock; the GPU's f_max is 1,980 MHz). Catalog
#: ``peak_tflops_clock_mhz``.
H100_PEAK_CLOCK_MHZ = 1830.0

#: Usable share of the datasheet HBM bandwidth (``efficiency.HBM_EFFICIENCY``, measured: 3.0 of 3.35 TB/s device
#: copy on the H100; 4.3 of 4.8 TB/s on the H200, device/KINDS.md). Repeated here because efficiency.py sits above
#: this module.
HBM_USABLE_SHARE = 0.90


@dataclass(frozen=True)
class GemmMachine:
    """What a GEMM runs on: the dense BF16 rate at the clock it runs at and the usable HBM bandwidth.

    Attributes:
        bf16_flops_per_s: dense BF16 FLOP/s at the GEMM's clock (other dtypes scale by :func:`rate_factor`).
        hbm_bytes_per_s: usable HBM bandwidth (datasheet × :data:`HBM_USABLE_SHARE`).
    """

    bf16_flops_per_s: float
    hbm_bytes_per_s: float


#: The H100 SXM at its peak clock: the default for callers that give no machine.
REFERENCE_MACHINE = GemmMachine(bf16_flops_per_s=989.0e12, hbm_bytes_per_s=HBM_USABLE_SHARE * 3.35e12)


@dataclass(frozen=True)
class GemmCurve:
    """One dtype's fitted compute share and fixed time (see the module docstring).

    Attributes:
        e_inf: share of the dense peak per clock of a very large GEMM (dimensions count as at most
            :data:`MAX_FITTED_DIM`).
        k_fill_elems: ``a_K``, elements of K lost per output tile to the K loop's fill and drain.
        mn_fill_elems: ``a_MN``, the same for the edges of M and N.
        fixed_s: per-kernel time beside the roofline (seconds).
    """

    e_inf: float
    k_fill_elems: float
    mn_fill_elems: float
    fixed_s: float


#: FITTED by :func:`twinloop.lab.gemm_fit.fit` on the fit subset (module docstring; ``benchmarks/calibrate_gemm.py``
#: prints the fit and the held-out errors; ``tests/plan/test_gemm_fit.py`` checks these are what it returns).
CURVES: dict[str, GemmCurve] = {
    "bf16": GemmCurve(e_inf=0.930, k_fill_elems=471.0, mn_fill_elems=64.0, fixed_s=3.64e-6),
    "fp8": GemmCurve(e_inf=0.824, k_fill_elems=236.0, mn_fill_elems=183.0, fixed_s=1.99e-6),
}

#: Largest M measured; larger dimensions count as this one in the fill penalty (no extrapolation of ``e_inf``).
MAX_FITTED_DIM = 16384

#: Reference shape at which a profile's large-GEMM efficiency (``TrainEfficiency.gemm``) is taken to hold (BF16).
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

#: Dense rate of each curve's dtypes relative to BF16 on Hopper (catalog: 1,979 vs 989 TFLOP/s).
_RATE_OF_CURVE = {"bf16": 1.0, "fp8": 2.0}

#: Bytes per input element (the output is BF16, 2 B, except for FP32/TF32 GEMMs: 4 B).
_IN_BYTES = {"fp8": 1.0, "int8": 1.0, "fp6": 0.75, "fp4": 0.5, "fp32": 4.0, "tf32": 4.0}


def curve_name(dtype: str) -> str:
    """The curve a dtype uses: ``fp8`` for 8-bit and narrower formats, ``bf16`` otherwise."""
    return _CURVE_OF.get(dtype, "bf16")


def rate_factor(dtype: str) -> float:
    """Dense rate of ``dtype`` relative to BF16 (2 for the FP8 curve's dtypes, 1 otherwise)."""
    return _RATE_OF_CURVE[curve_name(dtype)]


def clock_normalised_share(tflops: float, peak_tflops: float, clock_mhz: float, peak_clock_mhz: float) -> float:
    """Achieved TFLOP/s over the peak *at the clock it ran at*: ``tflops / (peak · clock / peak_clock)``."""
    return tflops / (peak_tflops * clock_mhz / peak_clock_mhz)


def _tile(d: F64, t: int) -> F64:
    return np.asarray(d / (t * np.ceil(d / t)), dtype=np.float64)


def compute_share(dtype: str, m: F64 | float, n: F64 | float, k: F64 | float, curve: GemmCurve | None = None) -> F64:
    """``S_c``: share of the dense peak per clock while the GEMM is compute-bound (tiles and fill penalty)."""
    c = curve if curve is not None else CURVES[curve_name(dtype)]
    mm, nn, kk = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    tile = _tile(mm, TILE_M) * _tile(nn, TILE_N) * _tile(kk, TILE_K)
    # The fill is paid per tile, so on the padded dimensions: time then grows with each dimension (one more row
    # never makes a GEMM faster). No extrapolation above the largest measured dimension.
    padded = (x / _tile(x, t) for x, t in ((mm, TILE_M), (nn, TILE_N), (kk, TILE_K)))
    pm, pn, pk = (np.minimum(x, MAX_FITTED_DIM) for x in padded)
    penalty = c.k_fill_elems / pk + c.mn_fill_elems * (1 / pm + 1 / pn)
    return np.asarray(c.e_inf * tile / (1.0 + penalty), dtype=np.float64)


def gemm_time_s(
    dtype: str,
    m: F64 | float,
    n: F64 | float,
    k: F64 | float,
    machine: GemmMachine = REFERENCE_MACHINE,
    curve: GemmCurve | None = None,
) -> F64:
    """Seconds one GEMM takes on ``machine``: ``max(t_compute, t_memory) + t_fixed``."""
    c = curve if curve is not None else CURVES[curve_name(dtype)]
    mm, nn, kk = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    flops = 2.0 * mm * nn * kk
    t_compute = flops / (machine.bf16_flops_per_s * rate_factor(dtype) * compute_share(dtype, mm, nn, kk, c))
    out_bytes = 4.0 if dtype in ("fp32", "tf32") else 2.0
    moved = (mm * kk + kk * nn) * _IN_BYTES.get(dtype, 2.0) + mm * nn * out_bytes
    return np.asarray(np.maximum(t_compute, moved / machine.hbm_bytes_per_s) + c.fixed_s, dtype=np.float64)


def shape_efficiency(
    dtype: str, m: F64 | float, n: F64 | float, k: F64 | float, machine: GemmMachine = REFERENCE_MACHINE
) -> F64:
    """``S_dtype(M, N, K)``: achieved share of the dtype's dense peak on ``machine`` (roofline included)."""
    mm, nn, kk = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    ideal = 2.0 * mm * nn * kk / (machine.bf16_flops_per_s * rate_factor(dtype))
    return np.asarray(ideal / gemm_time_s(dtype, mm, nn, kk, machine), dtype=np.float64)


def relative_efficiency(
    dtype: str,
    m: F64 | float,
    n: F64 | float,
    k: F64 | float,
    fp8_scaling: Fp8Scaling = "tensor",
    machine: GemmMachine = REFERENCE_MACHINE,
) -> F64:
    """``S_dtype(M,N,K) / S_bf16(8192³)`` on ``machine``: the factor on the profile's large-GEMM efficiency."""
    ref = shape_efficiency("bf16", REFERENCE_DIM, REFERENCE_DIM, REFERENCE_DIM, machine)
    r = shape_efficiency(dtype, m, n, k, machine) / ref
    if curve_name(dtype) == "fp8" and fp8_scaling == "block":
        r = r * FP8_BLOCKWISE_FACTOR
    return np.asarray(r, dtype=np.float64)
