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

from twinloop.twin.dvfs import hbm_split_w
from twinloop.twin.scenario import PowerPeakSpec

if TYPE_CHECKING:
    from twinloop.twin.jobs import Job
    from twinloop.twin.state import GpuPhysics
    from twinloop.twin.topology import Topology

F32 = np.float32


class PowerPeaks:
    """Per-step instantaneous node power peaks for a twin (held by the twin; ``reset`` with each run).

    When any job swings this step, the peak is computed in about twenty in-place float32 passes (gathers from per
    (slot, kind) tables, like the DVFS step) over the span of GPUs holding the swinging jobs: the tables are zero
    for slots that do not swing, so other GPUs in the span add nothing. Steps where no job swings cost one pass
    over the nodes (the ripple).
    """

    def __init__(self, spec: PowerPeakSpec, physics: GpuPhysics, topo: Topology) -> None:
        self.spec = spec
        self.physics = physics
        self.topo = topo
        n = topo.n_gpus
        self.rng = np.random.default_rng(0)
        self._prev_act: dict[int, NDArray[np.float64]] = {}
        self._active = False
        self._nodes = (0, 0)
        self._span = (0, 0)  # GPU index range [lo, hi) holding every swinging job's GPUs, on node boundaries
        self._tables: tuple[NDArray[np.float32], ...] = ()
        self._p_prev = np.zeros(n, dtype=F32)
        self._b1 = np.zeros(n, dtype=F32)
        self._b2 = np.zeros(n, dtype=F32)
        self._b3 = np.zeros(n, dtype=F32)

    def nbytes(self) -> int:
        """Bytes of the per-GPU buffers."""
        return sum(b.nbytes for b in (self._p_prev, self._b1, self._b2, self._b3))

    def reset(self, rng: np.random.Generator) -> None:
        """Forget the previous step; draw overshoots from ``rng`` from now on."""
        self.rng = rng
        self._prev_act = {}
        self._active = False

    def plan(
        self,
        jobs: list[Job],
        slot_act: NDArray[np.float64],
        slot_high: NDArray[np.float64],
        slot_low: NDArray[np.float64],
    ) -> None:
        """After the step's activities: find the jobs that swing (activity changed since the last step, or high ≠ low
        within the step), draw each one's overshoot fraction, and build the per (slot, kind) tables.
        """
        lo_k, hi_k = self.spec.overshoot_fraction
        k_slot = np.zeros(slot_act.shape[0])
        swinging = np.zeros(slot_act.shape[0], dtype=bool)
        lo_gpu, hi_gpu = self.topo.n_gpus, 0
        for job in jobs:
            sl = slice(job.slot0, job.slot0 + job.n_slots)
            act = slot_act[sl]
            prev = self._prev_act.get(job.index)
            swings = not np.array_equal(slot_high[sl], slot_low[sl])
            changed = prev is None or not np.array_equal(prev, act)
            self._prev_act[job.index] = act.copy()
            if job.gpus.size and (swings or changed):
                k_slot[sl] = self.rng.uniform(lo_k, hi_k)
                swinging[sl] = True
                lo_gpu, hi_gpu = min(lo_gpu, int(job.gpus.min())), max(hi_gpu, int(job.gpus.max()) + 1)
        self._active = bool(swinging.any())
        if not self._active:
            return
        node = self.topo.gpu_node
        n_lo, n_hi = int(node[lo_gpu]), int(node[hi_gpu - 1]) + 1
        starts = self.topo.node_start
        self._nodes = (n_lo, n_hi)
        self._span = (int(starts[n_lo]), int(starts[n_hi]) if n_hi < starts.shape[0] else self.topo.n_gpus)
        kc = self.physics.kc
        n_kinds = kc.mem_per_activity_w.shape[0]
        clocked = kc.clocked_per_activity_w.T.astype(np.float64)  # (2, kinds)
        on = swinging[:, None]
        up, down = (slot_high - slot_act) * on, (slot_act - slot_low) * on
        # HBM power per phase as the DVFS step has it (fixed + clock-following parts), as differences of phases; the
        # step's mean is the DVFS tables' own split (GpuPhysics.group_tables), the two phases one call
        n = slot_act.shape[0]
        m0, mx = hbm_split_w(np.concatenate((slot_high, slot_low)), kc)
        m0_hi, m0_lo, mx_hi, mx_lo = m0[:n], m0[n:], mx[:n], mx[n:]
        m0_act, mx_act = self.physics.slot_hbm_w
        self._tables = tuple(
            t.astype(F32).reshape(-1)
            for t in (
                up[:, :2] @ clocked,
                (m0_hi - m0_act) * on,
                (mx_hi - mx_act) * on,
                down[:, :2] @ clocked,
                (m0_act - m0_lo) * on,
                (mx_act - mx_lo) * on,
                np.repeat(k_slot[:, None], n_kinds, axis=1),
            )
        )

    def capture(self) -> None:
        """Before the step's power is computed: keep the previous step's mean power (when a job swings)."""
        if self._active:
            lo, hi = self._span
            np.copyto(self._p_prev[lo:hi], self.physics.gpus.power_w[lo:hi])

    def node_peak_w(self, node_dc_w: NDArray[np.float64], gpu_node_w: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each node's instantaneous peak DC draw this step (W), from its mean draw and its GPUs' mean power."""
        peak = node_dc_w + self.spec.ripple_fraction * gpu_node_w
        if not self._active:
            return peak
        # Only the span of GPUs that holds the swinging jobs (every other GPU adds nothing): views, no copies.
        lo, hi = self._span
        n_lo, n_hi = self._nodes
        a = self.physics.gpus
        gid, p, g, limit = a.gid[lo:hi], a.power_w[lo:hi], a.g[lo:hi], a.limit_w[lo:hi]
        f = None if self.physics.dyn_factor is None else self.physics.dyn_factor[lo:hi]
        d_up, m_up, mx_up, d_down, m_down, mx_down, k = self._tables
        x = a.clock_x[lo:hi]  # this step's relative clock (GpuPhysics.finish), for the clock-following HBM power
        high, drop, t, prev = self._b1[lo:hi], self._b2[lo:hi], self._b3[lo:hi], self._p_prev[lo:hi]
        # busy phase above the mean, held to the limit: min(D_up·g·f + M_up, max(limit − P, 0))
        np.take(d_up, gid, out=high, mode="clip")
        np.multiply(high, g, out=high)
        if f is not None:
            np.multiply(high, f, out=high)
        np.take(m_up, gid, out=t, mode="clip")
        np.add(high, t, out=high)
        np.take(mx_up, gid, out=t, mode="clip")
        np.multiply(t, x, out=t)
        np.add(high, t, out=high)
        np.subtract(limit, p, out=t)
        np.maximum(t, 0.0, out=t)
        np.minimum(high, t, out=high)
        # the rise into it: from the idlest phase or from the previous step, whichever is lower
        np.take(d_down, gid, out=drop, mode="clip")
        np.multiply(drop, g, out=drop)
        if f is not None:
            np.multiply(drop, f, out=drop)
        np.take(m_down, gid, out=t, mode="clip")
        np.add(drop, t, out=drop)
        np.take(mx_down, gid, out=t, mode="clip")
        np.multiply(t, x, out=t)
        np.add(drop, t, out=drop)
        np.subtract(p, prev, out=t)
        np.maximum(drop, t, out=drop)
        np.add(drop, high, out=drop)
        np.maximum(drop, 0.0, out=drop)
        np.take(k, gid, out=t, mode="clip")
        np.multiply(drop, t, out=drop)
        np.maximum(high, 0.0, out=high)
        np.add(high, drop, out=high)
        peak[n_lo:n_hi] += np.add.reduceat(high, self.topo.node_start[n_lo:n_hi] - lo).astype(np.float64)
        return peak
