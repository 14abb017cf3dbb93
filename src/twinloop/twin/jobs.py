"""Jobs and their lifecycle: queued → ramp-up → launch → sustained (⇄ checkpoint) → cooldown → done.

* **queued** (pre-run): waits for placement and admission, declaring a requested TDP fraction that a cooling
  controller may use to precool.
* **ramp_up**: context/weights load SSD→DRAM→HBM (``load_s`` plus, after an interruption, the restart overhead);
  HBM fills, the memory interface is busy, tensor cores idle.
* **launch**: one step in which every GPU of the job starts its kernels at once — an instant power peak that the
  power limit does not catch (the limit acts over ~100 ms, the PSUs see the peak).
* **sustained**: training alternates compute and communication, all GPUs together, at the pace of the slowest
  GPU (synchronous data parallelism); serving follows its request trace, prefill near TDP, decode far below.
  Training checkpoints every N iterations counted from iteration 0, as frameworks count them (Megatron-LM saves
  when ``iteration % save_interval == 0``), N being ``checkpoint_interval_s`` at the job's pace when it first
  runs (as an operator sets ``save_interval`` from the step time they see): a checkpoint forced between two saves
  leaves the next one where it was, and a job slowed later saves later in wall time (the work since the last
  checkpoint is what an interruption loses).
* **cooldown**: after the job ends its GPUs idle with residual heat for the plant's ramp-down time, then free.

A job owns *activity slots* (training one, serving one per replica); the engine maps GPUs to slots so per-GPU
activity is one gather. A serving fleet's replica (its ``gpus_per_replica`` GPUs, in placement order) is its unit:
a slow GPU slows only its own replica, and a replica on a drained node is out of service (the router sends it no
requests; its GPUs idle): the live replicas share the fleet's requests (:func:`shared_demand`). A hung replica (one
tensor-parallel group's collective stuck: ``hung_until_s``) serves nothing while the router, which does not know,
still sends it its share: its GPUs spin in the collective (:data:`HANG_ACTIVITY`), its requests wait, and the other
replicas serve on.

Progress uses :func:`twinloop.hardware.power.relative_speed` (roofline); in a hall with a
GPU model other than the one the job's profile was made for, every GPU runs at its own model's rates
(:mod:`twinloop.twin.gpu_rates`), so an A100 is not as fast as an H100 at the same relative clock.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import relative_speed
from twinloop.twin.from_plan import job_profile
from twinloop.twin.gpu_rates import KindRates, kind_rates
from twinloop.twin.scenario import JobSpec
from twinloop.twin.trace import DECODE_TOKENS_PER_S_PER_SEQ, ServingLoad
from twinloop.twin.workload import PhaseActivity, WorkloadProfile

RAMP_ACTIVITY = PhaseActivity(tensor_active=0.0, sm_active=0.1, dram_active=0.35)
CHECKPOINT_ACTIVITY = PhaseActivity(tensor_active=0.0, sm_active=0.15, dram_active=0.25)
HANG_ACTIVITY = PhaseActivity(tensor_active=0.0, sm_active=0.3, dram_active=0.02)  # NCCL spin: busy, no work
IDLE_ACTIVITY = PhaseActivity(0.0, 0.0, 0.0)
DECODE_COMPUTE_FRACTION = 0.2  # decode is memory-bound: it barely slows with the SM clock (guess)
#: A replica's decode step at a full batch (``decode_tokens_per_s`` of the profile): the trace's per-sequence decode
#: rate sets it (one token per sequence per step, :data:`twinloop.twin.trace.DECODE_TOKENS_PER_S_PER_SEQ`).
DECODE_STEP_FULL_S = 1.0 / DECODE_TOKENS_PER_S_PER_SEQ
#: Share of that step spent reading the weights, the same for any batch; the rest reads the batch's KV cache and
#: grows with it (memory-bound decode; a guess: an empty batch steps in half the time of a full one).
DECODE_WEIGHT_SHARE = 0.5
#: How long a training job's pace (:meth:`Job.pace`, what its next save is expected at) remembers, s: several
#: iterations (seconds each), short against a save interval (10-30 min in the packaged scenarios), so a straggler or a
#: cap shows in the expected save time within a minute.
PACE_S = 30.0
LOSS_START = 10.0
LOSS_FLOOR = 1.6


class Phase(enum.IntEnum):
    """Lifecycle phase of a job."""

    QUEUED = 0
    RAMP_UP = 1
    LAUNCH = 2
    SUSTAINED = 3
    CHECKPOINT = 4
    HUNG = 5
    COOLDOWN = 6
    DONE = 7


@dataclass
class Job:
    """Run-time state of one job (mutable; the engine owns it)."""

    index: int
    spec: JobSpec
    profile: WorkloadProfile
    slot0: int
    n_slots: int
    load: ServingLoad | None = None
    #: the hall's GPU kinds against the GPU the profile was made for; None: every kind is that GPU
    rates: KindRates | None = None
    phase: Phase = Phase.QUEUED
    phase_end_s: float = 0.0
    gpus: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    nodes: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    first_start_s: float | None = None
    end_s: float | None = None
    iter_pos_s: float = 0.0
    iterations: float = 0.0
    iterations_at_checkpoint: float = 0.0
    #: when the next periodic checkpoint is expected at the job's current pace (it starts at an iteration count)
    next_checkpoint_s: float = 0.0
    #: when the last checkpoint completed, or the job last launched from one
    saved_at_s: float = 0.0
    #: iterations between periodic checkpoints, set from the job's pace on its first step of work
    save_every: float | None = None
    restarts: int = 0
    interruptions: int = 0
    lost_iterations: float = 0.0
    speed: float = 1.0
    #: compute-time-weighted sums of the speed its compute ran at, decayed over :data:`PACE_S` (see :meth:`pace`)
    _pace_sum: float = 0.0
    _pace_weight: float = 0.0
    served_tokens: float = 0.0
    demanded_tokens: float = 0.0
    backlog: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    loss: float = LOSS_START
    sdc_until_s: float = -1.0
    sdc_magnitude: float = 0.0
    restart_pending: bool = False
    tokens_per_s: float = 0.0
    #: serving, per replica: out of service (on a drained or lost node, or reloading its model: no requests routed
    #: to it, its GPUs idle or loading)
    out_of_service: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: serving, per replica: when it has reloaded its model after its node came back or it was rescheduled, s
    ready_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: serving: the lost nodes it holds, each with the time its replica(s) there are rescheduled (evicted), s
    evict_at_s: dict[int, float] = field(default_factory=dict)
    #: a replica was rescheduled since the job started: its GPUs are no longer in placement order
    moved: bool = False
    #: serving, per replica: hung until this time (its collective watchdog then restarts it), s; 0: not hung
    hung_until_s: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: serving, per replica, at the last step: work rate (its slowest GPU's clock and straggler factor) and decode
    #: tokens per second asked of it
    replica_speed: NDArray[np.float64] = field(default_factory=lambda: np.ones(0))
    replica_decode_tokens_per_s: NDArray[np.float32] | NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @property
    def kind(self) -> str:
        """'training' or 'serving'."""
        return self.spec.kind

    @property
    def running(self) -> bool:
        """Holding GPUs (any phase between ramp-up and cooldown)."""
        return Phase.RAMP_UP <= self.phase <= Phase.COOLDOWN

    def activity(self, t_s: float, dt_s: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per-slot activities ``(n_slots, 3)`` (tensor, sm, dram) and compute fractions for this step."""
        act, cf, _, _ = self.activity_span(t_s, dt_s)
        return act, cf

    def activity_span(
        self, t_s: float, dt_s: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """This step's mean activities and compute fractions, plus the activities of its busiest and idlest phase.

        Returns ``(mean, compute_fraction, high, low)``; ``mean``, ``high``, ``low`` have shape ``(n_slots, 3)``.
        Within a step a training job swings between compute (high) and communication (low) when an iteration
        boundary falls inside it, and a serving replica between prefill bursts (high) and decode (low): the swing
        is what the instantaneous power peak (:mod:`twinloop.twin.peaks`) is made of.
        """
        p = self.profile
        n = self.n_slots
        if self.phase in (Phase.QUEUED, Phase.COOLDOWN, Phase.DONE) or (
            self.phase == Phase.RAMP_UP and self.restart_pending
        ):
            return _flat(_rows(IDLE_ACTIVITY, n), np.zeros(n))
        if self.phase == Phase.RAMP_UP:
            return _flat(_rows(RAMP_ACTIVITY, n), np.zeros(n))
        if self.phase == Phase.CHECKPOINT:
            return _flat(_rows(CHECKPOINT_ACTIVITY, n), np.zeros(n))
        if self.phase == Phase.HUNG:
            return _flat(_rows(HANG_ACTIVITY, n), np.zeros(n))
        if self.phase == Phase.LAUNCH:
            return _flat(_rows(p.compute, n), np.full(n, p.compute_fraction))
        if self.kind == "training":
            _, _, compute_time = self._advance(self.iter_pos_s, dt_s, self.speed)
            w = compute_time / dt_s
            compute, comm = _vec(p.compute), _vec(p.comm)
            act = w * compute + (1.0 - w) * comm
            high = compute if w > 0.0 else comm
            low = comm if w < 1.0 else compute
            return act[None, :], np.array([p.compute_fraction * w]), high[None, :], low[None, :]
        demand_prefill, decode = self.serving_demand(t_s)
        frac_prefill = np.clip(demand_prefill / p.tokens_per_step, 0.0, 1.0)
        decode_util = np.clip(decode / p.decode_tokens_per_s, 0.0, 1.0)
        decode_act = np.where(decode_util[:, None] > 0, np.sqrt(decode_util)[:, None] * _vec(p.comm), 0.0)
        compute = np.broadcast_to(_vec(p.compute), decode_act.shape)
        act = frac_prefill[:, None] * compute + (1.0 - frac_prefill)[:, None] * decode_act
        cf = frac_prefill * p.compute_fraction + (1.0 - frac_prefill) * DECODE_COMPUTE_FRACTION
        high = np.where(frac_prefill[:, None] > 0.0, compute, decode_act)
        low = np.where(frac_prefill[:, None] < 1.0, decode_act, compute)
        loading = self.ready_s > t_s  # a replica reloading its model fills its HBM, as a job's ramp-up does
        if loading.any():
            act[loading] = high[loading] = low[loading] = _vec(RAMP_ACTIVITY)
            cf[loading] = 0.0
        hung = self.hung_replicas
        if hung.any():  # spinning in its stuck collective, as a hung job does
            act[hung] = high[hung] = low[hung] = _vec(HANG_ACTIVITY)
            cf[hung] = 0.0
        return act, cf, high, low

    @property
    def hung_replicas(self) -> NDArray[np.bool_]:
        """Serving, per replica: hung (its collective stuck; it serves nothing until restarted)."""
        return np.asarray(self.hung_until_s > 0.0)

    def serving_demand(self, t_s: float) -> tuple[NDArray[np.float64], NDArray[np.float32] | NDArray[np.float64]]:
        """Per replica, this second's prefill tokens to serve (the trace's and its backlog) and decode tokens asked,
        with the requests of replicas out of service routed to the live ones (:func:`shared_demand`).
        """
        assert self.load is not None
        prefill, decode = self.load.at(t_s)
        demand = prefill + self.backlog
        out = self.out_of_service
        if out.size and out.any():
            return shared_demand(demand, out), shared_demand(decode, out)
        return demand, decode

    def decode_step_s(self, speed: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per replica (or per GPU, given per-GPU speeds of the replicas' GPUs in order), the decode step at this
        step's decode load and work rate ``speed``, s: the weights' read plus the batch's KV read, slower by
        ``speed`` (what a serving engine reports as its time per output token).
        """
        load = np.clip(self.replica_decode_tokens_per_s / self.profile.decode_tokens_per_s, 0.0, 1.0)
        load = np.repeat(load, speed.shape[0] // max(self.n_slots, 1))
        step = DECODE_STEP_FULL_S * (DECODE_WEIGHT_SHARE + (1.0 - DECODE_WEIGHT_SHARE) * load)
        return np.asarray(step / np.maximum(speed, 1e-6), dtype=np.float64)

    def pace(self) -> float:
        """The speed the job's compute has run at lately: the mean of :attr:`speed` over its compute time, decayed
        over :data:`PACE_S` (:attr:`speed` itself before any compute). A step spent communicating reads the clock of
        GPUs at communication power, full speed for a power-bound job: taken alone it put a 70 % job's next save
        ~20 % nearer than it was.
        """
        return self._pace_sum / self._pace_weight if self._pace_weight > 0.0 else self.speed

    def wall_iteration_s(self) -> float:
        """Wall seconds per iteration at the job's pace (compute at :meth:`pace`, communication at full rate)."""
        p = self.profile
        return p.compute_s / max(self.pace(), 1e-6) + p.comm_s

    def next_save_iteration(self) -> float:
        """The iteration of the next periodic checkpoint: the next multiple of :attr:`save_every` above the last
        checkpoint's; the first time it is asked (the job's pace now known) the spec's ``checkpoint_interval_s``
        becomes that many iterations at this pace.
        """
        if self.save_every is None:
            every = self.spec.checkpoint_interval_s / self.wall_iteration_s()
            self.save_every = max(1.0, round(every)) if math.isfinite(every) else math.inf
        if not math.isfinite(self.save_every):
            return math.inf
        return self.save_every * (math.floor(self.iterations_at_checkpoint / self.save_every + 1e-9) + 1.0)

    def _advance(self, pos_s: float, dt_s: float, speed: float) -> tuple[float, float, float]:
        """Move through iterations for ``dt_s`` wall seconds: (new position, iterations done, compute time).

        The compute phase advances at ``speed`` (relative clock-driven rate), communication at full rate.
        """
        p = self.profile
        left, done, compute_time = dt_s, 0.0, 0.0
        speed = max(speed, 1e-6)
        while left > 1e-12:
            if pos_s < p.compute_s:
                need = (p.compute_s - pos_s) / speed
                used = min(need, left)
                pos_s += used * speed
                compute_time += used
            else:
                need = p.iteration_s - pos_s
                used = min(need, left)
                pos_s += used
            left -= used
            if pos_s >= p.iteration_s - 1e-9:
                pos_s = 0.0
                done += 1.0
        return pos_s, done, compute_time

    def progress(
        self,
        t_s: float,
        dt_s: float,
        min_clock_x: NDArray[np.float64],
        slot_cf: NDArray[np.float64],
        straggle: float | NDArray[np.float64],
        slot_rate: NDArray[np.float64] | None = None,
    ) -> None:
        """Advance work for this step given the slowest relative clock per slot and a straggler factor (per replica
        for a serving fleet: its slowest GPU's).

        ``slot_rate`` (per slot, from :func:`twinloop.twin.gpu_rates.slot_rates`) replaces the rate of the slowest
        clock where the job's GPUs are not all the model its profile was made for.
        """
        p = self.profile
        if self.phase != Phase.SUSTAINED:
            self.tokens_per_s = 0.0
            return
        if self.kind == "training":
            rate = relative_speed(float(min_clock_x[0]), 1.0, p.compute_fraction) if slot_rate is None else slot_rate[0]
            self.speed = float(rate) * (straggle if isinstance(straggle, float) else float(np.min(straggle)))
            self.iter_pos_s, done, compute_s = self._advance(self.iter_pos_s, dt_s, self.speed)
            decay = math.exp(-dt_s / PACE_S)
            self._pace_sum = decay * self._pace_sum + compute_s * self.speed
            self._pace_weight = decay * self._pace_weight + compute_s
            self.iterations += done
            self.tokens_per_s = done * p.tokens_per_step / dt_s
            self.loss = LOSS_FLOOR + (LOSS_START - LOSS_FLOOR) / (1.0 + self.iterations / 200.0) ** 0.5
            if t_s < self.sdc_until_s:
                self.loss += self.sdc_magnitude
            return
        assert self.load is not None
        prefill, decode_asked = self.load.at(t_s)
        demand, decode = self.serving_demand(t_s)
        rates = relative_speed(min_clock_x, 1.0, slot_cf) if slot_rate is None else slot_rate
        hung = self.hung_replicas
        speed = np.where(hung, 0.0, np.asarray(rates) * straggle)  # a hung replica's requests wait
        served = np.minimum(demand, p.tokens_per_step * speed * dt_s)
        self.backlog = demand - served
        decode_served = np.minimum(decode * dt_s, p.decode_tokens_per_s * speed * dt_s)
        self.served_tokens += float(served.sum() + decode_served.sum())
        self.demanded_tokens += float(prefill.sum() + decode_asked.sum()) * dt_s
        self.tokens_per_s = float(served.sum() + decode_served.sum()) / dt_s
        live = ~(self.out_of_service | hung)
        self.speed = float(speed[live].min() if live.any() and not live.all() else speed.min())  # of live replicas
        self.replica_speed = speed
        self.replica_decode_tokens_per_s = decode

    def interrupt(self) -> float:
        """Lose the work since the last checkpoint; returns the iterations lost."""
        lost = self.iterations - self.iterations_at_checkpoint
        self.lost_iterations += lost
        self.iterations = self.iterations_at_checkpoint
        self.iter_pos_s = 0.0
        self._pace_sum = self._pace_weight = 0.0  # it restarts on other GPUs, perhaps: its pace is measured again
        self.interruptions += 1
        if self.kind == "serving":
            self.backlog = np.zeros(self.n_slots)
        return lost

    @property
    def kept_iterations(self) -> float:
        """Iterations the job keeps: a hung job keeps only its checkpointed work, since its collective watchdog
        (``hang_timeout_s``) interrupts it whatever anyone does, so a run that ends while it hangs counts its
        unsaved work as lost, as a later one would.
        """
        return self.iterations_at_checkpoint if self.phase == Phase.HUNG else self.iterations

    def ettr(self, now_s: float) -> float:
        """Effective training time ratio: ideal time of the work kept / wall time since first start.

        For serving: tokens served / tokens demanded while the job existed.
        """
        if self.first_start_s is None:
            return 0.0
        if self.kind == "serving":
            return self.served_tokens / self.demanded_tokens if self.demanded_tokens > 0 else 0.0
        wall = (self.end_s if self.end_s is not None else now_s) - self.first_start_s
        return min(1.0, self.kept_iterations * self.profile.iteration_s / wall) if wall > 0 else 0.0

    def goodput_tokens_per_s(self, now_s: float) -> float:
        """Tokens kept (training) or served (serving) per wall second since first start."""
        if self.first_start_s is None:
            return 0.0
        wall = max((self.end_s if self.end_s is not None else now_s) - self.first_start_s, 1e-9)
        kept = self.kept_iterations * self.profile.tokens_per_step if self.kind == "training" else self.served_tokens
        return kept / wall


def shared_demand(demand: NDArray[np.float32] | NDArray[np.float64], out: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per replica, ``demand`` with the out-of-service replicas' (``out``) shared evenly by the live ones (a router
    sends a drained replica no requests, and what it held queued goes to the others); all out: nobody serves.
    """
    live = ~out
    n_live = int(np.count_nonzero(live))
    if n_live == 0:
        return np.zeros(demand.shape)
    moved = float(demand[out].sum()) / n_live
    return np.where(live, demand + moved, 0.0)


def _vec(a: PhaseActivity) -> NDArray[np.float64]:
    return np.array([a.tensor_active, a.sm_active, a.dram_active])


def _rows(a: PhaseActivity, n: int) -> NDArray[np.float64]:
    return np.tile(_vec(a), (n, 1))


def _flat(
    act: NDArray[np.float64], cf: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """A step with one phase throughout: its high and low activities are its mean."""
    return act, cf, act, act


def make_jobs(
    specs: tuple[JobSpec, ...], loads: dict[str, ServingLoad], gpu: str, kinds: tuple[GpuSpec, ...] = ()
) -> list[Job]:
    """Job objects with their activity slots (slot 0 is the idle slot).

    ``gpu`` is the kind plans assume unless a job's ``plan.gpu`` names another; ``kinds`` are the hall's GPU kinds
    (a topology's, in its order), each job's rates against its profile's GPU (none given: every GPU is that GPU).
    """
    jobs: list[Job] = []
    slot = 1
    for i, s in enumerate(specs):
        size = s.gpus_per_replica if s.kind == "serving" else s.gpus
        profile = job_profile(s.kind, size, s.profile, s.plan, gpu)
        n_slots = 1 if s.kind == "training" else s.gpus // s.gpus_per_replica
        rates = kind_rates(kinds, get_gpu(str((s.plan or {}).get("gpu", gpu)))) if kinds else None
        job = Job(index=i, spec=s, profile=profile, slot0=slot, n_slots=n_slots, load=loads.get(s.name))
        job.rates = rates if rates is not None and not rates.uniform else None
        job.backlog = np.zeros(n_slots)
        job.out_of_service = np.zeros(n_slots, dtype=bool)
        job.ready_s = np.zeros(n_slots)
        job.hung_until_s = np.zeros(n_slots)
        job.replica_speed = np.ones(n_slots)
        job.replica_decode_tokens_per_s = np.zeros(n_slots)
        jobs.append(job)
        slot += n_slots
    return jobs
