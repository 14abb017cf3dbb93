"""Telemetry out of the twin: columnar blocks per step, DCGM names for GPUs, ``TWINLOOP_FI_*`` for the facility.

Resolution is per level: GPU (and node) fields every ``telemetry.gpu_every_s``, rack/row/site/job fields every
``telemetry.facility_every_s``. With ``aggregate: window`` the GPU power and temperature are the *mean over the
window* (accumulated every step) and the SM clock is the clock at the window's mean clock scale ``g`` (the
clock whose dynamic power is the window's mean; within a few MHz of the plain mean clock); with ``sample`` they
are the values at the sample step. Other GPU fields are always sampled. A job's tokens/s is, either way, the
mean over its sample interval (the tokens its steps completed in it, over its length), as a framework logs its
throughput over a logging interval: the per-step value sampled every few steps saw only the steps that ended on a
sample step, so a job whose steps end between samples looked stalled (a false hang).
``telemetry.entities`` (glob patterns over entity ids) selects which GPUs, nodes, racks and rows are kept.

Field names follow ``twinloop.telemetry.fields`` where it has one; the ``EXTRA_FIELDS`` are twin-specific
fields in the same style. Energy is in J (the telemetry layer's unit; dcgm-exporter shows mJ).

What a CDU and the plant report beyond temperatures, as real ones do: ``TWINLOOP_FI_CDU_PUMP_SPEED`` (commanded
pump speed, fraction of nominal), ``TWINLOOP_FI_CDU_HEAT_LOAD`` (heat rejected to facility water, W),
``TWINLOOP_FI_CDU_VALVE`` (facility-water valve opening, 0..1), ``TWINLOOP_FI_FACILITY_WATER_TEMP`` and
``TWINLOOP_FI_FACILITY_WATER_SETPOINT`` (site, C).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_FB_FREE,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
    DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_PROF_DRAM_ACTIVE,
    DCGM_FI_PROF_GR_ENGINE_ACTIVE,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    DCGM_FI_PROF_SM_ACTIVE,
    TWINLOOP_FI_AMBIENT_TEMP,
    TWINLOOP_FI_CARBON_INTENSITY,
    TWINLOOP_FI_CDU_FLOW,
    TWINLOOP_FI_CDU_HEAT_LOAD,
    TWINLOOP_FI_CDU_PUMP_POWER,
    TWINLOOP_FI_CDU_PUMP_SPEED,
    TWINLOOP_FI_CDU_RETURN_TEMP,
    TWINLOOP_FI_CDU_SETPOINT,
    TWINLOOP_FI_CDU_SUPPLY_TEMP,
    TWINLOOP_FI_CDU_VALVE,
    TWINLOOP_FI_CONVERSION_LOSS,
    TWINLOOP_FI_COOLING_POWER,
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_FACILITY_WATER_SETPOINT,
    TWINLOOP_FI_FACILITY_WATER_TEMP,
    TWINLOOP_FI_IT_POWER,
    TWINLOOP_FI_JOB_GPUS,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
    TWINLOOP_FI_NODE_POWER,
    TWINLOOP_FI_POWER_BUDGET,
    TWINLOOP_FI_PSU_OUTPUT_POWER,
    TWINLOOP_FI_PSU_STATE,
    TWINLOOP_FI_PUE,
    TWINLOOP_FI_RACK_COOLANT_TEMP,
    TWINLOOP_FI_RACK_INLET_TEMP,
    TWINLOOP_FI_RACK_POWER,
    TWINLOOP_FI_ROW_POWER,
    TWINLOOP_FI_WETBULB_TEMP,
)
from twinloop.twin.dvfs import dram_activity_at_clock
from twinloop.twin.events import StepResult
from twinloop.twin.jobs import Phase
from twinloop.twin.operations import ClusterOps
from twinloop.twin.seeds import stream
from twinloop.twin.sensors import Sensors, quantise

EPOCH_START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: telemetry timestamps = this + simulated time
MIB = 1024.0 * 1024.0
IDLE_FB_MIB = 512.0  # driver/context memory on an idle GPU (guess)
KG_PER_S_TO_L_PER_MIN = 60.0  # water: ~1 kg per litre

GPU_FIELDS = (
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_PROF_GR_ENGINE_ACTIVE,
    DCGM_FI_PROF_SM_ACTIVE,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    DCGM_FI_PROF_DRAM_ACTIVE,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_FB_FREE,
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
)
EXTRA_FIELDS = (
    TWINLOOP_FI_RACK_COOLANT_TEMP,
    TWINLOOP_FI_CDU_SETPOINT,
    TWINLOOP_FI_WETBULB_TEMP,
    TWINLOOP_FI_CARBON_INTENSITY,
    TWINLOOP_FI_CONVERSION_LOSS,
    TWINLOOP_FI_POWER_BUDGET,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_CDU_PUMP_SPEED,
    TWINLOOP_FI_CDU_HEAT_LOAD,
    TWINLOOP_FI_CDU_VALVE,
    TWINLOOP_FI_FACILITY_WATER_TEMP,
    TWINLOOP_FI_FACILITY_WATER_SETPOINT,
)


class TelemetryRecorder:
    """Builds the per-step blocks for a :class:`~twinloop.twin.engine.Twin` (held by the twin)."""

    def __init__(self, twin: ClusterOps) -> None:
        self.twin = twin
        spec = twin.spec.telemetry
        dt = twin.dt_s
        self.gpu_every = max(1, round(spec.gpu_every_s / dt))
        self.fac_every = max(1, round(spec.facility_every_s / dt))
        self.window = spec.aggregate == "window" and self.gpu_every > 1
        self.keep_gpu = spec.keep_gpu
        topo = twin.topo
        pats = spec.entities
        self.all_gpus = "*" in pats
        self.gpu_idx = topo.select("gpu", pats)
        self.node_idx = topo.select("node", pats)
        self.rack_idx = topo.select("rack", pats)
        self.row_idx = topo.select("row", pats)
        n = topo.n_gpus if self.all_gpus else self.gpu_idx.size
        self.sum_power = np.zeros(n, dtype=np.float32)
        self.sum_temp = np.zeros(n, dtype=np.float32)
        self.sum_clock = np.zeros(n, dtype=np.float32)
        self.count = 0
        self.job_window = self.fac_every > 1  # a throughput is a rate over the interval, not a reading
        self.sum_tokens = np.zeros(len(twin.jobs))
        self.token_steps = 0
        self._ids: dict[str, list[str]] = {}
        self._labels_key: bytes | None = None
        self._labels: dict[str, dict[str, str]] = {}
        self.sensors = Sensors(twin.spec.sensors, stream(twin.seed, "sensors")) if twin.spec.sensors.enabled else None

    def entities(self, level: str) -> list[str]:
        """Entity ids of the kept entities of ``level`` (cached)."""
        if level not in self._ids:
            topo = self.twin.topo
            if level == "job":
                self._ids[level] = [f"{topo.site}/jobs/{j.spec.name}" for j in self.twin.jobs]
            elif level == "site":
                self._ids[level] = [topo.site]
            else:
                idx = {"gpu": self.gpu_idx, "node": self.node_idx, "rack": self.rack_idx, "row": self.row_idx}[level]
                fn = {"gpu": topo.gpu_id, "node": topo.node_id, "rack": topo.rack_id, "row": topo.row_id}[level]
                self._ids[level] = [fn(int(i)) for i in idx]
        return self._ids[level]

    def gpu_labels(self) -> dict[str, dict[str, str]]:
        """Labels of the kept GPUs: ``modelName`` (catalog display name) and ``job`` while a job holds the GPU.

        Rebuilt only when the GPU → job assignment changed (the exporter turns ``job`` into dcgm-exporter's
        ``pod``/``hpc_job`` labels).
        """
        twin = self.twin
        owner = np.full(twin.topo.n_gpus, -1, dtype=np.int64)
        for j in twin.jobs:
            if j.running and j.gpus.size:
                owner[j.gpus] = j.index
        owner = self._kept(owner)
        key = owner.tobytes()
        if key != self._labels_key:
            kinds = self._kept(twin.topo.gpu_kind)
            names = [k.display_name for k in twin.topo.kinds]
            by_index = {j.index: j.spec.name for j in twin.jobs}
            self._labels = {
                e: {"modelName": names[int(k)], **({"job": by_index[int(o)]} if o >= 0 else {})}
                for e, k, o in zip(self.entities("gpu"), kinds.tolist(), owner.tolist(), strict=True)
            }
            self._labels_key = key
        return self._labels

    def _kept(self, arr: NDArray[Any]) -> NDArray[Any]:
        return arr if self.all_gpus else arr[self.gpu_idx]

    def record(self) -> tuple[dict[str, NDArray[Any]] | None, dict[str, dict[str, NDArray[Any]]] | None]:
        """Called after every step: accumulate windows; return the blocks due at this step."""
        twin = self.twin
        k = twin.step_index
        gpu_block = None
        if self.keep_gpu:
            a = twin.physics.gpus
            if self.window:
                self.sum_power += self._kept(a.power_w)
                self.sum_temp += self._kept(a.temp_c)
                self.sum_clock += self._kept(a.g)
                self.count += 1
            if k % self.gpu_every == 0:
                gpu_block = self.gpu_block()
        if self.job_window:
            self.sum_tokens += np.array([j.tokens_per_s for j in twin.jobs])
            self.token_steps += 1
        facility = self.facility_block(with_nodes=k % self.gpu_every == 0) if k % self.fac_every == 0 else None
        return gpu_block, facility

    def gpu_block(self) -> dict[str, NDArray[Any]]:
        """The GPU fields over kept GPUs now (window means for power, temperature and clock)."""
        twin = self.twin
        ph = twin.physics
        a = ph.gpus
        n_steps = 1
        if self.window and self.count:
            n_steps = self.count
            inv = np.float32(1.0 / self.count)
            power = self.sum_power * inv
            temp = self.sum_temp * inv
            clock_x = ph.x_of_g(self.sum_clock * inv)
            self.sum_power[:] = 0.0
            self.sum_temp[:] = 0.0
            self.sum_clock[:] = 0.0
            self.count = 0
        else:
            power, temp, clock_x = self._kept(a.power_w).copy(), self._kept(a.temp_c).copy(), self._kept(ph.clock_x())
        slot = self._kept(a.gid) // ph.n_kinds
        act = twin.slot_activity[slot]
        fb = self._slot_fb_mib()[slot]
        enforced = np.minimum(
            self._kept(a.user_limit_w), twin.chain.per_rack_limit_w().astype(np.float32)[self._kept(twin.topo.gpu_rack)]
        )
        powered = twin.node_powered[self._kept(twin.topo.gpu_node)]
        hbm = self._kept(a.hbm_temp_c).copy()
        max_mhz = self._kept(ph.clock_max_mhz)
        clock = (clock_x * max_mhz) * powered
        util = np.minimum(100.0, 200.0 * act[:, 1]).astype(np.float32)
        energy = self._kept(a.energy_j).copy()
        fb = fb * powered
        sensors = self.sensors
        if sensors is not None:  # what NVML would report: noisy, quantised readings of the exact model
            power = sensors.power_w(power, n_steps)
            temp, hbm = sensors.temp_c(temp), sensors.temp_c(hbm)
            clock = sensors.clock_mhz(clock.astype(np.float32), self._kept(a.limited), max_mhz)
            util, fb, energy = np.round(util), np.round(fb), quantise(energy, 1e-3)
        return {
            DCGM_FI_DEV_POWER_USAGE: power,
            DCGM_FI_DEV_GPU_TEMP: temp,
            DCGM_FI_DEV_MEMORY_TEMP: hbm,
            DCGM_FI_DEV_SM_CLOCK: clock,
            DCGM_FI_DEV_POWER_MGMT_LIMIT: enforced,
            DCGM_FI_DEV_CLOCKS_EVENT_REASONS: self._kept(twin.clock_event_reasons()),
            DCGM_FI_DEV_XID_ERRORS: self._kept(a.xid).copy(),
            DCGM_FI_DEV_GPU_UTIL: util,
            # Time a kernel runs, as a fraction: the same guess as GPU_UTIL (dcgm-exporter dashboards read this one).
            DCGM_FI_PROF_GR_ENGINE_ACTIVE: util / np.float32(100.0),
            DCGM_FI_PROF_SM_ACTIVE: act[:, 1].astype(np.float32),
            DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: act[:, 0].astype(np.float32),
            DCGM_FI_PROF_DRAM_ACTIVE: dram_activity_at_clock(
                act, self._kept(twin.topo.gpu_kind), clock_x.astype(np.float64), ph.kc
            ).astype(np.float32),
            DCGM_FI_DEV_FB_USED: fb.astype(np.float32),
            DCGM_FI_DEV_FB_FREE: (
                np.maximum(self._hbm_mib()[self._kept(twin.topo.gpu_kind)] - fb, 0.0) * powered
            ).astype(np.float32),
            DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: energy,
        }

    def _hbm_mib(self) -> NDArray[np.float64]:
        """HBM capacity per GPU kind, MiB (FB_FREE = capacity - FB_USED, as nvidia-smi reports it)."""
        return np.array([k.hbm_bytes / MIB for k in self.twin.topo.kinds])

    def _slot_fb_mib(self) -> NDArray[np.float64]:
        twin = self.twin
        fb = np.full(twin.n_slots, IDLE_FB_MIB)
        for job in twin.jobs:
            used = job.profile.hbm_bytes_used / MIB
            if job.phase == Phase.RAMP_UP and not job.restart_pending:
                load_s = max(job.profile.load_s, 1e-9)
                frac = float(np.clip(1.0 - (job.phase_end_s - twin.t_s) / load_s, 0.0, 1.0))
                value = IDLE_FB_MIB + frac * used
            elif job.phase in (Phase.LAUNCH, Phase.SUSTAINED, Phase.CHECKPOINT, Phase.HUNG):
                value = IDLE_FB_MIB + used
            else:
                value = IDLE_FB_MIB
            fb[job.slot0 : job.slot0 + job.n_slots] = value
        return fb

    def _job_tokens_per_s(self) -> NDArray[np.float64]:
        """Each job's tokens/s: the mean since the last job sample (this step's when jobs report every step)."""
        if not (self.job_window and self.token_steps):
            return np.array([j.tokens_per_s for j in self.twin.jobs])
        out = self.sum_tokens / self.token_steps
        self.sum_tokens = np.zeros(len(self.twin.jobs))
        self.token_steps = 0
        return out

    def facility_block(self, with_nodes: bool) -> dict[str, dict[str, NDArray[Any]]]:
        """Rack, row, site and job fields now (and node fields when ``with_nodes``)."""
        twin = self.twin
        flows = twin.flows
        assert flows is not None
        cs = twin.cooling.state
        topo = twin.topo
        mdot = twin.cooling.mass_flow_kg_per_s()
        supply = cs.supply_c[topo.rack_row]
        recirc = twin.cooling.recirc[topo.rack_row]
        rack_inlet = supply + recirc / (recirc + 0.5) * (twin.rack_coolant_c - supply)
        # The CDU's facility-water control valve, taken as linear in duty: the heat it rejects over the heat it
        # could reject now (capacity as in Cooling.step: nominal x capacity health x min(1, flow ratio)). A
        # guess at the valve characteristic; what matters is that it opens further when the exchanger loses
        # capacity at the same heat load, as a real CDU's valve does.
        cool = twin.cooling
        available_w = cool.capacity_w * cs.capacity_health * np.minimum(1.0, mdot / cool.flow_nom_kg_per_s)
        valve = np.clip(cs.heat_removed_w / np.maximum(available_w, 1e-3), 0.0, 1.0)
        out: dict[str, dict[str, NDArray[Any]]] = {
            "rack": {
                TWINLOOP_FI_RACK_POWER: flows.rack_w[self.rack_idx],
                TWINLOOP_FI_RACK_INLET_TEMP: rack_inlet[self.rack_idx],
                TWINLOOP_FI_RACK_COOLANT_TEMP: twin.rack_coolant_c[self.rack_idx],
            },
            "row": {
                TWINLOOP_FI_ROW_POWER: flows.row_w[self.row_idx],
                TWINLOOP_FI_CDU_SUPPLY_TEMP: cs.supply_c[self.row_idx],
                TWINLOOP_FI_CDU_RETURN_TEMP: cs.return_c[self.row_idx],
                TWINLOOP_FI_CDU_FLOW: (mdot * KG_PER_S_TO_L_PER_MIN)[self.row_idx],
                TWINLOOP_FI_CDU_PUMP_POWER: cs.mover_power_w[self.row_idx],
                TWINLOOP_FI_CDU_SETPOINT: (cs.setpoint_c + cs.drift_c)[self.row_idx],
                TWINLOOP_FI_CDU_PUMP_SPEED: cs.flow_fraction[self.row_idx],
                TWINLOOP_FI_CDU_HEAT_LOAD: cs.heat_removed_w[self.row_idx],
                TWINLOOP_FI_CDU_VALVE: valve[self.row_idx],
            },
            "site": {
                TWINLOOP_FI_AMBIENT_TEMP: np.array([twin.ambient.drybulb_c]),
                TWINLOOP_FI_WETBULB_TEMP: np.array([twin.ambient.wetbulb_c]),
                TWINLOOP_FI_CARBON_INTENSITY: np.array([twin.ambient.carbon_g_per_kwh]),
                TWINLOOP_FI_FACILITY_POWER: np.array([twin.facility_w]),
                TWINLOOP_FI_IT_POWER: np.array([flows.it_w]),
                TWINLOOP_FI_COOLING_POWER: np.array([twin.cooling_w]),
                TWINLOOP_FI_CONVERSION_LOSS: np.array([flows.conversion_loss_w]),
                TWINLOOP_FI_PUE: np.array([twin.pue]),
                TWINLOOP_FI_POWER_BUDGET: np.array([twin.chain.budget_w]),
                TWINLOOP_FI_FACILITY_WATER_TEMP: np.array([twin.cooling.facility_water_c(twin.ambient.wetbulb_c)]),
                TWINLOOP_FI_FACILITY_WATER_SETPOINT: np.array([cs.facility_water_setpoint_c]),
            },
            "job": {
                TWINLOOP_FI_JOB_STEP_TIME: np.array(
                    [
                        j.profile.iteration_s / max(j.speed, 1e-6) if j.phase == Phase.SUSTAINED else 0.0
                        for j in twin.jobs
                    ]
                ),
                TWINLOOP_FI_JOB_LOSS: np.array([j.loss for j in twin.jobs]),
                TWINLOOP_FI_JOB_TOKENS_PER_S: self._job_tokens_per_s(),
                TWINLOOP_FI_JOB_GPUS: np.array([float(j.gpus.size) for j in twin.jobs]),
                TWINLOOP_FI_JOB_PHASE: np.array([float(j.phase) for j in twin.jobs]),
            },
        }
        if with_nodes:
            alive = twin.chain.psus_alive
            installed = twin.chain.psus_installed
            state = np.where(alive <= 0, 2.0, np.where(alive < installed, 1.0, 0.0))
            out["node"] = {
                TWINLOOP_FI_NODE_POWER: flows.node_ac_w[self.node_idx],
                TWINLOOP_FI_PSU_OUTPUT_POWER: twin.node_dc_w[self.node_idx],
                TWINLOOP_FI_PSU_STATE: state[self.node_idx],
            }
        return out


class Recorded(Protocol):
    """What :func:`frames_of` needs of a twin: its recorder."""

    @property
    def telemetry(self) -> TelemetryRecorder:
        """The twin's telemetry recorder (entity ids and labels of the kept entities)."""
        ...


def frames_of(twin: Recorded, result: StepResult) -> list[Any]:
    """The step's blocks as :class:`twinloop.telemetry.frame.Frame` objects (one per level)."""
    from twinloop.telemetry.frame import Frame

    ts = EPOCH_START_S + result.t_s
    rec = twin.telemetry
    frames = []
    if result.gpu is not None:
        frames.append(Frame.from_dense(ts, rec.entities("gpu"), result.gpu, labels=rec.gpu_labels(), source="twin"))
    if result.facility is not None:
        for level, cols in result.facility.items():
            frames.append(Frame.from_dense(ts, rec.entities(level), cols, source="twin"))
    return frames
