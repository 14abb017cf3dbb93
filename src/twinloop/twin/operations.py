"""Cluster operations of the twin: job lifecycle, scheduling, node/GPU incidents and their consequences.

:class:`ClusterOps` is the part of :class:`~twinloop.twin.engine.Twin` that reacts to *discrete* happenings —
jobs arriving, starting, checkpointing, hanging, ending; nodes and GPUs failing and coming back; PSUs overloading;
GPUs overheating — as opposed to the per-step vectorized physics in the engine. Its methods are what actions
(:mod:`twinloop.twin.actions`) and injected faults (:mod:`twinloop.twin.faults`) call.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.power import (
    CLOCK_EVENT_GPU_IDLE,
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
)
from twinloop.twin.events import Event
from twinloop.twin.gpu_rates import gpu_work_rates
from twinloop.twin.jobs import Job, Phase
from twinloop.twin.power_chain import BRAKE_S
from twinloop.twin.scheduler import OVERHEAD, ClusterView
from twinloop.twin.site import SiteState

REPAIR_S = 4 * 3600.0  # time to replace a failed GPU/host part and return the node (guess)
#: A serving replica on a lost node is recreated elsewhere this long after the node stopped answering: Kubernetes
#: evicts the pods of an unreachable or not-ready node after the default 300 s toleration
#: (``node.kubernetes.io/unreachable``, ``tolerationSeconds: 300``), then the Deployment recreates them.
EVICT_S = 300.0
SDC_VISIBLE_S = 1800.0  # how long a failure-model SDC perturbs the loss before a restore (guess)


class ClusterOps(SiteState):
    """Discrete cluster operations (mixed into :class:`~twinloop.twin.engine.Twin`, which owns the state)."""

    def job_by_name(self, name: str) -> Job | None:
        """The job called ``name``."""
        return next((j for j in self.jobs if j.spec.name == name), None)

    def job_on_gpu(self, gpu: int) -> Job | None:
        """The job running on ``gpu`` now, if any."""
        j = int(self.job_of_gpu[gpu])
        return self.jobs[j] if j >= 0 else None

    def clock_event_reasons(self) -> NDArray[np.uint32]:
        """NVML clock-event reason bitmask per GPU for the last step (hardware slowdown and power brakes included)."""
        a = self.physics.gpus
        bits = np.zeros(self.topo.n_gpus, dtype=np.uint32)
        bits[a.limited & ~a.thermal_bound] |= CLOCK_EVENT_SW_POWER_CAP
        bits[a.limited & a.thermal_bound] |= CLOCK_EVENT_SW_THERMAL
        bits[self.hw_slow_gpus] |= CLOCK_EVENT_HW_SLOWDOWN
        bits[self.braked_gpus] |= CLOCK_EVENT_HW_POWER_BRAKE
        bits[a.gid < self.physics.n_kinds] |= CLOCK_EVENT_GPU_IDLE
        return bits

    def emit(self, event: Event) -> None:
        """Record an event (kept for the run and returned with this step)."""
        self._step_events.append(event)
        self.events.append(event)

    def _job_entity(self, job: Job) -> str:
        return f"{self.topo.site}/jobs/{job.spec.name}"

    def _set_phase(self, job: Job, phase: Phase, until_s: float = 0.0) -> None:
        job.phase = phase
        job.phase_end_s = until_s
        self.emit(Event(self.t_s, "job_phase", self._job_entity(job), phase.name.lower()))

    def _release(self, job: Job) -> None:
        if job.nodes.size:
            self.scheduler.release(job.nodes)
            gpus = job.gpus
            self.physics.gpus.gid[gpus] = self.topo.gpu_kind[gpus]
            self.job_of_gpu[gpus] = -1
        job.nodes = np.zeros(0, dtype=np.int64)
        job.gpus = np.zeros(0, dtype=np.int64)
        job.out_of_service[:] = False
        job.ready_s[:] = 0.0
        job.hung_until_s[:] = 0.0
        job.evict_at_s.clear()
        job.moved = False

    def _bind(self, job: Job, gpus: NDArray[np.int64], pos: NDArray[np.int64]) -> None:
        """Give ``job`` the GPUs ``gpus``, at positions ``pos`` of its placement (a serving fleet's replica ``pos //
        gpus_per_replica``): their activity slot and owner.
        """
        slot = job.slot0 + (pos // job.spec.gpus_per_replica if job.kind == "serving" else 0)
        self.physics.gpus.gid[gpus] = slot * self.physics.n_kinds + self.topo.gpu_kind[gpus]
        self.job_of_gpu[gpus] = job.index

    def _replica_where(self, job: Job, r: int) -> str:
        return self.topo.node_id(int(self.topo.gpu_node[int(job.gpus[r * job.spec.gpus_per_replica])]))

    def route_replicas(self, job: Job) -> None:
        """The router's view of a serving fleet: a replica on a lost (down) or drained node, or reloading its model,
        is out of service (it gets no requests; its GPUs idle, are off, or load), the others serve; an event per
        change. Training jobs run on through a drain (it only keeps new work off the node).
        """
        if job.kind != "serving" or job.gpus.size == 0:
            return
        nodes = self.topo.gpu_node[job.gpus]
        down: NDArray[np.bool_] = np.asarray(self.scheduler.node_down[nodes].reshape(job.n_slots, -1).any(axis=1))
        drained: NDArray[np.bool_] = np.asarray(self.scheduler.node_drained[nodes].reshape(job.n_slots, -1).any(axis=1))
        loading = job.ready_s > self.t_s
        job.ready_s[~loading] = 0.0  # loaded: nothing left to wait for
        out: NDArray[np.bool_] = np.asarray(down | drained | loading)
        for r in np.flatnonzero(out != job.out_of_service).tolist():
            why = "node down" if down[r] else "node drained" if drained[r] else "loading its model"
            what = f"out of service ({why})" if out[r] else "back in service"
            where = self._replica_where(job, r)
            self.emit(Event(self.t_s, "replica_routing", self._job_entity(job), f"replica {r} on {where}: {what}"))
        job.out_of_service = out

    def _replica_reload(self, job: Job, pos: NDArray[np.int64]) -> NDArray[np.int64]:
        """The replicas at placement positions ``pos`` reload their model (restart overhead and load, as a restarted
        job does) before they serve again; returns them. A reload is a new process: a hang ends, and the requests
        queued on the old one are lost (their clients see errors and retry as new requests).
        """
        replicas = np.unique(pos // job.spec.gpus_per_replica)
        job.ready_s[replicas] = self.t_s + job.spec.restart_overhead_s + job.profile.load_s
        job.hung_until_s[replicas] = 0.0
        job.backlog[replicas] = 0.0
        return replicas

    def replica_gpus(self, job: Job, r: int) -> NDArray[np.int64]:
        """Placement positions of replica ``r`` of a serving fleet."""
        size = job.spec.gpus_per_replica
        return np.arange(r * size, (r + 1) * size, dtype=np.int64)

    def replicas_under(self, job: Job, gpus: NDArray[np.int64]) -> list[int]:
        """The replicas of serving fleet ``job`` holding any of ``gpus`` (GPU indices), in replica order."""
        pos = np.flatnonzero(np.isin(job.gpus, gpus))
        return np.unique(pos // job.spec.gpus_per_replica).tolist() if job.kind == "serving" else []

    def hang_replica(self, job: Job, r: int) -> None:
        """Replica ``r`` of a serving fleet hangs (one tensor-parallel group's collective never completes) until
        its hang timeout, when its collective watchdog kills the process and the replica restarts
        (:meth:`restart_replica`); the other replicas serve on. Only a serving replica that serves now hangs.
        """
        if job.phase != Phase.SUSTAINED or job.out_of_service[r] or job.hung_until_s[r] > 0:
            return
        job.hung_until_s[r] = self.t_s + job.spec.hang_timeout_s
        where = self._replica_where(job, r)
        self.emit(Event(self.t_s, "replica_routing", self._job_entity(job), f"replica {r} on {where}: hung"))

    def restart_replica(self, job: Job, r: int, reason: str) -> None:
        """Restart replica ``r`` of a serving fleet where it is (its pod recreated on its node): it reloads its
        model and serves again; the rest of the fleet is untouched.
        """
        self._replica_reload(job, self.replica_gpus(job, r))
        where = self._replica_where(job, r)
        self.emit(Event(self.t_s, "replica_routing", self._job_entity(job), f"replica {r} on {where}: {reason}"))
        self.route_replicas(job)

    def _reschedule_replicas(self, job: Job) -> None:
        """Recreate a serving fleet's replicas on lost nodes past their eviction time (:data:`EVICT_S`) on a free node
        of the scheduler's choosing with enough GPUs (placement policy, the job's GPU model first); the lost node is
        no longer the fleet's. Without a free node they wait (for one, or for their node's repair). No admission
        check: the replica replaces one the fleet already had.
        """
        for node, at_s in list(job.evict_at_s.items()):
            if self.t_s < at_s:
                continue
            pos = np.flatnonzero(self.topo.gpu_node[job.gpus] == node)
            free = self.scheduler.free_nodes()
            free = free[self.topo.node_gpus[free] >= pos.size]
            chosen = self.scheduler.choose(pos.size, self.cluster_view(free, job))
            if chosen is None:
                continue
            target = int(chosen[0])
            gpus = np.arange(self.topo.node_start[target], self.topo.node_start[target] + pos.size, dtype=np.int64)
            old = job.gpus[pos]
            self.job_of_gpu[old] = -1
            self.physics.gpus.gid[old] = self.topo.gpu_kind[old]
            job.gpus[pos] = gpus
            job.moved = True
            self.scheduler.node_owner[node] = -1
            self.scheduler.node_owner[target] = job.index
            job.nodes = np.sort(np.append(job.nodes[job.nodes != node], target))
            self._bind(job, gpus, pos)
            del job.evict_at_s[node]
            for r in self._replica_reload(job, pos).tolist():
                moved = f"replica {r} rescheduled from {self.topo.node_id(node)} to {self.topo.node_id(target)}"
                self.emit(Event(self.t_s, "replica_routing", self._job_entity(job), f"{moved}: loading its model"))
            self.route_replicas(job)

    def interrupt_job(self, job: Job, reason: str, planned: bool = False) -> None:
        """Stop a job, lose the work since its checkpoint (unless planned) and requeue it at the front.

        A job already cooling down has finished its work: it just releases its nodes.
        """
        if job.phase == Phase.COOLDOWN:
            self._release(job)
            self._set_phase(job, Phase.DONE)
            return
        if planned and job.kind == "training":
            job.iterations_at_checkpoint = job.iterations
        lost = job.interrupt()
        self.emit(Event(self.t_s, "job_interrupted", self._job_entity(job), f"{reason}; lost {lost:.1f} iterations"))
        self._release(job)
        job.restart_pending = True
        job.restarts += 1
        self._set_phase(job, Phase.QUEUED)
        self.scheduler.submit(job.index, front=True)

    def node_lost(self, node: int, reason: str, repair_at_s: float | None = None) -> None:
        """Take a node down (until ``repair_at_s`` or ``REPAIR_S`` from now). A training job on it is interrupted (a
        synchronous job cannot go on without a rank); a serving fleet loses only its replica(s) there, which the
        router stops sending requests to, and which are rescheduled after :data:`EVICT_S` where a node is free.
        """
        s, e = int(self.topo.node_start[node]), int(self.topo.node_start[node] + self.topo.node_gpus[node])
        owner = int(self.scheduler.node_owner[node])
        job = self.jobs[owner] if owner >= 0 else None
        fleet = job is not None and job.kind == "serving" and job.phase != Phase.COOLDOWN
        if job is not None and not fleet:
            self.interrupt_job(job, f"{reason} on {self.topo.node_id(node)}")
        self.scheduler.node_down[node] = True
        self.node_powered[node] = False
        self.physics.set_powered(np.arange(s, e, dtype=np.int64), False)
        self.node_down_until[node] = self.t_s + REPAIR_S if repair_at_s is None else repair_at_s
        self._next_repair_s = float(self.node_down_until.min())
        if job is not None and fleet:
            job.evict_at_s.setdefault(node, self.t_s + EVICT_S)
            self.route_replicas(job)

    def node_repaired(self, node: int) -> None:
        """Bring a node back (GPUs powered, PSUs replaced, XIDs cleared); a serving replica still placed on it
        reloads its model there and serves again.
        """
        s, e = int(self.topo.node_start[node]), int(self.topo.node_start[node] + self.topo.node_gpus[node])
        self.scheduler.node_down[node] = False
        self.node_powered[node] = True
        self.physics.set_powered(np.arange(s, e, dtype=np.int64), True)
        self.physics.gpus.xid[s:e] = 0
        self.chain.psus_alive[node] = self.chain.psus_installed[node]
        self.node_down_until[node] = np.inf
        self._next_repair_s = float(self.node_down_until.min())
        self.emit(Event(self.t_s, "node_repaired", self.topo.node_id(node)))
        owner = int(self.scheduler.node_owner[node])
        if owner >= 0 and self.jobs[owner].kind == "serving":
            job = self.jobs[owner]
            job.evict_at_s.pop(node, None)
            pos = np.flatnonzero(self.topo.gpu_node[job.gpus] == node)
            self._bind(job, job.gpus[pos], pos)
            self._replica_reload(job, pos)
            self.route_replicas(job)

    def gpu_lost(self, gpu: int, xid: int, reason: str, repair_at_s: float | None = None, detail: str = "") -> None:
        """A GPU stops (XID recorded unless 0); its node goes down for repair and its job is interrupted."""
        self.physics.gpus.xid[gpu] = xid
        self.emit(Event(self.t_s, reason, self.topo.gpu_id(gpu), detail or f"XID {xid}"))
        self.node_lost(int(self.topo.gpu_node[gpu]), reason, repair_at_s)
        self.physics.gpus.xid[gpu] = xid

    def hang_job(self, job: Job) -> None:
        """A job hangs (collective never completes) until its hang timeout, then restarts (a serving fleet: every
        replica at once; :meth:`hang_replica` hangs one).
        """
        if job.phase in (Phase.SUSTAINED, Phase.CHECKPOINT):
            self._set_phase(job, Phase.HUNG, self.t_s + job.spec.hang_timeout_s)

    def start_checkpoint(self, job: Job) -> None:
        """Begin writing a checkpoint (no progress meanwhile)."""
        self._set_phase(job, Phase.CHECKPOINT, self.t_s + job.spec.checkpoint_write_s)

    def _schedule(self) -> None:
        t = self.t_s
        for job in self.jobs:
            if (
                job.phase == Phase.QUEUED
                and not job.restart_pending
                and job.spec.submit_s <= t
                and (job.index not in self.scheduler.queue)
            ):
                self.scheduler.submit(job.index)
        if not self.scheduler.queue:
            return
        for j in list(self.scheduler.queue):
            job = self.jobs[j]
            if job.spec.submit_s > t:
                continue
            if not self.scheduler.admit(self.admission_estimate_w(job), self.facility_w, self.chain.budget_w):
                continue
            nodes = self.scheduler.try_place(j, job.spec.gpus, self.cluster_view(self.scheduler.free_nodes(), job))
            if nodes is None:
                continue
            self.scheduler.queue.remove(j)
            self._start(job, nodes)

    def admission_estimate_w(self, job: Job) -> float:
        """What admission counts ``job`` to draw (:mod:`twinloop.twin.scheduler`: GPUs x TDP x its requested TDP
        fraction x ``OVERHEAD``), W.
        """
        tdp = float(self.physics.tdp_w.mean())
        return job.spec.gpus * tdp * job.profile.requested_tdp_fraction * OVERHEAD

    def cluster_view(self, free_nodes: NDArray[np.int64], job: Job) -> ClusterView:
        """What the scheduler sees of ``free_nodes`` for ``job`` now: each rack's PDU headroom and coolant
        temperature, and in a hall of several GPU models the job's work rate on each node's model.
        """
        rack_w = self.flows.rack_w if self.flows is not None else np.zeros(self.topo.n_racks)
        return ClusterView(
            free_nodes, np.asarray(self.pdu_rating_w - rack_w), self.rack_coolant_c, self.node_speed(job)
        )

    def node_speed(self, job: Job) -> NDArray[np.float64] | None:
        """Per node, ``job``'s work rate on the node's GPU model at full clock; None in a hall of one model."""
        if job.rates is None or len(self.topo.kinds) < 2:
            return None
        kinds = np.arange(len(self.topo.kinds))
        per_kind = gpu_work_rates(np.ones(kinds.size), job.profile.compute_fraction, kinds, job.rates)
        return np.asarray(per_kind[self.topo.gpu_kind[self.topo.node_start]])

    def _start(self, job: Job, nodes: NDArray[np.int64]) -> None:
        gpus = np.concatenate(
            [np.arange(self.topo.node_start[n], self.topo.node_start[n] + self.topo.node_gpus[n]) for n in nodes]
        )[: job.spec.gpus].astype(np.int64)
        job.nodes, job.gpus = nodes, gpus
        self._bind(job, gpus, np.arange(gpus.size))
        if job.first_start_s is None:
            job.first_start_s = self.t_s
        ramp = job.profile.load_s + (job.spec.restart_overhead_s if job.restart_pending else 0.0)
        job.restart_pending = False
        self._set_phase(job, Phase.RAMP_UP, self.t_s + ramp)

    def _lifecycle(self) -> list[Job]:
        """Time-driven phase transitions; returns the jobs launching this step."""
        t = self.t_s
        launching = []
        for job in self.jobs:
            ph = job.phase
            if ph == Phase.RAMP_UP and t >= job.phase_end_s:
                self._set_phase(job, Phase.LAUNCH)
                launching.append(job)
            elif ph == Phase.LAUNCH:
                self._set_phase(job, Phase.SUSTAINED)
                job.saved_at_s = t
            elif ph == Phase.CHECKPOINT and t >= job.phase_end_s:
                job.iterations_at_checkpoint = job.iterations
                job.saved_at_s = t
                self._set_phase(job, Phase.SUSTAINED)
            elif ph == Phase.HUNG and t >= job.phase_end_s:
                self.interrupt_job(job, "hang: collective watchdog timeout")
            elif ph == Phase.COOLDOWN and t >= job.phase_end_s:
                self._release(job)
                self._set_phase(job, Phase.DONE)
            if job.evict_at_s and Phase.RAMP_UP <= job.phase < Phase.COOLDOWN:
                self._reschedule_replicas(job)
            if job.ready_s.any():  # a replica reloading its model: back in service once loaded
                self.route_replicas(job)
            if job.hung_until_s.any():
                for r in np.flatnonzero((job.hung_until_s > 0) & (job.hung_until_s <= t)).tolist():
                    self.restart_replica(job, r, "hang: collective watchdog timeout, restarting")
            if job.phase == Phase.SUSTAINED:
                if (
                    job.spec.run_s is not None
                    and job.first_start_s is not None
                    and (t >= job.first_start_s + job.spec.run_s)
                ):
                    job.end_s = t
                    self._set_phase(job, Phase.COOLDOWN, t + self.spec.cooling.ramp_down_s)
                elif job.kind == "training":
                    self._periodic_checkpoint(job, t)
        return launching

    def _periodic_checkpoint(self, job: Job, t: float) -> None:
        """Start the job's checkpoint at its save iteration; else expect it when the job gets there at its pace."""
        if job.save_every is None and job.iterations == 0 and job.iter_pos_s == 0:
            job.next_checkpoint_s = t + job.spec.checkpoint_interval_s  # no step done yet: its pace is not known
            return
        save_at = job.next_save_iteration()
        if job.iterations >= save_at:
            self.start_checkpoint(job)
            return
        fraction_done = job.iter_pos_s / job.profile.iteration_s
        job.next_checkpoint_s = t + (save_at - job.iterations - fraction_done) * job.wall_iteration_s()

    def _overload(self, nodes: NDArray[np.int64], node_dc: NDArray[np.float64]) -> None:
        topo = self.topo
        for n in nodes:
            n = int(n)
            if self.brake_until[n] > self.t_s:
                continue
            self.accounts.psu_overloads += 1
            cap = self.chain.psus_alive[n] * self.chain.psu_rating_w[n]
            self.emit(
                Event(
                    self.t_s,
                    "psu_overload",
                    topo.node_id(n),
                    f"draw {node_dc[n]:.0f} W > {cap:.0f} W of working PSUs; power brake {BRAKE_S:.0f} s",
                )
            )
            if cap <= 0:
                self.node_lost(n, "psu_loss")
                continue
            self.brake_until[n] = self.t_s + BRAKE_S
        braked = np.flatnonzero(self.brake_until > self.t_s)
        self.braked_gpus = (
            np.concatenate(
                [np.arange(topo.node_start[n], topo.node_start[n] + topo.node_gpus[n]) for n in braked]
            ).astype(np.int64)
            if braked.size
            else np.zeros(0, dtype=np.int64)
        )

    def _thermal_limits(self) -> None:
        ph = self.physics
        a = ph.gpus
        tmax = float(a.temp_c.max())
        if tmax >= float(ph.slowdown_c.min()):
            self.hw_slow_gpus = np.flatnonzero(a.temp_c >= ph.slowdown_c)
            hot = np.flatnonzero(a.temp_c >= ph.shutdown_c)
            for gpu in hot.tolist():
                if not self.node_powered[self.topo.gpu_node[gpu]]:
                    continue  # already off, still cooling down
                self.accounts.thermal_shutdowns += 1
                detail = f"{float(a.temp_c[gpu]):.1f} C >= shutdown {float(ph.shutdown_c[gpu]):.0f} C"
                self.gpu_lost(gpu, xid=0, reason="thermal_shutdown", detail=detail)
        elif self.hw_slow_gpus.size:
            self.hw_slow_gpus = np.zeros(0, dtype=np.int64)

    def _failures(self) -> None:
        if self.failure_model is None:
            return
        draw = self.failure_model.draw(
            self.rng, self.dt_s, self.physics.gpus.temp_c, self.gpus_per_node, self.job_of_gpu
        )
        for gpu, ci in zip(draw.gpu.tolist(), draw.cause.tolist(), strict=True):
            cause = self.failure_causes[ci]
            node = int(self.topo.gpu_node[gpu])
            if not self.node_powered[node]:
                continue
            self.accounts.failures[cause.name] = self.accounts.failures.get(cause.name, 0) + 1
            entity = self.topo.gpu_id(gpu) if cause.scope == "gpu" else self.topo.node_id(node)
            self.emit(Event(self.t_s, "failure", entity, cause.name))
            job = self.job_on_gpu(gpu)
            if not cause.detectable:  # silent data corruption: only the job's loss shows it
                if job is not None:
                    job.sdc_until_s = self.t_s + SDC_VISIBLE_S
                    job.sdc_magnitude = 0.5
                continue
            if cause.hardware and cause.scope in ("gpu", "node"):
                if cause.xid is not None:
                    self.gpu_lost(gpu, cause.xid, cause.name)
                else:
                    self.node_lost(node, cause.name)
            elif job is not None and job.running and job.phase != Phase.COOLDOWN:
                if cause.xid is not None:
                    self.physics.gpus.xid[gpu] = cause.xid
                self.interrupt_job(job, cause.name, planned=cause.planned)
