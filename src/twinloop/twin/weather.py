"""Ambient dry/wet-bulb temperature and grid carbon intensity over the day.

Dry-bulb is a sinusoid peaking at ``peak_hour`` (or a 24-value hourly profile, interpolated, wrapping at
midnight); wet-bulb is dry-bulb minus a constant depression (a simplification: real depression varies with
humidity); carbon intensity is interpolated hourly. A heat-wave fault adds ``extra_c`` to both temperatures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twinloop.twin.scenario import WeatherSpec

_HOURS = np.arange(25, dtype=np.float64)


@dataclass(frozen=True)
class Ambient:
    """Conditions at one instant."""

    drybulb_c: float
    wetbulb_c: float
    carbon_g_per_kwh: float


class Weather:
    """Evaluates :class:`WeatherSpec` at simulation time ``t_s``."""

    def __init__(self, spec: WeatherSpec) -> None:
        self.spec = spec
        self._carbon = np.append(spec.carbon_g_per_kwh, spec.carbon_g_per_kwh[0])
        self._profile = (
            None if spec.drybulb_profile_c is None else np.append(spec.drybulb_profile_c, spec.drybulb_profile_c[0])
        )

    def hour(self, t_s: float) -> float:
        """Local hour of day (0..24) at ``t_s``."""
        return (self.spec.start_hour + t_s / 3600.0) % 24.0

    def at(self, t_s: float, extra_c: float = 0.0) -> Ambient:
        """Ambient at ``t_s`` with ``extra_c`` added (heat wave)."""
        h = self.hour(t_s)
        if self._profile is not None:
            dry = float(np.interp(h, _HOURS, self._profile))
        else:
            s = self.spec
            dry = s.drybulb_mean_c + s.drybulb_amplitude_c * math.cos(2 * math.pi * (h - s.peak_hour) / 24.0)
        dry += extra_c
        return Ambient(dry, dry - self.spec.wetbulb_depression_c, float(np.interp(h, _HOURS, self._carbon)))
