"""First-order thermal models of a GPU die and its HBM, and their fit to a real heat-up and cool-down.

Die: ``τ·dT/dt = T_cool + R·P − T`` (one RC to the coolant, ``τ = R·C``). HBM: the stacks sit on the die's
package under the same cold plate, so their steady temperature is the coolant plus a share ``coupling`` of the
die's rise above it plus ``r_c_per_w`` times the memory system's own power (``P_mem`` of the power model, which
follows DRAM activity), approached with time constant ``tau_s``:
``τ_hbm·dT_hbm/dt = T_cool + k·(T_die − T_cool) + R_hbm·P_mem − T_hbm``.

Both are integrated exactly over a step with inputs held (``T ← T_ss + (T − T_ss)·exp(−Δt/τ)``); the twin
does that in :mod:`twinloop.twin.thermal`. The fits here run the same update on a 1 Hz trace of measured
power: for a given time constant the trace is linear in the other parameters, so each fit is a least-squares
solve per time constant on a grid (NumPy only, deterministic).

Measured limits: the H100 die has a second, fast time constant (~1 s: 34 → 54 °C within two seconds of a
GEMM starting, then ~15 s to 67 °C); one RC with the fitted τ lags the first seconds of every load step.
The GPU's cooling (air or liquid, inlet temperature) was not recorded; the fitted coolant temperature is
whatever the fit needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.readings import Trace


@dataclass(frozen=True)
class DieRc:
    """Die-to-coolant RC: ``r_c_per_w`` °C/W, ``tau_s`` s, and the coolant temperature of the fit (°C)."""

    r_c_per_w: float
    tau_s: float
    coolant_c: float
    rms_c: float = 0.0


@dataclass(frozen=True)
class HbmThermal:
    """HBM temperature model (see the module docstring); ``rms_c``: fit residual."""

    coupling: float
    r_c_per_w: float
    tau_s: float
    rms_c: float = 0.0


#: The H100 fit (``benchmarks/validate_power_h100.py`` reproduces it; the twin uses it for every GPU kind,
#: the HBM stacks of other GPUs being assumed to sit as close to their die).
HBM_DEFAULT = HbmThermal(coupling=0.66, r_c_per_w=0.089, tau_s=3.5)


def hbm_steady_c(
    coolant_c: NDArray[np.float64] | float,
    die_c: NDArray[np.float64] | float,
    memory_power_w: NDArray[np.float64] | float,
    model: HbmThermal,
) -> NDArray[np.float64] | float:
    """Steady HBM temperature for the given coolant and die temperatures and memory power."""
    return coolant_c + model.coupling * (die_c - coolant_c) + model.r_c_per_w * memory_power_w


def _responses(drive: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """Response of ``y_k = α·y_{k−1} + (1−α)·drive_k`` from ``y_{−1} = 0``."""
    out = np.empty_like(drive)
    y = 0.0
    for k, d in enumerate(drive):
        y = alpha * y + (1.0 - alpha) * d
        out[k] = y
    return out


def _windows(trace: Trace, windows: Sequence[tuple[float, float]]) -> list[NDArray[np.int64]]:
    return [np.flatnonzero((trace.t_s >= a) & (trace.t_s < b)) for a, b in windows]


def _fit_linear_per_tau(
    trace: Trace,
    windows: Sequence[tuple[float, float]],
    taus: NDArray[np.float64],
    observed: NDArray[np.float64],
    drives: Sequence[NDArray[np.float64]],
) -> tuple[float, NDArray[np.float64], float]:
    """Best ``τ`` and the coefficients of ``drives`` for ``observed`` over ``windows`` (each starts at its
    first measured value).
    """
    dt = float(np.median(np.diff(trace.t_s)))
    best: tuple[float, NDArray[np.float64], float] = (np.nan, np.zeros(len(drives)), np.inf)
    idx = _windows(trace, windows)
    for tau in taus:
        alpha = float(np.exp(-dt / tau))
        cols, rhs = [], []
        for w in idx:
            if w.size < 2:
                continue
            decay = observed[w[0]] * alpha ** np.arange(1, w.size + 1)
            cols.append(np.stack([_responses(d[w], alpha) for d in drives], axis=1))
            rhs.append(observed[w] - decay)
        a, b = np.vstack(cols), np.concatenate(rhs)
        x = np.linalg.lstsq(a, b, rcond=None)[0]
        rms = float(np.sqrt(np.mean((a @ x - b) ** 2)))
        if rms < best[2]:
            best = (float(tau), x, rms)
    return best


def fit_die_rc(trace: Trace, windows: Sequence[tuple[float, float]]) -> DieRc:
    """Fit the die RC (R, τ, T_cool) on the given ``(start_s, end_s)`` windows of a 1 Hz trace."""
    ones = np.ones_like(trace.power_w)
    tau, (coolant, r), rms = _fit_linear_per_tau(
        trace, windows, np.arange(2.0, 120.01, 0.5), trace.temp_c, [ones, trace.power_w]
    )
    return DieRc(r_c_per_w=float(r), tau_s=tau, coolant_c=float(coolant), rms_c=rms)


def fit_hbm(
    trace: Trace, windows: Sequence[tuple[float, float]], coolant_c: float, memory_power_w: NDArray[np.float64]
) -> HbmThermal:
    """Fit the HBM model given the coolant temperature (from the die fit) and the memory power per sample."""
    rise = trace.hbm_temp_c - coolant_c
    tau, (k, r), rms = _fit_linear_per_tau(
        trace, windows, np.arange(2.0, 120.01, 0.5), rise, [trace.temp_c - coolant_c, memory_power_w]
    )
    return HbmThermal(coupling=float(k), r_c_per_w=float(r), tau_s=tau, rms_c=rms)


def simulate(
    trace: Trace, window: tuple[float, float], die: DieRc, hbm: HbmThermal, memory_power_w: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Die and HBM temperatures over ``window`` from measured power, starting at the measured values."""
    (w,) = _windows(trace, [window])
    dt = float(np.median(np.diff(trace.t_s)))
    a_die, a_hbm = np.exp(-dt / die.tau_s), np.exp(-dt / hbm.tau_s)
    die_c = np.empty(w.size)
    hbm_c = np.empty(w.size)
    t, th = trace.temp_c[w[0]], trace.hbm_temp_c[w[0]]
    for i, k in enumerate(w):
        steady = die.coolant_c + die.r_c_per_w * trace.power_w[k]
        t = steady + (t - steady) * a_die
        ss = float(hbm_steady_c(die.coolant_c, t, memory_power_w[k], hbm))
        th = ss + (th - ss) * a_hbm
        die_c[i], hbm_c[i] = t, th
    return w, die_c, hbm_c
