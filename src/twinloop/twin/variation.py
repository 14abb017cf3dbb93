"""GPU-to-GPU manufacturing variation: per-GPU factors on leakage power, dynamic power and thermal resistance.

Each factor is ``1 + sigma·z`` with ``z`` a standard normal truncated at ``±clip_sigmas`` (out-of-range draws are
drawn again, so the truncated normal has no atoms at its bounds), drawn once per GPU when the twin is built,
from the ``variation`` stream of the scenario seed (:mod:`twinloop.twin.seeds`): the same seed builds the same
hall, bit for bit. The sizes (:class:`~twinloop.twin.scenario.VariationSpec`) and their basis are in
``docs/sections/calibration-twin.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import VariationSpec


@dataclass(frozen=True, eq=False)
class GpuVariation:
    """Per-GPU multiplicative factors (float32, mean ≈ 1).

    Attributes:
        leakage: on static (leakage) power, both its constant and its temperature slope.
        dynamic: on clocked dynamic power (tensor and SM activity).
        thermal_resistance: on die-to-coolant thermal resistance.
    """

    leakage: NDArray[np.float32]
    dynamic: NDArray[np.float32]
    thermal_resistance: NDArray[np.float32]

    @staticmethod
    def nominal(n_gpus: int) -> GpuVariation:
        """No variation: every factor 1."""
        one = np.ones(n_gpus, dtype=np.float32)
        return GpuVariation(one, one.copy(), one.copy())


def truncated_normal(rng: np.random.Generator, n: int, clip: float) -> NDArray[np.float64]:
    """``n`` standard normal draws truncated at ``±clip`` (redrawn until inside; vectorized)."""
    z = rng.standard_normal(n)
    bad = np.flatnonzero(np.abs(z) > clip)
    while bad.size:
        z[bad] = rng.standard_normal(bad.size)
        bad = bad[np.abs(z[bad]) > clip]
    return z


def draw_variation(rng: np.random.Generator, n_gpus: int, spec: VariationSpec) -> GpuVariation:
    """Draw every GPU's factors: leakage, then dynamic, then thermal resistance (this order is part of the seed's
    meaning). A zero sigma still draws, so changing one sigma leaves the other factors as they were.
    """
    out = []
    for sigma in (spec.leakage_sigma, spec.dynamic_sigma, spec.thermal_resistance_sigma):
        z = truncated_normal(rng, n_gpus, spec.clip_sigmas)
        out.append((1.0 + sigma * z).astype(np.float32))
    return GpuVariation(*out)
