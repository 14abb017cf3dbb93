"""NVML source (through nvidia-ml-py's ``pynvml``): power, energy, temperatures, clocks, reasons, ECC, XID.

Every ``period_s`` (down to 0.1 s) it reads each GPU and converts NVML's units to the field table's:
mW → W (power, power limit), mJ → J (energy), bytes → MiB (framebuffer). A reading the GPU does not
support is counted once per GPU as ``unavailable`` and not asked again; any other NVML error is counted
as ``source_error`` and the sweep goes on. XID errors come from an NVML event set (critical XID events)
polled without blocking each sweep; ``DCGM_FI_DEV_XID_ERRORS`` carries the last XID seen (0 = none),
as DCGM does. The compute processes on each GPU (``nvmlDeviceGetComputeRunningProcesses``) give
``TWINLOOP_FI_GPU_COMPUTE_PROCESSES`` (their count) and, as the frame label ``compute_processes``
(:mod:`~twinloop.telemetry.sources.nvml_processes`), their pids, names (``nvmlSystemGetProcessName``, where NVML
may read them) and memory; a driver or binding without the call leaves both out (absent, not 0).

The library is injected (``lib``): the real ``pynvml`` module by default, or
:class:`~twinloop.telemetry.sources.nvml_fake.FakeNvml` replaying a recording (``replay_file``) so that
tests need no GPU. Tensor-pipe and DRAM activity (``DCGM_FI_PROF_*``) need DCGM's profiling module and
are not read here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from twinloop.errors import InputError
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,
    DCGM_FI_DEV_ECC_DBE_AGG_TOTAL,
    DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
    DCGM_FI_DEV_ECC_SBE_AGG_TOTAL,
    DCGM_FI_DEV_ECC_SBE_VOL_TOTAL,
    DCGM_FI_DEV_FB_FREE,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEM_CLOCK,
    DCGM_FI_DEV_MEM_COPY_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_ROW_REMAP_FAILURE,
    DCGM_FI_DEV_ROW_REMAP_PENDING,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
    DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
    DCGM_FI_DEV_XID_ERRORS,
    TWINLOOP_FI_GPU_COMPUTE_PROCESSES,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig, default_node_prefix
from twinloop.telemetry.sources.nvml_processes import PROCESSES_LABEL, ComputeProcess, encode

MIB = float(2**20)


class NvmlConfig(SourceConfig):
    """NVML source options.

    Attributes:
        period_s: sampling period, s (>= 0.1).
        samples: number of sweeps (``None`` = until ``duration_s`` or interrupted).
        duration_s: stop after this many seconds of sampling (``None`` = no limit).
        gpus: GPU indices to read (``None`` = all).
        node_prefix: entity prefix of this node (``None`` = ``site0/row0/rack0/<hostname>``); GPU ``i`` is
            ``<node_prefix>/gpu<i>``.
        replay_file: read a recorded JSON through the fake NVML instead of the real library.
        start_ts_s: virtual clock: timestamps ``start_ts_s + k * period_s`` and no sleeping (deterministic
            replays); ``None`` = wall clock and real pacing.
        xid_events: listen for XID critical-error events.
    """

    period_s: float = Field(default=1.0, ge=0.1)
    samples: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    gpus: tuple[int, ...] | None = None
    node_prefix: str | None = None
    replay_file: str | None = None
    start_ts_s: float | None = None
    xid_events: bool = True


def _default_lib() -> Any:
    import pynvml

    return pynvml


def _memory_info(lib: Any, h: Any) -> Any:
    """Framebuffer use as nvidia-smi and DCGM report it: the driver's reserved memory is not "used".

    NVML's v1 query counts it in ``used`` (total − free): on a real H100 that read 476 MiB more than nvidia-smi's
    ``memory.used`` (tests/fixtures/h100_nvml). The v2 query reports it apart; v1 where the driver or binding
    has no v2.
    """
    v2 = getattr(lib, "nvmlMemory_v2", None)
    if v2 is not None:
        try:
            return lib.nvmlDeviceGetMemoryInfo(h, version=v2)
        except (TypeError, lib.NVMLError):
            pass
    return lib.nvmlDeviceGetMemoryInfo(h)


def _process_name(lib: Any, pid: int) -> str | None:
    """The process's name as NVML gives it (a path, shortened to its last part); None where NVML may not read it
    (another user's process without root, a pid of another namespace) or the binding has no such call.
    """
    fn = getattr(lib, "nvmlSystemGetProcessName", None)
    if fn is None:
        return None
    try:
        name = fn(pid)
    except lib.NVMLError:
        return None
    text = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    return text.rsplit("/", 1)[-1] or None


def _ask(
    lib: Any, getter: str, fn: Callable[[], Any], pos: int, src: str, sweep: int, unsupported: set[tuple[int, str]],
    report: IngestReport,
) -> Any:  # fmt: skip
    """``fn()`` (NVML's ``getter`` on GPU ``pos``), or None: not supported on this GPU (counted once as
    ``unavailable`` and not asked again) or another NVML error (a ``source_error``; asked again next sweep).
    """
    if (pos, getter) in unsupported:
        return None
    try:
        return fn()
    except lib.NVMLError as exc:
        if isinstance(exc, lib.NVMLError_NotSupported):
            unsupported.add((pos, getter))
            report.add("unavailable", src, sweep, f"GPU {pos}: {getter} not supported")
        else:
            report.add("source_error", src, sweep, f"GPU {pos}: {getter}: {exc}")
        return None


class NvmlSource(Source):
    """Samples read from the GPUs of this machine through NVML."""

    name: ClassVar[str] = "nvml"
    config_type: ClassVar[type[SourceConfig]] = NvmlConfig
    target_field: ClassVar[str | None] = "replay_file"

    def _lib(self) -> Any:
        cfg = self.config
        assert isinstance(cfg, NvmlConfig)
        if cfg.replay_file is not None:
            from twinloop.telemetry.sources.nvml_fake import FakeNvml

            return FakeNvml.from_file(cfg.replay_file)
        return _default_lib()

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield one frame per sweep over the GPUs."""
        cfg = self.config
        assert isinstance(cfg, NvmlConfig)
        lib = self._lib()
        src = cfg.replay_file or "nvml"
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            raise InputError("nvml", "", f"NVML is not available on this machine: {exc}") from None
        try:
            yield from self._sweeps(lib, cfg, src, report)
        finally:
            lib.nvmlShutdown()

    def _sweeps(self, lib: Any, cfg: NvmlConfig, src: str, report: IngestReport) -> Iterator[Frame]:
        count = lib.nvmlDeviceGetCount()
        indices = list(range(count)) if cfg.gpus is None else [i for i in cfg.gpus if 0 <= i < count]
        for bad in set(cfg.gpus or ()) - set(indices):
            report.add("source_error", src, None, f"GPU index {bad} not present ({count} GPUs)")
        handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in indices]
        prefix = (cfg.node_prefix or default_node_prefix()).rstrip("/")
        entities = [f"{prefix}/gpu{i}" for i in indices]
        labels: dict[str, dict[str, str]] = {}
        uuid_to_pos: dict[str, int] = {}
        for pos, (i, h) in enumerate(zip(indices, handles, strict=True)):
            uuid, model = str(lib.nvmlDeviceGetUUID(h)), str(lib.nvmlDeviceGetName(h))
            uuid_to_pos[uuid] = pos
            labels[entities[pos]] = {"gpu": str(i), "UUID": uuid, "modelName": model, "device": f"nvidia{i}",
                                     "Hostname": prefix.rsplit("/", 1)[-1]}  # fmt: skip
        event_set = self._xid_setup(lib, cfg, handles, src, report)
        last_xid = np.zeros(len(handles))
        unsupported: set[tuple[int, str]] = set()
        # Each GPU's labels with its processes: a new dict only when they change (the store encodes a label dict it
        # has not seen; the same object again costs nothing).
        sweep_labels: dict[str, dict[str, str]] = dict(labels)
        frame_labels = labels
        t_start = time.monotonic()
        k = 0
        while (cfg.samples is None or k < cfg.samples) and (
            cfg.duration_s is None or k * cfg.period_s < cfg.duration_s
        ):
            if cfg.start_ts_s is None:
                delay = t_start + k * cfg.period_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                ts = time.time()
            else:
                ts = cfg.start_ts_s + k * cfg.period_s
            columns: dict[str, np.ndarray] = {}
            changed = False
            for pos, h in enumerate(handles):
                for name, value in self._read(lib, h, pos, src, k, unsupported, report).items():
                    columns.setdefault(name, np.full(len(handles), np.nan))[pos] = value
                procs = self._processes(lib, h, pos, src, k, unsupported, report)
                if procs is not None:
                    count = columns.setdefault(TWINLOOP_FI_GPU_COMPUTE_PROCESSES, np.full(len(handles), np.nan))
                    count[pos] = len(procs)
                    text, e = encode(procs), entities[pos]
                    if sweep_labels[e].get(PROCESSES_LABEL) != text:
                        sweep_labels[e], changed = {**labels[e], PROCESSES_LABEL: text}, True
            if changed:
                frame_labels = dict(sweep_labels)
            if event_set is not None:
                self._poll_xid(lib, event_set, uuid_to_pos, last_xid, src, report)
                columns[DCGM_FI_DEV_XID_ERRORS] = last_xid.copy()
            frame = Frame.from_dense(ts, entities, columns, labels=frame_labels, source=src)
            # Cells not read (unsupported or errored) are NaN in the grid: drop them, they are already counted.
            yield frame.take(~np.isnan(frame.value))
            k += 1
        if event_set is not None:
            lib.nvmlEventSetFree(event_set)

    def _xid_setup(self, lib: Any, cfg: NvmlConfig, handles: list[Any], src: str, report: IngestReport) -> Any:
        if not cfg.xid_events or not handles:
            return None
        try:
            event_set = lib.nvmlEventSetCreate()
            for h in handles:
                lib.nvmlDeviceRegisterEvents(h, lib.nvmlEventTypeXidCriticalError, event_set)
            return event_set
        except lib.NVMLError as exc:
            report.add("unavailable", src, None, f"XID events: {exc}")
            return None

    def _poll_xid(
        self, lib: Any, event_set: Any, uuid_to_pos: dict[str, int], last_xid: np.ndarray, src: str,
        report: IngestReport,
    ) -> None:  # fmt: skip
        while True:
            try:
                data = lib.nvmlEventSetWait_v2(event_set, 0)
            except lib.NVMLError as exc:
                if getattr(exc, "value", None) != lib.NVML_ERROR_TIMEOUT:
                    report.add("source_error", src, None, f"XID event wait: {exc}")
                return
            pos = uuid_to_pos.get(str(lib.nvmlDeviceGetUUID(data.device)))
            if pos is not None:
                last_xid[pos] = float(data.eventData)

    def _processes(
        self, lib: Any, h: Any, pos: int, src: str, sweep: int, unsupported: set[tuple[int, str]],
        report: IngestReport,
    ) -> tuple[ComputeProcess, ...] | None:  # fmt: skip
        """The GPU's compute processes; None where NVML cannot list them (no such call in this driver or binding,
        not supported on this GPU: counted once as ``unavailable``; another error: a ``source_error``).
        """
        getter = "nvmlDeviceGetComputeRunningProcesses"
        fn = getattr(lib, getter, None)
        infos = None if fn is None else _ask(lib, getter, lambda: fn(h), pos, src, sweep, unsupported, report)
        if infos is None:
            return None
        out = []
        for info in infos:
            pid = int(info.pid)
            used = getattr(info, "usedGpuMemory", None)  # bytes; None where the driver does not say
            out.append(ComputeProcess(pid, None if used is None else used / MIB, _process_name(lib, pid)))
        return tuple(out)

    def _read(
        self, lib: Any, h: Any, pos: int, src: str, sweep: int, unsupported: set[tuple[int, str]],
        report: IngestReport,
    ) -> dict[str, float]:  # fmt: skip
        out: dict[str, float] = {}

        def get(getter: str, fn: Callable[[], Any]) -> Any:
            return _ask(lib, getter, fn, pos, src, sweep, unsupported, report)

        p = get("nvmlDeviceGetPowerUsage", lambda: lib.nvmlDeviceGetPowerUsage(h))
        if p is not None:
            out[DCGM_FI_DEV_POWER_USAGE] = p / 1000.0
        e = get("nvmlDeviceGetTotalEnergyConsumption", lambda: lib.nvmlDeviceGetTotalEnergyConsumption(h))
        if e is not None:
            out[DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION] = e / 1000.0
        t = get("nvmlDeviceGetTemperature", lambda: lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU))
        if t is not None:
            out[DCGM_FI_DEV_GPU_TEMP] = float(t)
        fv = get("nvmlDeviceGetFieldValues", lambda: lib.nvmlDeviceGetFieldValues(h, [lib.NVML_FI_DEV_MEMORY_TEMP]))
        if fv is not None and fv[0].nvmlReturn == lib.NVML_SUCCESS:
            out[DCGM_FI_DEV_MEMORY_TEMP] = float(fv[0].value.uiVal)
        sm = get("nvmlDeviceGetClockInfo", lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_SM))
        if sm is not None:
            out[DCGM_FI_DEV_SM_CLOCK] = float(sm)
            mem = get("nvmlDeviceGetClockInfo", lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_MEM))
            if mem is not None:
                out[DCGM_FI_DEV_MEM_CLOCK] = float(mem)
        lim = get("nvmlDeviceGetPowerManagementLimit", lambda: lib.nvmlDeviceGetPowerManagementLimit(h))
        if lim is not None:
            out[DCGM_FI_DEV_POWER_MGMT_LIMIT] = lim / 1000.0
        reasons_fn = (
            getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or lib.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        r = get("nvmlDeviceGetCurrentClocksEventReasons", lambda: reasons_fn(h))
        if r is not None:
            out[DCGM_FI_DEV_CLOCKS_EVENT_REASONS] = float(r)
        u = get("nvmlDeviceGetUtilizationRates", lambda: lib.nvmlDeviceGetUtilizationRates(h))
        if u is not None:
            out[DCGM_FI_DEV_GPU_UTIL] = float(u.gpu)
            out[DCGM_FI_DEV_MEM_COPY_UTIL] = float(u.memory)
        m = get("nvmlDeviceGetMemoryInfo", lambda: _memory_info(lib, h))
        if m is not None:
            out[DCGM_FI_DEV_FB_USED] = m.used / MIB
            out[DCGM_FI_DEV_FB_FREE] = m.free / MIB
        for name, etype, ctype in (
            (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_VOLATILE_ECC),
            (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_VOLATILE_ECC),
            (DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_AGGREGATE_ECC),
            (DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, lib.NVML_AGGREGATE_ECC),
        ):
            c = get("nvmlDeviceGetTotalEccErrors", partial(lib.nvmlDeviceGetTotalEccErrors, h, etype, ctype))
            if c is not None:
                out[name] = float(c)
        rr = get("nvmlDeviceGetRemappedRows", lambda: lib.nvmlDeviceGetRemappedRows(h))
        if rr is not None:
            corr, unc, pending, failure = rr
            out[DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS] = float(corr)
            out[DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS] = float(unc)
            out[DCGM_FI_DEV_ROW_REMAP_PENDING] = float(bool(pending))
            out[DCGM_FI_DEV_ROW_REMAP_FAILURE] = float(bool(failure))
        return out
