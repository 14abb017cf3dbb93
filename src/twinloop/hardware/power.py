"""Per-GPU power and DVFS model shared by the planner (scalars) and the twin (arrays).

``P = P_static(T) + P_dyn(activity) * g(f)`` with

* ``P_static(T) = idle_power_w * (1 + leak_per_c * (T - 40 C))`` — leakage grows with temperature;
* ``P_dyn`` = ``(tdp - idle) * (c_tensor*tensor_active + c_sm*sm_active)`` scaled by the clock through
  ``g(f) = x * (v0 + (1 - v0) * x)**2`` (``x = f / f_max``: dynamic power ~ f * V^2 with V linear in f),
  plus ``(tdp - idle) * c_dram * dram_active`` which does not follow the SM clock;
* DVFS: under a power limit, the clock is the highest one whose power fits (``max_clock_for_power``).

Work slows with the clock as the roofline says: ``relative_speed(f) = 1 / (cf * f_max/f + (1 - cf))`` for a
compute-bound fraction ``cf`` of the step: compute-bound work slows with the clock, memory-bound barely.

This is a *model with guessed coefficients* (``PowerCoefficients`` defaults): c_tensor, c_sm, c_dram, v0 and
leak_per_c were chosen so that dense BF16 GEMMs at full clock slightly exceed TDP (so H100s run
power-capped at ~1.75 GHz, as operators report), memory-bound decode draws roughly 45-60 % of TDP, and
idle matches the catalog. docs/calibration.md ("GPU power model") records how far this is from published
figures; no real-GPU reading has calibrated it yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec

ArrayOrFloat = TypeVar("ArrayOrFloat", float, NDArray[np.float64])

# NVML clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
CLOCK_EVENT_GPU_IDLE = 0x1
CLOCK_EVENT_APPLICATIONS_CLOCKS = 0x2
CLOCK_EVENT_SW_POWER_CAP = 0x4
CLOCK_EVENT_HW_SLOWDOWN = 0x8
CLOCK_EVENT_SYNC_BOOST = 0x10
CLOCK_EVENT_SW_THERMAL = 0x20
CLOCK_EVENT_HW_THERMAL = 0x40
CLOCK_EVENT_HW_POWER_BRAKE = 0x80

T_REF_C = 40.0


@dataclass(frozen=True)
class PowerCoefficients:
    """Dimensionless coefficients of the power model (guesses; see module docstring)."""

    c_tensor: float = 0.88
    c_sm: float = 0.22
    c_dram: float = 0.30
    v0: float = 0.55
    leak_per_c: float = 0.008


DEFAULT_COEFFICIENTS = PowerCoefficients()

_X_GRID = np.linspace(0.0, 1.0, 4097)


def clock_scale(x: ArrayOrFloat, v0: float = DEFAULT_COEFFICIENTS.v0) -> ArrayOrFloat:
    """g(x): dynamic power at relative clock ``x = f/f_max`` relative to full clock (1 at x=1)."""
    return x * (v0 + (1.0 - v0) * x) ** 2


_G_GRID = clock_scale(_X_GRID)


@dataclass(frozen=True)
class GpuPowerModel:
    """The power model for one GPU kind; every method works on floats or NumPy arrays alike."""

    gpu: GpuSpec
    coeff: PowerCoefficients = DEFAULT_COEFFICIENTS

    @property
    def dyn_range_w(self) -> float:
        """TDP minus idle power: the scale of the dynamic terms."""
        return self.gpu.tdp_w - self.gpu.idle_power_w

    def static_w(self, temp_c: ArrayOrFloat) -> ArrayOrFloat:
        """Static (leakage + always-on) power at die temperature ``temp_c``."""
        return self.gpu.idle_power_w * (1.0 + self.coeff.leak_per_c * (temp_c - T_REF_C))

    def clocked_dyn_w(self, tensor_active: ArrayOrFloat, sm_active: ArrayOrFloat) -> ArrayOrFloat:
        """Dynamic power at full clock that scales with the SM clock."""
        c = self.coeff
        return self.dyn_range_w * (c.c_tensor * tensor_active + c.c_sm * sm_active)

    def memory_dyn_w(self, dram_active: ArrayOrFloat) -> ArrayOrFloat:
        """Dynamic HBM power, independent of the SM clock."""
        return self.dyn_range_w * self.coeff.c_dram * dram_active

    def power_w(
        self,
        clock_mhz: ArrayOrFloat,
        tensor_active: ArrayOrFloat,
        sm_active: ArrayOrFloat,
        dram_active: ArrayOrFloat,
        temp_c: ArrayOrFloat,
    ) -> ArrayOrFloat:
        """Board power in watts at the given clock, activities (0..1) and die temperature."""
        x = np.clip(np.asarray(clock_mhz, dtype=np.float64) / self.gpu.sm_clock_max_mhz, 0.0, 1.0)
        p = (
            self.static_w(temp_c)
            + self.clocked_dyn_w(tensor_active, sm_active) * clock_scale(x, self.coeff.v0)
            + self.memory_dyn_w(dram_active)
        )
        return p if isinstance(p, np.ndarray) else float(p)  # type: ignore[return-value]

    def max_clock_for_power(
        self,
        power_limit_w: ArrayOrFloat,
        tensor_active: ArrayOrFloat,
        sm_active: ArrayOrFloat,
        dram_active: ArrayOrFloat,
        temp_c: ArrayOrFloat,
    ) -> ArrayOrFloat:
        """DVFS: the highest SM clock (MHz, within the GPU's range) whose power fits ``power_limit_w``.

        If even the lowest clock does not fit, the lowest clock is returned (the hardware cannot go lower).
        """
        budget = np.asarray(power_limit_w, dtype=np.float64) - self.static_w(temp_c) - self.memory_dyn_w(dram_active)
        clocked = np.asarray(self.clocked_dyn_w(tensor_active, sm_active), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            g_target = np.where(clocked > 0, budget / np.where(clocked > 0, clocked, 1.0), np.inf)
        x = np.interp(np.clip(g_target, 0.0, 1.0), _G_GRID, _X_GRID)
        f_min, f_max = self.gpu.sm_clock_min_mhz, self.gpu.sm_clock_max_mhz
        clock = np.clip(x * f_max, f_min, f_max)
        return clock if clock.ndim else float(clock)  # type: ignore[return-value]


def relative_speed(clock_mhz: ArrayOrFloat, clock_max_mhz: float, compute_fraction: ArrayOrFloat) -> ArrayOrFloat:
    """Work rate at ``clock_mhz`` relative to full clock for a step whose compute-bound share is
    ``compute_fraction`` (0 = purely memory/communication bound, 1 = purely compute bound)."""
    x = np.maximum(np.asarray(clock_mhz, dtype=np.float64) / clock_max_mhz, 1e-6)
    speed = 1.0 / (np.asarray(compute_fraction) / x + (1.0 - np.asarray(compute_fraction)))
    return speed if speed.ndim else float(speed)  # type: ignore[return-value]
