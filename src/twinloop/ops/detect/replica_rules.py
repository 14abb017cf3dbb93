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

Thresholds are guesses, not fitted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.job_rules import StragglerRule, group_median
from twinloop.ops.detect.rules import F64, RANK_STEP_TIME, BoolArr, RuleFrame


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
