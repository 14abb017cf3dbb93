"""Money: GPU-hours at a rental/amortized price plus facility energy at a price per kWh.

``cost = gpu_hours × price_per_gpu_hour + gpu_energy_kwh × pue × price_per_kwh``.

The GPU-hour price is the all-in rate of one GPU (cloud list price or amortized capex + opex); the energy
term adds the electricity the GPUs draw, scaled by the facility's PUE (cooling, power conversion; default
:data:`twinloop.plan.efficiency.DEFAULT_PUE` = 1.2). When the GPU-hour price already includes power, pass
``price_per_kwh=0``. Works on floats and NumPy arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.plan.efficiency import DEFAULT_PUE

Num = TypeVar("Num", float, NDArray[np.float64])

J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Prices:
    """Prices and facility overhead.

    Attributes:
        per_gpu_hour_usd: all-in price of one GPU for one hour (USD).
        per_kwh_usd: electricity price (USD/kWh).
        pue: facility power usage effectiveness (≥ 1) applied to GPU energy.
    """

    per_gpu_hour_usd: float = 2.0
    per_kwh_usd: float = 0.10
    pue: float = DEFAULT_PUE

    def __post_init__(self) -> None:
        if self.per_gpu_hour_usd < 0:
            raise InputError("--price-gpu-hour", "", f"must be >= 0, got {self.per_gpu_hour_usd}")
        if self.per_kwh_usd < 0:
            raise InputError("--price-kwh", "", f"must be >= 0, got {self.per_kwh_usd}")
        if not 1.0 <= self.pue <= 5.0:
            raise InputError("pue", "", f"must be in [1, 5], got {self.pue}")


def facility_energy_kwh(gpu_energy_j: Num, pue: float) -> Num:
    """Facility energy (kWh) for ``gpu_energy_j`` joules drawn by the GPUs."""
    return gpu_energy_j * pue / J_PER_KWH


def cost_usd(gpu_hours: Num, gpu_energy_j: Num, prices: Prices) -> Num:
    """Total cost (USD): GPU-hours × price + facility energy × price per kWh."""
    return gpu_hours * prices.per_gpu_hour_usd + facility_energy_kwh(gpu_energy_j, prices.pue) * prices.per_kwh_usd
