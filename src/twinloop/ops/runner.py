"""The loop runner: detect → classify → respond → verify → cool, over any :class:`~twinloop.ops.ports.Cluster`.

One :class:`LoopRunner` drives the whole operational loop through the port and nothing else, so the same code
runs over the twin (``twinloop.closedloop``) and over a live cluster (``twinloop.ops.live``).

API (kept stable; live clusters and ``twinloop watch`` build on it):

* ``LoopRunner(cluster, *, mode="auto", policy=None, pipeline_config=None, optimize_cooling=True,
  cooling_config=None, forecast=None, on_sample=None, on_incidents=None, on_actions=None)``: nothing is read
  from the cluster until the first :meth:`LoopRunner.start` / :meth:`LoopRunner.step` / :meth:`LoopRunner.run`.
  ``mode=None`` runs detection only (no responder, no actions: the closed loop's "loop off" pass);
  ``"observe"`` records recommendations, ``"approve"`` queues actions for a person, ``"auto"`` applies them.
* :meth:`LoopRunner.step` ``(sample) -> StepOutput``: one sample through every stage; returns the incident
  updates (new, updated, closed, merged) and the action results recorded during the step.
* :meth:`LoopRunner.run` ``(duration_s=None, *, max_samples=None, stop=None, idle_s=0.2, sleep=time.sleep)
  -> RunSummary``: polls the cluster until :data:`~twinloop.ops.ports.END`, ``duration_s`` of cluster time,
  ``max_samples`` samples, or ``stop()`` returning True; sleeps ``idle_s`` when the cluster has nothing new.
* :meth:`LoopRunner.approve` / :meth:`LoopRunner.reject` ``(action_id)``: a person's answer to a pending
  action (``approve`` mode); its result is reported by the next :class:`StepOutput` too.
* Read-only state: :attr:`LoopRunner.incidents` (latest version of every incident, by id),
  :attr:`LoopRunner.actions` (the responder's log), :attr:`LoopRunner.pending` (actions awaiting a person),
  :attr:`LoopRunner.pipeline`, :attr:`LoopRunner.responder`, :attr:`LoopRunner.optimizer`,
  :attr:`LoopRunner.topology`, :attr:`LoopRunner.warnings` (every sample's data-quality notes).

Hooks, each called synchronously inside :meth:`LoopRunner.step`:

* ``on_sample(sample)``: every sample, before detection (progress, recording the telemetry);
* ``on_incidents(sample, updates)``: a step's incident updates as the detectors report them, before the responder
  acts (writing incidents to a store as they happen);
* ``on_actions(sample, results)``: the action results recorded in a step (applied, refused, dry run, pending,
  rolled back, restored...), after the responder and the cooling optimizer acted.

A sample whose time is not after the previous one's (a duplicate, out of order, NaN) is dropped before any stage
sees it: counted in :attr:`LoopRunner.dropped`, noted in :attr:`LoopRunner.warnings` and in its
:class:`StepOutput`, no hook called.

Order within a step (the closed-loop results depend on it): the heat forecast sees the sample's
:class:`~twinloop.ops.ports.RackHeat`; ``on_sample``; the CDU setpoints commanded since the last sample are told to
the ``cdu_setpoint`` rule; detection; ``on_incidents``; the responder handles the updates and verifies earlier
actions' effects; the cooling optimizer takes its control period; ``on_actions``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.events import EventClass, Incident
from twinloop.ops.learn.precool import ArrivalTemperature, RowHeatForecast
from twinloop.ops.ports import END, Cluster, Sample, Topology
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
from twinloop.ops.respond.adapters.base import ancestor
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer, CoolingOptimizerConfig
from twinloop.ops.respond.policy import Mode, Policy, default_policy, root_level
from twinloop.ops.respond.relax_value import RelaxValue
from twinloop.ops.respond.responder import Responder

OnSample = Callable[[Sample], None]
OnIncidents = Callable[[Sample, Sequence[Incident]], None]
OnActions = Callable[[Sample, Sequence[ActionResult]], None]


@dataclass(frozen=True)
class StepOutput:
    """What one sample did.

    Attributes:
        ts: the sample's time, s.
        incidents: incident updates of this step (new, updated, closed, merged), as the pipeline reported them.
        actions: action results recorded during this step (and any approval/rejection since the last step).
        warnings: the sample's data-quality notes.
    """

    ts: float
    incidents: tuple[Incident, ...]
    actions: tuple[ActionResult, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    """Why and where :meth:`LoopRunner.run` stopped.

    Attributes:
        samples: samples processed by this call.
        first_ts: time of the first of them, s (None when none).
        last_ts: time of the last of them, s (None when none).
        stopped: ``"end"`` (the cluster's source is exhausted), ``"duration"``, ``"max_samples"`` or ``"stop"``.
    """

    samples: int
    first_ts: float | None
    last_ts: float | None
    stopped: str


#: Settings that slow a GPU on purpose (the straggler rules expect it).
_SLOWING_KINDS = frozenset({ActionKind.POWER_CAP, ActionKind.SET_CLOCKS})

#: Incident classes during which the cooling optimizer relaxes nothing they cover (their rules tighten cooling).
_HOLDING_CLASSES = frozenset({EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE})


class LoopRunner:
    """The operational loop over one cluster (see the module docstring for the API and the order of a step).

    Args:
        cluster: the cluster, seen only through the :class:`~twinloop.ops.ports.Cluster` port.
        mode: ``observe``, ``approve`` or ``auto``; None = detection only (no responder, no optimizer).
        policy: the response policy (default: :func:`~twinloop.ops.respond.policy.default_policy`).
        pipeline_config: detection settings.
        optimize_cooling: run the cooling optimizer on the topology's ``liquid_rows`` (needs a responder).
        cooling_config: optimizer settings (default: its defaults, with the topology's CDU approach when known).
        forecast: a heat forecaster fed by the samples' :class:`~twinloop.ops.ports.RackHeat` for precooling;
            None, or a cluster that never offers rack heat, leaves precooling off.
        on_sample: hook, every sample before detection.
        on_incidents: hook, every step with incident updates, before the responder acts.
        on_actions: hook, every step that recorded action results.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        mode: Mode | None = "auto",
        policy: Policy | None = None,
        pipeline_config: PipelineConfig | None = None,
        optimize_cooling: bool = True,
        cooling_config: CoolingOptimizerConfig | None = None,
        forecast: RowHeatForecast | None = None,
        on_sample: OnSample | None = None,
        on_incidents: OnIncidents | None = None,
        on_actions: OnActions | None = None,
    ) -> None:
        self.cluster = cluster
        self.mode = mode
        self.policy = policy
        self.pipeline_config = pipeline_config
        self.optimize_cooling = optimize_cooling
        self.cooling_config = cooling_config
        self.forecast = forecast
        self.on_sample = on_sample
        self.on_incidents = on_incidents
        self.on_actions = on_actions
        self.incidents: dict[int, Incident] = {}
        self.warnings: list[tuple[float, str]] = []
        self._topology: Topology | None = None
        self._pipeline: DetectionPipeline | None = None
        self.responder: Responder | None = None
        self.optimizer: CoolingOptimizer | None = None
        self._reported = 0  # responder log entries already handed out in a StepOutput
        self._own_setpoints: dict[str, tuple[float, float]] = {}  # CDU -> (setpoint, when) the loop itself set
        self._last_ts = -math.inf
        #: Samples dropped because their time was not after the previous sample's.
        self.dropped = 0
        self._asked_jobs: set[str] = set()

    # ------------------------------------------------------------------ set-up
    def start(self) -> None:
        """Read the topology and build the stages (idempotent; step/run call it)."""
        if self._pipeline is not None:
            return
        topo = self.cluster.topology()
        self._topology = topo
        self._pipeline = DetectionPipeline(
            topo.gpu_ids, limits=topo.limits, cdu_of_rack=topo.cdu_of_rack, config=self.pipeline_config
        )
        if self.mode is None:
            return
        self.responder = Responder(self.policy or default_policy(), self.cluster.adapter, mode=self.mode)
        if self.optimize_cooling:
            config = self.cooling_config or CoolingOptimizerConfig(
                approach_c=topo.cdu_approach_c if topo.cdu_approach_c is not None else CoolingOptimizerConfig.approach_c
            )
            heat = self.forecast
            self.optimizer = CoolingOptimizer(
                self.responder,
                topo.site,
                topo.liquid_rows,
                config,
                forecast=heat.rise_w if heat else None,
                load=heat.load_w if heat else None,
                hold=self._cooling_hold,
                local=self._local_thermal_fault,
                pace=self._pace_setting_fault,
                arrival=ArrivalTemperature(topo.gpu_ids, topo.limits) if heat else None,
                value=RelaxValue(topo.gpu_ids, topo.limits),
                shared=topo.air_rows,
            )
            # A coolant rule with `hand_over` leaves the rows to the optimizer while their GPUs keep a margin.
            self.responder.cooling = self.optimizer

    @property
    def topology(self) -> Topology:
        """The cluster's topology (read at start)."""
        self.start()
        assert self._topology is not None
        return self._topology

    @property
    def pipeline(self) -> DetectionPipeline:
        """The detection pipeline (built at start)."""
        self.start()
        assert self._pipeline is not None
        return self._pipeline

    # ------------------------------------------------------------------ the loop
    def step(self, sample: Sample) -> StepOutput:
        """Run one sample through detect → classify → respond → verify → cool (see the module docstring)."""
        self.start()
        pipeline = self.pipeline
        if not sample.ts > self._last_ts:  # a duplicate or out-of-order sample (or NaN time): nothing may act on it
            note = f"sample at {sample.ts} not after {self._last_ts}: dropped"
            self.warnings.append((sample.ts, note))
            self.dropped += 1
            return StepOutput(sample.ts, (), self._new_actions(), (*sample.warnings, note))
        self._last_ts = sample.ts
        if self.forecast is not None and sample.rack_heat is not None:
            self.forecast.observe(sample.rack_heat)
        self.warnings.extend((sample.ts, w) for w in sample.warnings)
        if self.on_sample is not None:
            self.on_sample(sample)
        for cdu, setpoint_c in sample.commanded_setpoints.items():
            pipeline.commanded_setpoint(cdu, setpoint_c)
        for cdu, (setpoint_c, at_s) in self._own_setpoints.items():
            if cdu not in sample.commanded_setpoints:  # a cluster with no control system's write log (live)
                pipeline.commanded_setpoint(cdu, setpoint_c, at_s)
        self._own_setpoints.clear()
        self._tell_replica_jobs(sample.job_ids)
        if sample.gpu_processes:
            pipeline.compute_processes(sample.gpu_processes)
        updates = pipeline.step(
            sample.ts,
            sample.gpu,
            job_index=sample.job_index,
            job_ids=sample.job_ids,
            job_fields=sample.job_fields,
            site_fields=sample.site_fields,
        )
        for inc in updates:
            self.incidents[inc.incident_id] = inc
        if self.on_incidents is not None and updates:
            self.on_incidents(sample, updates)
        read = self.cluster.read
        if self.responder is not None:
            self.responder.handle(updates, sample.ts, read)
            self.responder.verify(sample.ts, read)
        if self.optimizer is not None:
            self.optimizer.observe(sample.gpu, sample.site_fields)
            self.optimizer.step(sample.ts, read)
        actions = self._new_actions()
        self._tell_settings(actions)
        if self.on_actions is not None and actions:
            self.on_actions(sample, actions)
        return StepOutput(sample.ts, tuple(updates), actions, sample.warnings)

    def run(
        self,
        duration_s: float | None = None,
        *,
        max_samples: int | None = None,
        stop: Callable[[], bool] | None = None,
        idle_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RunSummary:
        """Poll the cluster and step every sample until the source ends or a limit is reached.

        Args:
            duration_s: cluster time to run for, s, from the first call's clock (None: until END).
            max_samples: stop after this many samples.
            stop: called between polls; True stops the run (a signal handler, a test).
            idle_s: wall seconds to wait when the cluster has nothing new.
            sleep: the wait function (tests pass a fake).
        """
        self.start()
        t0 = self.cluster.now_s()
        n, first, last = 0, None, None
        while True:
            if stop is not None and stop():
                why = "stop"
                break
            if max_samples is not None and n >= max_samples:
                why = "max_samples"
                break
            if duration_s is not None and self.cluster.now_s() - t0 >= duration_s:
                why = "duration"
                break
            sample = self.cluster.poll()
            if sample is END:
                why = "end"
                break
            if sample is None:
                sleep(idle_s)
                continue
            assert isinstance(sample, Sample)
            self.step(sample)
            n += 1
            first = sample.ts if first is None else first
            last = sample.ts
        return RunSummary(n, first, last, why)

    # ------------------------------------------------------------------ people and records
    @property
    def actions(self) -> tuple[ActionResult, ...]:
        """Every action result so far (the responder's log; empty when detection only)."""
        return tuple(self.responder.log) if self.responder is not None else ()

    @property
    def pending(self) -> dict[int, ActionRequest]:
        """Actions awaiting a person's approval, by action id."""
        return self.responder.pending if self.responder is not None else {}

    def approve(self, action_id: int) -> ActionResult:
        """Approve a pending action now (applies it through the cluster's adapter, under the guard rails)."""
        return self._responder().approve(action_id, self.cluster.now_s(), self.cluster.read)

    def reject(self, action_id: int) -> ActionResult:
        """Reject a pending action now."""
        return self._responder().reject(action_id, self.cluster.now_s())

    @property
    def open_incidents(self) -> list[Incident]:
        """Incidents open now."""
        return self.pipeline.open_incidents

    def _cooling_hold(self, row: str) -> str | None:
        """An open cooling incident (a heat wave at the site, a row's coolant) covering ``row``: the optimizer must
        not relax that row while its rule holds it tightened. A single GPU's or node's thermal fault holds
        nothing: its rule acts on that GPU, not on the row.
        """
        for inc in self.pipeline.open_incidents:
            if inc.event_class not in _HOLDING_CLASSES:
                continue
            level = root_level(inc.root)
            if level == "site" or (level in ("row", "rack") and ancestor(inc.root, 2) == ancestor(row, 2)):
                return f"incident {inc.incident_id} ({inc.event_class} at {inc.root}) open"
        return None

    def _local_thermal_faults(self, row: str) -> Iterator[Incident]:
        """The open cooling or thermal incidents rooted at one GPU or node of ``row`` (a thermal-interface fault)."""
        for inc in self.pipeline.open_incidents:
            local = inc.event_class in _HOLDING_CLASSES and root_level(inc.root) in ("gpu", "node")
            if local and ancestor(inc.root, 2) == ancestor(row, 2):
                yield inc

    def _local_thermal_fault(self, row: str) -> str | None:
        """An open local thermal fault of ``row``: its own rule acts on that GPU, so the optimizer does not chill the
        whole row for it.
        """
        for inc in self._local_thermal_faults(row):
            return f"incident {inc.incident_id} ({inc.event_class} at {inc.root}) open"
        return None

    def _pace_setting_fault(self, row: str) -> str | None:
        """An open local thermal fault of ``row`` that slows its job now (the detector's measured ``job_slowdown``):
        the optimizer does not keep the row relaxed above its design point for it.
        """
        for inc in self._local_thermal_faults(row):
            slows = inc.impact.job_slowdown
            if slows is not None and slows > 0:
                return f"incident {inc.incident_id} ({inc.event_class} at {inc.root}) costs its job {slows:.1%}"
        return None

    def _tell_replica_jobs(self, job_ids: Sequence[str] | None) -> None:
        """Ask the cluster once per new job whether it is a serving fleet (independent replicas: no stragglers)."""
        for job in job_ids or ():
            if job in self._asked_jobs:
                continue
            self._asked_jobs.add(job)
            entity = job if "/" in job else f"{self.topology.site}/jobs/{job}"
            if self.cluster.adapter.is_serving(entity):
                self.pipeline.replica_job(job)

    def _tell_settings(self, actions: Sequence[ActionResult]) -> None:
        """Tell the detectors which GPUs the loop itself capped or clock-locked (their slowness is expected, not a
        straggler) and which it released (a restore or rollback puts the previous setting back); and, with the next
        sample, the CDU setpoints it set, where the cluster's sample does not report them (a live cluster has no
        control system's write log: the loop's own coolant steps then read as unexplained temperature changes).
        """
        for a in actions:
            r = a.request
            moved = a.status in ("applied", "restored", "rolled_back")
            if r.kind == ActionKind.CDU_SETPOINT and moved and r.value is not None:
                self._own_setpoints[r.target] = (r.value, a.ts)
            if r.kind not in _SLOWING_KINDS:
                continue
            if a.status == "applied":
                self.pipeline.loop_setting(r.target, r.value is not None)
            elif a.status in ("restored", "rolled_back"):
                self.pipeline.loop_setting(r.target, False)

    def _responder(self) -> Responder:
        self.start()
        if self.responder is None:
            raise RuntimeError("this loop runs detection only (mode=None): there is nothing to approve")
        return self.responder

    def _new_actions(self) -> tuple[ActionResult, ...]:
        if self.responder is None:
            return ()
        log = self.responder.log
        out = tuple(log[self._reported :])
        self._reported = len(log)
        return out
