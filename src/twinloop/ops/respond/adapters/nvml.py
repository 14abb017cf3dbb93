"""NVML adapter: power limits and locked clocks on this node's GPUs, through nvidia-ml-py.

The NVML library is passed in (``pynvml`` itself, or a fake with the same functions in tests), so nothing here
touches a GPU at construction. NVML speaks milliwatts; this adapter speaks watts like the rest of twinloop.
Setting limits needs root; NVML's refusal comes back as a ``failed`` reply with NVML's message.
"""

from __future__ import annotations

from typing import Any, ClassVar

from twinloop.hardware.gpu import get_gpu, gpu_key
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply, ThermalPath, leaf


def _gpu_index(entity: str) -> int | None:
    """GPU index from an entity id's last component (``.../gpu3`` as the NVML source and a site file name GPUs,
    ``.../g3`` as the twin does, or ``.../3``); None for non-GPU ids.
    """
    name = leaf(entity)
    digits = name.removeprefix("gpu") if name.startswith("gpu") else name.removeprefix("g")
    return int(digits) if digits.isdigit() else None


class NvmlAdapter(ActionAdapter):
    """Power caps (``nvmlDeviceSetPowerManagementLimit``) and clock ceilings (``nvmlDeviceSetGpuLockedClocks``)."""

    name: ClassVar[str] = "nvml"
    supported: ClassVar[frozenset[ActionKind]] = frozenset({ActionKind.POWER_CAP, ActionKind.SET_CLOCKS})

    def __init__(self, nvml: Any, dry_run: bool = True) -> None:
        self.nvml = nvml
        self.dry_run = dry_run

    @classmethod
    def from_system(cls, dry_run: bool = True) -> NvmlAdapter:
        """Initialise the real NVML (raises the NVML error when no driver is present)."""
        import pynvml

        pynvml.nvmlInit()
        return cls(pynvml, dry_run=dry_run)

    def _handles(self, target: str) -> list[Any]:
        index = _gpu_index(target)
        if index is not None:
            return [self.nvml.nvmlDeviceGetHandleByIndex(index)]
        count = self.nvml.nvmlDeviceGetCount()
        return [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        """Power-limit range in W (the narrowest over the target's GPUs); clock range from the max SM clock."""
        handles = self._handles(target)
        if kind == ActionKind.POWER_CAP:
            ranges = [self.nvml.nvmlDeviceGetPowerManagementLimitConstraints(h) for h in handles]
            return max(r[0] for r in ranges) / 1000.0, min(r[1] for r in ranges) / 1000.0
        if kind == ActionKind.SET_CLOCKS:
            top = min(self.nvml.nvmlDeviceGetMaxClockInfo(h, self.nvml.NVML_CLOCK_SM) for h in handles)
            return 0.3 * top, float(top)
        return None

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        """The GPU's slowdown threshold from the catalog entry of the model NVML names (``NVIDIA H100 80GB HBM3`` ->
        ``h100-sxm``, 89 C), no coolant reading; None for a model the catalog does not know. The catalog, not
        ``nvmlDeviceGetTemperatureThreshold``: H100 and H200 drivers report their thresholds against T.Limit (the
        recorded H200's ``nvidia-smi -q``: "GPU Slowdown T.Limit Temp: -2 C"), and no reading here says what the
        absolute query returns there.
        """
        index = _gpu_index(gpu)
        if index is None:
            return None
        name = self.nvml.nvmlDeviceGetName(self.nvml.nvmlDeviceGetHandleByIndex(index))
        key = gpu_key(name.decode() if isinstance(name, bytes) else str(name))
        return None if key is None else ThermalPath(get_gpu(key).slowdown_temp_c, None)

    def current(self, kind: ActionKind, target: str) -> float | None:
        """The current power limit in W (mean over the target's GPUs)."""
        if kind != ActionKind.POWER_CAP:
            return None
        values = [self.nvml.nvmlDeviceGetPowerManagementLimit(h) for h in self._handles(target)]
        return float(sum(values)) / len(values) / 1000.0

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.value is None:
            return AdapterReply("refused", f"{request.kind} needs a value")
        handles = self._handles(request.target)
        if request.kind == ActionKind.POWER_CAP:
            what = f"power limit {request.value:.0f} W on {len(handles)} GPU(s)"
        else:
            what = f"SM clock ceiling {request.value:.0f} MHz on {len(handles)} GPU(s)"
        if self.dry_run:
            return AdapterReply("dry_run", f"would set {what}")
        try:
            for h in handles:
                if request.kind == ActionKind.POWER_CAP:
                    self.nvml.nvmlDeviceSetPowerManagementLimit(h, int(request.value * 1000))
                else:
                    self.nvml.nvmlDeviceSetGpuLockedClocks(h, 0, int(request.value))
        except Exception as exc:  # NVMLError subclasses carry the driver's message
            return AdapterReply("failed", f"NVML refused to set {what}: {exc}")
        return AdapterReply("applied", f"set {what}")
