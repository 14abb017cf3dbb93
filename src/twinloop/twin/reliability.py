"""Job-level reliability Monte-Carlo: interruptions, checkpoint/restart, ETTR, goodput and MTTF.

A training job on ``n_gpus`` GPUs sees the failure causes of :mod:`twinloop.twin.failures` as one Poisson
process per cause (its rate: :meth:`FailureModel.expected_rate_per_hour` at the job's GPU temperature). Each
Monte-Carlo run samples the counts per cause and uniform event times over the wall time, all runs at once
(NumPy, no loop over runs or events). Between two interruptions the job

1. restarts (``restart_overhead_s``: detect, reschedule, load the checkpoint, re-initialise NCCL; none at the
   very start of the job),
2. then alternates ``checkpoint_interval_s`` of useful compute with ``checkpoint_write_s`` of blocking
   checkpoint write.

An unexpected interruption loses the compute since the last completed checkpoint (and any partly written
checkpoint). A *planned* interruption is preceded by a checkpoint, so it loses no compute; the time of that
extra checkpoint is taken as part of its restart overhead (an assumption). Interruptions arrive in wall time,
also during restarts (a new failure during a restart simply restarts again). Work done after the last
interruption counts as useful at the end of the window (the job goes on).

``ETTR`` (effective training time ratio) = useful compute time / wall time; goodput = ETTR x GPUs x wall
hours (useful GPU-hours). Job MTTF counts unexpected interruptions only. Young/Daly: with job failure rate
``lambda`` and checkpoint cost ``C`` the loss-minimising compute interval is about ``sqrt(2 C / lambda)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.failure_rates import CAUSE_NAMES, CAUSES, LLAMA3_GPUS_PER_NODE
from twinloop.twin.failures import FailureConfig, FailureModel

_PLANNED = np.array([c.planned for c in CAUSES])


def job_failure_rates_per_h(
    n_gpus: int,
    gpus_per_node: int = LLAMA3_GPUS_PER_NODE,
    gpu_temp_c: float | NDArray[np.float64] | None = None,
    config: FailureConfig = FailureConfig(),
) -> NDArray[np.float64]:
    """Interruption rate per cause of one job on ``n_gpus`` GPUs, events/hour (order of ``CAUSES``)."""
    if n_gpus < 1:
        raise InputError("reliability", "n_gpus", f"{n_gpus} (allowed >= 1)")
    return FailureModel(config).expected_rate_per_hour(n_gpus, gpus_per_node, gpu_temp_c)


def job_mttf_h(
    n_gpus: int,
    gpus_per_node: int = LLAMA3_GPUS_PER_NODE,
    gpu_temp_c: float | NDArray[np.float64] | None = None,
    config: FailureConfig = FailureConfig(),
) -> float:
    """Mean time between unexpected interruptions of one job on ``n_gpus`` GPUs, hours.

    Every cause scales with the job's GPU or node count, so MTTF falls as ``1/n_gpus``.
    """
    rates = job_failure_rates_per_h(n_gpus, gpus_per_node, gpu_temp_c, config)
    total = float(rates[~_PLANNED].sum())
    return float("inf") if total == 0.0 else 1.0 / total


def young_daly_interval_s(job_failure_rate_per_s: float, checkpoint_write_s: float) -> float:
    """Young/Daly checkpoint interval ``sqrt(2 C / lambda)``, s (compute time between checkpoints).

    Args:
        job_failure_rate_per_s: the job's rate of work-losing (unexpected) interruptions, 1/s.
        checkpoint_write_s: blocking cost of one checkpoint, s.
    """
    if not job_failure_rate_per_s > 0.0:
        raise InputError("young_daly_interval_s", "job_failure_rate_per_s", "must be > 0")
    if checkpoint_write_s < 0.0:
        raise InputError("young_daly_interval_s", "checkpoint_write_s", "must be >= 0")
    return float(np.sqrt(2.0 * checkpoint_write_s / job_failure_rate_per_s))


@dataclass(frozen=True, eq=False)
class JobReliability:
    """Monte-Carlo result for one job configuration (arrays are per run unless noted).

    Attributes:
        n_gpus: GPUs in the job.
        wall_s: wall time of the window, s.
        checkpoint_interval_s: compute time between checkpoints, s.
        checkpoint_write_s: blocking checkpoint write, s.
        restart_overhead_s: time from an interruption to compute again, s.
        cause_names: names of the causes (columns of ``counts``).
        expected_counts: expected interruptions per cause over the window (analytic, not sampled).
        counts: interruptions per run and cause, shape (n_runs, n_causes).
        ettr: useful compute time / wall time per run.
        lost_work_s: compute lost to unexpected interruptions per run, s.
        checkpoint_s: time spent writing checkpoints per run, s.
        restart_s: time spent restarting per run, s.
        job_mttf_h: mean time between unexpected interruptions (analytic), h.
    """

    n_gpus: int
    wall_s: float
    checkpoint_interval_s: float
    checkpoint_write_s: float
    restart_overhead_s: float
    cause_names: tuple[str, ...]
    expected_counts: NDArray[np.float64]
    counts: NDArray[np.int64]
    ettr: NDArray[np.float64]
    lost_work_s: NDArray[np.float64]
    checkpoint_s: NDArray[np.float64]
    restart_s: NDArray[np.float64]
    job_mttf_h: float

    @property
    def n_runs(self) -> int:
        """Number of Monte-Carlo runs."""
        return int(self.ettr.shape[0])

    @property
    def mean_counts(self) -> NDArray[np.float64]:
        """Mean interruptions per cause over the runs."""
        return np.asarray(self.counts.mean(axis=0), dtype=np.float64)

    @property
    def std_counts(self) -> NDArray[np.float64]:
        """Standard deviation of the interruptions per cause over the runs."""
        return np.asarray(self.counts.std(axis=0, ddof=1 if self.n_runs > 1 else 0), dtype=np.float64)

    @property
    def total_interruptions(self) -> NDArray[np.int64]:
        """Interruptions per run (all causes)."""
        return np.asarray(self.counts.sum(axis=1), dtype=np.int64)

    @property
    def ettr_mean(self) -> float:
        """Mean effective training time ratio."""
        return float(self.ettr.mean())

    @property
    def goodput_gpu_h(self) -> float:
        """Mean useful GPU-hours over the window (ETTR x GPUs x wall hours)."""
        return self.ettr_mean * self.n_gpus * self.wall_s / 3600.0


@dataclass(frozen=True, eq=False)
class _Events:
    counts: NDArray[np.int64]  # (n_runs, n_causes)
    run: NDArray[np.int64]  # per event, sorted by (run, time)
    time_s: NDArray[np.float64]
    planned: NDArray[np.bool_]
    prev_s: NDArray[np.float64]  # previous event of the same run, or 0
    has_prev: NDArray[np.bool_]
    last_s: NDArray[np.float64]  # per run: time of its last event, or 0
    run_has_event: NDArray[np.bool_]


def _sample_events(rates_per_h: NDArray[np.float64], wall_s: float, n_runs: int, seed: int) -> _Events:
    rng = np.random.default_rng(seed)
    n_causes = rates_per_h.shape[0]
    counts = rng.poisson(rates_per_h * wall_s / 3600.0, size=(n_runs, n_causes)).astype(np.int64)
    run = np.repeat(np.arange(n_runs, dtype=np.int64), counts.sum(axis=1))
    cause = np.repeat(np.tile(np.arange(n_causes), n_runs), counts.ravel())
    time_s = rng.uniform(0.0, wall_s, size=run.shape[0])
    order = np.lexsort((time_s, run))
    run, cause, time_s = run[order], cause[order], time_s[order]
    has_prev = np.zeros(run.shape[0], dtype=bool)
    has_prev[1:] = run[1:] == run[:-1]
    prev_s = np.where(has_prev, np.roll(time_s, 1), 0.0)
    last_s = np.zeros(n_runs)
    last_s[run] = time_s  # sorted by time within a run, so the last write per run wins
    run_has_event = np.bincount(run, minlength=n_runs) > 0
    return _Events(counts, run, time_s, _PLANNED[cause], prev_s, has_prev, last_s, run_has_event)


def _segment(
    span_s: NDArray[np.float64], restarts: NDArray[np.bool_], tau_s: float, write_s: float, restart_s: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Split segments of wall time into restart, whole checkpoint cycles and the remainder."""
    restart = np.where(restarts, np.minimum(restart_s, span_s), 0.0)
    productive = span_s - restart
    cycle = tau_s + write_s
    k = np.floor(productive / cycle)
    rem = productive - k * cycle
    return restart, k * tau_s, k * write_s + np.maximum(rem - tau_s, 0.0), np.minimum(rem, tau_s)


def _evaluate(
    ev: _Events, wall_s: float, tau_s: float, write_s: float, restart_s: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    n_runs = ev.counts.shape[0]
    # Segments that end in an interruption.
    rst, saved, ckpt, unsaved = _segment(ev.time_s - ev.prev_s, ev.has_prev, tau_s, write_s, restart_s)
    useful_ev = saved + np.where(ev.planned, unsaved, 0.0)
    lost_ev = np.where(ev.planned, 0.0, unsaved)
    # The last segment of every run, up to the end of the window.
    rst_t, saved_t, ckpt_t, unsaved_t = _segment(wall_s - ev.last_s, ev.run_has_event, tau_s, write_s, restart_s)

    def per_run(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.bincount(ev.run, weights=x, minlength=n_runs).astype(np.float64)

    useful = per_run(useful_ev) + saved_t + unsaved_t
    return useful / wall_s, per_run(lost_ev), per_run(ckpt) + ckpt_t, per_run(rst) + rst_t


def _check(n_gpus: int, days: float, write_s: float, restart_s: float, n_runs: int) -> None:
    src = "simulate_job"
    if n_gpus < 1:
        raise InputError(src, "n_gpus", f"{n_gpus} (allowed >= 1)")
    if not (np.isfinite(days) and days > 0.0):
        raise InputError(src, "days", f"{days} (allowed > 0)")
    if not (np.isfinite(write_s) and write_s >= 0.0):
        raise InputError(src, "checkpoint_write_s", f"{write_s} (allowed >= 0)")
    if not (np.isfinite(restart_s) and restart_s >= 0.0):
        raise InputError(src, "restart_overhead_s", f"{restart_s} (allowed >= 0)")
    if n_runs < 1:
        raise InputError(src, "n_runs", f"{n_runs} (allowed >= 1)")


def _check_interval(tau_s: float) -> None:
    if not (np.isfinite(tau_s) and tau_s > 0.0):
        raise InputError("simulate_job", "checkpoint_interval_s", f"{tau_s} (allowed > 0)")


def simulate_job(
    n_gpus: int,
    days: float,
    checkpoint_interval_s: float,
    checkpoint_write_s: float,
    restart_overhead_s: float,
    gpu_temp_c: float | NDArray[np.float64] | None = None,
    seed: int = 0,
    n_runs: int = 200,
    gpus_per_node: int = LLAMA3_GPUS_PER_NODE,
    config: FailureConfig = FailureConfig(),
) -> JobReliability:
    """Monte-Carlo of one training job over ``days`` of wall time.

    Args:
        n_gpus: GPUs in the job (all busy).
        days: wall-time window, days.
        checkpoint_interval_s: useful compute between checkpoints, s.
        checkpoint_write_s: blocking cost of one checkpoint, s.
        restart_overhead_s: time from an interruption until compute resumes, s.
        gpu_temp_c: GPU temperature, C (scalar or per-GPU; default the failure model's reference).
        seed: random seed (same seed, same result; the event sample does not depend on the interval).
        n_runs: Monte-Carlo runs.
        gpus_per_node: GPUs per server.
        config: failure-model settings.
    """
    _check(n_gpus, days, checkpoint_write_s, restart_overhead_s, n_runs)
    _check_interval(checkpoint_interval_s)
    rates = job_failure_rates_per_h(n_gpus, gpus_per_node, gpu_temp_c, config)
    wall_s = days * 86400.0
    ev = _sample_events(rates, wall_s, n_runs, seed)
    ettr, lost, ckpt, rst = _evaluate(ev, wall_s, checkpoint_interval_s, checkpoint_write_s, restart_overhead_s)
    unexpected = float(rates[~_PLANNED].sum())
    return JobReliability(
        n_gpus=n_gpus,
        wall_s=wall_s,
        checkpoint_interval_s=checkpoint_interval_s,
        checkpoint_write_s=checkpoint_write_s,
        restart_overhead_s=restart_overhead_s,
        cause_names=CAUSE_NAMES,
        expected_counts=rates * wall_s / 3600.0,
        counts=ev.counts,
        ettr=ettr,
        lost_work_s=lost,
        checkpoint_s=ckpt,
        restart_s=rst,
        job_mttf_h=float("inf") if unexpected == 0.0 else 1.0 / unexpected,
    )


def _ettr_chunk(
    shared: tuple[_Events, float, NDArray[np.float64], float, float], start: int, stop: int
) -> NDArray[np.float64]:
    """ETTR per run for the intervals ``start:stop`` (the kernel of :func:`sweep_checkpoint_interval`)."""
    ev, wall_s, taus, write_s, restart_s = shared
    return np.stack([_evaluate(ev, wall_s, float(t), write_s, restart_s)[0] for t in taus[start:stop]])


@dataclass(frozen=True, eq=False)
class CheckpointSweep:
    """ETTR as a function of the checkpoint interval.

    Attributes:
        intervals_s: checkpoint intervals tried, s.
        ettr_mean: mean ETTR per interval.
        ettr_std: standard deviation of ETTR over the runs per interval.
        best_interval_s: interval with the highest mean ETTR, s.
        young_daly_s: ``sqrt(2 C / lambda)`` with lambda the job's unexpected-interruption rate, s.
        job_failure_rate_per_s: that lambda, 1/s.
    """

    intervals_s: NDArray[np.float64]
    ettr_mean: NDArray[np.float64]
    ettr_std: NDArray[np.float64]
    best_interval_s: float
    young_daly_s: float
    job_failure_rate_per_s: float


def sweep_checkpoint_interval(
    n_gpus: int,
    days: float,
    checkpoint_write_s: float,
    restart_overhead_s: float,
    intervals_s: NDArray[np.float64] | None = None,
    gpu_temp_c: float | NDArray[np.float64] | None = None,
    seed: int = 0,
    n_runs: int = 200,
    gpus_per_node: int = LLAMA3_GPUS_PER_NODE,
    config: FailureConfig = FailureConfig(),
    ray: bool = False,
    ray_address: str | None = None,
) -> CheckpointSweep:
    """Mean ETTR over checkpoint intervals, on one shared event sample (common random numbers).

    Args:
        n_gpus: GPUs in the job (all busy).
        days: wall-time window, days.
        checkpoint_write_s: blocking cost of one checkpoint, s.
        restart_overhead_s: time from an interruption until compute resumes, s.
        intervals_s: intervals to try, s; default 33 points from 1/4 to 4 times the Young/Daly interval.
        gpu_temp_c: GPU temperature, C (scalar or per-GPU; default the failure model's reference).
        seed: random seed (same seed, same result).
        n_runs: Monte-Carlo runs.
        gpus_per_node: GPUs per server.
        config: failure-model settings.
        ray: evaluate the intervals in chunks as Ray tasks (:func:`twinloop.sweep.chunked.ray_map`) on the same
            event sample (sampled once here, shared through the object store): exactly the local result.
        ray_address: an existing Ray cluster (default: the initialized Ray, or a local one).
    """
    _check(n_gpus, days, checkpoint_write_s, restart_overhead_s, n_runs)
    rates = job_failure_rates_per_h(n_gpus, gpus_per_node, gpu_temp_c, config)
    lam_per_s = float(rates[~_PLANNED].sum()) / 3600.0
    yd = young_daly_interval_s(lam_per_s, checkpoint_write_s)
    taus = yd * np.geomspace(0.25, 4.0, 33) if intervals_s is None else np.asarray(intervals_s, dtype=np.float64)
    for tau in taus:
        _check_interval(float(tau))
    wall_s = days * 86400.0
    ev = _sample_events(rates, wall_s, n_runs, seed)
    shared = (ev, wall_s, taus, checkpoint_write_s, restart_overhead_s)
    if ray:
        from twinloop.sweep.chunked import ray_map

        ettr = np.concatenate(ray_map(_ettr_chunk, len(taus), shared, address=ray_address))
    else:
        ettr = _ettr_chunk(shared, 0, len(taus))
    mean = ettr.mean(axis=1)
    return CheckpointSweep(
        intervals_s=taus,
        ettr_mean=mean,
        ettr_std=ettr.std(axis=1),
        best_interval_s=float(taus[int(np.argmax(mean))]),
        young_daly_s=yd,
        job_failure_rate_per_s=lam_per_s,
    )
