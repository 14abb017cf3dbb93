"""Per-GPU power and DVFS model shared by the planner (scalars) and the twin (arrays), fitted on a real H100.

``P = P_static(T) + P_clocked(activity, context)·g(f) + P_mem(dram)`` with

* ``P_static(T) = idle_power_w·(1 + leak_per_c·(T − T_REF_C))``: the catalog's cold idle (no CUDA context,
  lowest clock) plus leakage that grows with die temperature;
* ``P_clocked = (tdp − idle)·(c_context·context + c_tensor·tensor_active + c_sm·sm_active)``: power that
  follows the SM clock and voltage. ``context`` (0 or 1) is a live CUDA context, which holds the GPU at its
  boost clock even with no work (an idle H100 draws ~117-123 W with a context, ~70 W without);
* ``g(x) = x·V(x)²`` with ``x = f/f_max`` and a V-f curve ``V(x) = max(v_floor, 1 − v_slope·(1 − x))``
  relative to V at f_max: dynamic power ~ f·V². Below the voltage floor (``x < 1 − (1 − v_floor)/v_slope``,
  about 1.1 GHz on an H100) only the frequency falls, so low power limits cost more speed per watt saved;
* ``P_mem = (tdp − idle)·c_dram·dram_active``: HBM, memory controllers and the data path to them, which do
  *not* shrink with the SM clock (the HBM clock is fixed), so memory-bound work keeps drawing it when capped;
* DVFS: under a power limit the clock is the highest one whose power fits (:meth:`max_clock_for_power`).

FP8 GEMMs keep the tensor pipes as busy per cycle as BF16 while doing twice the work per cycle; per active
cycle they draw a little *more* (``fp8_tensor_power``), so at the same ~700 W an FP8 GEMM runs at a slightly
lower clock and delivers ~1.8× the BF16 throughput. Callers weight ``tensor_active`` with
:meth:`GpuPowerModel.tensor_weight`.

Coefficients: fitted by :mod:`twinloop.hardware.power_fit` on the H100 readings in ``shared/data/h100``
(2026-11-23); ``benchmarks/validate_power_h100.py`` refits them and prints the per-phase comparison, and
docs/calibration.md ("GPU power model") records which phases were fitted and which are predicted, with the
misses. Other GPUs reuse the H100 coefficients, which are relative to each GPU's ``tdp − idle`` and to its
``f_max``: a scaling, not a fit (catalog ``sources.power_model``).

Known limits (measured, not modelled): power is not separable into activity × g(f) across GEMM shapes — at
the same ~650-700 W a square 8192³ GEMM runs at 1,367 MHz with 91 % tensor activity, a 2048³ GEMM or a
batch-512 decode at 1,860-1,940 MHz with ~60 %; fitted on the clock and power-limit sweep of the square
GEMM, the model overstates the power of moderately tensor-active work at high clock (decode batch ≥ 128).

Work slows with the clock as the roofline says: ``relative_speed(f) = 1 / (cf·f_max/f + (1 − cf))`` for a
compute-bound fraction ``cf`` of the step: compute-bound work slows with the clock, memory-bound barely.
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

#: Largest instantaneous power over the limit at a load step, before the power controller pulls the clock
#: down (H100: 890 W under its 700 W limit, 778 W under 600 W; NVML_FI_DEV_POWER_INSTANT at 20 Hz).
LAUNCH_OVERSHOOT = 1.27

#: Fewest rows a GEMM occupies on the tensor cores (the MMA tile height): a decode GEMV at batch 1 keeps the
#: tensor pipes as busy as batch 16 (an assumption that matches the flat 466-527 W of decode at batch 1-32).
MMA_MIN_ROWS = 16

#: Die temperature at which the catalog's ``idle_power_w`` holds (the H100's cold-idle reading: 69.5-70.9 W
#: at 32-33 °C).
T_REF_C = 32.0


@dataclass(frozen=True)
class PowerCoefficients:
    """Dimensionless coefficients of the power model, relative to ``tdp − idle`` and ``f_max``.

    The defaults are the H100 fit (:func:`twinloop.hardware.power_fit.fit_power`, reproduced by
    ``benchmarks/validate_power_h100.py`` and checked by ``tests/hardware/test_power_fit.py``).

    Attributes:
        c_context: clocked power of a live CUDA context with no work, at f_max.
        c_tensor / c_sm: clocked power per unit tensor-pipe / SM activity at f_max.
        c_dram: HBM power per unit DRAM activity (clock-independent).
        v_floor: lowest voltage relative to V(f_max); v_slope: dV/dx above the floor.
        leak_per_c: relative growth of static power per °C of die temperature.
        fp8_tensor_power: tensor-pipe power per active cycle of FP8 relative to BF16.
    """

    c_context: float = 0.0778
    c_tensor: float = 2.3658
    c_sm: float = 0.0
    c_dram: float = 0.4471
    v_floor: float = 0.625
    v_slope: float = 0.845
    leak_per_c: float = 0.0075
    fp8_tensor_power: float = 1.2576


DEFAULT_COEFFICIENTS = PowerCoefficients()


def clock_scale(x: ArrayOrFloat, coeff: PowerCoefficients = DEFAULT_COEFFICIENTS) -> ArrayOrFloat:
    """g(x): clocked power at relative clock ``x = f/f_max`` relative to full clock (1 at x = 1).

    ``x·V(x)²`` with ``V(x) = max(v_floor, 1 − v_slope·(1 − x))``; increasing in x, so DVFS can invert it.
    """
    v = np.maximum(coeff.v_floor, 1.0 - coeff.v_slope * (1.0 - np.asarray(x, dtype=np.float64)))
    g = np.asarray(x, dtype=np.float64) * v * v
    return g if g.ndim else float(g)  # type: ignore[return-value]


def clock_grid(
    coeff: PowerCoefficients = DEFAULT_COEFFICIENTS, size: int = 4097
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(x, g(x))`` on a uniform grid of ``x`` in [0, 1], for inverting ``g`` by interpolation."""
    x = np.linspace(0.0, 1.0, size)
    return x, np.asarray(clock_scale(x, coeff))


#: The H100's dense BF16 GEMM at its 700 W limit (the fit's anchor): tensor, SM and DRAM activity, die °C, clock.
REF_GEMM_ACTIVITY = (0.905, 1.0, 0.331)
REF_GEMM_TEMP_C = 66.0
REF_GEMM_CLOCK_FRACTION = 1367.0 / 1980.0


def reference_gemm_clock_x(gpu: GpuSpec) -> float:
    """Relative clock of ``gpu``'s dense GEMM at TDP, the fit's anchor: the catalog's ``gemm_clock_at_tdp_mhz`` over
    f_max (None: the H100's measured 1,367 of 1,980 MHz).
    """
    if gpu.gemm_clock_at_tdp_mhz is None:
        return REF_GEMM_CLOCK_FRACTION
    return gpu.gemm_clock_at_tdp_mhz / gpu.sm_clock_max_mhz


def coefficients_for(gpu: GpuSpec, base: PowerCoefficients = DEFAULT_COEFFICIENTS) -> PowerCoefficients:
    """The H100 fit scaled to ``gpu``: every term relative to its ``tdp − idle`` and ``f_max``, and the tensor
    term set so that a dense GEMM at TDP runs at the catalog's ``gemm_clock_at_tdp_mhz`` (None: at the H100's
    measured share of f_max, 1,367/1,980).
    """
    if gpu.gemm_clock_at_tdp_mhz is None:
        return base
    x = reference_gemm_clock_x(gpu)
    dyn = gpu.tdp_w - gpu.idle_power_w
    tensor, sm, dram = REF_GEMM_ACTIVITY
    static = gpu.idle_power_w * (1.0 + base.leak_per_c * (REF_GEMM_TEMP_C - T_REF_C))
    clocked_w = (gpu.tdp_w - static - dyn * base.c_dram * dram) / float(clock_scale(x, base))
    c_tensor = (clocked_w / dyn - base.c_context - base.c_sm * sm) / tensor
    return PowerCoefficients(**{**base.__dict__, "c_tensor": max(c_tensor, 0.0)})


@dataclass(frozen=True)
class GpuPowerModel:
    """The power model for one GPU kind; every method works on floats or NumPy arrays alike.

    ``coeff`` defaults to :func:`coefficients_for` the GPU (the H100 fit, scaled).
    """

    gpu: GpuSpec
    coeff: PowerCoefficients = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.coeff is None:
            object.__setattr__(self, "coeff", coefficients_for(self.gpu))

    @property
    def dyn_range_w(self) -> float:
        """TDP minus idle power: the scale of the dynamic terms."""
        return self.gpu.tdp_w - self.gpu.idle_power_w

    def tensor_weight(self, fp8_share: ArrayOrFloat) -> ArrayOrFloat:
        """Factor on ``tensor_active`` when a share ``fp8_share`` (0..1) of the tensor cycles run FP8."""
        return 1.0 + (self.coeff.fp8_tensor_power - 1.0) * fp8_share

    def static_w(self, temp_c: ArrayOrFloat) -> ArrayOrFloat:
        """Static (leakage + always-on) power at die temperature ``temp_c``: the cold idle power."""
        return self.gpu.idle_power_w * (1.0 + self.coeff.leak_per_c * (temp_c - T_REF_C))

    def clocked_dyn_w(
        self, tensor_active: ArrayOrFloat, sm_active: ArrayOrFloat, context: float | NDArray[np.float64] = 1.0
    ) -> ArrayOrFloat:
        """Power at full clock that scales with the SM clock and voltage (context + tensor + SM)."""
        c = self.coeff
        out = self.dyn_range_w * (c.c_context * context + c.c_tensor * tensor_active + c.c_sm * sm_active)
        return out  # type: ignore[return-value]

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
        context: float | NDArray[np.float64] = 1.0,
    ) -> ArrayOrFloat:
        """Board power in watts at the given clock, activities (0..1), die temperature and context (0/1)."""
        x = np.clip(np.asarray(clock_mhz, dtype=np.float64) / self.gpu.sm_clock_max_mhz, 0.0, 1.0)
        p = (
            self.static_w(temp_c)
            + self.clocked_dyn_w(tensor_active, sm_active, context) * clock_scale(x, self.coeff)
            + self.memory_dyn_w(dram_active)
        )
        p = np.asarray(p, dtype=np.float64)
        return p if p.ndim else float(p)  # type: ignore[return-value]

    def max_clock_for_power(
        self,
        power_limit_w: ArrayOrFloat,
        tensor_active: ArrayOrFloat,
        sm_active: ArrayOrFloat,
        dram_active: ArrayOrFloat,
        temp_c: ArrayOrFloat,
        context: float | NDArray[np.float64] = 1.0,
    ) -> ArrayOrFloat:
        """DVFS: the highest SM clock (MHz, within the GPU's range) whose power fits ``power_limit_w``.

        If even the lowest clock does not fit, the lowest clock is returned (the hardware cannot go lower).
        """
        budget = np.asarray(power_limit_w, dtype=np.float64) - self.static_w(temp_c) - self.memory_dyn_w(dram_active)
        clocked = np.asarray(self.clocked_dyn_w(tensor_active, sm_active, context), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            g_target = np.where(clocked > 0, budget / np.where(clocked > 0, clocked, 1.0), np.inf)
        x_grid, g_grid = _grid(self.coeff)
        x = np.interp(np.clip(g_target, 0.0, 1.0), g_grid, x_grid)
        f_min, f_max = self.gpu.sm_clock_min_mhz, self.gpu.sm_clock_max_mhz
        clock = np.clip(x * f_max, f_min, f_max)
        return clock if clock.ndim else float(clock)  # type: ignore[return-value]


def gemm_clock_mhz(
    model: GpuPowerModel,
    power_limit_w: float,
    activity: tuple[float, float, float],
    ref_clock_mhz: float,
    temp_c: float,
    lock_mhz: float | None = None,
) -> float:
    """DVFS clock of a compute-bound GEMM under ``power_limit_w`` (and a clock lock), from its ``(tensor, sm,
    dram)`` activity measured at ``ref_clock_mhz``: its DRAM activity follows the clock (it moves bytes in
    proportion to its FLOP rate), so the clock is a short fixed point.
    """
    tensor, sm, dram_ref = activity
    f = f_new = ref_clock_mhz
    for _ in range(8):
        dram = dram_ref * f / ref_clock_mhz
        f_new = float(model.max_clock_for_power(power_limit_w, tensor, sm, dram, temp_c))
        if lock_mhz is not None:
            f_new = min(f_new, lock_mhz)
        if abs(f_new - f) < 0.01:
            break
        f = f_new
    return f_new


_GRIDS: dict[PowerCoefficients, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}


def _grid(coeff: PowerCoefficients) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    grid = _GRIDS.get(coeff)
    if grid is None:
        grid = _GRIDS[coeff] = clock_grid(coeff)
    return grid


def relative_speed(clock_mhz: ArrayOrFloat, clock_max_mhz: float, compute_fraction: ArrayOrFloat) -> ArrayOrFloat:
    """Work rate at ``clock_mhz`` relative to full clock for a step whose compute-bound share is
    ``compute_fraction`` (0 = purely memory/communication bound, 1 = purely compute bound).
    """
    x = np.maximum(np.asarray(clock_mhz, dtype=np.float64) / clock_max_mhz, 1e-6)
    speed = 1.0 / (np.asarray(compute_fraction) / x + (1.0 - np.asarray(compute_fraction)))
    return speed if speed.ndim else float(speed)  # type: ignore[return-value]
