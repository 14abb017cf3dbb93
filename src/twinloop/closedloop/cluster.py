"""The twin as a :class:`~twinloop.ops.ports.Cluster`: what the loop sees of a simulated hall, and nothing more.

:class:`TwinCluster` steps a :class:`~twinloop.twin.engine.Twin` on every :meth:`TwinCluster.poll` and turns the
step into a :class:`~twinloop.ops.ports.Sample`: the GPU telemetry, the node and row fields the rules read per GPU
(:func:`gpu_fields`), the job and site blocks, the CDU setpoints the control system commanded since the last
sample (:class:`SetpointLog`) and, when asked for, the per-rack heat and what the queue knows ahead
(:class:`~twinloop.closedloop.twin_history.TwinRecorder`) for precooling. Effect checks read the twin through
:class:`TwinReader`; actions reach it through :class:`~twinloop.closedloop.adapter.TwinAdapter`.

It also keeps the two harness figures the loop cannot see but is judged on (hottest GPU, GPU-seconds above
slowdown), measured on every step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.closedloop.adapter import TwinAdapter
from twinloop.closedloop.twin_history import HORIZONS_S, TwinRecorder
from twinloop.errors import InputError
from twinloop.ops import END, GpuLimits, PollResult, RackHeat, Sample, Topology
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_FLOW as CDU_FLOW
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_HEAT_LOAD as CDU_HEAT_LOAD
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_PUMP_POWER as CDU_PUMP_POWER
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_PUMP_SPEED as CDU_PUMP_SPEED
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_SETPOINT as CDU_SETPOINT
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_SUPPLY_TEMP as CDU_SUPPLY
from twinloop.telemetry.fields import TWINLOOP_FI_CDU_VALVE as CDU_VALVE
from twinloop.telemetry.fields import TWINLOOP_FI_GPU_COMPUTE_PROCESSES as COMPUTE_PROCESSES
from twinloop.telemetry.fields import TWINLOOP_FI_PSU_STATE as PSU_STATE
from twinloop.telemetry.fields import TWINLOOP_FI_RANK_STEP_TIME as RANK_STEP_TIME
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.gpu_rates import gpu_work_rates
from twinloop.twin.jobs import DECODE_COMPUTE_FRACTION, Phase
from twinloop.twin.scenario import ScenarioSpec

_STATE_OF_FIELD = {DCGM_FI_DEV_GPU_TEMP: "gpu_temp_c", DCGM_FI_DEV_POWER_USAGE: "gpu_power_w"}

#: Node and row fields the rules read per GPU (PSU health; the CDU's supply, setpoint, flow, pump speed, heat load
#: and facility-water valve), by level.
_BROADCAST = {
    "node": (PSU_STATE,),
    "row": (CDU_SUPPLY, CDU_SETPOINT, CDU_FLOW, CDU_PUMP_SPEED, CDU_HEAT_LOAD, CDU_VALVE, CDU_PUMP_POWER),
}


def loop_scenario(spec: ScenarioSpec) -> ScenarioSpec:
    """The scenario with GPU telemetry every step (the detectors want 1 s data, not windows)."""
    telemetry = spec.telemetry.model_copy(update={"gpu_every_s": spec.step_s, "aggregate": "sample"})
    return spec.model_copy(update={"telemetry": telemetry})


def gpu_limits(twin: Twin) -> GpuLimits:
    """Every GPU's physical limits, with an air-cooled row's higher thermal resistance."""
    topo = twin.topo
    air = np.array([r.air.resistance_factor if r.cooling == "air" else 1.0 for r in topo.rows])[topo.gpu_row]
    return GpuLimits.from_kinds(topo.kinds, topo.gpu_kind, air)


def rank_step_times(twin: Twin) -> NDArray[np.float64]:
    """Per GPU: the step time its rank of a running job would have on its own, s; NaN elsewhere.

    The twin's stand-in for a framework's per-rank step timers: each rank's step at its own clock (roofline speed
    of its own relative clock) and its own straggler factor (an injected ``straggler`` fault or a background
    straggler), before the collectives make every rank wait for the slowest. For a training job the step is its
    iteration; the job's own step time (``TWINLOOP_FI_JOB_STEP_TIME``) is the longest of these. For a serving fleet
    it is the rank's decode step at its replica's decode load (:meth:`~twinloop.twin.jobs.Job.decode_step_s`: a
    replica's time per output token is its slowest rank's), NaN on a replica out of service or hung (it serves nothing).
    Exact, no timer noise (a model, not a measurement).
    """
    out = np.full(twin.topo.n_gpus, np.nan)
    factor = twin.straggle_factors()
    ph = twin.physics
    for job in twin.jobs:  # per job, vectorized over its GPUs
        if job.phase != Phase.SUSTAINED or job.gpus.size == 0:
            continue
        p = job.profile
        x = ph.x_of_g(ph.gpus.g[job.gpus]).astype(np.float64)
        serving = job.kind == "serving"
        cf = np.full(x.shape, DECODE_COMPUTE_FRACTION if serving else p.compute_fraction)
        rate = gpu_work_rates(x, cf, twin.topo.gpu_kind[job.gpus], job.rates)  # each rank at its own model's rates
        speed = rate * factor[job.gpus]
        if not serving:
            out[job.gpus] = p.iteration_s / np.maximum(speed, 1e-6)
            continue
        step = job.decode_step_s(speed)
        silent = job.out_of_service | job.hung_replicas  # no token comes out of it: no step to report
        out[job.gpus] = np.where(np.repeat(silent, job.spec.gpus_per_replica), np.nan, step)
    return out


def compute_processes(twin: Twin) -> NDArray[np.float64]:
    """Per GPU: the compute processes NVML would list, one for a GPU a job holds (its rank) plus one per injected
    ``co_tenant`` fault on it (someone else's process); 0 on an idle GPU.
    """
    out = (twin.job_of_gpu >= 0).astype(np.float64)
    if twin.co_tenants:
        np.add.at(out, np.fromiter(twin.co_tenants, dtype=np.int64), 1.0)
    return out


def gpu_fields(twin: Twin, result: StepResult) -> Mapping[str, NDArray[Any]]:
    """The step's GPU fields, each GPU's rank step time (:func:`rank_step_times`), plus the node and row fields the
    rules read per GPU, when every node/row reports.
    """
    assert result.gpu is not None
    out = dict(result.gpu)
    out[RANK_STEP_TIME] = rank_step_times(twin)[twin.telemetry.gpu_idx]
    if twin.emits_processes:
        out[COMPUTE_PROCESSES] = compute_processes(twin)[twin.telemetry.gpu_idx]
    topo, rec = twin.topo, twin.telemetry
    for level, of_gpu, idx in (("node", topo.gpu_node, rec.node_idx), ("row", topo.gpu_row, rec.row_idx)):
        block = result.facility.get(level) if result.facility else None
        if not block or idx.size != int(of_gpu.max(initial=-1)) + 1:
            continue
        for name in _BROADCAST[level]:
            if name in block:
                values = np.empty(idx.size)
                values[idx] = block[name]
                out[name] = values[of_gpu]
    return out


class TwinReader:
    """The responder's view of the twin's GPU telemetry: a field's mean or max over an entity's GPUs, now or up
    to ``keep_s`` ago (snapshots every ``every_s``; the nearest older one answers).
    """

    def __init__(self, twin: Twin, adapter: TwinAdapter, every_s: float = 10.0, keep_s: float = 600.0) -> None:
        self.twin = twin
        self.adapter = adapter
        self.every_s = every_s
        self.keep_s = keep_s
        self._snapshots: deque[tuple[float, dict[str, NDArray[np.float32]]]] = deque()

    def record(self) -> None:
        """Take a snapshot if ``every_s`` has passed since the last one (call after each twin step)."""
        t = float(self.twin.t_s)
        if self._snapshots and t - self._snapshots[-1][0] < self.every_s:
            return
        state = self.twin.state
        self._snapshots.append((t, {key: state[key].copy() for key in _STATE_OF_FIELD.values()}))
        while self._snapshots and t - self._snapshots[0][0] > self.keep_s + self.every_s:
            self._snapshots.popleft()

    def __call__(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        """The mean or max of ``field`` over ``entity``'s GPUs now or ``ago_s`` ago; None when the twin cannot say."""
        if field == CDU_SUPPLY:  # a row field: the CDU of a row id, now
            row = self.adapter.row_index(entity)
            return float(self.twin.state["cdu_supply_c"][row]) if row is not None and ago_s <= 0 else None
        key = _STATE_OF_FIELD.get(field)
        gpus = self.adapter.gpus_of(entity) if key else None
        if key is None or gpus is None or gpus.size == 0:
            return None
        if ago_s <= 0:
            values = self.twin.state[key]
        else:
            when = float(self.twin.t_s) - ago_s
            older = [snap for t, snap in self._snapshots if t <= when]
            if not older:
                return None
            values = older[-1][key]
        picked = values[gpus]
        return float(picked.max() if aggregate == "max" else picked.mean())


class SetpointLog:
    """The control system's record of the CDU setpoints it commanded, for the ``cdu_setpoint`` rule.

    It stands in for a BMS's write log: under ``fixed`` and ``commanded`` cooling control a CDU's setpoint changes
    only by commands (the scenario's configuration, the loop's actions, scheduled pre-cooling), and the twin keeps
    the last value written apart from any drift fault, so that value is what the control system knows it wrote.
    Under ``reactive`` control the CDU's own PID owns the setpoint and nothing is told (the rule stays silent).
    """

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self._told = np.full(twin.topo.n_rows, np.nan)

    def changed(self) -> dict[str, float]:
        """CDU (row) id → setpoint °C of every CDU setpoint written since the last call, in row order."""
        cooling = self.twin.cooling
        if cooling.plant.control == "reactive":
            return {}
        now = cooling.state.setpoint_c
        out: dict[str, float] = {}
        for row in np.flatnonzero(now != self._told).tolist():
            out[self.twin.topo.row_id(row)] = float(now[row])
            self._told[row] = now[row]
        return out


class TwinCluster:
    """A :class:`~twinloop.ops.ports.Cluster` over a twin of ``spec`` (GPU telemetry every step).

    Args:
        spec: the scenario (made a loop scenario: GPU telemetry every step).
        source: where the scenario came from (the twin's summary names it).
        duration_s: simulated time to run before :meth:`poll` returns END, s (default: the scenario's).
        rack_heat_every_s: offer :class:`~twinloop.ops.ports.RackHeat` every this many seconds (a multiple of the
            twin step; the heat forecaster's sample interval), on the facility telemetry steps; None = never.
        rack_heat_horizons_s: the horizons the known-ahead columns are computed for, s.
        on_step: ``on_step(twin, result)`` after every twin step (progress, telemetry writers, harness hooks).
    """

    def __init__(
        self,
        spec: ScenarioSpec,
        source: str = "scenario",
        *,
        duration_s: float | None = None,
        rack_heat_every_s: float | None = None,
        rack_heat_horizons_s: Sequence[float] = HORIZONS_S,
        on_step: Callable[[Twin, StepResult], None] | None = None,
    ) -> None:
        self.twin = Twin(loop_scenario(spec), source)
        self._adapter = TwinAdapter(self.twin)
        self.reader = TwinReader(self.twin, self._adapter)
        self.setpoints = SetpointLog(self.twin)
        self.on_step = on_step
        self.n_steps = round((spec.duration_s if duration_s is None else duration_s) / self.twin.dt_s)
        self.recorder: TwinRecorder | None = None
        self._heat_every = 0
        if rack_heat_every_s is not None:
            every = rack_heat_every_s / self.twin.dt_s
            if every < 1 or abs(every - round(every)) > 1e-9:
                allowed = f"a multiple of {self.twin.dt_s} s"
                raise InputError("TwinCluster", "rack_heat_every_s", f"{rack_heat_every_s} (allowed: {allowed})")
            self._heat_every = round(every)
            self.recorder = TwinRecorder(self.twin, horizons_s=tuple(rack_heat_horizons_s))
        self._rack_ids = tuple(self.twin.telemetry.entities("rack"))
        self._job_ids = self.twin.telemetry.entities("job")
        self._topology: Topology | None = None
        self._steps = 0
        self._pending_heat: RackHeat | None = None
        self.last_result: StepResult | None = None
        topo = self.twin.topo
        self._slowdown_c = np.array([k.slowdown_temp_c for k in topo.kinds])[topo.gpu_kind]
        #: Hottest GPU seen on any step, °C (a harness figure: the loop is judged on it, it does not read it).
        self.max_gpu_temp_c = -np.inf
        #: GPU-seconds at or above the slowdown temperature (a harness figure).
        self.gpu_s_above_slowdown = 0.0

    # ----- the port --------------------------------------------------------------------------------------
    @property
    def adapter(self) -> TwinAdapter:
        """Actions become twin commands between steps."""
        return self._adapter

    def topology(self) -> Topology:
        """The twin's GPUs, their limits, one CDU per row, its liquid-cooled rows and its air-cooled ones."""
        if self._topology is None:
            twin, topo = self.twin, self.twin.topo
            liquid = [(rid, r) for rid, r in zip(topo.ids("row"), topo.rows, strict=True) if r.cooling == "liquid"]
            self._topology = Topology(
                gpu_ids=tuple(twin.telemetry.entities("gpu")),
                limits=gpu_limits(twin),
                cdu_of_rack={rid: rid.rsplit("/", 1)[0] for rid in topo.ids("rack")},
                liquid_rows=tuple(rid for rid, _ in liquid),
                air_rows=tuple(rid for rid, r in zip(topo.ids("row"), topo.rows, strict=True) if r.cooling == "air"),
                cdu_approach_c=min((r.cdu.approach_c for _, r in liquid), default=None),
            )
        return self._topology

    def poll(self) -> PollResult:
        """Step the twin (until a step carries GPU telemetry) and return its sample; END after ``duration_s``."""
        while self._steps < self.n_steps:
            result = self._step()
            if result.gpu is None:
                continue
            facility = result.facility or {}
            heat, self._pending_heat = self._pending_heat, None
            return Sample(
                ts=result.t_s,
                gpu=gpu_fields(self.twin, result),
                job_index=self.twin.job_of_gpu,
                job_ids=self._job_ids,
                job_fields=facility.get("job"),
                site_fields=facility.get("site"),
                commanded_setpoints=self.setpoints.changed(),
                rack_heat=heat,
            )
        return END

    def read(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        """A GPU field (temperature, power) over an entity's GPUs now or ``ago_s`` ago; a row's CDU supply now.

        The value is the twin's exact state, without the sensor model's noise and rounding (a real cluster's read
        is its latest reading: within 0.5 °C of this, power within its noise).
        """
        return self.reader(field, entity, aggregate, ago_s)

    def now_s(self) -> float:
        """Simulation time, s."""
        return float(self.twin.t_s)

    # ----- the twin --------------------------------------------------------------------------------------
    def _step(self) -> StepResult:
        twin = self.twin
        result = twin.step()
        self._steps += 1
        self.last_result = result
        self.reader.record()
        temps = twin.state["gpu_temp_c"]
        self.max_gpu_temp_c = max(self.max_gpu_temp_c, float(temps.max()))
        self.gpu_s_above_slowdown += float(np.count_nonzero(temps >= self._slowdown_c)) * twin.dt_s
        if self.recorder is not None and self._steps % self._heat_every == 0 and result.facility is not None:
            obs = self.recorder.observe(result)
            if obs is not None:
                rack = obs["rack"]
                self._pending_heat = RackHeat(
                    rack.t_s, self._rack_ids, rack.load_w, rack.scheduled_delta_w, rack.known_ahead_w
                )
        if self.on_step is not None:
            self.on_step(twin, result)
        return result
