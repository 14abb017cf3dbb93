"""Vectorized DVFS for the twin, built on :class:`twinloop.hardware.power.GpuPowerModel`.

The hardware model writes board power as ``P = P_static(T) + D·g(x) + M`` with ``D`` the clocked dynamic power at
full clock (a live CUDA context, which every GPU holding a job has, plus tensor and SM activity), ``M`` the HBM
power and ``g`` the clock scale (``clock_scale``). Both ``P_static`` (affine in T) and
``D``, ``M`` (linear in the activities) are taken from the model for every GPU kind; only the inverse of ``g``
is tabulated here, on a uniform grid in ``g`` so that inverting it is one multiply and one table look-up
instead of a binary search (``np.interp``). ``max_clock_for_power`` of the hardware model is the reference
(tests check agreement to < 1 % of the clock range).

HBM power follows the clock where the bytes ride on tensor work. A GEMM moves
:data:`~twinloop.plan.efficiency.GEMM_HBM_BYTES_PER_FLOP` per FLOP, so its DRAM activity is ``k·tensor·x`` (``k``
= that traffic at full tensor activity and f_max over the usable HBM bandwidth, :func:`gemm_dram_per_tensor`):
the planner's rule (:func:`twinloop.plan.activity.compute_activity`, ``hardware.power.gemm_clock_mhz``). A phase's
DRAM activity, given at the kind's reference clock ``x_ref`` (its dense GEMM's clock at TDP, where the fit's GEMM
activity was read), splits into that clock-proportional part and a fixed rest (memory-bound kernels, NCCL,
decode's weight streaming): ``M(x) = M0 + Mx·x``. The power is then ``P = P_static + M0 + D·g(x) + Mx·x``, and
DVFS solves ``P = limit`` exactly on a second table: with ``r = Mx/D`` rounded *up* to one of
:data:`HBM_TABLE_ROWS` rows, ``h_r(x) = (g(x) + r·x)/(1 + r)`` is tabulated inversely like ``g`` (uniform in
``h``), so ``g_target = G[r, (limit − P_static − M0)/(D·(1 + r))]`` is one divide and two look-ups. Rounding ``r``
up and the inverse down keep the power at or under the limit; it errs low by under ``D·x·r_max/255`` (0.4 W on an
H100).

In one step the twin computes that ``g_target``, clips it to ``[g_min, g_cap]`` (the lowest supported clock, and
the clock cap set by ``set clocks`` or 1), and then the relative clock is ``x = g⁻¹(g)`` and the power
``P = P_static + M0 + Mx·x + D·g`` is exact for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import (
    DEFAULT_COEFFICIENTS,
    GpuPowerModel,
    PowerCoefficients,
    clock_scale,
    reference_gemm_clock_x,
)
from twinloop.plan import efficiency as effc
from twinloop.plan.activity import gemm_hbm_s

INV_TABLE_SIZE = 8192
#: Rows (values of ``r = Mx/D``) of the HBM-aware inverse table; ``r`` is rounded up to the next row.
HBM_TABLE_ROWS = 256


@dataclass(frozen=True)
class KindConstants:
    """Per-kind constants of the power model (one entry per GPU kind)."""

    static_a_w: NDArray[np.float32]  # P_static = a + b·T
    static_b_w_per_c: NDArray[np.float32]
    clocked_per_activity_w: NDArray[np.float32]  # D = dyn·(c_tensor·tensor + c_sm·sm): (kinds, 2)
    context_w: NDArray[np.float32]  # clocked power of a live CUDA context (a GPU that holds a job)
    mem_per_activity_w: NDArray[np.float32]  # M = dyn·c_dram·dram
    gemm_dram_per_tensor: NDArray[np.float32]  # k: GEMM DRAM activity per unit tensor activity at f_max
    ref_clock_x: NDArray[np.float32]  # relative clock at which profile activities are given (dense GEMM at TDP)
    clock_max_mhz: NDArray[np.float32]
    clock_min_mhz: NDArray[np.float32]
    g_min: NDArray[np.float32]
    coeff: PowerCoefficients  # the shared V-f curve (clock scale)


def kind_constants(kinds: tuple[GpuSpec, ...]) -> KindConstants:
    """Extract the affine/linear pieces of each kind's :class:`GpuPowerModel`."""
    models = [GpuPowerModel(k) for k in kinds]
    a = [m.static_w(0.0) for m in models]
    b = [m.static_w(1.0) - m.static_w(0.0) for m in models]
    clocked = [[m.clocked_dyn_w(1.0, 0.0, 0.0), m.clocked_dyn_w(0.0, 1.0, 0.0)] for m in models]
    context = [m.clocked_dyn_w(0.0, 0.0, 1.0) for m in models]
    mem = [m.memory_dyn_w(1.0) for m in models]
    curves = {(m.coeff.v_floor, m.coeff.v_slope) for m in models}
    if len(curves) != 1:
        raise ValueError("all GPU kinds must share the V-f curve (v_floor, v_slope)")
    coeff = models[0].coeff if models else DEFAULT_COEFFICIENTS
    fmin = np.array([k.sm_clock_min_mhz for k in kinds], dtype=np.float32)
    fmax = np.array([k.sm_clock_max_mhz for k in kinds], dtype=np.float32)
    return KindConstants(
        static_a_w=np.array(a, dtype=np.float32),
        static_b_w_per_c=np.array(b, dtype=np.float32),
        clocked_per_activity_w=np.array(clocked, dtype=np.float32),
        context_w=np.array(context, dtype=np.float32),
        mem_per_activity_w=np.array(mem, dtype=np.float32),
        gemm_dram_per_tensor=np.array([gemm_dram_per_tensor(k) for k in kinds], dtype=np.float32),
        ref_clock_x=np.array([reference_gemm_clock_x(k) for k in kinds], dtype=np.float32),
        clock_max_mhz=fmax,
        clock_min_mhz=fmin,
        g_min=np.asarray(clock_scale(fmin.astype(np.float64) / fmax, coeff)).astype(np.float32),
        coeff=coeff,
    )


def inverse_clock_table(coeff: PowerCoefficients, size: int = INV_TABLE_SIZE) -> NDArray[np.float32]:
    """``x`` at ``g = i/(size-1)`` for i = 0..size-1, rounded *down* to the grid so power never exceeds a cap."""
    x_fine = np.linspace(0.0, 1.0, 1 << 16)
    g_fine = np.asarray(clock_scale(x_fine, coeff))
    g_grid = np.linspace(0.0, 1.0, size)
    x = np.interp(g_grid, g_fine, x_fine)
    return x.astype(np.float32)


def hbm_split_w(
    activity: NDArray[np.float64], kc: KindConstants, r_max: float | None = None, d: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """HBM power of activities ``(n, 3)`` (tensor, sm, dram at the reference clock) per kind: ``(M0, Mx)``, both
    ``(n, kinds)``, with ``M(x) = M0 + Mx·x``.

    ``Mx`` is the GEMM traffic's share, ``k·tensor`` per unit clock but at most the phase's DRAM activity at the
    reference clock, and at most ``r_max·d`` when given (the inverse table's range); ``M0`` the rest, so that
    ``M(x_ref)`` is the phase's DRAM activity times the HBM power per unit activity.
    """
    mem = kc.mem_per_activity_w[None, :].astype(np.float64)
    x_ref = kc.ref_clock_x[None, :].astype(np.float64)
    dram = activity[:, 2:3]
    per_x = np.minimum(activity[:, 0:1] * kc.gemm_dram_per_tensor[None, :], dram / x_ref)
    mx = per_x * mem
    if r_max is not None and d is not None:
        mx = np.minimum(mx, r_max * d)
    return dram * mem - mx * x_ref, mx


def dram_activity_at_clock(
    activity: NDArray[np.float64], kind: NDArray[np.int64], clock_x: NDArray[np.float64], kc: KindConstants
) -> NDArray[np.float64]:
    """DRAM activity per GPU at relative clock ``clock_x``: the phase's value at its kind's reference clock, with
    the GEMM traffic's share (the ``Mx`` of :func:`hbm_split_w`) moved to the clock the GPU runs at.

    ``activity`` is ``(n, 3)`` (tensor, sm, dram at the reference clock), ``kind`` each row's GPU kind. What DCGM's
    ``DRAM_ACTIVE`` reads on a GPU capped below its reference clock: the GEMMs stretch, so their bytes per second
    fall, while memory-bound kernels keep theirs.
    """
    x_ref = kc.ref_clock_x[kind].astype(np.float64)
    dram = activity[:, 2]
    per_x = np.minimum(activity[:, 0] * kc.gemm_dram_per_tensor[kind], dram / x_ref)
    return np.asarray(np.clip(dram + per_x * (clock_x - x_ref), 0.0, 1.0))


def gemm_dram_per_tensor(gpu: GpuSpec) -> float:
    """DRAM activity of GEMM operand traffic per unit tensor activity at f_max (the planner's bytes per FLOP).

    Tensor activity counts cycles, so at relative clock ``x`` the GEMMs run ``tensor·x`` of the f_max BF16 peak
    and keep the memory busy ``k·tensor·x`` of the time (FP8 does twice the FLOPs per cycle at half the bytes).
    """
    peak = gpu.tflops("bf16") * 1e12 * gpu.sm_clock_max_mhz / gpu.peak_clock_mhz
    return float(gemm_hbm_s(np.ones(1), peak, effc.HBM_EFFICIENCY * gpu.hbm_bandwidth_bytes_per_s)[0])


def hbm_clock_table(
    coeff: PowerCoefficients, r_max: float, rows: int = HBM_TABLE_ROWS, size: int = INV_TABLE_SIZE
) -> NDArray[np.float32]:
    """Clock scale ``g(x)`` where ``h_r(x) = (g(x) + r·x)/(1 + r)`` equals ``b``, shape ``(rows, size)``.

    Row ``j`` holds ``r = j·r_max/(rows − 1)``, column ``i`` holds ``b = i/(size − 1)``. ``h_r`` is convex and
    increasing, so the interpolated inverse lies at or below the true one: the power never exceeds a cap.
    """
    x_fine = np.linspace(0.0, 1.0, 1 << 16)
    g_fine = np.asarray(clock_scale(x_fine, coeff))
    b_grid = np.linspace(0.0, 1.0, size)
    out = np.empty((rows, size), dtype=np.float32)
    for j, r in enumerate(np.linspace(0.0, r_max, rows)):
        x = np.interp(b_grid, (g_fine + r * x_fine) / (1.0 + r), x_fine)
        out[j] = np.asarray(clock_scale(x, coeff))
    return out
