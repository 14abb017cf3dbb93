"""Twin adapter: the closed loop. Policy actions become twin commands, validated by the twin itself too.

Entity conventions follow the twin: GPUs ``dc1/r01/k03/n05/g7``, jobs ``dc1/jobs/<name>``, and one CDU per row,
so a CDU is addressed by its row id (``dc1/r01``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from twinloop.closedloop.requeue_pace import requeue_pace
from twinloop.ops import ActionAdapter, ActionKind, ActionRequest, AdapterReply, Incident, JobTiming, ancestor
from twinloop.ops.respond.adapters.base import RequeuePace, ThermalPath
from twinloop.twin.actions import (
    Action,
    Drain,
    HoldAdmission,
    RequeueJob,
    RestartReplica,
    SchedulePrecool,
    SetClocks,
    SetCoolant,
    SetFacilityWater,
    SetPowerLimit,
    TriggerCheckpoint,
)
from twinloop.twin.jobs import Job, Phase

if TYPE_CHECKING:
    from twinloop.twin.engine import Twin

_JOBS = "/jobs/"


class TwinAdapter(ActionAdapter):
    """Carries policy actions out on a :class:`~twinloop.twin.engine.Twin` between its steps."""

    name: ClassVar[str] = "twin"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind) - {
        ActionKind.EXCLUDE_GPU,  # the twin has no hot spares to swap a GPU out of a running job
        ActionKind.STAGGER_START,
    }

    def __init__(self, twin: Twin, precool_ramp_down_s: float = 300.0, supply_margin: float = 0.9) -> None:
        self.twin = twin
        self.precool_ramp_down_s = precool_ramp_down_s
        self.supply_margin = supply_margin  # PSUs run below their rating: conversion loss, GPU power excursions

    # ----- entities -------------------------------------------------------------------------------------
    def job_of(self, entity: str) -> str | None:
        """The job id of ``entity``: itself for job ids, the job running on a GPU (or on a node's GPUs)."""
        if _JOBS in entity:
            return entity
        gpus = self.gpus_of(entity)
        if gpus is None or gpus.size == 0:
            return None
        owners = self.twin.job_of_gpu[gpus]
        owners = owners[owners >= 0]
        if owners.size == 0:
            return None
        return f"{self.twin.topo.site}{_JOBS}{self.twin.jobs[int(np.bincount(owners).argmax())].spec.name}"

    def jobs_on(self, entity: str) -> tuple[str, ...] | None:
        """From the twin's placement: the jobs holding a GPU under ``entity`` (a queued job holds none)."""
        gpus = self.gpus_of(entity)
        if gpus is None:
            return None
        owners = np.unique(self.twin.job_of_gpu[gpus])
        return tuple(f"{self.twin.topo.site}{_JOBS}{self.twin.jobs[int(j)].spec.name}" for j in owners if j >= 0)

    def cdu_of(self, entity: str) -> str | None:
        """The row (one CDU per row) cooling ``entity``."""
        return ancestor(entity, 2)

    def gpus_of(self, target: str) -> NDArray[np.int64] | None:
        """GPU indices under an entity or job id; None for ids the twin does not know."""
        if _JOBS in target:
            job = self.twin.job_by_name(target.split(_JOBS, 1)[1])
            return None if job is None else np.asarray(job.gpus, dtype=np.int64)
        try:
            level, index = self.twin.topo.resolve(target)
        except KeyError:
            return None
        return self.twin.topo.gpus_of(level, index)

    def _is_site(self, target: str) -> bool:
        return target == self.twin.topo.site

    def index_at(self, target: str, level: str) -> int | None:
        """Index of ``target`` if it is an id of that level (``row``, ``node``, ``gpu``...); None for anything else."""
        try:
            found, index = self.twin.topo.resolve(target)
        except KeyError:
            return None
        return index if found == level else None

    def row_index(self, target: str) -> int | None:
        """Index of a row (CDU) id; None for anything else."""
        return self.index_at(target, "row")

    def _replicas_of(self, incident: Incident) -> list[str]:
        """From the twin's placement: for each serving replica holding a member GPU, its first member GPU."""
        first: dict[tuple[int, int], str] = {}
        for e in incident.members:
            gpu = self.index_at(e, "gpu")
            job = None if gpu is None else self.twin.job_on_gpu(gpu)
            if gpu is None or job is None or job.kind != "serving":
                continue
            for r in self.twin.replicas_under(job, np.array([gpu], dtype=np.int64)):
                first.setdefault((job.index, r), e)
        return [first[k] for k in sorted(first)]

    def is_serving(self, job: str) -> bool | None:
        """From the twin's job kind."""
        j = self.twin.job_by_name(job.split(_JOBS, 1)[1]) if _JOBS in job else None
        return None if j is None else j.kind == "serving"

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """From the twin's job state: a training job back in its sustained phase whose last checkpoint (or restart
        from one) completed at or after ``since_ts``; a job holding no unsaved work (serving, queued, ramping up
        from its checkpoint, done) is done too. A job writing its checkpoint, or hung, is not.
        """
        if _JOBS not in job:
            return None
        j = self.twin.job_by_name(job.split(_JOBS, 1)[1])
        if j is None:
            return None
        if j.kind != "training" or j.phase in (Phase.QUEUED, Phase.RAMP_UP, Phase.LAUNCH, Phase.COOLDOWN, Phase.DONE):
            return True
        if j.phase != Phase.SUSTAINED:
            return False
        return j.saved_at_s >= since_ts or j.iterations <= j.iterations_at_checkpoint

    def job_timing(self, job: str) -> JobTiming | None:
        """From the twin's job spec and state: checkpoint write, restart (overhead + loading), time to the next
        checkpoint (0 with no unsaved work: nothing to save), for a job with a run time what is left of it, and its
        unsaved work (iterations since its last checkpoint at the profile's full-speed iteration time: what a
        restart on healthy GPUs redoes).
        """
        j = self.twin.job_by_name(job.split(_JOBS, 1)[1]) if _JOBS in job else None
        if j is None or j.kind != "training":
            return None
        now = self.twin.t_s
        saved = j.iterations <= j.iterations_at_checkpoint
        next_s = 0.0 if saved or j.phase != Phase.SUSTAINED else max(0.0, j.next_checkpoint_s - now)
        remaining = None
        if j.spec.run_s is not None and j.first_start_s is not None:
            remaining = max(0.0, j.first_start_s + j.spec.run_s - now)
        unsaved_s = max(0.0, j.iterations - j.iterations_at_checkpoint) * j.profile.iteration_s
        restart_s = j.spec.restart_overhead_s + j.profile.load_s
        return JobTiming(
            j.spec.checkpoint_write_s,
            restart_s,
            next_s,
            remaining,
            unsaved_s,
            checkpoint_interval_s=j.spec.checkpoint_interval_s,
            interruptions_per_s=self._interruptions_per_s(j),
        )

    def _interruptions_per_s(self, job: Job) -> float:
        """The job's expected failure rate from the scenario's failure model (its GPUs' and nodes' rates, at its
        GPUs' temperatures now: :meth:`~twinloop.twin.failures.FailureModel.interruptions_per_s`), what a job's
        heartbeats would measure over a long run; 0 with failures off.
        """
        model = self.twin.failure_model
        if model is None:
            return 0.0
        temp_c = self.twin.physics.gpus.temp_c[job.gpus] if job.gpus.size else None
        return float(model.interruptions_per_s(int(job.gpus.size), int(job.nodes.size), temp_c))

    def requeue_pace(self, job: str, without: tuple[str, ...] = ()) -> RequeuePace | None:
        """From the twin's scheduler and GPU rates (:func:`twinloop.closedloop.requeue_pace.requeue_pace`)."""
        j = self.twin.job_by_name(job.split(_JOBS, 1)[1]) if _JOBS in job else None
        nodes = [n for n in (self.index_at(node, "node") for node in without) if n is not None]
        return None if j is None else requeue_pace(self.twin, j, np.asarray(nodes, dtype=np.int64))

    def thermal_path(self, gpu: str) -> ThermalPath | None:
        """A GPU's slowdown threshold and the coolant its die sees now (its rack's liquid loop, or its row's inlet
        air), from the twin's state: what a cold-plate temperature sensor or a rack inlet sensor would report.
        """
        index = self.index_at(gpu, "gpu")
        if index is None:
            return None
        ph = self.twin.physics
        return ThermalPath(float(ph.slowdown_c[index]), float(ph.gpus.coolant_c[index]))

    # ----- settings -------------------------------------------------------------------------------------
    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        """Hardware ranges from the twin's GPUs and CDUs."""
        ph, cool = self.twin.physics, self.twin.cooling
        if kind in (ActionKind.POWER_CAP, ActionKind.SET_CLOCKS):
            gpus = self.gpus_of(target)
            if gpus is None or gpus.size == 0:
                return None
            lo_arr, hi_arr = (
                (ph.limit_min_w, ph.limit_max_w)
                if kind == ActionKind.POWER_CAP
                else (ph.clock_min_mhz, ph.clock_max_mhz)
            )
            return float(lo_arr[gpus].max()), float(hi_arr[gpus].min())
        if kind == ActionKind.FACILITY_WATER:
            plant = cool.plant
            return (plant.facility_water_min_c, plant.facility_water_max_c) if self._is_site(target) else None
        row = self.row_index(target)
        if row is None:
            return None
        if kind in (ActionKind.CDU_SETPOINT, ActionKind.PRECOOL):
            return float(cool.setpoint_min_c[row]), float(cool.setpoint_max_c[row])
        if kind == ActionKind.CDU_FLOW:
            return float(cool.flow_min[row]), float(cool.flow_max[row])
        return None

    def current(self, kind: ActionKind, target: str) -> float | None:
        """Current power limit (mean over the target's GPUs), clock cap, CDU setpoint, flow fraction, or whether a
        node is drained (1) or not (0).
        """
        if kind == ActionKind.DRAIN:
            return self._drained(target)
        if kind == ActionKind.POWER_CAP:
            gpus = self.gpus_of(target)
            if gpus is None or gpus.size == 0:
                return None
            return float(self.twin.physics.gpus.user_limit_w[gpus].mean())
        state = self.twin.cooling.state
        if kind == ActionKind.FACILITY_WATER:
            return state.facility_water_setpoint_c if self._is_site(target) else None
        row = self.row_index(target)
        if row is None:
            return None
        if kind in (ActionKind.CDU_SETPOINT, ActionKind.PRECOOL):
            return float(state.setpoint_c[row])
        if kind == ActionKind.CDU_FLOW:
            return float(state.flow_fraction[row])
        return None

    def _drained(self, target: str) -> float | None:
        node = self.index_at(target, "node")
        return None if node is None else float(self.twin.scheduler.node_drained[node])

    def supply_limit_w(self, target: str) -> float | None:
        """Working PSUs' rating times ``supply_margin``, less the node's host draw, shared by its GPUs, W."""
        node = self.index_at(target, "node")
        if node is None:
            return None
        t, chain = self.twin, self.twin.chain
        host_w = t.host_busy_w[node] if t.scheduler.node_owner[node] >= 0 else t.host_idle_w[node]
        carried_w = float(chain.psus_alive[node] * chain.psu_rating_w[node]) * self.supply_margin - float(host_w)
        return carried_w / float(t.topo.node_gpus[node])

    # ----- apply ----------------------------------------------------------------------------------------
    def _commands(self, r: ActionRequest) -> list[Action] | str:
        t = self.twin
        job = r.target.split(_JOBS, 1)[1] if _JOBS in r.target else None
        if r.kind == ActionKind.POWER_CAP and r.value is not None:
            if job is None:
                return [SetPowerLimit(r.target, r.value)]
            gpus = self.gpus_of(r.target)
            if gpus is None:
                return f"unknown job {job!r}"
            nodes = np.unique(t.topo.gpu_node[gpus])
            return [SetPowerLimit(t.topo.node_id(int(n)), r.value) for n in nodes]
        if r.kind == ActionKind.SET_CLOCKS:
            return [SetClocks(r.target, r.value)]
        if r.kind == ActionKind.CDU_SETPOINT:
            return [SetCoolant(r.target, setpoint_c=r.value)]
        if r.kind == ActionKind.CDU_FLOW:
            return [SetCoolant(r.target, flow_fraction=r.value)]
        if r.kind == ActionKind.FACILITY_WATER:
            if not self._is_site(r.target) or r.value is None:
                return f"facility water takes the site ({t.topo.site!r}) and a value"
            return [SetFacilityWater(r.value)]
        if r.kind == ActionKind.PRECOOL and r.value is not None:
            return [SchedulePrecool(r.target, t.t_s, r.value, r.duration_s, self.precool_ramp_down_s)]
        if r.kind == ActionKind.COOLING_RAMP_DOWN:
            # Hold today's setpoint, then step back to the scenario's over duration_s (residual heat fades).
            row = self.row_index(r.target)
            if row is None:
                return f"{r.target!r} is not a row (CDU)"
            now_c = float(t.cooling.state.setpoint_c[row])
            return [SchedulePrecool(r.target, t.t_s, now_c, 0.0, r.duration_s or self.precool_ramp_down_s)]
        if r.kind in (ActionKind.CHECKPOINT, ActionKind.REQUEUE):
            if job is None:
                return f"{r.target!r} is not a job"
            return [TriggerCheckpoint(job) if r.kind == ActionKind.CHECKPOINT else RequeueJob(job)]
        if r.kind == ActionKind.RESTART_REPLICA:
            return [RestartReplica(r.target)]
        if r.kind in (ActionKind.DRAIN, ActionKind.UNDRAIN):
            return [Drain(r.target, undrain=r.kind == ActionKind.UNDRAIN)]
        if r.kind in (ActionKind.HOLD_ADMISSION, ActionKind.RELEASE_ADMISSION):
            return [HoldAdmission(hold=r.kind == ActionKind.HOLD_ADMISSION)]
        return f"{r.kind} needs a value"

    def _apply(self, request: ActionRequest) -> AdapterReply:
        commands = self._commands(request)
        if isinstance(commands, str):
            return AdapterReply("refused", commands)
        for cmd in commands:
            result = self.twin.apply(cmd)
            if not result.ok:
                return AdapterReply("refused", f"twin refused {cmd.name}: {result.reason}")
        return AdapterReply("applied", ", ".join(c.name for c in commands))
