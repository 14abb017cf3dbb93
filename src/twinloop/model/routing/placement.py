"""Placement of routed experts (and replicas of hot ones) on expert-parallel ranks and nodes.

A placement is a list of expert instances, each on one rank; a token routed to an expert goes to the
instance on its own node when there is one, otherwise to one of the instances chosen by token index
(a fixed spread, so replicas split remote traffic evenly). Two variants:

* ``contiguous``: expert ``e`` on rank ``e // (n_experts / ep)``, no replicas (Megatron/DeepSpeed default).
* ``affinity``: a greedy clustering on the co-activation matrix (how often two experts serve the same
  token) and the per-expert load, measured on a warm-up sample: first the ``replica_slots_per_rank · ep``
  spare slots (the memory budget) go to the hottest experts, one at a time by load per instance
  (DeepSeek-V3's redundant experts); then experts, heaviest first, join the node whose experts they are
  most co-activated with among the nodes with a free slot and load under the mean (a token whose experts
  share a node crosses the network once); inside a node, instances go heaviest first to the least
  loaded rank with a free slot. A greedy heuristic, not an optimum; its gain is measured, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

PLACEMENTS = ("contiguous", "affinity")


@dataclass(frozen=True)
class Placement:
    """Expert instances on ranks.

    Attributes:
        name: the variant; n_experts / ep_ranks / ranks_per_node: the shape.
        instance_expert / instance_rank: expert and rank of each instance, shape (n_instances,); the first
            ``n_experts`` instances are the primaries, in expert order.
        local_rank: (n_experts, n_nodes) rank of the expert's instance on that node, -1 where none.
        replicas: (n_experts, max_replicas) ranks of each expert's instances, padded by repeating them.
        n_replicas: instances per expert, shape (n_experts,).
    """

    name: str
    n_experts: int
    ep_ranks: int
    ranks_per_node: int
    instance_expert: I64
    instance_rank: I64
    local_rank: I64
    replicas: I64
    n_replicas: I64

    @property
    def n_nodes(self) -> int:
        """Nodes the EP group spans."""
        return self.ep_ranks // self.ranks_per_node

    @property
    def primary_node(self) -> I64:
        """The node of each expert's primary instance, shape (n_experts,)."""
        return np.asarray(self.instance_rank[: self.n_experts] // self.ranks_per_node, dtype=np.int64)

    def hosts(self) -> NDArray[np.bool_]:
        """(n_experts, n_nodes): whether the node holds an instance of the expert."""
        return np.asarray(self.local_rank >= 0)

    def dest_rank(self, experts: I64, source_rank: I64) -> I64:
        """Rank serving each (token, slot) copy: the instance on the source's node if any, else a spread."""
        e = np.maximum(experts, 0)
        node = (source_rank // self.ranks_per_node)[:, None]
        local = self.local_rank[e, node]
        token = np.arange(experts.shape[0])[:, None]
        spread = self.replicas[e, token % self.n_replicas[e]]
        return np.asarray(np.where(local >= 0, local, spread), dtype=np.int64)


def _validate(n_experts: int, ep_ranks: int, ranks_per_node: int, replica_slots_per_rank: int) -> None:
    if ep_ranks < 1 or n_experts % ep_ranks:
        raise InputError("--ep", "", f"must divide the {n_experts} routed experts, got {ep_ranks}")
    if ranks_per_node < 1 or ep_ranks % ranks_per_node:
        raise InputError("ranks_per_node", "", f"must divide ep {ep_ranks}, got {ranks_per_node}")
    if replica_slots_per_rank < 0:
        raise InputError("replica_slots_per_rank", "", f"must be >= 0, got {replica_slots_per_rank}")


def _build(name: str, n_experts: int, ep: int, per_node: int, expert: I64, rank: I64) -> Placement:
    n_nodes = ep // per_node
    local = np.full((n_experts, n_nodes), -1, dtype=np.int64)
    local[expert[::-1], rank[::-1] // per_node] = rank[::-1]  # primaries written last win on a shared node
    n_rep = np.bincount(expert, minlength=n_experts).astype(np.int64)
    width = int(n_rep.max())
    order = np.argsort(expert, kind="stable")
    starts = np.cumsum(n_rep) - n_rep
    reps = np.empty((n_experts, width), dtype=np.int64)
    for j in range(width):  # pad each row by cycling its own instances
        reps[:, j] = rank[order][starts + j % n_rep]
    return Placement(name, n_experts, ep, per_node, expert, rank, local, reps, n_rep)


def contiguous(n_experts: int, ep_ranks: int, ranks_per_node: int) -> Placement:
    """Expert ``e`` on rank ``e // (n_experts / ep_ranks)``, no replicas."""
    _validate(n_experts, ep_ranks, ranks_per_node, 0)
    expert = np.arange(n_experts, dtype=np.int64)
    return _build("contiguous", n_experts, ep_ranks, ranks_per_node, expert, expert // (n_experts // ep_ranks))


def coactivation(experts: I64, n_experts: int) -> tuple[F64, F64]:
    """(co-activation matrix, load) of routed choices ``experts`` (tokens × k, -1 = empty): entry (a, b)
    counts tokens routed to both a and b (diagonal zero); load counts copies per expert.
    """
    t = experts.shape[0]
    onehot = np.zeros((t, n_experts), dtype=np.float32)
    valid = experts >= 0
    onehot[np.nonzero(valid)[0], experts[valid]] = 1.0
    co = (onehot.T @ onehot).astype(np.float64)
    load = np.diag(co).copy()
    np.fill_diagonal(co, 0.0)
    return co, load


def affinity(co: F64, load: F64, ep_ranks: int, ranks_per_node: int, replica_slots_per_rank: int = 1) -> Placement:
    """Affinity-aware placement from a co-activation matrix and per-expert load (see the module docstring).

    Args:
        co: (n_experts, n_experts) co-activation counts.
        load: copies per expert.
        ep_ranks: GPUs in the EP group.
        ranks_per_node: GPUs per node.
        replica_slots_per_rank: spare expert slots per rank for replicas of hot experts (memory budget).
    """
    n_experts = load.size
    _validate(n_experts, ep_ranks, ranks_per_node, replica_slots_per_rank)
    n_nodes = ep_ranks // ranks_per_node
    per_rank = n_experts // ep_ranks
    slots_rank = per_rank + replica_slots_per_rank
    load = np.maximum(np.asarray(load, dtype=np.float64), 1e-9)

    # 1. replicas: each spare slot to the expert with the highest load per instance (≤ one per node)
    n_rep = np.ones(n_experts, dtype=np.int64)
    for _ in range(replica_slots_per_rank * ep_ranks):
        per_inst = np.where(n_rep < n_nodes, load / n_rep, -1.0)
        best = int(per_inst.argmax())
        if per_inst[best] < 0:
            break
        n_rep[best] += 1
    inst_expert = np.repeat(np.arange(n_experts), n_rep)
    inst_load = load[inst_expert] / n_rep[inst_expert]

    # 2. instances to nodes, heaviest first, by co-activation with what the node already holds
    slots_node = slots_rank * ranks_per_node
    node_of = np.full(inst_expert.size, -1, dtype=np.int64)
    node_used = np.zeros(n_nodes, dtype=np.int64)
    node_load = np.zeros(n_nodes)
    node_has = np.zeros((n_nodes, n_experts), dtype=bool)
    target = inst_load.sum() / n_nodes
    for i in np.argsort(-inst_load, kind="stable"):
        e = inst_expert[i]
        free = (node_used < slots_node) & ~node_has[:, e]
        if not free.any():
            free = node_used < slots_node
        light = free & (node_load + inst_load[i] <= target * 1.05)
        pool = light if light.any() else free
        affinity_to = node_has.astype(np.float64) @ co[e]
        score = np.where(pool, affinity_to - 1e-6 * node_load, -np.inf)
        n = int(score.argmax())
        node_of[i], node_has[n, e] = n, True
        node_used[n] += 1
        node_load[n] += inst_load[i]

    # 3. inside each node: heaviest instance to the least loaded rank with a free slot (LPT)
    rank_of = np.empty(inst_expert.size, dtype=np.int64)
    rank_used = np.zeros(ep_ranks, dtype=np.int64)
    rank_load = np.zeros(ep_ranks)
    for i in np.argsort(-inst_load, kind="stable"):
        ranks = np.arange(node_of[i] * ranks_per_node, (node_of[i] + 1) * ranks_per_node)
        ok = ranks[rank_used[ranks] < slots_rank]
        r = int(ok[rank_load[ok].argmin()])
        rank_of[i] = r
        rank_used[r] += 1
        rank_load[r] += inst_load[i]

    # primaries first, in expert order (the first instance of each expert)
    first = np.cumsum(n_rep) - n_rep
    rest = np.setdiff1d(np.arange(inst_expert.size), first)
    order = np.concatenate([first, rest])
    return _build("affinity", n_experts, ep_ranks, ranks_per_node, inst_expert[order], rank_of[order])
