"""Commands the loop can give the twin between steps, validated against the hardware's limits and logged.

Every command returns an :class:`ActionResult`; a refused command changes nothing and says why (for example a
power limit outside the GPU's ``power_limit_min_w..power_limit_max_w``). Registry: ``ACTIONS`` (name → class).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from twinloop.twin.cooling import ScheduledCommand
from twinloop.twin.events import Event
from twinloop.twin.jobs import Phase
from twinloop.twin.operations import ClusterOps


@dataclass(frozen=True)
class ActionResult:
    """Outcome of one command: ``ok`` and, if refused, ``reason``."""

    ok: bool
    action: Action
    t_s: float
    reason: str = ""


@dataclass(frozen=True)
class Action:
    """Base class of all commands."""

    name: ClassVar[str] = "action"

    def apply(self, twin: ClusterOps) -> str | None:
        """Validate and apply; return a refusal reason or None when applied."""
        raise ValueError(f"{type(self).__name__} is not a concrete action")


def _gpus(twin: ClusterOps, target: str) -> tuple[np.ndarray, str | None]:
    try:
        level, index = twin.topo.resolve(target)
    except KeyError:
        return np.zeros(0, dtype=np.int64), f"unknown entity {target!r}"
    return twin.topo.gpus_of(level, index), None


def _one(twin: ClusterOps, target: str, level: str, takes: str) -> tuple[int, str | None]:
    """The index of ``target``, which must be a ``level``; else -1 and why (``takes``: what the command takes)."""
    try:
        found, index = twin.topo.resolve(target)
    except KeyError:
        return -1, f"unknown entity {target!r}"
    if found != level:
        return -1, f"{target!r} is a {found}; {takes}"
    return index, None


def _row(twin: ClusterOps, target: str) -> tuple[int, str | None]:
    try:
        level, index = twin.topo.resolve(target)
    except KeyError:
        return -1, f"unknown entity {target!r}"
    if level == "site":
        return -1, None
    if level != "row":
        return -1, f"{target!r} is a {level}; cooling commands take a row (or the site)"
    return index, None


@dataclass(frozen=True)
class SetPowerLimit(Action):
    """Set the power limit (W) of every GPU under ``target`` (GPU, node, rack, row or site)."""

    name: ClassVar[str] = "set_power_limit"
    target: str
    power_w: float

    def apply(self, twin: ClusterOps) -> str | None:
        idx, err = _gpus(twin, self.target)
        if err:
            return err
        lo, hi = twin.physics.limit_min_w[idx], twin.physics.limit_max_w[idx]
        if not (np.isfinite(self.power_w) and (self.power_w >= lo).all() and (self.power_w <= hi).all()):
            return f"power limit {self.power_w} W outside the GPU range (allowed: {lo.max():.0f}..{hi.min():.0f} W)"
        twin.physics.gpus.user_limit_w[idx] = self.power_w
        return None


@dataclass(frozen=True)
class SetClocks(Action):
    """Lock the SM clock (MHz) of every GPU under ``target``; ``clock_mhz=None`` resets to default."""

    name: ClassVar[str] = "set_clocks"
    target: str
    clock_mhz: float | None

    def apply(self, twin: ClusterOps) -> str | None:
        idx, err = _gpus(twin, self.target)
        if err:
            return err
        if self.clock_mhz is not None:
            lo, hi = twin.physics.clock_min_mhz[idx], twin.physics.clock_max_mhz[idx]
            if not (np.isfinite(self.clock_mhz) and (self.clock_mhz >= lo).all() and (self.clock_mhz <= hi).all()):
                return f"clock {self.clock_mhz} MHz outside the GPU range (allowed: {lo.max():.0f}..{hi.min():.0f} MHz)"
        twin.physics.gpus.g_cap[idx] = twin.physics.g_for_clock(idx, self.clock_mhz)
        return None


@dataclass(frozen=True)
class SetCoolant(Action):
    """Set a row's CDU supply setpoint (C) and/or flow (fraction of nominal); ``row`` = site id for all rows."""

    name: ClassVar[str] = "set_coolant"
    row: str
    setpoint_c: float | None = None
    flow_fraction: float | None = None

    def apply(self, twin: ClusterOps) -> str | None:
        row, err = _row(twin, self.row)
        if err:
            return err
        return _cooling_command(twin, row, twin.t_s, self.setpoint_c, self.flow_fraction)


def _cooling_command(
    twin: ClusterOps, row: int, at_s: float, setpoint_c: float | None, flow_fraction: float | None
) -> str | None:
    c = twin.cooling
    if c.plant.control == "reactive":
        return "cooling control is 'reactive' (the PID owns setpoints); use 'commanded' or 'fixed'"
    rows = slice(None) if row < 0 else slice(row, row + 1)
    if setpoint_c is not None:
        lo, hi = float(c.setpoint_min_c[rows].max()), float(c.setpoint_max_c[rows].min())
        if not lo <= setpoint_c <= hi:
            return f"setpoint {setpoint_c} C outside the CDU range (allowed: {lo}..{hi} C)"
    if flow_fraction is not None:
        lo, hi = float(c.flow_min[rows].max()), float(c.flow_max[rows].min())
        if not lo <= flow_fraction <= hi:
            return f"flow fraction {flow_fraction} outside the pump range (allowed: {lo}..{hi})"
    if setpoint_c is None and flow_fraction is None:
        return "give setpoint_c and/or flow_fraction"
    c.state.schedule.append(ScheduledCommand(at_s, row, setpoint_c, flow_fraction))
    c.state.schedule.sort(key=lambda s: s.at_s)
    return None


@dataclass(frozen=True)
class SetFacilityWater(Action):
    """Reset the plant's facility water supply setpoint (C), within the plant's allowed range."""

    name: ClassVar[str] = "set_facility_water"
    setpoint_c: float

    def apply(self, twin: ClusterOps) -> str | None:
        p = twin.cooling.plant
        if not (np.isfinite(self.setpoint_c) and p.facility_water_min_c <= self.setpoint_c <= p.facility_water_max_c):
            return (
                f"facility water setpoint {self.setpoint_c} C outside the plant range "
                f"(allowed: {p.facility_water_min_c}..{p.facility_water_max_c} C)"
            )
        twin.cooling.state.facility_water_setpoint_c = float(self.setpoint_c)
        return None


@dataclass(frozen=True)
class SchedulePrecool(Action):
    """Lower a row's setpoint to ``setpoint_c`` from ``start_s`` for ``duration_s``, then ramp back to the
    scenario setpoint over ``ramp_down_s`` (in ``RAMP_STEPS`` equal steps).
    """

    name: ClassVar[str] = "schedule_precool"
    RAMP_STEPS: ClassVar[int] = 5
    row: str
    start_s: float
    setpoint_c: float
    duration_s: float
    ramp_down_s: float = 0.0

    def apply(self, twin: ClusterOps) -> str | None:
        row, err = _row(twin, self.row)
        if err:
            return err
        if self.start_s < twin.t_s or self.duration_s < 0 or self.ramp_down_s < 0:
            return f"start_s must be >= now ({twin.t_s} s), durations >= 0"
        err = _cooling_command(twin, row, self.start_s, self.setpoint_c, None)
        if err:
            return err
        base = float(twin.cooling.base_setpoint_c[0 if row < 0 else row])
        end = self.start_s + self.duration_s
        n = self.RAMP_STEPS if self.ramp_down_s > 0 else 1
        for k in range(1, n + 1):
            sp = self.setpoint_c + (base - self.setpoint_c) * k / n
            _cooling_command(twin, row, end + self.ramp_down_s * (k - 1) / n, sp, None)
        return None


@dataclass(frozen=True)
class TriggerCheckpoint(Action):
    """Make a running training job write a checkpoint now."""

    name: ClassVar[str] = "trigger_checkpoint"
    job: str

    def apply(self, twin: ClusterOps) -> str | None:
        job = twin.job_by_name(self.job)
        if job is None:
            return f"unknown job {self.job!r}"
        if job.kind != "training" or job.phase != Phase.SUSTAINED:
            return f"job {self.job!r} is not a training job in its sustained phase"
        twin.start_checkpoint(job)
        return None


@dataclass(frozen=True)
class Drain(Action):
    """Drain a node: no new placements; a training job on it runs on, a serving fleet's replica on it goes out of
    service (its requests go to the live replicas). ``undrain`` reverses it.
    """

    name: ClassVar[str] = "drain"
    node: str
    undrain: bool = False

    def apply(self, twin: ClusterOps) -> str | None:
        index, err = _one(twin, self.node, "node", "drain takes a node")
        if err:
            return err
        twin.scheduler.node_drained[index] = not self.undrain
        owner = int(twin.scheduler.node_owner[index])
        if owner >= 0:
            twin.route_replicas(twin.jobs[owner])
        return None


@dataclass(frozen=True)
class RequeueJob(Action):
    """Stop a job (losing work since its last checkpoint) and put it back at the head of the queue."""

    name: ClassVar[str] = "requeue_job"
    job: str

    def apply(self, twin: ClusterOps) -> str | None:
        job = twin.job_by_name(self.job)
        if job is None:
            return f"unknown job {self.job!r}"
        if not job.running or job.phase == Phase.COOLDOWN:
            return f"job {self.job!r} is not running"
        twin.interrupt_job(job, "requeued by command")
        return None


@dataclass(frozen=True)
class RestartReplica(Action):
    """Restart the serving replica holding GPU ``gpu`` where it is (as deleting its pod does: the Deployment
    recreates it on its node): it reloads its model and serves again; the rest of its fleet serves on.
    """

    name: ClassVar[str] = "restart_replica"
    gpu: str

    def apply(self, twin: ClusterOps) -> str | None:
        index, err = _one(twin, self.gpu, "gpu", "restart_replica takes a GPU of the replica")
        if err:
            return err
        job = twin.job_on_gpu(index)
        if job is None or job.kind != "serving" or job.phase != Phase.SUSTAINED:
            return f"{self.gpu!r} runs no serving fleet in its sustained phase"
        (replica,) = twin.replicas_under(job, np.array([index], dtype=np.int64))
        twin.restart_replica(job, replica, "restarted by command: reloading its model")
        return None


@dataclass(frozen=True)
class HoldAdmission(Action):
    """Hold (``hold=True``) or release admission of queued jobs."""

    name: ClassVar[str] = "hold_admission"
    hold: bool = True

    def apply(self, twin: ClusterOps) -> str | None:
        twin.scheduler.admission_held = self.hold
        return None


ACTIONS: dict[str, type[Action]] = {
    cls.name: cls
    for cls in (
        SetPowerLimit,
        SetClocks,
        SetCoolant,
        SetFacilityWater,
        SchedulePrecool,
        TriggerCheckpoint,
        Drain,
        RequeueJob,
        RestartReplica,
        HoldAdmission,
    )
}


def apply_action(twin: ClusterOps, action: Action) -> ActionResult:
    """Validate and apply one command; emit its ``action`` event (the engine keeps the log of results)."""
    reason = action.apply(twin)
    result = ActionResult(ok=reason is None, action=action, t_s=twin.t_s, reason=reason or "")
    twin.emit(
        Event(
            twin.t_s,
            "action",
            getattr(action, "target", getattr(action, "gpu", twin.topo.site)),
            f"{action.name}: {'applied' if result.ok else 'refused: ' + result.reason}",
        )
    )
    return result
