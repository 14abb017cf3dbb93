"""Job-level rules: a straggler among a job's GPUs, suspected silent data corruption, a hung job.

* ``straggler`` (per GPU): a GPU's smoothed speed metric (SM clock by default; ``rank_straggler``: the rank's own
  step time) against the median of its peers (same job, same GPU model, not capped on purpose) at the same time,
  as a robust z within the group (``(m - median) / (1.4826·MAD)``, with a floor of ``min_deficit/4`` of the
  median so a job whose GPUs all sit at the same clock does not divide by zero) and at least ``min_deficit``
  below the median. The group statistics are vectorized: one ``np.lexsort`` by (job, value) gives every
  job's median and MAD without a per-job loop.
* ``sdc`` (per job): the loss or gradient norm jumps (z of its log against a Holt level+trend forecast, as
  the loss curve trends down; scale = EWMA of |residual|; updated only on new steps) while *no hardware fault
  that can change a step's results* (an XID, a power-delivery fault) began on the job's GPUs recently
  (``frame.hw_fault_onset_s``) and the job has not restarted since (a restart leaves the faulty hardware's steps
  behind: what it computes after it, on reset or new GPUs, that fault does not explain). SDC shows in no hardware
  counter (Llama 3 report), so this is the only way to see it; a spike with such a fault is that hardware event
  instead. A throttle, a cooling alarm or a temperature that moved on one of the job's GPUs changes its speed, not
  its numbers, and does not veto. A job that restarted
  (phase back to a starting phase, progress counter going backwards) anchors its loss level afresh on its first
  new step and keeps the learned trend and scale; where the job reports its checkpoint phase, that first step is
  judged against the value it had when it began its last *completed* checkpoint (what it resumes from; a write a
  restart interrupts saved nothing), so an SDC that begins during the restart is caught; a checkpoint write is no
  restart.
* ``job_slowdown`` (per job): the job's step time rose with no clock drop and no hardware event on its GPUs:
  a straggler the per-GPU counters do not show (see :class:`JobSlowdownRule`).
* ``hang`` (per job): the progress counter (or, without one, tokens/s > 0) has not moved for
  ``max(n_steps × expected step time, min_stall_s)`` (3 steps, at least 15 s) after the job made progress,
  while its GPUs are idle-ish (mean tensor activity below ``idle_tensor``). A pause the job reports
  (``TWINLOOP_FI_JOB_PHASE``: starting, checkpoint, cooldown) is no stall, so the limit need not cover a
  checkpoint write or a restart; three step times with the whole job's GPUs idle is far beyond step-to-step
  jitter, and the 15 s floor covers data-loader or storage hiccups of jobs with sub-second steps.

Thresholds are guesses, not fitted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.rules import (
    F64,
    JOB_GRAD_NORM,
    JOB_LOSS,
    JOB_PHASE,
    JOB_PROGRESS,
    JOB_STEP_TIME,
    JOB_TOKENS,
    POWER_LIMIT,
    RANK_STEP_TIME,
    SM_CLOCK,
    TENSOR,
    BoolArr,
    Rule,
    RuleFrame,
    ewma_toward,
    steps,
)
from twinloop.ops.events import EventClass


def group_median(values: F64, group: NDArray[np.int64], n_groups: int) -> tuple[F64, NDArray[np.int64]]:
    """Median of ``values`` per group (NaN values and ``group < 0`` ignored); also the count per group.

    Args:
        values: shape (n,).
        group: group index per value, -1 = none.
        n_groups: number of groups.

    Returns:
        (median per group, NaN where empty; count per group).
    """
    ok = (group >= 0) & np.isfinite(values)
    g, v = group[ok], values[ok]
    order = np.lexsort((v, g))
    g_sorted, v_sorted = g[order], v[order]
    count = np.bincount(g_sorted, minlength=n_groups).astype(np.int64)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    med = np.full(n_groups, np.nan)
    have = count > 0
    lo = start[have] + (count[have] - 1) // 2
    hi = start[have] + count[have] // 2
    med[have] = 0.5 * (v_sorted[lo] + v_sorted[hi])
    return med, count


def slowest_other(values: F64, group: NDArray[np.int64], n_groups: int) -> F64:
    """Per value, the largest value among the *other* members of its group (NaN and ``group < 0`` ignored; -inf
    where there is none): the pace a synchronous job would keep without that member. Vectorized, no group loop.
    """
    ok = (group >= 0) & np.isfinite(values)
    g, v = group[ok], values[ok]
    top = np.full(n_groups, -np.inf)
    np.maximum.at(top, g, v)
    is_top = v == top[g]
    second = np.full(n_groups, -np.inf)
    np.maximum.at(second, g[~is_top], v[~is_top])
    second = np.where(np.bincount(g[is_top], minlength=n_groups) >= 2, top, second)  # a tie: both hold it back
    out = np.full(values.shape, -np.inf)
    out[ok] = np.where(is_top, second[g], top[g])
    return out


#: ``TWINLOOP_FI_JOB_PHASE`` codes (``twinloop.telemetry.fields``) of a job being (re)started: queued, ramp-up,
#: launch. A job entering one of them from any other phase restarted.
STARTING_PHASES: frozenset[float] = frozenset({0.0, 1.0, 2.0})
#: Phases in which a job makes no progress on purpose and says so (starting, writing a checkpoint, cooling down,
#: done): no hang. The twin's own "hung" code (5) is not among them and is not used as evidence either: a hung
#: job's framework still reports that it is training.
PAUSED_PHASES: frozenset[float] = STARTING_PHASES | {4.0, 6.0, 7.0}
#: The phase code of a job writing a checkpoint.
CHECKPOINT_PHASE = 4.0


class RestartTracker:
    """Which job slots restarted this step: their phase went into a starting phase (queued, ramp-up, launch) or
    their progress counter went backwards (a restart from a checkpoint replays steps, and its loss jumps back up:
    not a fault of the job's data). A checkpoint write pauses a job without restarting it.
    """

    def __init__(self) -> None:
        self._phase: F64 = np.zeros(0)
        self._progress: F64 = np.zeros(0)

    def __call__(self, frame: RuleFrame) -> BoolArr:
        """Job slots that restarted at this frame (and remember their phase and progress for the next one)."""
        n = frame.n_slots
        if self._phase.shape[0] < n:
            k = n - self._phase.shape[0]
            self._phase = np.concatenate([self._phase, np.full(k, np.nan)])
            self._progress = np.concatenate([self._progress, np.full(k, np.nan)])
        restarted = np.zeros(n, dtype=bool)
        starting = np.fromiter(STARTING_PHASES, dtype=np.float64)
        for name, prev, backwards in ((JOB_PHASE, self._phase, False), (JOB_PROGRESS, self._progress, True)):
            x = frame.job.get(name)
            if x is None:
                continue
            ok = np.isfinite(x) & np.isfinite(prev[:n])
            with np.errstate(invalid="ignore"):
                changed = x < prev[:n] if backwards else np.isin(x, starting) & ~np.isin(prev[:n], starting)
            restarted |= ok & changed
            prev[:n] = np.where(np.isfinite(x), x, prev[:n])
        return restarted


def _at_least(seconds: float, samples: float, dt_s: float) -> float:
    """``seconds``, or ``samples`` sampling intervals when that is clearly longer (the 0.1 % margin keeps a
    1 s cadence whose median step is a hair over 1 s bit-identical to the plain value).
    """
    floor = samples * dt_s
    return floor if floor > seconds * 1.001 else seconds


class StragglerRule(Rule):
    """One GPU slower than its peers: the other GPUs of its job *of the same GPU model*, at the same time.

    The comparison is across peers at each step, never against the GPU's own history, so a GPU slow from its
    job's first step is found like one that slowed later. Expected slowness is no straggler: a GPU of another model
    (an A100 beside H100s: its own peer group), a GPU whose enforced power limit sits ``cap_tolerance`` below its
    peers' median (a cap the loop, an operator or a rack limit set), and a GPU the caller marks
    (``frame.expected_slow``: a clock lock or cap the loop applied). Such GPUs are not flagged and not counted as
    peers (a capped rack does not drag its peers' median).
    """

    name = "straggler"
    event_class = EventClass.STRAGGLER

    def __init__(
        self,
        metric: str = SM_CLOCK,
        lower_is_slower: bool = True,
        z_threshold: float = 4.0,
        min_deficit: float = 0.05,
        min_peers: int = 4,
        smooth_half_life_s: float = 5.0,
        persistence_s: float = 10.0,
        min_smooth_samples: float = 5.0,
        min_persistence_samples: int = 10,
        cap_tolerance: float = 0.02,
    ) -> None:
        super().__init__()
        self.metric = metric
        self.sign = 1.0 if lower_is_slower else -1.0
        self.z_threshold = z_threshold
        self.min_deficit = min_deficit
        self.min_peers = min_peers
        self.smooth_half_life_s = smooth_half_life_s
        self.persistence_s = persistence_s
        self.min_smooth_samples = min_smooth_samples
        self.min_persistence_samples = min_persistence_samples
        self.cap_tolerance = cap_tolerance
        self._m: F64 | None = None
        self._limit: F64 = np.zeros(0)
        self._raised_at: F64 | None = None
        # Per GPU, at the last update: the fraction of its job's throughput it costs, and whether that is measured.
        self.job_slowdown: F64 = np.zeros(0)
        self.pace_known: BoolArr = np.zeros(0, dtype=bool)
        self.pace_across_models = False  # the metric compares across GPU models (a step time), not only within

    def _expected_slow(self, frame: RuleFrame, group: NDArray[np.int64], n_groups: int, grace_s: float) -> BoolArr:
        """GPUs slower on purpose: marked by the caller, capped below their peers' enforced power limit, or whose
        limit rose by more than ``cap_tolerance`` within ``grace_s``: a lifted cap leaves the smoothed clock lagging
        its peers for a few half-lives (a lifted operator cap read as a straggler in the twin).
        """
        n = frame.n_gpus
        out = np.zeros(n, dtype=bool) if frame.expected_slow is None else frame.expected_slow.copy()
        limit = frame.gpu.get(POWER_LIMIT)
        if limit is None:
            return out
        med, _ = group_median(limit, group, n_groups)
        if self._raised_at is None or self._raised_at.shape[0] != n:
            self._raised_at, self._limit = np.full(n, -np.inf), limit.copy()
        with np.errstate(invalid="ignore"):
            out |= (group >= 0) & (limit < (1.0 - self.cap_tolerance) * med[np.maximum(group, 0)])
            raised = limit > (1.0 + self.cap_tolerance) * self._limit
        self._raised_at[raised] = frame.ts
        self._limit = np.where(np.isfinite(limit), limit, self._limit)
        return out | (frame.ts - self._raised_at <= grace_s)

    def _job_loss(self, m: F64, group: NDArray[np.int64], n_groups: int, frame: RuleFrame) -> F64:
        """What each GPU costs its synchronous job, as a fraction of the job's throughput (the respond stage weighs
        it against a restart): the job keeps its slowest rank's pace, so a GPU costs only how much slower it is than
        the slowest of the others, not its deficit against the median (a mild straggler among throttled peers
        costs little). Step times compare across the whole job (any GPU model); clocks within its model group.
        """
        if self.pace_across_models:
            group, n_groups = np.where(frame.job_slot >= 0, frame.job_slot, -1), frame.n_slots
        x = self.sign * -m  # larger = slower
        other = slowest_other(x, group, n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            # step time t against the others' slowest t2: 1 - t2/t; clock c against their lowest c2: 1 - c/c2.
            loss = 1.0 - other / x if self.sign < 0 else 1.0 - x / other
        return np.where(np.isfinite(loss) & np.isfinite(other), np.clip(loss, 0.0, 1.0), 0.0)

    def _smoothing_s(self, dt_s: float) -> tuple[float, float]:
        """The smoothing half-life and the persistence at a ``dt_s`` cadence, s (see :meth:`update`)."""
        return (
            _at_least(self.smooth_half_life_s, self.min_smooth_samples, dt_s),
            _at_least(self.persistence_s, self.min_persistence_samples, dt_s),
        )

    def lag_s(self, dt_s: float) -> float:
        """How long the smoothed metric still shows a slowdown that ended, s: 4 half-lives and the persistence (a
        lifted cap's grace here; a co-tenant's leaving in the pipeline).
        """
        half_life_s, persist_s = self._smoothing_s(dt_s)
        return 4.0 * half_life_s + persist_s

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on GPUs lastingly slower than their peers; the score is the robust z of the deficit (0 outside jobs)."""
        n = frame.n_gpus
        x = frame.gpu.get(self.metric)
        if x is None or frame.n_slots == 0:
            self.job_slowdown, self.pace_known = np.zeros(n), np.zeros(n, dtype=bool)
            return np.zeros(n, dtype=bool), np.zeros(n)
        if self._m is None or self._m.shape[0] != n:
            self._m = np.full(n, np.nan)
            self._slot = np.full(n, -1, dtype=np.int64)
        # A GPU that changed job starts its smoothing afresh.
        moved = frame.job_slot != self._slot
        self._m[moved] = np.nan
        self._slot = frame.job_slot.copy()
        valid = np.isfinite(x)
        # Smoothing and persistence are set in seconds but need samples: at a 5 s cadence a 5 s half-life and
        # 10 s persistence average ~1.5 samples and confirm on 2, so clock noise alone fires (17 straggler false
        # alarms in 12 min of the default hall at step_s 5 s vs 6 at 1 s). Both are stretched to what they are
        # at 1 s in samples (5 and 10), which at 1 s (the packaged scenarios) changes nothing.
        half_life_s, persist_s = self._smoothing_s(frame.dt_s)
        self._m = ewma_toward(self._m, x, valid, 1.0 - 2.0 ** (-frame.dt_s / half_life_s))
        m = self._m
        # Peer groups: (job slot, GPU model); vectorized, one group index per GPU.
        model, n_models = frame.limits.models()
        slot = frame.job_slot
        in_job = slot >= 0
        group = np.where(in_job, slot * n_models + model, -1)
        n_groups = frame.n_slots * n_models
        expected = self._expected_slow(frame, group, n_groups, self.lag_s(frame.dt_s))
        peer_group = np.where(expected, -1, group)
        med, count = group_median(m, peer_group, n_groups)
        safe = np.maximum(group, 0)
        dev = np.abs(m - med[safe])
        mad, _ = group_median(dev, peer_group, n_groups)
        med_g, mad_g, cnt_g = med[safe], mad[safe], count[safe]
        scale = np.maximum(1.4826 * mad_g, 0.25 * self.min_deficit * np.abs(med_g))
        with np.errstate(invalid="ignore", divide="ignore"):
            z = self.sign * (med_g - m) / scale
            deficit = self.sign * (med_g - m) / np.abs(med_g)
        cond = in_job & ~expected & (cnt_g >= self.min_peers) & (z >= self.z_threshold) & (deficit >= self.min_deficit)
        fired = self._persist(cond, valid, steps(persist_s, frame.dt_s))
        self.job_slowdown = self._job_loss(m, group, n_groups, frame)
        self.pace_known = in_job & np.isfinite(m)
        return fired, np.where(np.isfinite(z) & in_job, z, 0.0)


class RankStragglerRule(StragglerRule):
    """A rank whose own step time (``TWINLOOP_FI_RANK_STEP_TIME``, per GPU) is longer than its job's same-model
    peers': the GPU the whole job waits for, even when its clocks look normal (a degraded GPU, a slow host or NIC
    behind it). Same peer comparison and expectations as :class:`StragglerRule`; higher is slower.
    """

    name = "rank_straggler"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("metric", RANK_STEP_TIME)
        kwargs.setdefault("lower_is_slower", False)
        super().__init__(**kwargs)
        self.pace_across_models = True


def _grown(values: F64, size: int) -> F64:
    """``values`` padded with NaN to ``size`` entries (a copy)."""
    out = np.full(max(size, values.shape[0]), np.nan)
    out[: values.shape[0]] = values
    return out


class SdcRule(Rule):
    """A loss or gradient-norm spike with no hardware change on the job's GPUs (per job slot)."""

    name = "sdc"
    event_class = EventClass.SUSPECTED_SDC
    scope = "job"

    def __init__(
        self,
        z_threshold: float = 6.0,
        half_life_steps: float = 10.0,
        beta: float = 0.2,
        min_steps: int = 20,
        rel_floor: float = 0.002,
    ) -> None:
        super().__init__()
        self._resumed: dict[str, NDArray[np.bool_]] = {}
        self._at_checkpoint: dict[str, F64] = {}  # log value when the job began its last completed checkpoint
        self._writing: dict[str, F64] = {}  # log value when the job began the checkpoint it writes (or last wrote)
        self._phase: F64 = np.zeros(0)
        self.z_threshold = z_threshold
        self.beta = beta
        self.alpha = 1.0 - 2.0 ** (-1.0 / half_life_steps)
        self.min_steps = min_steps
        self.rel_floor = rel_floor
        self._state: dict[str, tuple[F64, F64, F64, F64, F64]] = {}
        self._restarts = RestartTracker()
        self._restart_ts: F64 = np.zeros(0)  # when each job slot last restarted, s (-inf: never seen to)

    def _signal_z(self, name: str, x: F64 | None, n_slots: int) -> F64:
        """Robust z of a new step's log value against a Holt (level + trend) forecast; 0 where no new step."""
        z_out = np.zeros(n_slots)
        if x is None:
            return z_out
        st = self._state.get(name)
        if st is None or st[0].shape[0] < n_slots:
            old = st
            st = (
                np.full(n_slots, np.nan),  # level
                np.zeros(n_slots),  # trend per step
                np.zeros(n_slots),  # EWMA |residual|
                np.full(n_slots, np.nan),  # previous log value
                np.zeros(n_slots),  # steps seen
            )
            if old is not None:
                k = old[0].shape[0]
                for new_arr, old_arr in zip(st, old, strict=True):
                    new_arr[:k] = old_arr
            self._state[name] = st
        level, trend, absdev, prev, count = st
        with np.errstate(invalid="ignore", divide="ignore"):
            lx = np.log(np.where(x > 0, x, np.nan))
        new = np.isfinite(lx) & (lx != prev)  # only a new step carries information
        first = new & np.isnan(level)
        upd = new & ~first
        forecast = level + trend
        r = np.where(upd, lx - forecast, 0.0)
        scale = np.maximum(1.2533 * absdev, self.rel_floor)  # mean |r| -> sigma for a Gaussian
        z = np.where(upd & (count >= self.min_steps), r / scale, 0.0)
        resumed, saved = self._resumed.get(name), self._at_checkpoint.get(name)
        if resumed is not None and saved is not None:
            # The first step after a restart resumes from the last checkpoint: judged against the value the job
            # had when it began writing it (one step of trend on), not taken as the new level unseen.
            back = first & resumed[:n_slots] & (count >= self.min_steps) & np.isfinite(saved[:n_slots])
            z = np.where(back, (lx - saved[:n_slots] - trend) / scale, z)
        if resumed is not None:
            resumed[:n_slots] &= ~first
        spike = z > self.z_threshold
        a = np.maximum(self.alpha, 1.0 / np.maximum(count, 1))
        rc = np.clip(r, -self.z_threshold * scale, self.z_threshold * scale)
        level[:] = np.where(first, lx, np.where(upd, forecast + a * rc, level))
        trend[:] = np.where(upd, trend + a * self.beta * rc, trend)
        absdev[:] = np.where(upd & ~spike, absdev + a * (np.abs(r) - absdev), absdev)
        prev[:] = np.where(np.isfinite(lx), lx, prev)
        count += new
        z_out[:] = np.where(np.isfinite(z), z, 0.0)
        return z_out

    def _note_checkpoints(self, frame: RuleFrame) -> None:
        """Remember each signal's last value when a job enters its checkpoint phase, and make it what a restart
        resumes at once the write completes (the job leaves the phase for anything but a restart). A write a restart
        interrupts saved nothing: a framework resumes from the checkpoint before, so its value stays (on the
        slow-checkpoint hall, a failure 57 s into a 90 s write sent the job back 47 iterations, and judging its first
        step against the interrupted write's loss made a suspected SDC of it).
        """
        phase = frame.job.get(JOB_PHASE)
        n = frame.n_slots
        if phase is None or n == 0:
            return
        if self._phase.shape[0] < n:
            self._phase = np.concatenate([self._phase, np.full(n - self._phase.shape[0], np.nan)])
        was = self._phase[:n].copy()
        entering = (phase == CHECKPOINT_PHASE) & (was != CHECKPOINT_PHASE)
        with np.errstate(invalid="ignore"):
            starting = np.isin(phase, np.fromiter(STARTING_PHASES, dtype=np.float64))
        completed = (was == CHECKPOINT_PHASE) & np.isfinite(phase) & (phase != CHECKPOINT_PHASE) & ~starting
        self._phase[:n] = np.where(np.isfinite(phase), phase, self._phase[:n])
        if not (entering.any() or completed.any()):
            return
        for name, (_, _, _, prev, _) in self._state.items():
            k = prev.shape[0]
            writing, saved = (_grown(d.get(name, np.zeros(0)), k) for d in (self._writing, self._at_checkpoint))
            writing[:n] = np.where(entering, prev[:n], writing[:n])
            saved[:n] = np.where(completed, writing[:n], saved[:n])
            self._writing[name], self._at_checkpoint[name] = writing, saved

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a loss or gradient-norm spike with no recent result-changing hardware fault; the score is the larger
        spike z.
        """
        n = frame.n_slots
        restarted = self._restarts(frame)
        if restarted.any():
            # The loss resumes from the checkpoint's value, on the same curve with the same noise: only the level
            # is anchored afresh, on the first new step (the last value before the restart, still reported while
            # the job restarts, is no new step); trend and scale carry over, so a fault right after a restart is
            # judged from the second step on instead of after ``min_steps``.
            # The first new step is still checked against the values the job passed through before (an SDC that
            # begins while the job restarts would otherwise become the new level).
            for name, (level, *_) in self._state.items():
                m = np.zeros(level.shape[0], dtype=bool)
                m[:n] = restarted
                level[m] = np.nan
                flags = self._resumed.setdefault(name, np.zeros(0, dtype=bool))
                if flags.shape[0] < level.shape[0]:
                    flags = np.concatenate([flags, np.zeros(level.shape[0] - flags.shape[0], dtype=bool)])
                self._resumed[name] = flags | m
        self._note_checkpoints(frame)
        z = np.maximum(
            self._signal_z("loss", frame.job.get(JOB_LOSS), n),
            self._signal_z("grad", frame.job.get(JOB_GRAD_NORM), n),
        )
        spike = z > self.z_threshold
        return spike & ~self._hw_veto(frame, restarted), z

    def _hw_veto(self, frame: RuleFrame, restarted: BoolArr) -> BoolArr:
        """Job slots where a result-changing hardware fault began on one of their GPUs since their last restart."""
        n = frame.n_slots
        if self._restart_ts.shape[0] < n:
            self._restart_ts = np.concatenate([self._restart_ts, np.full(n - self._restart_ts.shape[0], -np.inf)])
        self._restart_ts[:n][restarted] = frame.ts
        onset = frame.hw_fault_onset_s
        if onset is None or n == 0:
            return np.zeros(n, dtype=bool)
        last = np.full(n, -np.inf)
        in_job = (frame.job_slot >= 0) & (frame.job_slot < n)
        np.maximum.at(last, frame.job_slot[in_job], onset[in_job])
        veto: BoolArr = np.isfinite(last) & (last > self._restart_ts[:n])
        return veto


class HangRule(Rule):
    """No progress for many expected step times while the job's GPUs idle (per job slot)."""

    name = "hang"
    event_class = EventClass.JOB_HANG
    scope = "job"

    def __init__(self, n_steps: float = 3.0, min_stall_s: float = 15.0, idle_tensor: float = 0.1) -> None:
        super().__init__()
        self.n_steps = n_steps
        self.min_stall_s = min_stall_s
        self.idle_tensor = idle_tensor
        self._last: F64 = np.zeros(0)
        self._prev: F64 = np.zeros(0)
        self._step_s: F64 = np.zeros(0)
        self._training: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._fresh: NDArray[np.bool_] = np.zeros(0, dtype=bool)

    def _grow(self, n: int) -> None:
        k = self._last.shape[0]
        if k >= n:
            return
        self._last = np.concatenate([self._last, np.full(n - k, np.nan)])
        self._prev = np.concatenate([self._prev, np.full(n - k, np.nan)])
        self._step_s = np.concatenate([self._step_s, np.full(n - k, np.nan)])
        self._training = np.concatenate([self._training, np.zeros(n - k, dtype=bool)])
        self._fresh = np.concatenate([self._fresh, np.zeros(n - k, dtype=bool)])

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on a stalled job with idle GPUs; the score is the time since progress over the stall limit."""
        n = frame.n_slots
        self._grow(n)
        last, prev, step_s = self._last[:n], self._prev[:n], self._step_s[:n]
        progress = frame.job.get(JOB_PROGRESS)
        tokens = frame.job.get(JOB_TOKENS)
        if progress is not None:
            moved = np.isfinite(progress) & np.isfinite(prev) & (progress > prev)
            started = np.isfinite(progress) & np.isnan(prev)
            np.copyto(prev, progress, where=np.isfinite(progress))
        elif tokens is not None:
            # Without a progress counter only training jobs (they report a loss) are judged by tokens/s:
            # a serving job with no requests is idle, not hung.
            loss = frame.job.get(JOB_LOSS)
            if loss is not None:
                self._training[:n] |= np.isfinite(loss)
            moved = np.isfinite(tokens) & (tokens > 0)
            started = np.zeros(n, dtype=bool)
        else:
            return np.zeros(n, dtype=bool), np.zeros(n)
        phase = frame.job.get(JOB_PHASE)
        paused = np.zeros(n, dtype=bool)
        if phase is not None:
            paused = np.isfinite(phase) & np.isin(phase, np.fromiter(PAUSED_PHASES, dtype=np.float64))
        fresh = self._fresh[:n]
        interval = frame.ts - last
        # The first progress after a pause is no step interval (the pause ended mid-step).
        learn = moved & np.isfinite(last) & (interval > 0) & ~fresh & ~paused
        step_s[:] = ewma_toward(step_s, interval, learn, 0.2)
        st = frame.job.get(JOB_STEP_TIME)
        if st is not None:
            step_s[:] = np.where(np.isfinite(st) & (st > 0), st, step_s)
        # A pause the job reports restarts the stall clock (only after progress was seen at all).
        last[:] = np.where(moved | (started & np.isnan(last)) | (paused & np.isfinite(last)), frame.ts, last)
        fresh[:] = np.where(paused, True, np.where(moved, False, fresh))
        limit = np.maximum(self.n_steps * np.nan_to_num(step_s, nan=0.0), self.min_stall_s)
        # Made progress at least twice (a step time is known): a job still initializing is not hung.
        stalled = np.isfinite(last) & np.isfinite(step_s) & (frame.ts - last >= limit)
        in_job = frame.job_slot >= 0
        present = np.bincount(frame.job_slot[in_job], minlength=n)[:n] > 0
        idle = np.ones(n, dtype=bool)
        act = frame.gpu.get(TENSOR)
        if act is not None and n:
            ok = in_job & np.isfinite(act)
            s = np.bincount(frame.job_slot[ok], weights=act[ok], minlength=n)[:n]
            c = np.bincount(frame.job_slot[ok], minlength=n)[:n]
            idle = np.where(c > 0, s / np.maximum(c, 1) < self.idle_tensor, True)
        stalled &= present
        if progress is None:
            stalled &= self._training[:n]
        fired = stalled & idle
        score = np.where(np.isfinite(last), (frame.ts - last) / limit, 0.0)
        return fired, score


class JobSlowdownRule(Rule):
    """A job's step time rises with no clock drop and no hardware event on its GPUs: a straggler somewhere in
    the job (per job slot).

    When per-GPU telemetry does not show which GPU is slow (a slow NIC or host, a degraded GPU that the
    counters do not show), the job's own step time still does: all ranks wait for the slowest one. The rise
    is the log step time against its baseline; it must last ``min_steps`` new steps (a new step: its progress counter
    moved, where the job reports one, else a new step-time value); a drop of the job's mean SM
    clock by ``clock_drop`` (throttling) or a recent hardware detection on any of its GPUs explains it instead.
    The incident is rooted at the job.

    The baseline is the job's usual step time: an EWMA of the log step time over every sample that reports one
    (weighted by time: a value reported for 15 s counts 15 times, so a step time that changes only at brief dips
    is not outvoted by them), taking only *calm* samples, within half the rise of it *either way*. A brief step
    much faster than usual is no more the job's pace than a brief slow one: with faster steps taken as calm, a
    power-bound job whose reported step dips to its full-clock value between compute phases (two new values of
    three, round 5's ``thermal-move``) dragged the baseline 22 % under its pace, which then read as a lasting rise
    (a straggler false alarm whenever its clock sat less than ``clock_drop`` under its reference). A faster pace
    that lasts ``warmup_steps`` new steps in a row (a lifted cap) is the job's new pace: the baseline is learned
    afresh from it.
    """

    name = "job_slowdown"
    event_class = EventClass.STRAGGLER
    scope = "job"

    def __init__(
        self, rise: float = 0.15, half_life_steps: float = 20.0, min_steps: int = 3, warmup_steps: int = 10,
        clock_drop: float = 0.03,
    ) -> None:  # fmt: skip
        super().__init__()
        self.log_rise = float(np.log1p(rise))
        self.alpha = 1.0 - 2.0 ** (-1.0 / half_life_steps)
        self.min_steps = min_steps
        self.warmup_steps = warmup_steps
        self.clock_drop = clock_drop
        self._n = 0
        self._restarts = RestartTracker()

    def _grow(self, n: int) -> None:
        if n <= self._n:
            return
        k = n - self._n
        if self._n == 0:
            self._base = np.full(n, np.nan)
            self._prev = np.full(n, np.nan)
            self._count = np.zeros(n)
            self._run = np.zeros(n)
            self._clock_ref = np.full(n, np.nan)
            self._samples = np.zeros(n)
            self._fast = np.zeros(n)
            self._steps = np.full(n, np.nan)
        else:
            self._base = np.concatenate([self._base, np.full(k, np.nan)])
            self._prev = np.concatenate([self._prev, np.full(k, np.nan)])
            self._count = np.concatenate([self._count, np.zeros(k)])
            self._run = np.concatenate([self._run, np.zeros(k)])
            self._clock_ref = np.concatenate([self._clock_ref, np.full(k, np.nan)])
            self._samples = np.concatenate([self._samples, np.zeros(k)])
            self._fast = np.concatenate([self._fast, np.zeros(k)])
            self._steps = np.concatenate([self._steps, np.full(k, np.nan)])
        self._n = n

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Fire on an unexplained step-time rise lasting ``min_steps`` steps; the score is the rise of log step time."""
        n = frame.n_slots
        st = frame.job.get(JOB_STEP_TIME)
        if st is None or n == 0:
            return np.zeros(n, dtype=bool), np.zeros(n)
        self._grow(n)
        base, prev, count, run = self._base[:n], self._prev[:n], self._count[:n], self._run[:n]
        samples, fast = self._samples[:n], self._fast[:n]
        restarted = self._restarts(frame)
        base[restarted], prev[restarted], count[restarted], run[restarted] = np.nan, np.nan, 0.0, 0.0
        samples[restarted], fast[restarted] = 0.0, 0.0
        clock_ref = self._clock_ref[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            lx = np.log(np.where(st > 0, st, np.nan))
        progress = frame.job.get(JOB_PROGRESS)
        if progress is None:  # the twin: a new step is a new step time
            new = np.isfinite(lx) & (lx != prev)
        else:  # a job counting its steps (live heartbeats) says so itself: two equal step times are two steps
            steps = self._steps[:n]
            new = np.isfinite(lx) & np.isfinite(progress) & (progress != steps)
            steps[:] = np.where(np.isfinite(progress), progress, steps)
        prev[:] = np.where(np.isfinite(lx), lx, prev)
        rise = np.where(np.isfinite(base), lx - base, 0.0)
        slow = new & (count >= self.warmup_steps) & (rise >= self.log_rise)
        # Explanations: the job's GPUs clocked down, or a hardware event on any of them.
        explained = np.zeros(n, dtype=bool)
        clock = frame.gpu.get(SM_CLOCK)
        in_job = frame.job_slot >= 0
        if clock is not None:
            ok = in_job & np.isfinite(clock)
            s_clk = np.bincount(frame.job_slot[ok], weights=clock[ok], minlength=n)[:n]
            c_clk = np.bincount(frame.job_slot[ok], minlength=n)[:n]
            mean_clk = np.where(c_clk > 0, s_clk / np.maximum(c_clk, 1), np.nan)
            with np.errstate(invalid="ignore"):
                explained |= mean_clk < clock_ref * (1.0 - self.clock_drop)
            calm_clk = np.isfinite(mean_clk) & (run == 0)
            clock_ref[:] = ewma_toward(clock_ref, mean_clk, calm_clk, 1.0 - 2.0 ** (-frame.dt_s / 300.0))
        for flags in (frame.hw_recent, frame.slowing):  # a hardware change, or a GPU a known cause slows now
            if flags is not None:
                hw = np.bincount(frame.job_slot[in_job], weights=flags[in_job], minlength=n)[:n]
                explained |= hw > 0
        run[:] = np.where(new, np.where(slow & ~explained, run + 1, 0.0), run)
        # The baseline, over every sample reporting a step (time-weighted), calm ones only once warmed up.
        have = np.isfinite(lx)
        calm = have & (np.abs(rise) < 0.5 * self.log_rise)
        a = np.maximum(self.alpha, 1.0 / (samples + 1.0))
        learn = calm | (have & (count < self.warmup_steps))
        base[:] = np.where(have & np.isnan(base), lx, np.where(learn, base + a * (lx - base), base))
        samples += have
        count += new
        # A faster pace lasting warmup_steps new steps in a row is the job's new pace: learn it afresh.
        fast[:] = np.where(new, np.where(rise <= -0.5 * self.log_rise, fast + 1.0, 0.0), fast)
        anew = fast >= self.warmup_steps
        base[anew], count[anew], samples[anew], fast[anew] = np.nan, 0.0, 0.0, 0.0
        return run >= self.min_steps, np.where(np.isfinite(rise), rise, 0.0)


def job_rules() -> list[Rule]:
    """Fresh instances of the job rules with default thresholds."""
    return [StragglerRule(), RankStragglerRule(), SdcRule(), HangRule(), JobSlowdownRule()]
