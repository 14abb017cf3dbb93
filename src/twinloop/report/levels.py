"""Colour levels with a physical meaning, shared by the reports and the dashboard.

A GPU's temperature is judged by its headroom to that GPU's own slowdown temperature (from the GPU catalog:
the hardware starts cutting clocks there), and its power by the fraction of its enforced power limit it draws.
A colour therefore says the same thing on any GPU model and in any store, unlike a scale stretched between
the coolest and the hottest value shown. Each level carries a text colour chosen for contrast on its fill.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from twinloop.hardware.gpu import GpuSpec, gpu_key, load_gpu_catalog


@dataclass(frozen=True)
class Level:
    """One colour band ``[min, max)`` of a quantity, with the text colour to print on it."""

    label: str
    min: float
    max: float
    fill: str
    ink: str

    def as_dict(self) -> dict[str, object]:
        """JSON-ready (infinite bounds left out)."""
        out: dict[str, object] = {"label": self.label, "color": self.fill, "ink": self.ink}
        if math.isfinite(self.min):
            out["min"] = self.min
        if math.isfinite(self.max):
            out["max"] = self.max
        return out


INF = math.inf
DARK, LIGHT = "#111827", "#ffffff"
#: Headroom to the GPU's slowdown temperature, °C (slowdown − temperature).
TEMP_HEADROOM_LEVELS: tuple[Level, ...] = (
    Level("at/over slowdown", -INF, 0.0, "#b91c1c", LIGHT),
    Level("< 5 °C to slowdown", 0.0, 5.0, "#f97316", DARK),
    Level("5–10 °C", 5.0, 10.0, "#fcd34d", DARK),
    Level("10–20 °C", 10.0, 20.0, "#bbf7d0", DARK),
    Level("≥ 20 °C below", 20.0, INF, "#bfdbfe", DARK),
)
#: Drawn power as a fraction of the enforced power limit.
POWER_FRACTION_LEVELS: tuple[Level, ...] = (
    Level("< 50 % of limit", -INF, 0.5, "#e0f2fe", DARK),
    Level("50–80 %", 0.5, 0.8, "#bbf7d0", DARK),
    Level("80–95 %", 0.8, 0.95, "#fde68a", DARK),
    Level("at limit (95–102 %)", 0.95, 1.02, "#f97316", DARK),
    Level("over limit", 1.02, INF, "#b91c1c", LIGHT),
)
NO_DATA = Level("no data", -INF, INF, "#e5e7eb", DARK)


def level_index(values: ArrayLike, levels: Sequence[Level]) -> NDArray[np.int64]:
    """Index of the level each value falls in; −1 for NaN."""
    v = np.asarray(values, dtype=np.float64)
    edges = np.array([lv.min for lv in levels[1:]], dtype=np.float64)
    idx = np.searchsorted(edges, v, side="right").astype(np.int64)
    return np.where(np.isnan(v), -1, idx)


def level_of(value: float | None, levels: Sequence[Level]) -> Level:
    """The level of one value (``NO_DATA`` for None/NaN)."""
    if value is None or not math.isfinite(value):
        return NO_DATA
    return levels[int(level_index([value], levels)[0])]


@lru_cache(maxsize=1)
def _catalog() -> dict[str, GpuSpec]:
    return load_gpu_catalog()


def gpu_spec_of(labels: Mapping[str, str] | None) -> GpuSpec | None:
    """The catalog GPU a telemetry entity's labels name: ``gpu_kind`` (a catalog key) or ``modelName`` (the
    driver's name, e.g. ``NVIDIA H100 80GB HBM3``, resolved by :func:`~twinloop.hardware.gpu.gpu_key`); None
    when unknown.
    """
    if not labels:
        return None
    cat = _catalog()
    kind = labels.get("gpu_kind")
    if kind and kind in cat:
        return cat[kind]
    key = gpu_key(labels.get("modelName", ""))
    return cat.get(key) if key else None


def default_slowdown_temp_c() -> float:
    """Used when a GPU's model is unknown: the lowest slowdown temperature in the catalog (colours warn early)."""
    return min(s.slowdown_temp_c for s in _catalog().values())


def slowdown_temps_c(
    labels: Mapping[str, Mapping[str, str]], entities: Sequence[str]
) -> tuple[NDArray[np.float64], int]:
    """Slowdown temperature per entity (catalog by label, else :func:`default_slowdown_temp_c`), and how many
    entities fell back to the default.
    """
    out = np.full(len(entities), np.nan)
    for i, e in enumerate(entities):  # per entity, once per request: the labels are a dict, not an array
        spec = gpu_spec_of(labels.get(e))
        if spec is not None:
            out[i] = spec.slowdown_temp_c
    unknown = int(np.isnan(out).sum())
    out[np.isnan(out)] = default_slowdown_temp_c()
    return out, unknown
