"""Fit :class:`~twinloop.hardware.power.PowerCoefficients` to real readings (NumPy only, deterministic).

The fit runs in stages, each on named phases only (the rest are *predicted* and validate it):

1. ``leak_per_c``: slope of power against die temperature while idle with a context, over the cool-down
   (the last ``COOLDOWN_S`` seconds of the trace), divided by the cold idle power.
2. ``c_context``: the idle-with-context phase, ``(P − P_static(T)) / (tdp − idle)`` (at f_max, g = 1).
3. the V-f curve (``v_floor``, ``v_slope``) and ``c_tensor``, ``c_sm``, ``c_dram``: for each curve on a grid
   the model is linear in the three coefficients, solved by least squares on relative power error (negative
   coefficients are dropped and the rest re-solved); the curve with the least error wins, then a finer grid
   around it.
4. ``fp8_tensor_power``: the FP8 8192³ GEMM's power, solved for the FP8 tensor weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import T_REF_C, PowerCoefficients, clock_scale
from twinloop.hardware.readings import PhaseReading, Readings

#: Phases the V-f curve and activity coefficients are fitted on; every other phase is predicted.
FIT_PHASES: tuple[str, ...] = (
    "gemm_peak",
    "cap_500",
    "cap_300",
    "clock_1200",
    "clock_900",
    "memcopy",
    "decode_b1",
)
CONTEXT_PHASE = "idle_context"
FP8_PHASE = "fp8_8192"
COOLDOWN_S = 45.0


@dataclass(frozen=True)
class PowerFit:
    """The fitted coefficients and the fit's residual (RMS relative power error over ``FIT_PHASES``)."""

    coeff: PowerCoefficients
    rms_rel_error: float
    fit_phases: tuple[str, ...]


def fit_leakage(readings: Readings, gpu: GpuSpec) -> float:
    """``leak_per_c`` from the cool-down: least-squares slope of power on die temperature / idle power."""
    tr = readings.trace
    start = readings.trace.phase_start_s.get("cooldown", tr.t_s[-1] - COOLDOWN_S)
    sel = tr.t_s >= start + 1.0  # skip the second the 1 s power average still carries the last burst
    slope = np.polyfit(tr.temp_c[sel], tr.power_w[sel], 1)[0]
    return float(slope / gpu.idle_power_w)


def _static(gpu: GpuSpec, leak: float, temp_c: float) -> float:
    return gpu.idle_power_w * (1.0 + leak * (temp_c - T_REF_C))


def _solve_nonneg(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Least squares with non-negative coefficients for a handful of columns (drop negatives, re-solve)."""
    active = np.ones(a.shape[1], dtype=bool)
    x = np.zeros(a.shape[1])
    for _ in range(a.shape[1]):
        x[:] = 0.0
        x[active] = np.linalg.lstsq(a[:, active], b, rcond=None)[0]
        if (x >= 0).all():
            break
        active &= x > 0
    return x


def _curve_fit(
    phases: Sequence[PhaseReading], gpu: GpuSpec, leak: float, c_context: float, v_floor: float, v_slope: float
) -> tuple[NDArray[np.float64], float]:
    trial = PowerCoefficients(v_floor=v_floor, v_slope=v_slope)
    dyn = gpu.tdp_w - gpu.idle_power_w
    rows, rhs = [], []
    for p in phases:
        g = float(clock_scale(p.clock_mhz / gpu.sm_clock_max_mhz, trial))
        rest = p.power_w - _static(gpu, leak, p.temp_c) - dyn * c_context * p.context * g
        rows.append([dyn * p.tensor_active * g, dyn * p.sm_active * g, dyn * p.dram_active])
        rhs.append(rest)
    weight = 1.0 / np.array([p.power_w for p in phases])
    a = np.array(rows) * weight[:, None]
    b = np.array(rhs) * weight
    x = _solve_nonneg(a, b)
    return x, float(np.sqrt(np.mean((a @ x - b) ** 2)))


def fit_power(readings: Readings, gpu: GpuSpec, fit_phases: Sequence[str] = FIT_PHASES) -> PowerFit:
    """Fit every power coefficient to ``readings`` of ``gpu`` (see the module docstring)."""
    leak = fit_leakage(readings, gpu)
    ctx = readings.phases[CONTEXT_PHASE]
    dyn = gpu.tdp_w - gpu.idle_power_w
    c_context = (ctx.power_w - _static(gpu, leak, ctx.temp_c)) / dyn
    phases = [readings.phases[n] for n in fit_phases]
    best = (np.inf, 0.0, 0.0)
    floors, slopes = np.arange(0.30, 1.0001, 0.025), np.arange(0.0, 1.5001, 0.05)
    for step in (1, 2):
        for vf in floors:
            for vs in slopes:
                _, err = _curve_fit(phases, gpu, leak, c_context, float(vf), float(vs))
                if err < best[0] - 1e-12:
                    best = (err, float(vf), float(vs))
        if step == 1:  # refine around the coarse optimum
            floors = np.clip(best[1] + np.arange(-0.025, 0.02501, 0.0025), 0.05, 1.0)
            slopes = np.clip(best[2] + np.arange(-0.05, 0.05001, 0.005), 0.0, 3.0)
    err, vf, vs = best
    (c_t, c_s, c_d), _ = _curve_fit(phases, gpu, leak, c_context, vf, vs)
    coeff = PowerCoefficients(
        c_context=float(c_context),
        c_tensor=float(c_t),
        c_sm=float(c_s),
        c_dram=float(c_d),
        v_floor=vf,
        v_slope=vs,
        leak_per_c=leak,
    )
    fp8 = readings.phases.get(FP8_PHASE)
    if fp8 is not None:
        g = float(clock_scale(fp8.clock_mhz / gpu.sm_clock_max_mhz, coeff))
        rest = fp8.power_w - _static(gpu, leak, fp8.temp_c) - dyn * (c_context + c_s * fp8.sm_active) * g
        rest -= dyn * c_d * fp8.dram_active
        fp8_power = float(rest / (dyn * c_t * g * fp8.tensor_active))
        coeff = PowerCoefficients(**{**coeff.__dict__, "fp8_tensor_power": fp8_power})
    return PowerFit(coeff=coeff, rms_rel_error=err, fit_phases=tuple(fit_phases))


def rounded(coeff: PowerCoefficients, digits: int = 4) -> PowerCoefficients:
    """The coefficients rounded as they are written into :data:`~twinloop.hardware.power.DEFAULT_COEFFICIENTS`."""
    return PowerCoefficients(**{k: round(float(v), digits) for k, v in coeff.__dict__.items()})
