"""A fake NVML library that replays recorded readings, with pynvml's function names and error types.

:class:`FakeNvml` stands in for the ``pynvml`` module in :class:`~twinloop.telemetry.sources.nvml.NvmlSource`,
so tests run the real wrapper code (unit conversion, unsupported calls, XID events) without a GPU.

Recording format (JSON)::

    {"synthetic": true|false, "note": "...", "devices": [
        {"uuid", "name", "pci_bus_id", "memory_total_bytes", "unsupported": [getter names],
         "samples": [{"power_mw", "energy_mj", "gpu_temp_c", "memory_temp_c", "sm_clock_mhz", "mem_clock_mhz",
                      "power_limit_mw", "clocks_event_reasons", "gpu_util_pct", "mem_util_pct", "fb_used_bytes",
                      "ecc": {"sbe_volatile", "dbe_volatile", "sbe_aggregate", "dbe_aggregate"},
                      "remapped_rows": [correctable, uncorrectable, pending, failure],
                      "compute_processes": [{"pid", "name", "used_memory_bytes"}, ...]}, ...]}],
     "xid_events": [{"sample": k, "gpu": i, "xid": code}]}

``compute_processes`` is optional: a recording with none on any sample replays a binding without
``nvmlDeviceGetComputeRunningProcesses`` (the call is absent); a sample without it, once some have it, lists no
process; a process's ``name`` null is one NVML may not name, its ``used_memory_bytes`` null one whose memory the
driver does not report.

Values are in NVML's raw units (mW, mJ, bytes). A device's cursor moves to its next sample each time its
power is read (the NVML source reads power first in every sweep); at the end the recording loops, with the
energy counter carried on so it stays monotonic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml

from twinloop.errors import InputError


@dataclass
class _Handle:
    index: int


class _Named:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class FakeNvml:
    """Replays a recording through pynvml-compatible functions (only those the NVML source uses)."""

    NVMLError = pynvml.NVMLError

    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self.devices: list[dict[str, Any]] = recording.get("devices", [])
        self.cursor = [-1] * len(self.devices)
        self.initialized = False
        self._pending: list[tuple[int, int]] = []
        self._event_sets = 0

    @classmethod
    def from_file(cls, path: str | Path) -> FakeNvml:
        """Load a recording; raises InputError on a missing or malformed file."""
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise InputError(str(path), "", f"not an NVML recording: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("devices"), list) or not data["devices"]:
            raise InputError(str(path), "devices", "an NVML recording needs a non-empty 'devices' list")
        return cls(data)

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes are pynvml's own, so the source handles fake and real alike.
        if name.startswith(("NVML", "nvmlEventType", "nvmlClocksEventReason", "nvmlMemory_v")):
            return getattr(pynvml, name)
        # The process calls exist only where the recording has processes (else: an older binding, no such call).
        if name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlSystemGetProcessName") and self._has_processes():
            return self._compute_processes if name.startswith("nvmlDevice") else self._process_name
        raise AttributeError(name)

    def _has_processes(self) -> bool:
        return any("compute_processes" in s for d in self.__dict__.get("devices", ()) for s in d.get("samples", ()))

    def _compute_processes(self, h: _Handle) -> list[Any]:
        procs = self._sample(h, "nvmlDeviceGetComputeRunningProcesses").get("compute_processes", [])
        return [_Named(pid=int(p["pid"]), usedGpuMemory=p.get("used_memory_bytes")) for p in procs]

    def _process_name(self, pid: int) -> str:
        self._check()
        for dev in self.devices:
            for s in dev["samples"]:
                for p in s.get("compute_processes", ()):
                    if int(p["pid"]) == pid and p.get("name") is not None:
                        return str(p["name"])
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    # ----- helpers ------------------------------------------------------------------------------------
    def _check(self) -> None:
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _sample(self, h: _Handle, getter: str) -> dict[str, Any]:
        self._check()
        dev = self.devices[h.index]
        if getter in dev.get("unsupported", []):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        samples = dev["samples"]
        k = max(self.cursor[h.index], 0)
        s: dict[str, Any] = samples[k % len(samples)]
        return s

    def _energy_offset(self, index: int) -> int:
        samples = self.devices[index]["samples"]
        loops = max(self.cursor[index], 0) // len(samples)
        span = int(samples[-1]["energy_mj"]) - int(samples[0]["energy_mj"]) + int(samples[0]["power_mw"])
        return loops * span

    # ----- pynvml API ---------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.recording.get("driver_version", "0"))

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check()
        if not 0 <= index < len(self.devices):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        return str(self.devices[h.index]["uuid"])

    def nvmlDeviceGetName(self, h: _Handle) -> str:
        return str(self.devices[h.index]["name"])

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> Any:
        return _Named(busId=self.devices[h.index]["pci_bus_id"])

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        self._check()
        self.cursor[h.index] += 1
        k = self.cursor[h.index]
        for ev in self.recording.get("xid_events", []):
            n = len(self.devices[h.index]["samples"])
            if ev["gpu"] == h.index and k % n == ev["sample"] and self._event_sets:
                self._pending.append((h.index, int(ev["xid"])))
        return int(self._sample(h, "nvmlDeviceGetPowerUsage")["power_mw"])

    def nvmlDeviceGetTotalEnergyConsumption(self, h: _Handle) -> int:
        s = self._sample(h, "nvmlDeviceGetTotalEnergyConsumption")
        return int(s["energy_mj"]) + self._energy_offset(h.index)

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        return int(self._sample(h, "nvmlDeviceGetTemperature")["gpu_temp_c"])

    def nvmlDeviceGetFieldValues(self, h: _Handle, field_ids: list[int]) -> Any:
        s = self._sample(h, "nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            values[i].fieldId = fid
            if fid == pynvml.NVML_FI_DEV_MEMORY_TEMP and "memory_temp_c" in s:
                values[i].nvmlReturn = pynvml.NVML_SUCCESS
                values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                values[i].value.uiVal = int(s["memory_temp_c"])
            else:
                values[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock: int) -> int:
        s = self._sample(h, "nvmlDeviceGetClockInfo")
        return int(s["sm_clock_mhz"] if clock == pynvml.NVML_CLOCK_SM else s["mem_clock_mhz"])

    def nvmlDeviceGetPowerManagementLimit(self, h: _Handle) -> int:
        return int(self._sample(h, "nvmlDeviceGetPowerManagementLimit")["power_limit_mw"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: _Handle) -> int:
        return int(self._sample(h, "nvmlDeviceGetCurrentClocksEventReasons")["clocks_event_reasons"])

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:
        s = self._sample(h, "nvmlDeviceGetUtilizationRates")
        return _Named(gpu=int(s["gpu_util_pct"]), memory=int(s["mem_util_pct"]))

    def nvmlDeviceGetMemoryInfo(self, h: _Handle, version: int | None = None) -> Any:
        # As the driver does: v1's ``used`` is total − free, the driver's reserved memory included; v2 reports
        # the reserved part apart (``fb_reserved_bytes`` in a recording, 0 when absent).
        s = self._sample(h, "nvmlDeviceGetMemoryInfo")
        total = int(self.devices[h.index]["memory_total_bytes"])
        used, reserved = int(s["fb_used_bytes"]), int(s.get("fb_reserved_bytes", 0))
        if version is None:
            return _Named(total=total, used=used + reserved, free=total - used - reserved)
        return _Named(total=total, reserved=reserved, used=used, free=total - used - reserved)

    def nvmlDeviceGetTotalEccErrors(self, h: _Handle, error_type: int, counter_type: int) -> int:
        ecc = self._sample(h, "nvmlDeviceGetTotalEccErrors")["ecc"]
        sbe = error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        vol = counter_type == pynvml.NVML_VOLATILE_ECC
        key = ("sbe" if sbe else "dbe") + ("_volatile" if vol else "_aggregate")
        return int(ecc[key])

    def nvmlDeviceGetRemappedRows(self, h: _Handle) -> tuple[int, int, int, int]:
        c, u, p, f = self._sample(h, "nvmlDeviceGetRemappedRows")["remapped_rows"]
        return int(c), int(u), int(p), int(f)

    def nvmlEventSetCreate(self) -> int:
        self._check()
        self._event_sets += 1
        return self._event_sets

    def nvmlDeviceRegisterEvents(self, h: _Handle, event_types: int, event_set: int) -> None:
        self._check()

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:
        self._check()
        if not self._pending:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        index, xid = self._pending.pop(0)
        return _Named(device=_Handle(index), eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlEventSetFree(self, event_set: int) -> None:
        return None
