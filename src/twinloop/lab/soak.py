"""Readings of one GPU device check: a 10 Hz heat soak and cool-down, and a power cap set inside the soak.

The layout is the one ``tools/gpu/check.sh`` writes (``tests/fixtures/h200/README.md``): ``soak_10hz.csv``
(NVML power in mW, die °C, SM MHz at 10 Hz through all of ``tools/gpu/shapes.py``), ``soak_phases.csv`` (the
wall-clock start of each phase), ``actuator.json`` (NVML power, SM clock and clock-event reasons at 10 Hz around
a power cap, and the times the cap was set and restored) and ``watch_nvml.parquet`` (the 1 Hz watcher's store,
for the memory utilisation). Times are seconds from the start of the heat soak.

NVML's power reading on Hopper (``nvmlDeviceGetPowerUsage``) is a 1 s moving average; the die temperature is
read in whole °C. Both limit what a fit can resolve (see :mod:`twinloop.lab.thermal_poles`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.lab.phases import load_phases
from twinloop.telemetry.fields import DCGM_FI_DEV_MEM_COPY_UTIL, DCGM_FI_DEV_MEMORY_TEMP

F64 = NDArray[np.float64]
HEAT_SOAK = "heat_soak"
MEM_UTIL_FIELD = DCGM_FI_DEV_MEM_COPY_UTIL
HBM_TEMP_FIELD = DCGM_FI_DEV_MEMORY_TEMP


@dataclass(frozen=True)
class CapReadings:
    """NVML samples around a power cap (``actuator.json``), times from the heat soak's start.

    ``set_s`` / ``restore_s`` are when the adapter's call to set / restore the limit *returned* (the set itself
    happened at most that call's duration earlier).
    """

    t_s: F64
    power_w: F64
    clock_mhz: F64
    reasons: NDArray[np.int64]
    cap_w: float
    default_limit_w: float
    set_s: float
    restore_s: float


@dataclass(frozen=True)
class SoakReadings:
    """The 10 Hz soak trace, its phase starts, the cap samples and the watcher's 1 Hz memory utilisation (%)
    and HBM temperature (°C), each as ``(t_s, value)``.
    """

    t_s: F64
    power_w: F64
    temp_c: F64
    clock_mhz: F64
    phase_start_s: dict[str, float]
    cap: CapReadings
    watch_1hz: dict[str, tuple[F64, F64]]

    def window(self, start_s: float, end_s: float) -> tuple[float, float, float]:
        """Mean (power W, die °C, SM MHz) of the 10 Hz samples in ``[start_s, end_s)``."""
        m = (self.t_s >= start_s) & (self.t_s < end_s)
        if not m.any():
            raise InputError("soak_10hz.csv", "t", f"no sample in [{start_s:.1f}, {end_s:.1f}) s of the heat soak")
        return float(self.power_w[m].mean()), float(self.temp_c[m].mean()), float(self.clock_mhz[m].mean())

    def watch_mean(self, field: str, start_s: float, end_s: float) -> float:
        """Mean of the watcher's 1 Hz samples of ``field`` in ``[start_s, end_s)``."""
        t, v = self.watch_1hz[field]
        m = (t >= start_s) & (t < end_s)
        if not m.any():
            raise InputError("watch_nvml.parquet", field, f"no sample in [{start_s:.1f}, {end_s:.1f}) s")
        return float(v[m].mean())

    def mem_util(self, start_s: float, end_s: float) -> float:
        """Mean NVML memory utilisation (0..1) in ``[start_s, end_s)``."""
        return self.watch_mean(MEM_UTIL_FIELD, start_s, end_s) / 100.0


def _cap(path: Path, t0: float) -> CapReadings:
    raw = json.loads(path.read_text())
    s = np.asarray(raw["samples"], dtype=np.float64)
    events = {e["what"]: float(e["t"]) for e in raw["events"]}
    if s.ndim != 2 or s.shape[1] != 4 or not {"cap", "restore"} <= events.keys():
        raise InputError(
            str(path), "samples/events", "expected samples [t, W, MHz, reasons] and 'cap' and 'restore' events"
        )
    return CapReadings(
        t_s=s[:, 0] - t0,
        power_w=s[:, 1],
        clock_mhz=s[:, 2],
        reasons=s[:, 3].astype(np.int64),
        cap_w=float(raw["cap_w"]),
        default_limit_w=float(raw["default_limit_w"]),
        set_s=events["cap"] - t0,
        restore_s=events["restore"] - t0,
    )


def load_trace(path: Path) -> tuple[F64, F64, F64, F64]:
    """``soak_10hz.csv`` of a device check: Unix time s, power W, die °C, SM MHz, one row per 10 Hz sample."""
    rows = np.genfromtxt(path, delimiter=",", names=True)
    return (
        rows["t"].astype(np.float64),
        rows["power_mw"] / 1000.0,
        rows["gpu_temp_c"].astype(np.float64),
        rows["sm_mhz"].astype(np.float64),
    )


def load_soak(data: Path) -> SoakReadings:
    """Read a device-check directory (see the module docstring)."""
    try:
        phases = {phase: t for t, phase in load_phases(data / "soak_phases.csv")}
        t, power_w, temp_c, clock_mhz = load_trace(data / "soak_10hz.csv")
        watch = pq.read_table(data / "watch_nvml.parquet", columns=["ts", "field", "value"]).to_pydict()
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(str(data), "", f"not a device-check directory ({exc})") from exc
    if HEAT_SOAK not in phases:
        raise InputError(str(data / "soak_phases.csv"), "phase", f"no '{HEAT_SOAK}' phase")
    t0 = phases[HEAT_SOAK]
    field = np.asarray(watch["field"])
    ts, value = np.asarray(watch["ts"], dtype=np.float64) - t0, np.asarray(watch["value"], dtype=np.float64)
    return SoakReadings(
        t_s=t - t0,
        power_w=power_w,
        temp_c=temp_c,
        clock_mhz=clock_mhz,
        phase_start_s={name: t - t0 for name, t in phases.items()},
        cap=_cap(data / "actuator.json", t0),
        watch_1hz={f: (ts[field == f], value[field == f]) for f in (MEM_UTIL_FIELD, HBM_TEMP_FIELD)},
    )


def settle_s(t_s: F64, power_w: F64, since_s: float, target_w: float, band: float) -> float:
    """Seconds from ``since_s`` to the first sample within ``band`` (relative) of ``target_w`` that stays
    within it for the next second (NaN if none).
    """
    after = np.flatnonzero(t_s > since_s)
    inside = np.abs(power_w[after] / target_w - 1.0) <= band
    for k, i in enumerate(after):
        hold = after[k:][t_s[after[k:]] <= t_s[i] + 1.0]
        if inside[k] and np.all(np.abs(power_w[hold] / target_w - 1.0) <= band):
            return float(t_s[i] - since_s)
    return float("nan")
