"""Instantaneous GPU power inside a step: what PSUs and the power chain see, while telemetry shows 1 s means.

The twin's per-GPU ``power_w`` is the step's mean (NVML's ``power.draw`` on Hopper is a 1 s moving average).
Inside the step the draw is higher at two moments, both measured on an H100 (``shared/data/h100``, 20 Hz NVML
``POWER_INSTANT``; figures and the script that reproduces them in ``docs/sections/calibration-twin.md``):

* **load steps**: when a GPU's load rises (a job launching, a training iteration's compute after its collective
  or checkpoint, a serving replica's prefill burst after decode), the instant power overshoots the new steady
  power for a fraction of a second, before the power controller catches it: to 767-890 W on
  124 → 700 W steps, i.e. ``overshoot_fraction`` 0.14-0.34 of the step (drawn per job and step, uniformly);
* **ripple**: at steady load the 1 s maximum of the instant power sits ``ripple_fraction`` (median 4 % for
  GEMMs, 7 % for training) above the 1 s mean.

Per GPU that swings this step: ``peak = P_high + k·max(0, P_high − min(P_low, P_previous))``, where ``P_high``
and ``P_low`` are the power of the step's busiest and idlest phase at the GPU's clock (:meth:`Job.activity_span`;
``P_high`` held to the power limit, as the power controller acts within ~100 ms) and ``P_previous`` the previous
step's mean. A synchronous job's GPUs swing together, so their peaks add: each
node's peak is the sum of its GPUs' peaks plus the ripple, and the facility sees the sum over nodes (an upper
bound for serving replicas, whose bursts need not align). Only GPUs of jobs whose activity changed or swings
within the step are computed (O(affected GPUs)); the others' peak is their mean plus the ripple.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import PowerPeakSpec

if TYPE_CHECKING:
    from twinloop.twin.jobs import Job
    from twinloop.twin.state import GpuPhysics
    from twinloop.twin.topology import Topology

F32 = np.float32


class PowerPeaks:
    """Per-step instantaneous node power peaks for a twin (held by the twin; ``reset`` with each run)."""

    def __init__(self, spec: PowerPeakSpec, physics: GpuPhysics, topo: Topology) -> None:
        self.spec = spec
        self.physics = physics
        self.topo = topo
        self.rng = np.random.default_rng(0)
        self._prev_act: dict[int, NDArray[np.float64]] = {}
        self._idx = np.zeros(0, dtype=np.intp)
        self._k = np.zeros(0, dtype=F32)
        self._p_prev = np.zeros(0, dtype=F32)
        self._tables: tuple[NDArray[np.float32], ...] = ()

    def reset(self, rng: np.random.Generator) -> None:
        """Forget the previous step; draw overshoots from ``rng`` from now on."""
        self.rng = rng
        self._prev_act = {}
        self._idx = np.zeros(0, dtype=np.intp)

    def plan(
        self,
        jobs: list[Job],
        slot_act: NDArray[np.float64],
        slot_high: NDArray[np.float64],
        slot_low: NDArray[np.float64],
    ) -> None:
        """After the step's activities: pick the GPUs that swing (job activity changed, or high ≠ low within the
        step), draw each such job's overshoot fraction, and build the per (slot, kind) swing tables."""
        idx, ks = [], []
        lo_k, hi_k = self.spec.overshoot_fraction
        for job in jobs:
            sl = slice(job.slot0, job.slot0 + job.n_slots)
            act = slot_act[sl]
            prev = self._prev_act.get(job.index)
            swings = not np.array_equal(slot_high[sl], slot_low[sl])
            changed = prev is None or not np.array_equal(prev, act)
            self._prev_act[job.index] = act.copy()
            if job.gpus.size and (swings or changed):
                idx.append(job.gpus)
                ks.append(np.full(job.gpus.size, self.rng.uniform(lo_k, hi_k), dtype=F32))
        if not idx:
            self._idx = np.zeros(0, dtype=np.intp)
            return
        self._idx = np.concatenate(idx).astype(np.intp)
        self._k = np.concatenate(ks)
        kc = self.physics.kc
        clocked = kc.clocked_per_activity_w.T.astype(np.float64)  # (2, kinds)
        mem = kc.mem_per_activity_w[None, :].astype(np.float64)
        up, down = slot_high - slot_act, slot_act - slot_low
        self._tables = tuple(
            t.astype(F32).reshape(-1)
            for t in (up[:, :2] @ clocked, up[:, 2:3] * mem, down[:, :2] @ clocked, down[:, 2:3] * mem)
        )

    def capture(self) -> None:
        """Before the step's power is computed: keep the swinging GPUs' previous mean power."""
        if self._idx.size:
            self._p_prev = self.physics.gpus.power_w[self._idx]

    def node_peak_w(self, node_dc_w: NDArray[np.float64], gpu_node_w: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each node's instantaneous peak DC draw this step (W), from its mean draw and its GPUs' mean power."""
        peak = node_dc_w + self.spec.ripple_fraction * gpu_node_w
        idx = self._idx
        if not idx.size:
            return peak
        a = self.physics.gpus
        gid = a.gid[idx]
        g = a.g[idx]
        if self.physics.dyn_factor is not None:
            g = g * self.physics.dyn_factor[idx]
        p = a.power_w[idx]
        d_up, m_up, d_down, m_down = self._tables
        # The busy phase runs at this step's clock, but the power controller (~100 ms) holds it to the limit:
        # above the limit is only the overshoot.
        high = np.minimum(d_up[gid] * g + m_up[gid], np.maximum(a.limit_w[idx] - p, 0.0))
        drop = d_down[gid] * g + m_down[gid]
        rise = high + np.maximum(drop, p - self._p_prev)
        extra = (np.maximum(high, 0.0) + self._k * np.maximum(rise, 0.0)) * (p > 0)
        return peak + np.bincount(self.topo.gpu_node[idx], weights=extra, minlength=peak.shape[0])
