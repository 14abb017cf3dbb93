"""GPU readings the way NVML/DCGM report them: noisy, quantised (the twin's physics stays exact).

* power (``DCGM_FI_DEV_POWER_USAGE``): the 1 s mean the twin computes, plus Gaussian noise of standard deviation
  ``max(power_noise_fraction·P, power_noise_floor_w)`` (over ``sqrt(steps)`` when a telemetry window averages
  several steps), to ``power_step_w`` (NVML: mW);
* temperatures (die, HBM): to ``temp_step_c`` (NVML: whole °C);
* SM clock: in ``clock_step_mhz`` bins (H100: 15 MHz), with ``clock_jitter_mhz`` of noise on a GPU that a power
  or thermal limit holds (the clock controller hunts between bins there; an unlimited GPU sits on one bin);
* utilisation in whole percent, framebuffer in whole MiB, energy to the mJ.

A GPU that is off reads 0. The noise comes from the twin's ``sensors`` stream (:mod:`twinloop.twin.seeds`), so
more or fewer readings never move the physics' random draws. Sizes and their basis: ``calibration-twin.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import SensorSpec

F32 = np.float32


def quantise(x: NDArray[Any], step: float) -> NDArray[Any]:
    """``x`` rounded to the nearest multiple of ``step`` (unchanged when ``step`` is 0)."""
    return np.round(x / step) * step if step > 0 else x


class Sensors:
    """Applies the sensor model to one GPU telemetry block."""

    def __init__(self, spec: SensorSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng

    def power_w(self, mean_w: NDArray[np.float32], n_steps: int) -> NDArray[np.float32]:
        """Reported power from the exact mean over ``n_steps`` steps."""
        s = self.spec
        sigma = np.maximum(mean_w * F32(s.power_noise_fraction), F32(s.power_noise_floor_w)) / F32(np.sqrt(n_steps))
        z = np.asarray(self.rng.standard_normal(mean_w.shape[0]), dtype=F32)
        noisy = np.maximum(mean_w + sigma * z, 0.0)
        return np.asarray(quantise(noisy, s.power_step_w) * (mean_w > 0), dtype=F32)

    def temp_c(self, temp_c: NDArray[np.float32]) -> NDArray[np.float32]:
        """Reported temperature (whole degrees by default)."""
        return np.asarray(quantise(temp_c, self.spec.temp_step_c), dtype=F32)

    def clock_mhz(
        self, clock_mhz: NDArray[np.float32], limited: NDArray[np.bool_], max_mhz: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """Reported SM clock: jitter on limited GPUs, then the clock bins, within ``[0, max_mhz]``."""
        s = self.spec
        out = clock_mhz
        if s.clock_jitter_mhz > 0 and limited.any():
            idx = np.flatnonzero(limited & (clock_mhz > 0))
            out = clock_mhz.copy()
            out[idx] += F32(s.clock_jitter_mhz) * np.asarray(self.rng.standard_normal(idx.size), dtype=F32)
        return np.asarray(np.clip(quantise(out, s.clock_step_mhz), 0.0, max_mhz), dtype=F32)
