"""The twin engine: :class:`Twin` advances the whole site one step at a time.

One step (``dt = step_s``):

1. injected faults switch on/off; ambient and grid carbon for this instant;
2. scheduler: arrivals, repairs, placement and admission of queued jobs;
3. job lifecycle transitions; per-slot activity → per (slot, kind) power tables;
4. cooling control; coolant temperature per rack from the loops;
5. GPU physics for all GPUs at once (:class:`~twinloop.twin.state.GpuPhysics`): limits, DVFS, power, RC
   temperatures, energy; sparse patches for launch peaks, power brakes and hardware slowdown;
6. node power → PSUs → PDUs → busways → UPS/HVDC → transformer; PSU overload events; cooling loops and plant;
   facility power and PUE; cap controllers;
7. job progress at the pace of each job's slowest GPU (a serving fleet's: each replica at its own slowest GPU's);
   failure draws and their consequences;
8. accounting and telemetry.

The loop drives it with :meth:`Twin.step` and :meth:`Twin.apply` between steps; :meth:`Twin.run` runs many
steps. Same scenario and seed → identical results, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.power import clock_scale
from twinloop.twin.actions import Action, ActionResult, apply_action
from twinloop.twin.cooling import Cooling
from twinloop.twin.events import Event, FaultLabel, StepResult
from twinloop.twin.faults import ResolvedFault, apply_fault, resolve_faults, timeline
from twinloop.twin.gpu_rates import slot_rates
from twinloop.twin.jobs import Job, Phase, make_jobs
from twinloop.twin.operations import ClusterOps
from twinloop.twin.peaks import PowerPeaks
from twinloop.twin.power_chain import ChainFlows, PowerChain
from twinloop.twin.scenario import ScenarioSpec, check_scenario
from twinloop.twin.scheduler import Scheduler
from twinloop.twin.seeds import stream
from twinloop.twin.site import Accounts
from twinloop.twin.state import F32, GpuPhysics
from twinloop.twin.topology import Topology, build_topology
from twinloop.twin.trace import ServingLoad, resolve_trace_path, serving_load
from twinloop.twin.variation import draw_variation
from twinloop.twin.weather import Weather

#: A GPU whose power limit (its own or a rack/row cap) sits this far below its TDP counts as power-throttled
#: below its at-TDP clock; at the TDP itself, dense work is power-bound by design (NVML's SW power cap bit).
BELOW_TDP_FRACTION = 0.995


class Twin(ClusterOps):
    """A simulated GPU site (see module docstring). Construct from a validated :class:`ScenarioSpec`."""

    def __init__(self, spec: ScenarioSpec, source: str = "scenario") -> None:
        check_scenario(spec, source)
        self.spec = spec
        self.source = source
        self.dt_s = float(spec.step_s)
        self.topo: Topology = build_topology(spec)
        # The hall's GPUs as manufactured: drawn once, here, from the scenario seed's own stream.
        self.variation = draw_variation(stream(spec.seed, "variation"), self.topo.n_gpus, spec.variation)
        self.physics = GpuPhysics(self.topo, self.dt_s, self.variation)
        self.peaks = PowerPeaks(spec.power_peaks, self.physics, self.topo)
        self.cooling = Cooling(self.topo, spec.cooling, self.dt_s)
        lo = float(self.physics.limit_min_w.min())
        hi = float(self.physics.limit_max_w.max())
        self.chain = PowerChain(self.topo, spec.power_chain, lo, hi)
        self.weather = Weather(spec.weather)
        self.scheduler = Scheduler(self.topo, spec.scheduler)
        self.loads: dict[str, ServingLoad] = {}
        for i, j in enumerate(spec.jobs):
            if j.kind == "serving":
                if j.trace is None:
                    raise InputError(source, f"jobs.{i}.trace", "a serving job needs a trace (Azure-format CSV)")
                path = resolve_trace_path(j.trace, spec.base_dir)
                if not path.exists():
                    raise InputError(source, f"jobs.{i}.trace", f"{path}: file not found")
                self.loads[j.name] = serving_load(path, j.gpus // j.gpus_per_replica, j.trace_rate_scale)
        self.faults: list[ResolvedFault] = resolve_faults(spec, self.topo, source, spec.seed)
        self._timeline = timeline(self.faults)
        self.failure_model: Any = None
        self.failure_causes: tuple[Any, ...] = ()
        if spec.failures != "off":
            from twinloop.hardware.failure_rates import CAUSES
            from twinloop.twin.failures import FailureConfig, FailureModel

            cfg = {} if spec.failures == "on" else dict(spec.failures)
            try:
                if "disabled_causes" in cfg:
                    cfg["disabled_causes"] = tuple(cfg["disabled_causes"])
                self.failure_model = FailureModel(FailureConfig(**cfg))
            except TypeError as exc:
                raise InputError(source, "failures", str(exc)) from None
            except InputError as exc:
                raise InputError(source, f"failures.{exc.field}", exc.message) from None
            self.failure_causes = CAUSES
        node_rows = self.topo.rows
        nr = self.topo.node_row
        self.host_idle_w = np.array(
            [
                r.node.cpus * r.node.cpu_idle_power_w + r.node.nics * r.node.nic_power_w + r.node.other_power_w
                for r in node_rows
            ]
        )[nr]
        self.host_busy_w = np.array(
            [
                r.node.cpus * r.node.cpu_busy_power_w + r.node.nics * r.node.nic_power_w + r.node.other_power_w
                for r in node_rows
            ]
        )[nr]
        self.pdu_rating_w = np.array([r.rack_pdu_rating_w for r in node_rows])[self.topo.rack_row]
        gpn = np.unique(self.topo.node_gpus)
        self.gpus_per_node = int(gpn[0]) if gpn.size == 1 else int(gpn.max())
        self.g_half = clock_scale(0.5).__float__()
        self.reset(spec.seed)

    # ----- lifecycle -----------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Back to t = 0 with ``seed`` (default: the scenario's)."""
        self.seed = self.spec.seed if seed is None else int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.peaks.reset(stream(self.seed, "peaks"))
        self.t_s = 0.0
        self.step_index = 0
        self.cooling.reset()
        self.chain.reset()
        self.scheduler.reset()
        self.physics.gpus = self.physics.initial(float(self.cooling.state.supply_c.mean()))
        self.jobs: list[Job] = make_jobs(self.spec.jobs, self.loads, self.spec.rows[0].node.gpu, self.topo.kinds)
        self.n_slots = 1 + sum(j.n_slots for j in self.jobs)
        self.slot_activity = np.zeros((self.n_slots, 3))
        self.slot_high = np.zeros((self.n_slots, 3))
        self.slot_low = np.zeros((self.n_slots, 3))
        self.slot_cf = np.zeros(self.n_slots)
        self.job_of_gpu = np.full(self.topo.n_gpus, -1, dtype=np.int64)
        self.straggle: dict[int, float] = {}  # injected stragglers: GPU → speed factor
        # injected co-tenants (another process on the GPU): GPU → speed factor its job's rank keeps
        self.co_tenants: dict[int, float] = {}
        # the GPUs' compute-process count is emitted only by a scenario with co-tenants (others' outputs unchanged)
        self.emits_processes = any(f.label.kind == "co_tenant" for f in self.faults)
        self.background_stragglers = np.zeros(0, dtype=np.int64)
        self.background_speed = np.zeros(0, dtype=np.float32)
        if self.spec.straggler_fraction > 0:
            from twinloop.twin.failures import draw_stragglers

            lo, hi = self.spec.straggler_speed_range
            speed = draw_stragglers(self.rng, self.topo.n_gpus, self.spec.straggler_fraction, (lo, hi))
            self.background_stragglers = np.flatnonzero(speed < 1.0)
            self.background_speed = speed[self.background_stragglers]
        self.drift_rate_c_per_s = np.zeros(self.topo.n_rows)
        self.extra_ambient_c = 0.0
        self.node_down_until = np.full(self.topo.n_nodes, np.inf)
        self.node_powered = np.ones(self.topo.n_nodes, dtype=bool)
        self.brake_until = np.zeros(self.topo.n_nodes)
        self.braked_gpus = np.zeros(0, dtype=np.int64)
        self.hw_slow_gpus = np.zeros(0, dtype=np.int64)
        self.rack_heat_w = np.zeros(self.topo.n_racks)
        self.rack_coolant_c = self.cooling.coolant_per_rack_c(self.rack_heat_w)
        self.row_max_gpu_c = np.zeros(self.topo.n_rows)
        self.facility_w = 0.0
        self.pue = 1.0
        self.ambient = self.weather.at(0.0)
        self.flows: ChainFlows | None = None
        self.cooling_w = 0.0
        self.node_dc_w = np.zeros(self.topo.n_nodes)
        self.node_peak_w = np.zeros(self.topo.n_nodes)
        self.accounts = Accounts()
        self.action_log: list[ActionResult] = []
        self.events: list[Event] = []
        self._step_events: list[Event] = []
        self._timeline_pos = 0
        self._next_repair_s = np.inf
        from twinloop.twin.telemetry_out import TelemetryRecorder

        self.telemetry = TelemetryRecorder(self)

    @property
    def ground_truth(self) -> tuple[FaultLabel, ...]:
        """Labels of the injected faults: what, where, start, end."""
        return tuple(f.label for f in self.faults)

    @property
    def state(self) -> dict[str, NDArray[Any]]:
        """Read-only views of the main per-GPU and per-row state arrays."""
        a = self.physics.gpus
        views: dict[str, NDArray[Any]] = {
            "gpu_power_w": a.power_w,
            "gpu_temp_c": a.temp_c,
            "gpu_hbm_temp_c": a.hbm_temp_c,
            "gpu_clock_x": self.physics.clock_x(),
            "gpu_energy_j": a.energy_j,
            "gpu_power_limit_w": a.user_limit_w,
            "job_of_gpu": self.job_of_gpu,
            "rack_coolant_c": self.rack_coolant_c,
            "cdu_supply_c": self.cooling.state.supply_c,
            "cdu_setpoint_c": self.cooling.state.setpoint_c,
            "node_dc_w": self.node_dc_w,
        }
        out = {}
        for k, v in views.items():
            view = v.view()
            view.flags.writeable = False
            out[k] = view
        return out

    def straggle_factors(self) -> NDArray[np.float64]:
        """Per GPU, its speed factor: the slowest of an injected ``straggler`` fault, an injected ``co_tenant`` and a
        background straggler (1 elsewhere).
        """
        factor = np.ones(self.topo.n_gpus)
        for injected in (self.straggle, self.co_tenants):
            if injected:
                idx = np.fromiter(injected.keys(), dtype=np.int64)
                np.minimum.at(factor, idx, np.fromiter(injected.values(), dtype=np.float64))
        if self.background_stragglers.size:
            np.minimum.at(factor, self.background_stragglers, self.background_speed.astype(np.float64))
        return factor

    def apply(self, action: Action) -> ActionResult:
        """Validate and apply a command between steps (see :mod:`twinloop.twin.actions`)."""
        result = apply_action(self, action)
        self.action_log.append(result)
        return result

    # ----- the step ------------------------------------------------------------------------------------------
    def _faults_and_weather(self) -> None:
        t = self.t_s
        while self._timeline_pos < len(self._timeline) and self._timeline[self._timeline_pos][0] <= t:
            _, i, on = self._timeline[self._timeline_pos]
            apply_fault(self, self.faults[i], on)
            self._timeline_pos += 1
        if self.drift_rate_c_per_s.any():
            self.cooling.state.drift_c += self.drift_rate_c_per_s * self.dt_s
        if t >= self._next_repair_s:
            for node in np.flatnonzero(self.node_down_until <= t):
                self.node_repaired(int(node))
        self.ambient = self.weather.at(t, self.extra_ambient_c)

    def _activity(self) -> None:
        act, cf, high, low = self.slot_activity, self.slot_cf, self.slot_high, self.slot_low
        act[:] = 0.0
        cf[:] = 0.0
        high[:] = 0.0
        low[:] = 0.0
        for job in self.jobs:
            sl = slice(job.slot0, job.slot0 + job.n_slots)
            act[sl], cf[sl], high[sl], low[sl] = job.activity_span(self.t_s, self.dt_s)
        self.physics.group_tables(act)
        self.peaks.plan(self.jobs, act, high, low)

    def _gpu_physics(self) -> None:
        ph = self.physics
        a = ph.gpus
        ph.per_gpu_from_rack(self.rack_coolant_c.astype(F32), a.coolant_c)
        rack_limit = self.chain.per_rack_limit_w()
        ph.dvfs(None if rack_limit.min() >= self.chain.limit_max_w else rack_limit.astype(F32))
        if self.braked_gpus.size:
            ph.patch_g(self.braked_gpus, a.g_min[self.braked_gpus])
        if self.hw_slow_gpus.size:
            idx = self.hw_slow_gpus
            ph.patch_g(idx, np.minimum(a.g[idx], np.float32(self.g_half)))
        # A kernel launch is a load step: its overshoot is in the instant peak (twin.peaks), while the 1 s mean
        # already obeys the power limit (the H100 readings: the 1 s average ramps to the limit, never above).
        self.peaks.capture()
        ph.finish()

    def _power_and_cooling(self) -> None:
        ph, topo, dt = self.physics, self.topo, self.dt_s
        a = ph.gpus
        gpu_node_w = np.add.reduceat(a.power_w, topo.node_start).astype(np.float64)
        host = np.where(self.scheduler.node_owner >= 0, self.host_busy_w, self.host_idle_w)
        host = np.where(self.node_powered, host, 0.0)
        node_dc = gpu_node_w + host
        self.node_dc_w = node_dc
        # PSUs see the instant peak inside the step, not the 1 s mean the telemetry shows.
        self.node_peak_w = self.peaks.node_peak_w(node_dc, gpu_node_w)
        over = self.chain.overloaded_nodes(self.node_peak_w)
        if over.size:
            self._overload(over, self.node_peak_w)
        if self.braked_gpus.size and (self.brake_until[topo.gpu_node[self.braked_gpus]] <= self.t_s + dt).all():
            self.braked_gpus = np.zeros(0, dtype=np.int64)
        flows = self.chain.flows(node_dc)
        self.flows = flows
        self.rack_heat_w = flows.rack_w
        row_heat = np.bincount(topo.rack_row, weights=flows.rack_w, minlength=topo.n_rows).astype(np.float64)
        if self.spec.cooling.control == "reactive":
            rack_max = np.maximum.reduceat(a.temp_c, topo.rack_start)
            self.row_max_gpu_c = np.maximum.reduceat(rack_max, topo.row_rack_start).astype(np.float64)
        queued_w = sum(
            j.spec.gpus * j.profile.requested_tdp_fraction * float(ph.tdp_w[0])
            for j in self.jobs
            if j.phase in (Phase.QUEUED, Phase.RAMP_UP) and j.spec.submit_s <= self.t_s + 600.0
        )
        self.cooling.control(self.t_s, self.row_max_gpu_c, row_heat, queued_w)
        self.cooling.step(row_heat, self.ambient.wetbulb_c)
        self.rack_coolant_c = self.cooling.coolant_per_rack_c(self.rack_heat_w)
        cs = self.cooling.state
        self.cooling_w = float(cs.mover_power_w.sum()) + cs.plant_power_w
        utility_it = flows.it_w + flows.conversion_loss_w
        self.facility_w = utility_it + self.cooling_w
        self.pue = self.facility_w / flows.it_w if flows.it_w > 0 else 1.0
        self.chain.update_caps(flows, self.facility_w)
        acc = self.accounts
        acc.facility_j += self.facility_w * dt
        acc.it_j += flows.it_w * dt
        acc.host_j += float(host.sum()) * dt
        acc.conversion_loss_j += flows.conversion_loss_w * dt
        acc.cooling_j += self.cooling_w * dt
        acc.carbon_g += self.facility_w * dt / 3.6e6 * self.ambient.carbon_g_per_kwh
        acc.peak_facility_w = max(acc.peak_facility_w, self.facility_w)
        acc.peak_it_w = max(acc.peak_it_w, flows.it_w)
        acc.peak_it_instant_w = max(acc.peak_it_instant_w, float(self.node_peak_w.sum()))

    def _progress(self) -> None:
        ph = self.physics
        g = ph.gpus.g
        factors: NDArray[np.float64] | None = None  # per GPU straggler factors, computed once if any job needs them
        for job in self.jobs:
            if job.phase != Phase.SUSTAINED or job.gpus.size == 0:
                job.tokens_per_s = 0.0
                self._unserved(job)
                continue
            # The slowest GPU sets the pace; the relative clock is monotone in the clock scale g.
            lo, hi = int(job.gpus[0]), int(job.gpus[-1]) + 1
            gs = g[lo:hi] if hi - lo == job.gpus.size and not job.moved else g[job.gpus]
            if job.kind == "training":
                gmin = np.array([gs.min()], dtype=F32)
            else:
                gmin = gs.reshape(job.n_slots, -1).min(axis=1)
            xmin = ph.x_of_g(gmin).astype(np.float64)
            straggle: float | NDArray[np.float64] = 1.0
            if self.straggle or self.co_tenants or self.background_stragglers.size:
                factors = self.straggle_factors() if factors is None else factors
                per_slot = factors[job.gpus].reshape(job.n_slots, -1).min(axis=1)
                # a serving replica goes at its own slowest GPU's pace; a training job's ranks all wait for theirs
                straggle = per_slot if job.kind == "serving" else float(per_slot.min())
            slot_cf = self.slot_cf[job.slot0 : job.slot0 + job.n_slots]
            rate = None
            if job.rates is not None:  # GPUs of another model than the profile's: each at its own model's rates
                cf = np.array([job.profile.compute_fraction]) if job.kind == "training" else slot_cf
                x = ph.x_of_g(gs).astype(np.float64)
                rate = slot_rates(x, self.topo.gpu_kind[job.gpus], job.rates, cf, job.n_slots)
            job.progress(self.t_s, self.dt_s, xmin, slot_cf, straggle, rate)

    def _unserved(self, job: Job) -> None:
        """A serving fleet down as a whole (restarting after an interruption, or hung) serves nothing of what its
        trace asks: that demand counts against its ETTR (tokens served / tokens asked while the fleet exists), as
        its goodput already counts the wall time. Its first ramp-up, before it ever served, does not.
        """
        if job.kind != "serving" or job.load is None or job.first_start_s is None:
            return
        if job.phase == Phase.HUNG or (job.interruptions > 0 and job.phase < Phase.SUSTAINED):
            prefill, decode = job.load.at(self.t_s)
            job.demanded_tokens += float(prefill.sum() + decode.sum()) * self.dt_s

    def _throttle_counts(self) -> None:
        a = self.physics.gpus
        dt = self.dt_s
        acc = self.accounts.throttled_gpu_s
        n_lim = int(np.count_nonzero(a.limited))
        below = 0
        if n_lim:
            n_th = int(np.count_nonzero(a.limited & a.thermal_bound))
            acc["sw_thermal"] += n_th * dt
            acc["sw_power_cap"] += (n_lim - n_th) * dt
            if n_lim > n_th:
                under_tdp = a.limit_w < self.physics.tdp_w * np.float32(BELOW_TDP_FRACTION)
                capped = a.limited & ~a.thermal_bound & under_tdp
                # A GPU both capped below its TDP and braked is one throttled GPU-second, not two.
                capped[self.braked_gpus] = False
                below = int(np.count_nonzero(capped))
        acc["hw_slowdown"] += self.hw_slow_gpus.size * dt
        acc["hw_power_brake"] += self.braked_gpus.size * dt
        # The brake throttles only GPUs with work on them, as a limit counts only where it binds (`limited`).
        braked_busy = int(np.count_nonzero(self.job_of_gpu[self.braked_gpus] >= 0)) if self.braked_gpus.size else 0
        self.accounts.power_throttled_below_tdp_gpu_s += (below + braked_busy) * dt

    def step(self) -> StepResult:
        """Advance one step; returns this step's telemetry block (on sample steps) and events."""
        self._step_events = []
        self._faults_and_weather()
        self._schedule()
        self._lifecycle()
        self._activity()
        self._gpu_physics()
        self._power_and_cooling()
        self._throttle_counts()
        self._thermal_limits()
        self._progress()
        self._failures()
        self.t_s = (self.step_index + 1) * self.dt_s
        self.step_index += 1
        gpu, facility = self.telemetry.record()
        return StepResult(self.t_s, gpu, facility, tuple(self._step_events))

    def run(self, duration_s: float | None = None, callback: Callable[[StepResult], None] | None = None) -> None:
        """Run ``duration_s`` (default: the scenario's duration) from the current time."""
        n = round((self.spec.duration_s if duration_s is None else duration_s) / self.dt_s)
        for _ in range(n):
            result = self.step()
            if callback is not None:
                callback(result)

    def summary(self) -> dict[str, Any]:
        """The run's summary document (see :func:`twinloop.twin.summary.summarize`)."""
        from twinloop.twin.summary import summarize

        return summarize(self, self.action_log, faults_injected=len(self.faults))
