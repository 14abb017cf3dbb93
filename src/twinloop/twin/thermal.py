"""First-order RC thermal model per GPU, integrated exactly over a step.

Die: ``C·dT/dt = P − (T − T_cool)/R`` with P and T_cool held over the step gives, exactly,
``T ← T_ss + (T − T_ss)·α`` with ``T_ss = T_cool + R·P`` and ``α = exp(−Δt/(R·C))``. R and C come from the GPU
catalog (``thermal_resistance_c_per_w``, ``thermal_capacitance_j_per_c``; model parameters, not datasheet).

HBM: a second RC (:class:`twinloop.hardware.thermal.HbmThermal`, fitted on the H100 trace): the stacks share the
die's cold plate, so their steady temperature is the coolant plus ``coupling`` of the die's rise plus
``r_c_per_w`` times the memory power (the power model's DRAM-activity term), approached with ``tau_s``;
:func:`hbm_step` integrates it exactly like the die.

Thermal DVFS: the highest power that keeps the die at or below ``target`` at the *end* of the step is
``P_th = (T_ss_max − T_cool)/R`` with ``T_ss_max = (target − α·T)/(1 − α)``. Far below the target it is huge and
does not bind; near it, it converges to the steady-state power ``(target − T_cool)/R`` — the clock drops until
power and temperature fit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.thermal import HBM_DEFAULT

HBM_DIE_COUPLING = HBM_DEFAULT.coupling
HBM_R_C_PER_W = HBM_DEFAULT.r_c_per_w
HBM_TAU_S = HBM_DEFAULT.tau_s
SW_THERMAL_MARGIN_C = 2.0  # software thermal slowdown engages this far below the slowdown threshold (guess)


def rc_alpha(
    resistance_c_per_w: NDArray[np.float32], capacitance_j_per_c: NDArray[np.float32], dt_s: float
) -> NDArray[np.float32]:
    """Decay factor ``exp(−Δt/(R·C))`` per GPU."""
    return np.asarray(np.exp(-dt_s / (resistance_c_per_w * capacitance_j_per_c)), dtype=np.float32)


def rc_step(
    temp_c: NDArray[np.float32], steady_c: NDArray[np.float32], alpha: NDArray[np.float32] | np.float32
) -> None:
    """In place: ``temp ← steady + (temp − steady)·α`` (exact for constant inputs over the step)."""
    np.subtract(temp_c, steady_c, out=temp_c)
    np.multiply(temp_c, alpha, out=temp_c)
    np.add(temp_c, steady_c, out=temp_c)


def hbm_step(
    hbm_temp_c: NDArray[np.float32],
    die_c: NDArray[np.float32],
    coolant_c: NDArray[np.float32],
    memory_power_w: NDArray[np.float32],
    coupling: np.float32,
    r_c_per_w: np.float32,
    alpha: np.float32,
    buf: NDArray[np.float32],
) -> None:
    """In place: HBM temperature after one step, ``T_ss = T_cool + k·(T_die − T_cool) + R·P_mem`` held over it.

    ``buf`` is scratch space of the same shape; ``memory_power_w`` is overwritten (no allocation per step).
    """
    np.subtract(die_c, coolant_c, out=buf)
    np.multiply(buf, coupling, out=buf)
    np.add(buf, coolant_c, out=buf)
    np.multiply(memory_power_w, r_c_per_w, out=memory_power_w)
    np.add(buf, memory_power_w, out=buf)
    rc_step(hbm_temp_c, buf, alpha)


def rc_analytic(temp0_c: float, steady_c: float, tau_s: float, t_s: float) -> float:
    """Closed-form temperature after ``t_s`` seconds (for tests and validation)."""
    return float(steady_c + (temp0_c - steady_c) * np.exp(-t_s / tau_s))


def thermal_limit_coefficients(
    alpha: NDArray[np.float32], target_c: NDArray[np.float32]
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """``(c1, c2)`` with ``T_ss_max = c1 − c2·T``: ``c1 = target/(1−α)``, ``c2 = α/(1−α)``."""
    one_minus = np.maximum(1.0 - alpha.astype(np.float64), 1e-9)
    return (target_c / one_minus).astype(np.float32), (alpha / one_minus).astype(np.float32)
