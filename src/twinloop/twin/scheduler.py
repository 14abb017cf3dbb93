"""Scheduler: a FIFO queue with backfill, node-granular placement, admission under the facility power budget.

Placement policies (registry ``PLACEMENT``):

* ``first_fit``: the lowest-numbered free nodes.
* ``power_aware``: free nodes in racks with the most power headroom (PDU rating minus draw) and the coolest
  coolant first — it spreads heat and power, as thermal/power-aware placement (TAPAS) does.

In a hall of several GPU models either policy's order is taken within the models, the job's fastest first
(``ClusterView.node_speed``): a job planned for H100s is not spread over A100s while H100s are free, as a Slurm
job asking for ``--gres=gpu:h100`` or a partition per GPU type would not be. It still runs on a mix of models
when its own is short (a node down), rather than wait.

Admission: a job starts only if the facility's current power plus the job's estimated draw
(``gpus × TDP × requested_tdp_fraction × OVERHEAD``) stays within ``admission_fraction`` of the budget, and
admission is not held. ``OVERHEAD`` (host, conversion and cooling on top of GPU power) is a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import SchedulerSpec
from twinloop.twin.topology import Topology

OVERHEAD = 1.35


@dataclass(frozen=True)
class ClusterView:
    """What placement needs to know about the cluster right now."""

    free_nodes: NDArray[np.int64]
    rack_headroom_w: NDArray[np.float64]
    rack_coolant_c: NDArray[np.float64]
    #: per node of the site, the job's work rate on its GPU model at full clock (None: one model, no preference)
    node_speed: NDArray[np.float64] | None = None


def first_fit(topo: Topology, view: ClusterView, n_nodes: int) -> NDArray[np.int64]:
    """Lowest-numbered free nodes (policies return up to ``n_nodes`` nodes in order of preference)."""
    return view.free_nodes[:n_nodes]


def power_aware(topo: Topology, view: ClusterView, n_nodes: int) -> NDArray[np.int64]:
    """Free nodes in racks with the most headroom and coolest coolant first (ties by node index)."""
    racks = topo.node_rack[view.free_nodes]
    order = np.lexsort((view.free_nodes, view.rack_coolant_c[racks], -view.rack_headroom_w[racks]))
    return view.free_nodes[order][:n_nodes]


def fastest_first(ordered: NDArray[np.int64], node_speed: NDArray[np.float64] | None) -> NDArray[np.int64]:
    """``ordered`` nodes with the job's fastest GPU model first, keeping the policy's order within each model."""
    return ordered if node_speed is None else ordered[np.argsort(-node_speed[ordered], kind="stable")]


PLACEMENT: dict[str, Callable[[Topology, ClusterView, int], NDArray[np.int64]]] = {
    "first_fit": first_fit,
    "power_aware": power_aware,
}


class Scheduler:
    """Queue, placement and admission. Node state: owner job (-1 free), drained, down."""

    def __init__(self, topo: Topology, spec: SchedulerSpec) -> None:
        self.topo = topo
        self.spec = spec
        self.place = PLACEMENT[spec.policy]
        self.reset()

    def reset(self) -> None:
        """Empty queue, all nodes free, admission open."""
        self.queue: list[int] = []
        self.node_owner = np.full(self.topo.n_nodes, -1, dtype=np.int64)
        self.node_drained = np.zeros(self.topo.n_nodes, dtype=bool)
        self.node_down = np.zeros(self.topo.n_nodes, dtype=bool)
        self.admission_held = False

    def submit(self, job: int, front: bool = False) -> None:
        """Queue a job (at the front for restarts)."""
        if job in self.queue:
            return
        if front:
            self.queue.insert(0, job)
        else:
            self.queue.append(job)

    def free_nodes(self) -> NDArray[np.int64]:
        """Nodes that are free, not drained and not down."""
        return np.flatnonzero((self.node_owner < 0) & ~self.node_drained & ~self.node_down)

    def admit(self, est_w: float, facility_w: float, budget_w: float) -> bool:
        """Admission under the facility power budget."""
        return not self.admission_held and facility_w + est_w <= self.spec.admission_fraction * budget_w

    def choose(self, n_gpus: int, view: ClusterView) -> NDArray[np.int64] | None:
        """The nodes placement would give a job of ``n_gpus`` GPUs (enough GPUs); None if they are not available.
        Changes nothing (the loop asks it where a requeued job would land).
        """
        free = view.free_nodes
        gpus = self.topo.node_gpus[free]
        if int(gpus.sum()) < n_gpus:
            return None
        # Uniform GPUs per node is the common case; with mixed nodes take enough in policy order.
        ordered = self.place(self.topo, view, free.size)
        ordered = fastest_first(ordered, view.node_speed)
        need = int(np.searchsorted(np.cumsum(self.topo.node_gpus[ordered]), n_gpus) + 1)
        return np.sort(ordered[:need])

    def try_place(self, job: int, n_gpus: int, view: ClusterView) -> NDArray[np.int64] | None:
        """Nodes for ``job`` (:meth:`choose`), marked as owned; None if they are not available."""
        nodes = self.choose(n_gpus, view)
        if nodes is not None:
            self.node_owner[nodes] = job
        return nodes

    def release(self, nodes: NDArray[np.int64]) -> None:
        """Free the nodes of a finished or interrupted job."""
        self.node_owner[nodes] = -1
