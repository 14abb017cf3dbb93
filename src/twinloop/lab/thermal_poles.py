"""Die temperature as a sum of first-order poles driven by measured power, and its fit with SciPy.

``T = T_cool + Σ_i y_i`` with ``τ_i·dy_i/dt = R_i·P − y_i``: one pole is the twin's die RC
(:mod:`twinloop.twin.thermal`), two poles separate the die and package (fast) from the heat sink or cold plate
(slow). Each pole is stepped exactly for power held over a sample, on a uniform grid (power is held from each
reading to the next), from a steady state at the first sample's power.

NVML's power reading on Hopper is a 1 s moving average, which lags the power by half a second; ``lead_s`` reads
the power that much later to undo that lag. The die temperature is read in whole °C and within ~0.1 s of a load
step, so time constants well under a second are not resolved by such readings: a fit reports them, but only
as "below about half a second".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares
from scipy.signal import lfilter

F64 = NDArray[np.float64]
GRID_DT_S = 0.1
#: Half of NVML's 1 s averaging window on Hopper (the lag of a 1 s moving average).
NVML_AVERAGE_LAG_S = 0.5


@dataclass(frozen=True)
class Poles:
    """``coolant_c`` °C, and per pole its steady rise ``r_c_per_w`` (°C/W) and time constant ``tau_s`` (s)."""

    coolant_c: float
    r_c_per_w: tuple[float, ...]
    tau_s: tuple[float, ...]
    rms_c: float = 0.0

    @property
    def total_r_c_per_w(self) -> float:
        """Steady rise per watt of all poles together."""
        return float(sum(self.r_c_per_w))


def _grid(t_s: F64, power_w: F64, lead_s: float) -> tuple[F64, F64]:
    """Uniform grid over the readings and the power over the grid step that *ends* at each point (the last
    reading at or before its start, read ``lead_s`` later), so that the response at a point is the temperature
    at that time.
    """
    grid = np.arange(t_s[0], t_s[-1], GRID_DT_S)
    idx = np.clip(np.searchsorted(t_s, grid - GRID_DT_S + lead_s, side="right") - 1, 0, t_s.size - 1)
    return grid, power_w[idx]


def _response(power_w: F64, r_c_per_w: float, tau_s: float) -> F64:
    """One pole's rise, exact for power held over each grid step, steady at the first sample's power."""
    alpha = float(np.exp(-GRID_DT_S / tau_s))
    y0 = r_c_per_w * power_w[0]
    out, _ = lfilter([(1.0 - alpha) * r_c_per_w], [1.0, -alpha], power_w, zi=[alpha * y0])
    return np.asarray(out, dtype=np.float64)


def simulate(t_s: F64, power_w: F64, poles: Poles, lead_s: float = NVML_AVERAGE_LAG_S) -> tuple[F64, F64]:
    """``(grid_s, die_c)``: the die temperature the poles give for the measured power."""
    grid, p = _grid(t_s, power_w, lead_s)
    temp = np.full(grid.size, poles.coolant_c)
    for r, tau in zip(poles.r_c_per_w, poles.tau_s, strict=True):
        temp += _response(p, r, tau)
    return grid, temp


def anchored(t_s: F64, power_w: F64, temp_c: F64, r_c_per_w: Sequence[float], tau_s: Sequence[float]) -> Poles:
    """Poles with the coolant that makes the first reading a steady state (a prediction's only anchor)."""
    coolant = float(temp_c[0] - sum(r_c_per_w) * power_w[0])
    return Poles(coolant, tuple(r_c_per_w), tuple(tau_s))


def fit_poles(
    t_s: F64,
    power_w: F64,
    temp_c: F64,
    windows: Sequence[tuple[float, float]],
    n_poles: int,
    lead_s: float = NVML_AVERAGE_LAG_S,
) -> Poles:
    """Least-squares coolant, ``R_i`` and ``τ_i`` (SciPy ``least_squares``) on the readings inside ``windows``.

    The model runs over the whole trace from the first reading; only the windows' residuals count. Starting
    values: a fast pole of 0.5 s carrying 90 % of the rise and slow poles of 30 s, 300 s (deterministic).
    """
    grid, p = _grid(t_s, power_w, lead_s)
    measured = np.interp(grid, t_s, temp_c)
    mask = np.zeros(grid.size, dtype=bool)
    for a, b in windows:
        mask |= (grid >= a) & (grid < b)
    span = float(np.ptp(p)) or 1.0
    r0 = float(np.ptp(measured)) / span

    def residual(theta: F64) -> F64:
        temp = np.full(grid.size, theta[0])
        for i in range(n_poles):
            temp += _response(p, theta[1 + 2 * i], float(np.exp(theta[2 + 2 * i])))
        return (temp - measured)[mask]

    x0 = [float(measured[0] - r0 * p[0])]
    lo, hi = [-50.0], [150.0]
    for i in range(n_poles):
        x0 += [r0 * (0.9 if i == 0 else 0.1 / (n_poles - 1)), float(np.log((0.5, 30.0, 300.0)[i]))]
        lo += [0.0, float(np.log(0.02))]
        hi += [1.0, float(np.log(3600.0))]
    fit = least_squares(residual, np.array(x0), bounds=(lo, hi))
    order = np.argsort(fit.x[2::2])  # fastest pole first
    r = tuple(float(fit.x[1 + 2 * i]) for i in order)
    tau = tuple(float(np.exp(fit.x[2 + 2 * i])) for i in order)
    return Poles(float(fit.x[0]), r, tau, float(np.sqrt(np.mean(fit.fun**2))))
