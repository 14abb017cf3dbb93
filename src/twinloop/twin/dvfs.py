"""Vectorized DVFS for the twin, built on :class:`twinloop.hardware.power.GpuPowerModel`.

The hardware model writes board power as ``P = P_static(T) + D·g(x) + M`` with ``D`` the clocked dynamic power at
full clock (a live CUDA context, which every GPU holding a job has, plus tensor and SM activity), ``M`` the HBM
power and ``g`` the clock scale (``clock_scale``). Both ``P_static`` (affine in T) and
``D``, ``M`` (linear in the activities) are taken from the model for every GPU kind; only the inverse of ``g``
is tabulated here, on a uniform grid in ``g`` so that inverting it is one multiply and one table look-up
instead of a binary search (``np.interp``). ``max_clock_for_power`` of the hardware model is the reference
(tests check agreement to < 1 % of the clock range).

In one step the twin computes ``g_target = (limit - P_static - M) / D``, clips it to ``[g_min, g_cap]``
(the lowest supported clock, and the clock cap set by ``set clocks`` or 1), and then the power
``P = P_static + M + D·g`` is exact and the relative clock ``x = g⁻¹(g)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import DEFAULT_COEFFICIENTS, GpuPowerModel, PowerCoefficients, clock_scale

INV_TABLE_SIZE = 8192


@dataclass(frozen=True)
class KindConstants:
    """Per-kind constants of the power model (one entry per GPU kind)."""

    static_a_w: NDArray[np.float32]  # P_static = a + b·T
    static_b_w_per_c: NDArray[np.float32]
    clocked_per_activity_w: NDArray[np.float32]  # D = dyn·(c_tensor·tensor + c_sm·sm): (kinds, 2)
    context_w: NDArray[np.float32]  # clocked power of a live CUDA context (a GPU that holds a job)
    mem_per_activity_w: NDArray[np.float32]  # M = dyn·c_dram·dram
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
