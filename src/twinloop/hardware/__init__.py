"""Hardware specifications (GPUs, links) loaded from the catalog, and the shared GPU power model.

The public API: the names in ``__all__`` (``from twinloop.hardware import ...``), what other packages and
users may import; the modules behind them may move. They load on first use (PEP 562), so importing one
module of the package does not load the rest (CLI start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinloop.lazy import lazy_exports

if TYPE_CHECKING:
    from twinloop.hardware.failure_rates import FailureCause
    from twinloop.hardware.gpu import GpuSpec, get_gpu, gpu_catalog
    from twinloop.hardware.link import LinkSpec, get_link, link_catalog
    from twinloop.hardware.power import (
        DEFAULT_COEFFICIENTS,
        GpuPowerModel,
        PowerCoefficients,
        clock_scale,
        relative_speed,
    )
    from twinloop.hardware.power_fit import PowerFit, fit_power
    from twinloop.hardware.readings import PhaseReading, Readings, load_readings
    from twinloop.hardware.thermal import HBM_DEFAULT, HbmThermal

_WHERE = {
    "GpuSpec": "gpu",
    "get_gpu": "gpu",
    "gpu_catalog": "gpu",
    "LinkSpec": "link",
    "get_link": "link",
    "link_catalog": "link",
    "DEFAULT_COEFFICIENTS": "power",
    "GpuPowerModel": "power",
    "PowerCoefficients": "power",
    "clock_scale": "power",
    "relative_speed": "power",
    "PowerFit": "power_fit",
    "fit_power": "power_fit",
    "PhaseReading": "readings",
    "Readings": "readings",
    "load_readings": "readings",
    "HBM_DEFAULT": "thermal",
    "HbmThermal": "thermal",
    "FailureCause": "failure_rates",
}
__all__ = [
    "DEFAULT_COEFFICIENTS",
    "HBM_DEFAULT",
    "FailureCause",
    "GpuPowerModel",
    "GpuSpec",
    "HbmThermal",
    "LinkSpec",
    "PhaseReading",
    "PowerCoefficients",
    "PowerFit",
    "Readings",
    "clock_scale",
    "fit_power",
    "get_gpu",
    "get_link",
    "gpu_catalog",
    "link_catalog",
    "load_readings",
    "relative_speed",
]


__getattr__ = lazy_exports(__name__, _WHERE)
