"""A serving fleet's slow replica: its ranks' decode steps against the fleet's (issue 14).

A serving fleet's replicas run independently behind a router: nobody waits for the slowest, and their loads differ
second by second, so the synchronous job's straggler rules do not apply to them
(:meth:`~twinloop.ops.detect.pipeline.DetectionPipeline.replica_job`). A GPU that slows its replica still shows: the
replica's time per output token rises (a serving engine's per-instance metric). The twin gives each rank's decode
step (``TWINLOOP_FI_RANK_STEP_TIME``, as a training job's ranks give theirs: the step at its replica's load, at the
rank's own speed), and :class:`ReplicaStragglerRule` compares each with the fleet's other ranks of the same GPU
model: one lastingly slower by ``min_deficit`` and ``z_threshold`` robust sigmas is the fleet's straggler. The rank
that is slow on its own names the GPU; a replica slow on every rank (its host, its node) fires on all of them, and
the grouping roots that incident at their node.

Normal spread is no straggler: a replica's decode step grows with its batch, by up to the KV share of a full batch
(the twin's guess: a full batch steps in twice the time of an empty one). The fleet's router spreads requests
evenly, so over the ``smooth_half_life_s`` (30 s) the replicas' loads, and their steps, differ by ~15 % at most on
the packaged Azure trace (25 TP-8 replicas at 30× its rate: the largest smoothed decode load 1.4× the median, its
step 1.13× the median's); ``min_deficit`` 25 % lies above that: a GPU at 0.8 of its speed sits at it, one at 0.7
(the packaged straggler fault's) 43 % above its peers. A replica the loop capped (or an operator: its enforced limit
below its peers') is expected to be slow, and a replica out of service (its node drained) reports no steps: neither
is flagged, and neither counts as a peer.

A serving fleet's hung replica (:class:`ReplicaHangRule`): one tensor-parallel group's collective stuck (a bad link,
one GPU's process wedged) while the other replicas serve on. Its GPUs spin in the collective: busy (a kernel always
resident, ``DCGM_FI_DEV_GPU_UTIL`` high) with no tensor work, where a serving rank that keeps its SMs that busy runs
matmuls (the twin: tensor activity at least a ninth of SM activity in decode, more in prefill; a healthy TP-8
replica at 40 % util runs its tensor pipes >= 2 % of the time). A replica out of service (drained, its node down)
idles, and one loading its model barely runs kernels (the twin: 20 % util): neither spins. The rule fires on a fleet
GPU that has spun for ``min_stall_s`` (15 s, the job hang rule's floor) of wall time, measured from its last sample
that did not spin, so a 5 s cadence fires when a 1 s one does, while its fleet reports tokens/s > 0 (others serve).
Its firing GPUs group into their node's incident (a replica is its node's GPUs, or half of them). When every
replica hangs the fleet serves nothing: this rule is silent and the job's own hang rule
(:class:`~twinloop.ops.detect.job_rules.HangRule`) fires for the whole fleet.

Thresholds are guesses, not fitted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.job_rules import StragglerRule, group_median
from twinloop.ops.detect.rules import F64, JOB_TOKENS, RANK_STEP_TIME, TENSOR, BoolArr, Rule, RuleFrame
from twinloop.ops.events import EventClass
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_UTIL

UTIL = DCGM_FI_DEV_GPU_UTIL


class ReplicaStragglerRule(StragglerRule):
    """A serving fleet's rank lastingly slower than the fleet's others of its GPU model (see the module docstring).

    :meth:`update_fleet` judges only the GPUs of ``fleet`` (the serving fleets' GPUs); the others are no peers.
    """

    name = "replica_straggler"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("metric", RANK_STEP_TIME)
        kwargs.setdefault("lower_is_slower", False)
        kwargs.setdefault("z_threshold", 3.0)
        kwargs.setdefault("min_deficit", 0.25)
        kwargs.setdefault("smooth_half_life_s", 30.0)
        kwargs.setdefault("persistence_s", 60.0)
        super().__init__(**kwargs)

    def update_fleet(self, frame: RuleFrame, fleet: BoolArr) -> tuple[BoolArr, F64]:
        """:meth:`update` over the GPUs of ``fleet`` only (the rest as if in no job).

        A rank that reports no step (its replica out of service, its node drained) is no longer judged: it stops
        firing (its incident can close) and its smoothing starts afresh when it serves again.
        """
        fired, score = self.update(dataclasses.replace(frame, job_slot=np.where(fleet, frame.job_slot, -1)))
        x = frame.gpu.get(self.metric)
        if x is None or self._m is None:
            return fired, score
        idle = ~np.isfinite(x)
        self._m[idle] = np.nan
        self._persist.run[idle] = 0
        return fired & ~idle, np.where(idle, 0.0, score)

    def _job_loss(self, m: F64, group: NDArray[np.int64], n_groups: int, frame: RuleFrame) -> F64:
        """What each rank costs its fleet at capacity: its deficit against the fleet's median, as one GPU's share of
        the fleet (a lower bound: its replica's other ranks wait for it too). A fleet that serves all it is asked
        loses latency, not throughput.
        """
        med, count = group_median(m, group, n_groups)
        safe = np.maximum(group, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            deficit = 1.0 - med[safe] / m
            loss = deficit / np.maximum(count[safe], 1)
        return np.where((group >= 0) & np.isfinite(loss), np.clip(loss, 0.0, 1.0), 0.0)


class ReplicaHangRule(Rule):
    """A serving fleet's GPU spinning (busy, no tensor work) for ``min_stall_s`` while its fleet serves (see the
    module docstring); per GPU. :meth:`update_fleet` judges only the fleet GPUs.
    """

    name = "replica_hang"
    event_class = EventClass.JOB_HANG

    def __init__(self, min_stall_s: float = 15.0, busy_util: float = 40.0, spin_tensor: float = 0.01) -> None:
        super().__init__()
        self.min_stall_s = min_stall_s
        self.busy_util = busy_util
        self.spin_tensor = spin_tensor
        self._ok_ts: F64 = np.zeros(0)

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """Every GPU in a job judged as a fleet GPU (use :meth:`update_fleet` for a mixed hall)."""
        return self.update_fleet(frame, frame.job_slot >= 0)

    def update_fleet(self, frame: RuleFrame, fleet: BoolArr) -> tuple[BoolArr, F64]:
        """Fire on ``fleet`` GPUs spinning for ``min_stall_s`` while their job serves tokens; the score is the time
        spun over ``min_stall_s``.
        """
        n = frame.n_gpus
        if self._ok_ts.shape[0] != n:
            self._ok_ts = np.full(n, np.nan)
        util, tensor = frame.gpu.get(UTIL), frame.gpu.get(TENSOR)
        tokens = frame.job.get(JOB_TOKENS)
        if util is None or tensor is None or tokens is None or frame.n_slots == 0:
            return np.zeros(n, dtype=bool), np.zeros(n)
        with np.errstate(invalid="ignore"):
            spinning = fleet & (util >= self.busy_util) & (tensor < self.spin_tensor)
        seen = np.isfinite(util) & np.isfinite(tensor)
        # The stall clock: the last sample at which the GPU did not spin (a GPU first seen spinning starts it).
        self._ok_ts = np.where(seen & (~spinning | np.isnan(self._ok_ts)), frame.ts, self._ok_ts)
        self._ok_ts[~fleet] = np.nan
        slot = np.maximum(frame.job_slot, 0)
        with np.errstate(invalid="ignore"):
            serving = (frame.job_slot >= 0) & (tokens[np.minimum(slot, tokens.shape[0] - 1)] > 0)
        spun_s = np.where(spinning, frame.ts - self._ok_ts, 0.0)
        fired = spinning & serving & (spun_s >= self.min_stall_s)
        return fired, np.where(np.isfinite(spun_s), spun_s / self.min_stall_s, 0.0)
