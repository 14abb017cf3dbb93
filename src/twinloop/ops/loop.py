"""The operational loop over the twin: collect → detect → classify → respond, step by step, and its scoring.

:func:`run_pass` runs a scenario once, with the loop off (detection only, nothing acted on) or on (the responder
acts through :class:`~twinloop.ops.respond.adapters.twin.TwinAdapter` between twin steps), and returns what
happened: the twin's summary, the incidents, the action log, and detection quality against the injected faults.
:func:`compare` runs both passes with the same seed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import (
    CDU_FLOW,
    CDU_HEAT_LOAD,
    CDU_PUMP_SPEED,
    CDU_SETPOINT,
    CDU_SUPPLY,
    CDU_VALVE,
    PSU_STATE,
    GpuLimits,
)
from twinloop.ops.evaluate import DetectionReport, Label, evaluate_detection
from twinloop.ops.events import Incident
from twinloop.ops.learn.precool import RowHeatForecast, load_models
from twinloop.ops.respond.actions import ActionResult
from twinloop.ops.respond.adapters.twin import TwinAdapter
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.policy import Mode, Policy, default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.twin.engine import StepResult, Twin
from twinloop.twin.scenario import ScenarioSpec

#: Twin events that are true faults even though no scenario injected them (background failure process).
BACKGROUND_EVENTS = frozenset({"failure", "gpu_fell_off_bus", "psu_overload", "power_brake", "thermal_shutdown"})

_STATE_OF_FIELD = {"DCGM_FI_DEV_GPU_TEMP": "gpu_temp_c", "DCGM_FI_DEV_POWER_USAGE": "gpu_power_w"}


@dataclass(frozen=True)
class PassResult:
    """One pass over a scenario."""

    name: str
    loop_on: bool
    summary: dict[str, Any]
    incidents: tuple[Incident, ...]
    actions: tuple[ActionResult, ...]
    faults: tuple[Label, ...]
    background: tuple[Label, ...]
    detection: DetectionReport
    wall_s: float
    max_gpu_temp_c: float
    gpu_s_above_slowdown: float


def loop_scenario(spec: ScenarioSpec) -> ScenarioSpec:
    """The scenario with GPU telemetry every step (the detectors want 1 s data, not windows)."""
    telemetry = spec.telemetry.model_copy(update={"gpu_every_s": spec.step_s, "aggregate": "sample"})
    return spec.model_copy(update={"telemetry": telemetry})


class TwinReader:
    """The responder's view of the twin's GPU telemetry: a field's mean or max over an entity's GPUs, now or up
    to ``keep_s`` ago (snapshots every ``every_s``; the nearest older one answers)."""

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


def _labels(twin: Twin, adapter: TwinAdapter) -> tuple[tuple[Label, ...], tuple[Label, ...]]:
    site = twin.topo.site
    end = float(twin.t_s)
    faults = tuple(
        Label(
            f.kind,
            f"{site}/jobs/{f.entity}" if twin.job_by_name(f.entity) is not None else f.entity,
            f.start_s,
            end if f.end_s is None else min(f.end_s, end),
        )
        for f in twin.ground_truth
        if f.start_s < end
    )
    background = tuple(
        Label(f"{e.kind}:{e.detail}", e.entity, e.t_s, e.t_s + 600.0, job=adapter.job_of(e.entity))
        for e in twin.events
        if e.kind in BACKGROUND_EVENTS
    )
    return faults, background


#: Node and row fields the rules read per GPU (PSU health; the CDU's supply, setpoint, flow, pump speed, heat load
#: and facility-water valve), by level.
_BROADCAST = {
    "node": (PSU_STATE,),
    "row": (CDU_SUPPLY, CDU_SETPOINT, CDU_FLOW, CDU_PUMP_SPEED, CDU_HEAT_LOAD, CDU_VALVE),
}


class SetpointLog:
    """The control system's record of the CDU setpoints it commanded, told to the ``cdu_setpoint`` rule.

    It stands in for a BMS's write log: under ``fixed`` and ``commanded`` cooling control a CDU's setpoint changes
    only by commands (the scenario's configuration, the loop's actions, scheduled pre-cooling), and the twin keeps
    the last value written apart from any drift fault, so that value is what the control system knows it wrote.
    Under ``reactive`` control the CDU's own PID owns the setpoint and nothing is told (the rule stays silent).
    Call :meth:`sync` before each detection step.
    """

    def __init__(self, twin: Twin, pipeline: DetectionPipeline) -> None:
        self.twin = twin
        self.pipeline = pipeline
        self._told = np.full(twin.topo.n_rows, np.nan)

    def sync(self) -> None:
        """Tell the pipeline about every CDU setpoint written since the last call."""
        cooling = self.twin.cooling
        if cooling.plant.control == "reactive":
            return
        now = cooling.state.setpoint_c
        for row in np.flatnonzero(now != self._told).tolist():
            self.pipeline.commanded_setpoint(self.twin.topo.row_id(row), float(now[row]))
            self._told[row] = now[row]


def _gpu_fields(twin: Twin, result: StepResult) -> Mapping[str, NDArray[Any]]:
    """The step's GPU fields plus the node and row fields the rules read per GPU, when every node/row reports."""
    assert result.gpu is not None
    out = dict(result.gpu)
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


def gpu_limits(twin: Twin) -> GpuLimits:
    """Every GPU's physical limits, with an air-cooled row's higher thermal resistance."""
    topo = twin.topo
    air = np.array([r.air.resistance_factor if r.cooling == "air" else 1.0 for r in topo.rows])[topo.gpu_row]
    return GpuLimits.from_kinds(topo.kinds, topo.gpu_kind, air)


def run_pass(
    spec: ScenarioSpec,
    loop_on: bool,
    *,
    mode: Mode = "auto",
    policy: Policy | None = None,
    pipeline_config: PipelineConfig | None = None,
    duration_s: float | None = None,
    on_step: Callable[[Twin, StepResult], None] | None = None,
    on_incidents: Callable[[Twin, StepResult, Sequence[Incident]], None] | None = None,
    source: str = "scenario",
    optimize_cooling: bool = True,
    precool: bool = True,
) -> PassResult:
    """Run ``spec`` once with the loop off or on.

    ``on_step(twin, result)`` sees every step (progress, telemetry); ``on_incidents(twin, result, updates)`` sees
    every step's incident updates (new, updated and closed) as the detectors report them, before the responder acts.
    ``optimize_cooling`` adds the cooling optimizer to the loop; ``precool`` feeds it the packaged heat forecaster
    (:mod:`twinloop.ops.learn.precool`), so it tightens a row's cooling before the queue's jobs heat it.
    """
    started = time.perf_counter()
    twin = Twin(loop_scenario(spec), source)
    adapter = TwinAdapter(twin)
    read = TwinReader(twin, adapter)
    gpu_ids = twin.telemetry.entities("gpu")
    job_ids = twin.telemetry.entities("job")
    topo = twin.topo
    pipeline = DetectionPipeline(
        gpu_ids,
        limits=gpu_limits(twin),
        cdu_of_rack={rid: rid.rsplit("/", 1)[0] for rid in twin.topo.ids("rack")},
        config=pipeline_config,
    )
    setpoints = SetpointLog(twin, pipeline)
    responder = Responder(policy or default_policy(), adapter, mode=mode) if loop_on else None
    optimizer, heat = None, None
    if responder is not None and optimize_cooling:
        liquid = [(rid, row) for rid, row in zip(topo.ids("row"), topo.rows, strict=True) if row.cooling == "liquid"]
        approach_c = min((row.cdu.approach_c for _, row in liquid), default=CoolingOptimizerConfig.approach_c)
        heat = RowHeatForecast(twin, *load_models()) if precool else None
        optimizer = CoolingOptimizer(
            responder,
            topo.site,
            [rid for rid, _ in liquid],
            CoolingOptimizerConfig(approach_c=approach_c),
            forecast=heat.rise_w if heat else None,
            load=heat.load_w if heat else None,
        )
    incidents: dict[int, Incident] = {}
    slowdown_c = np.array([k.slowdown_temp_c for k in twin.topo.kinds])[twin.topo.gpu_kind]
    max_temp_c, above_s = -np.inf, 0.0
    n = round((spec.duration_s if duration_s is None else duration_s) / twin.dt_s)
    for _ in range(n):
        result = twin.step()
        read.record()
        temps = twin.state["gpu_temp_c"]
        max_temp_c = max(max_temp_c, float(temps.max()))
        above_s += float(np.count_nonzero(temps >= slowdown_c)) * twin.dt_s
        if heat is not None:
            heat.observe(result)
        if on_step is not None:
            on_step(twin, result)
        if result.gpu is None:
            continue
        jobs = result.facility.get("job") if result.facility else None
        setpoints.sync()
        updates = pipeline.step(
            result.t_s,
            _gpu_fields(twin, result),
            job_index=twin.job_of_gpu,
            job_ids=job_ids,
            job_fields=jobs,
            site_fields=result.facility.get("site") if result.facility else None,
        )
        for inc in updates:
            incidents[inc.incident_id] = inc
        if on_incidents is not None and updates:
            on_incidents(twin, result, updates)
        if responder is not None:
            responder.handle(updates, result.t_s, read)
            responder.verify(result.t_s, read)
        if optimizer is not None:
            optimizer.step(result.t_s, read)
    faults, background = _labels(twin, adapter)
    all_incidents = tuple(incidents.values())
    return PassResult(
        name="loop-on" if loop_on else "loop-off",
        loop_on=loop_on,
        summary=twin.summary(),
        incidents=all_incidents,
        actions=tuple(responder.log) if responder else (),
        faults=faults,
        background=background,
        detection=evaluate_detection(all_incidents, faults, background),
        wall_s=time.perf_counter() - started,
        max_gpu_temp_c=max_temp_c,
        gpu_s_above_slowdown=above_s,
    )


def outcome_metrics(r: PassResult) -> dict[str, float | None]:
    """The figures the loop is judged on, flat (lower is better unless the name says goodput/ettr)."""
    s = r.summary
    thr = s["throttled_gpu_s"]
    energy = s["energy"]
    useful_tokens = sum(j["goodput_tokens_per_s"] * s["simulated_s"] + j["served_tokens"] for j in s["jobs"])
    out: dict[str, float | None] = {
        "thermal_throttled_gpu_s": thr["sw_thermal"] + thr["hw_slowdown"],
        "power_throttled_gpu_s": s["power_throttled_below_tdp_gpu_s"],
        "power_bound_gpu_s": thr["sw_power_cap"],  # NVML SW power cap bit, TDP included (informational)
        "max_gpu_temp_c": r.max_gpu_temp_c,
        "gpu_s_above_slowdown": r.gpu_s_above_slowdown,
        "peak_facility_power_w": s["peak_facility_power_w"],
        "psu_trips": float(s["psu_overloads"]),
        "cooling_energy_kwh": energy["cooling_kwh"],
        "pue": s["pue"],
        "energy_per_useful_token_j": energy["facility_kwh"] * 3.6e6 / useful_tokens if useful_tokens else None,
    }
    for j in s["jobs"]:
        out[f"goodput_tokens_per_s[{j['name']}]"] = j["goodput_tokens_per_s"]
        out[f"ettr[{j['name']}]"] = j["ettr"]
    return out


def compare(spec: ScenarioSpec, **kwargs: Any) -> tuple[PassResult, PassResult]:
    """Loop off, then loop on, same scenario and seed."""
    return run_pass(spec, False, **kwargs), run_pass(spec, True, **kwargs)


def default_out_dir() -> Path:
    """Where ``twinloop run`` writes when no ``--out`` is given."""
    return Path("twinloop-out")
