"""Heat-load histories from twin runs, with what the job queue and the planner knew in advance.

:class:`TwinRecorder` watches a :class:`~twinloop.twin.engine.Twin` step by step and records, per rack and for
the site, the measured heat load (rack power ``TWINLOOP_FI_RACK_POWER``, site IT power ``TWINLOOP_FI_IT_POWER``)
and two kinds of schedule information:

* ``scheduled_delta_w`` — the planned power change of the jobs that *did* start or stop in the last sample
  interval (planned power per GPU × the job's GPUs on the rack). Only its past is ever read (the "change
  already begun" feature), so recording it from what happened is not peeking.
* ``known_ahead_w`` — for each horizon h, the load changes in (t, t+h] that were knowable *at t*, in K = 4
  columns (:data:`KNOWN_COLUMNS`): training jobs that will start (or finish ramping up / checkpointing),
  serving jobs that will start, and running jobs that will end. How each is known:

  - *ends*: a running job ends ``run_s`` after its first start (a time limit); the drop is its GPUs' measured
    power now minus their idle power (a present measurement, not a future one); hosts go idle when the nodes
    are released after the cooling ramp-down;
  - *starts of queued jobs*: a projection of the scheduler's own FIFO-with-backfill placement forward in time,
    over the nodes free now plus the nodes the known ends will release, with the scheduler's placement policy
    applied to the cluster view of *now* (exact for ``first_fit``; for ``power_aware`` the rack headroom and
    coolant used are today's, so rack attribution of future starts is approximate). Admission under the
    facility power budget is not projected. A job is in the projection only from its ``known_from_s`` (its
    submission, or an earlier announcement);
  - *ramps in progress*: a job in ramp-up (context loading, ``load_s`` from the planner) or writing a
    checkpoint returns to its planned power when that phase ends;
  - *checkpoints*: a sustained training job writes its next checkpoint at a time its own configuration fixes
    (``checkpoint_interval_s`` after the last one, for ``checkpoint_write_s``); while it writes, its GPUs drop
    from their measured power now to the checkpoint-phase power (a window, not a step: the column is non-zero
    only when t+h falls inside the write);
  - *planned power*: :func:`planned_gpu_power_w`, the GPU power model at full clock on the planner's per-phase
    activities. For serving jobs it uses the decode phase, since the request rate ahead is not known (a guess;
    the forecaster fits a separate gain for the serving column).

Not knowable and not used: future measured power, failures, hangs, jobs submitted without notice, the serving
request rate ahead. Samples are the twin's facility telemetry samples (every ``telemetry.facility_every_s``,
:attr:`TwinRecorder.sample_s`); the realized change accumulates between them.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import GpuPowerModel
from twinloop.ops import KNOWN_COLUMNS, HeatLoadForecaster, LoadHistory
from twinloop.ops.learn.forecast import FloatArray
from twinloop.telemetry.fields import TWINLOOP_FI_IT_POWER, TWINLOOP_FI_RACK_POWER
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.jobs import CHECKPOINT_ACTIVITY, Phase
from twinloop.twin.scheduler import ClusterView
from twinloop.twin.workload import WorkloadProfile

HORIZONS_S = (300.0, 600.0, 900.0)
PLAN_TEMP_C = 60.0  # die temperature assumed for planned power (guess; leakage is a few % of it)
POWERED = (Phase.LAUNCH, Phase.SUSTAINED, Phase.CHECKPOINT, Phase.HUNG)
RISING = (Phase.RAMP_UP, Phase.LAUNCH, Phase.CHECKPOINT)


def planned_gpu_power_w(profile: WorkloadProfile, kind: str, gpu: GpuSpec) -> float:
    """Planned sustained power per GPU, W: the power model at full clock on the profile's phase activities.

    Training: the duration-weighted mean of the compute and communication phases. Serving: the decode phase
    (a guess; the prefill share depends on a request rate nobody knows in advance). Capped at TDP, where the
    default power limit puts DVFS.
    """
    model = GpuPowerModel(gpu)

    def phase_w(tensor: float, sm: float, dram: float) -> float:
        return min(gpu.tdp_w, float(model.power_w(gpu.sm_clock_max_mhz, tensor, sm, dram, PLAN_TEMP_C)))

    c, m = profile.compute, profile.comm
    comm_w = phase_w(m.tensor_active, m.sm_active, m.dram_active)
    if kind != "training":
        return comm_w
    compute_w = phase_w(c.tensor_active, c.sm_active, c.dram_active)
    return (compute_w * profile.compute_s + comm_w * profile.comm_s) / profile.iteration_s


@dataclass(frozen=True)
class Observation:
    """One sample of one level (racks or site), as the online forecaster consumes it.

    Attributes:
        t_s: time of day-aligned timestamp, s (simulation time + the scenario's start hour).
        load_w: measured load per entity, W, shape ``(n_entities,)``.
        scheduled_delta_w: planned change of the jobs that started/stopped since the last sample, W.
        known_ahead_w: horizon (s) → ``(n_entities, K)`` known changes in (t, t+h], W.
    """

    t_s: float
    load_w: FloatArray
    scheduled_delta_w: FloatArray
    known_ahead_w: dict[float, FloatArray]


@dataclass(frozen=True)
class TwinHistory:
    """A recorded run: one history per kept rack and one for the site."""

    rack_ids: tuple[str, ...]
    rack: tuple[LoadHistory, ...]
    site_id: str
    site: LoadHistory

    def level(self, level: str) -> list[LoadHistory]:
        """Histories of ``level`` ('rack' or 'site')."""
        if level == "rack":
            return list(self.rack)
        if level == "site":
            return [self.site]
        raise InputError("twin_history", "level", f"unknown level {level!r} (allowed: rack, site)")


class TwinRecorder:
    """Records loads and queue knowledge from a twin; call :meth:`observe` after every step.

    Args:
        twin: the twin (observations happen on its facility telemetry steps).
        known_from_s: per job, the time from which the queue knows it (default: ``submit_s - announce_s``).
        horizons_s: horizons the known-ahead columns are computed for, s.
    """

    def __init__(
        self, twin: Twin, known_from_s: Sequence[float] | None = None, horizons_s: Sequence[float] = HORIZONS_S
    ) -> None:
        src = f"TwinRecorder({twin.spec.name})"
        if known_from_s is None:
            known_from_s = [max(0.0, j.submit_s - j.announce_s) for j in twin.spec.jobs]
        if len(known_from_s) != len(twin.spec.jobs):
            raise InputError(src, "known_from_s", f"{len(known_from_s)} values for {len(twin.spec.jobs)} jobs")
        if any(k > j.submit_s for k, j in zip(known_from_s, twin.spec.jobs, strict=True)):
            raise InputError(src, "known_from_s", "a job cannot be known after its submit_s (allowed: <= submit_s)")
        if not horizons_s or min(horizons_s) <= 0:
            raise InputError(src, "horizons_s", "need at least one horizon, all > 0 s")
        self.twin = twin
        self.known_from_s = np.asarray(known_from_s, dtype=np.float64)
        self.horizons_s = tuple(float(h) for h in horizons_s)
        topo = twin.topo
        gpu = get_gpu(twin.spec.rows[0].node.gpu)
        self.planned_w = np.array([planned_gpu_power_w(j.profile, j.kind, gpu) for j in twin.jobs])
        self.idle_w = np.array([k.idle_power_w for k in topo.kinds])[topo.gpu_kind]
        a = CHECKPOINT_ACTIVITY
        ckpt_w = GpuPowerModel(gpu).power_w(
            gpu.sm_clock_max_mhz, a.tensor_active, a.sm_active, a.dram_active, PLAN_TEMP_C
        )
        self.checkpoint_w = float(ckpt_w)
        self.host_delta_w = np.asarray(twin.host_busy_w - twin.host_idle_w, dtype=np.float64)
        self.day_offset_s = twin.spec.weather.start_hour * 3600.0
        self.rack_idx = twin.telemetry.rack_idx
        self._powered = np.zeros(len(twin.jobs), dtype=bool)
        self._last_vec: dict[int, FloatArray] = {}
        self._rows: list[tuple[float, FloatArray, float, FloatArray, FloatArray]] = []

    @property
    def sample_s(self) -> float:
        """Interval between observations (the facility telemetry interval), s: the ``dt_s`` to forecast at."""
        return self.twin.telemetry.fac_every * self.twin.dt_s

    # ----- knowledge -----------------------------------------------------------------------------------------
    def _per_rack(self, gpus: NDArray[np.int64], weights_w: FloatArray | float) -> FloatArray:
        w = np.broadcast_to(np.asarray(weights_w, dtype=np.float64), gpus.shape)
        return np.bincount(self.twin.topo.gpu_rack[gpus], weights=w, minlength=self.twin.topo.n_racks).astype(float)

    def _host_per_rack(self, nodes: NDArray[np.int64]) -> FloatArray:
        topo = self.twin.topo
        return np.bincount(topo.node_rack[nodes], weights=self.host_delta_w[nodes], minlength=topo.n_racks).astype(
            float
        )

    def _gpus_of(self, nodes: NDArray[np.int64], n_gpus: int) -> NDArray[np.int64]:
        topo = self.twin.topo
        parts = [np.arange(topo.node_start[n], topo.node_start[n] + topo.node_gpus[n]) for n in nodes]
        return np.concatenate(parts)[:n_gpus].astype(np.int64)

    def known_ahead(self) -> FloatArray:
        """Known changes per horizon, rack and column now, W, shape ``(n_horizons, n_racks_all, K)``."""
        twin = self.twin
        t, dt, topo = twin.t_s, twin.dt_s, twin.topo
        power = twin.physics.gpus.power_w.astype(np.float64)
        ramp_down = twin.spec.cooling.ramp_down_s
        last = t + max(self.horizons_s)
        events: list[tuple[float, int, FloatArray]] = []
        releases: list[tuple[float, int, NDArray[np.int64]]] = []  # heap of (time, tiebreak, nodes)
        free = np.zeros(topo.n_nodes, dtype=bool)
        free[twin.scheduler.free_nodes()] = True
        for i, job in enumerate(twin.jobs):
            ph, col = job.phase, 0 if job.kind == "training" else 1
            if ph in RISING:
                until = t if ph == Phase.LAUNCH else job.phase_end_s + dt
                events.append((until, col, self._per_rack(job.gpus, self.planned_w[i] - power[job.gpus])))
            if ph == Phase.SUSTAINED and job.kind == "training" and job.next_checkpoint_s <= last:
                dip = self._per_rack(job.gpus, self.checkpoint_w - power[job.gpus])
                events.append((job.next_checkpoint_s, 3, dip))
                events.append((job.next_checkpoint_s + job.spec.checkpoint_write_s + dt, 3, -dip))
            if ph == Phase.COOLDOWN:
                events.append((job.phase_end_s, 2, -self._host_per_rack(job.nodes)))
                heapq.heappush(releases, (job.phase_end_s + dt, i, job.nodes))
            elif job.running and job.spec.run_s is not None and job.first_start_s is not None:
                down = max(job.first_start_s + job.spec.run_s, t, job.phase_end_s if ph == Phase.RAMP_UP else t)
                now_w = np.where(ph in RISING, self.planned_w[i], power[job.gpus])
                events.append((down, 2, -self._per_rack(job.gpus, now_w - self.idle_w[job.gpus])))
                events.append((down + ramp_down, 2, -self._host_per_rack(job.nodes)))
                heapq.heappush(releases, (down + ramp_down + dt, i, job.nodes))
        self._project_queue(t, last, free, releases, events, power)
        out = np.zeros((len(self.horizons_s), topo.n_racks, len(KNOWN_COLUMNS)))
        for when, col, vec in events:
            for k, h in enumerate(self.horizons_s):
                if when <= t + h:
                    out[k, :, col] += vec
        return out

    def _project_queue(
        self,
        t: float,
        last: float,
        free: NDArray[np.bool_],
        releases: list[tuple[float, int, NDArray[np.int64]]],
        events: list[tuple[float, int, FloatArray]],
        power: FloatArray,
    ) -> None:
        """Play the scheduler forward over the known queue; append the starts (and ends) it implies."""
        twin = self.twin
        dt, topo, ramp_down = twin.dt_s, twin.topo, twin.spec.cooling.ramp_down_s
        queued = [i for i in twin.scheduler.queue if twin.jobs[i].phase == Phase.QUEUED]
        later = [
            i
            for i, j in enumerate(twin.jobs)
            if j.phase == Phase.QUEUED and i not in queued and self.known_from_s[i] <= t
        ]
        pending = queued + sorted(later, key=lambda i: (twin.jobs[i].spec.submit_s, i))
        if not pending:
            return
        # GPUs free now draw their measured power until the job starts; busy ones drop to idle at their end.
        base_w = np.where(free[topo.gpu_node], power, self.idle_w)
        rack_w = twin.flows.rack_w if twin.flows is not None else np.zeros(topo.n_racks)
        headroom, coolant = np.asarray(twin.pdu_rating_w - rack_w), twin.rack_coolant_c
        times = [t] + [max(t, twin.jobs[i].spec.submit_s) for i in pending] + [r[0] for r in releases]
        heapq.heapify(times)
        while times and pending:
            tau = heapq.heappop(times)
            if tau > last:
                break
            while releases and releases[0][0] <= tau:
                free[heapq.heappop(releases)[2]] = True
            for i in list(pending):
                job = twin.jobs[i]
                if job.spec.submit_s > tau:
                    continue
                view = ClusterView(np.flatnonzero(free), headroom, coolant, twin.node_speed(job))
                nodes = twin.scheduler.choose(job.spec.gpus, view)
                if nodes is None:
                    continue
                free[nodes] = False
                pending.remove(i)
                gpus = self._gpus_of(nodes, job.spec.gpus)
                col = 0 if job.kind == "training" else 1
                ramp = job.profile.load_s + (job.spec.restart_overhead_s if job.restart_pending else 0.0)
                up = tau + ramp + dt
                events.append((tau, col, self._host_per_rack(nodes)))
                events.append((up, col, self._per_rack(gpus, self.planned_w[i] - base_w[gpus])))
                if job.spec.run_s is not None:
                    first = job.first_start_s if job.first_start_s is not None else tau
                    down = max(first + job.spec.run_s, up)
                    events.append((down, 2, -self._per_rack(gpus, self.planned_w[i] - self.idle_w[gpus])))
                    heapq.heappush(releases, (down + ramp_down + dt, i, nodes))
                    heapq.heappush(times, down + ramp_down + dt)

    def _realized_delta(self) -> FloatArray:
        """Planned change of the jobs that began or stopped drawing their planned power since the last call."""
        twin = self.twin
        delta = np.zeros(twin.topo.n_racks)
        for i, job in enumerate(twin.jobs):
            powered = job.phase in POWERED
            if powered and not self._powered[i]:
                vec = self._per_rack(job.gpus, self.planned_w[i])
                self._last_vec[i] = vec
                delta += vec
            elif self._powered[i] and not powered:
                delta -= self._last_vec.pop(i)
            self._powered[i] = powered
        return delta

    # ----- recording -----------------------------------------------------------------------------------------
    def observe(self, result: StepResult) -> dict[str, Observation] | None:
        """Record this step (None when it carried no facility block); returns the rack and site observations."""
        if result.facility is None:
            return None
        rack_load = np.asarray(result.facility["rack"][TWINLOOP_FI_RACK_POWER], dtype=np.float64)
        site_load = float(result.facility["site"][TWINLOOP_FI_IT_POWER][0])
        delta = self._realized_delta()
        known = self.known_ahead()
        ts = self.day_offset_s + result.t_s
        self._rows.append((ts, rack_load.copy(), site_load, delta, known))
        rack_known = {h: known[k, self.rack_idx] for k, h in enumerate(self.horizons_s)}
        site_known = {h: known[k].sum(axis=0, keepdims=True) for k, h in enumerate(self.horizons_s)}
        return {
            "rack": Observation(ts, rack_load, delta[self.rack_idx], rack_known),
            "site": Observation(ts, np.array([site_load]), np.array([delta.sum()]), site_known),
        }

    def entities(self, level: str) -> list[str]:
        """Entity ids of ``level`` ('rack' or 'site'), in the order of the observations."""
        if level not in ("rack", "site"):
            raise InputError("TwinRecorder", "level", f"unknown level {level!r} (allowed: rack, site)")
        return self.twin.telemetry.entities(level)

    def history(self) -> TwinHistory:
        """Everything observed so far as :class:`LoadHistory` objects (needs at least two samples)."""
        if len(self._rows) < 2:
            raise InputError("TwinRecorder", "history", "need at least two observed steps")
        ts = np.array([r[0] for r in self._rows])
        rack_load = np.array([r[1] for r in self._rows])
        site_load = np.array([r[2] for r in self._rows])
        delta = np.array([r[3] for r in self._rows])
        known = np.array([r[4] for r in self._rows])  # (n, n_h, n_racks_all, K)
        racks = tuple(
            LoadHistory(
                ts,
                rack_load[:, j],
                delta[:, r],
                {h: known[:, k, r, :] for k, h in enumerate(self.horizons_s)},
            )
            for j, r in enumerate(self.rack_idx)
        )
        site = LoadHistory(
            ts, site_load, delta.sum(axis=1), {h: known[:, k].sum(axis=1) for k, h in enumerate(self.horizons_s)}
        )
        return TwinHistory(tuple(self.entities("rack")), racks, self.entities("site")[0], site)


def record_run(
    twin: Twin, known_from_s: Sequence[float] | None = None, horizons_s: Sequence[float] = HORIZONS_S
) -> TwinHistory:
    """Run ``twin`` for its scenario's duration from where it is, recording every step."""
    rec = TwinRecorder(twin, known_from_s, horizons_s)

    def observe(result: StepResult) -> None:
        rec.observe(result)

    twin.run(callback=observe)
    return rec.history()


def train_forecasters(
    runs: Sequence[TwinHistory], horizons_s: Sequence[float] = HORIZONS_S, ridge: float = 1e-3
) -> dict[str, dict[float, HeatLoadForecaster]]:
    """One :class:`HeatLoadForecaster` per level ('rack', 'site') and horizon, fitted on ``runs``."""
    return {
        level: {
            float(h): HeatLoadForecaster(h, ridge).fit([x for run in runs for x in run.level(level)])
            for h in horizons_s
        }
        for level in ("rack", "site")
    }
