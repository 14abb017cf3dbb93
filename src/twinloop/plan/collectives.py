"""α–β cost of collective operations across link tiers (NVLink inside a node, the network between nodes).

Every function works on plain floats or NumPy arrays (broadcasting), so the planner's search evaluates
thousands of configurations at once. Conventions:

* ``size_bytes`` is the *full* logical buffer: the tensor being all-reduced, the concatenation an
  all-gather produces (= the input a reduce-scatter consumes), or one rank's whole all-to-all send buffer.
* ``n`` is the number of ranks in the group; ``n == 1`` costs nothing.
* A :class:`LinkTier` is one hop class with its per-direction bandwidth β⁻¹ (bytes/s), the start-up
  latency α (s) of one message step, and an achievable-bandwidth ``efficiency`` (0..1] (what NCCL
  reaches of the wire rate; see :mod:`twinloop.plan.efficiency`).

Algorithms (the textbook α–β costs; Thakur, Rabenseifner & Gropp 2005; NCCL's ring and tree):

* ring all-reduce:      ``2(n-1)·α + 2(n-1)/n · S/B``
* tree all-reduce:      ``2·⌈log2 n⌉·α + 2·S/B`` (pipelined double binary tree: bandwidth term ≈ 2S/B,
  latency logarithmic, the better choice for small messages and many ranks)
* reduce-scatter / all-gather (ring): ``(n-1)·α + (n-1)/n · S/B``
* all-to-all (pairwise): ``(n-1)·α + (n-1)/n · S/B``
* hierarchical (two-tier) all-reduce over ``n`` ranks with ``k`` per node: reduce-scatter inside the node
  (k ranks, NVLink), all-reduce of ``S/k`` across the ``n/k`` nodes (each GPU on its own NIC, all k in
  parallel, best of ring and tree), all-gather inside the node; or a flat network all-reduce when cheaper.
  Reduce-scatter and all-gather split the same way. A two-tier all-to-all sends ``(k-1)/n`` of the buffer
  over NVLink and ``(n-k)/n`` over the network at the same time, so it costs the slower of the two.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from twinloop.plan.topology import DEFAULT_SCALEOUT as DEFAULT_SCALEOUT
from twinloop.plan.topology import DEFAULT_SCALEOUT_BY_SCALEUP as DEFAULT_SCALEOUT_BY_SCALEUP
from twinloop.plan.topology import LinkTier as LinkTier
from twinloop.plan.topology import Num
from twinloop.plan.topology import Topology as Topology
from twinloop.plan.topology import as_num as _as
from twinloop.plan.topology import default_topology as default_topology


def _steps(n: Num) -> NDArray[np.float64]:
    return np.maximum(np.asarray(n, dtype=np.float64), 1.0)


def ring_all_reduce_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """Ring all-reduce of ``size_bytes`` over ``n`` ranks: ``2(n-1)α + 2(n-1)/n·S/B`` seconds."""
    nn = _steps(n)
    t = 2 * (nn - 1) * link.latency_s + 2 * (nn - 1) / nn * np.asarray(size_bytes) / link.effective_bytes_per_s
    return _as(t, size_bytes, n)


def tree_all_reduce_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """Pipelined (double binary) tree all-reduce: ``2⌈log2 n⌉α + 2S/B`` seconds (0 when n == 1)."""
    nn = _steps(n)
    t = np.where(
        nn > 1, 2 * np.ceil(np.log2(nn)) * link.latency_s + 2 * np.asarray(size_bytes) / link.effective_bytes_per_s, 0.0
    )
    return _as(t, size_bytes, n)


def all_reduce_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """All-reduce on one tier with the faster of ring and tree (as NCCL's tuner picks)."""
    t = np.minimum(ring_all_reduce_s(size_bytes, n, link), tree_all_reduce_s(size_bytes, n, link))
    return _as(t, size_bytes, n)


def reduce_scatter_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """Ring reduce-scatter of a ``size_bytes`` input into ``n`` shards: ``(n-1)α + (n-1)/n·S/B`` seconds."""
    nn = _steps(n)
    t = (nn - 1) * link.latency_s + (nn - 1) / nn * np.asarray(size_bytes) / link.effective_bytes_per_s
    return _as(t, size_bytes, n)


def all_gather_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """Ring all-gather producing ``size_bytes`` from ``n`` shards (same cost as reduce-scatter)."""
    return reduce_scatter_s(size_bytes, n, link)


def all_to_all_s(size_bytes: Num, n: Num, link: LinkTier) -> Num:
    """Pairwise all-to-all; ``size_bytes`` is one rank's whole send buffer: ``(n-1)α + (n-1)/n·S/B``."""
    return reduce_scatter_s(size_bytes, n, link)


def hierarchical_all_reduce_s(size_bytes: Num, n: Num, ranks_per_node: Num, topo: Topology) -> Num:
    """Two-tier all-reduce: intra-node reduce-scatter, inter-node all-reduce of ``S/k``, intra all-gather.

    With ``ranks_per_node == n`` it is a plain NVLink all-reduce; with ``ranks_per_node == 1`` a plain
    network all-reduce (best of ring and tree). Across nodes the cheaper of the two-tier algorithm and a flat
    network all-reduce is taken (for small messages the extra intra-node latency steps do not pay off).
    """
    if topo.algorithms == "nccl":
        from twinloop.plan import nccl

        return _as(nccl.all_reduce_s(size_bytes, n, ranks_per_node, topo), size_bytes, n, ranks_per_node)
    nn, k = _steps(n), np.clip(_steps(ranks_per_node), 1, _steps(n))
    s = np.asarray(size_bytes, dtype=np.float64)
    intra_only = all_reduce_s(s, nn, topo.intra)
    nodes = np.maximum(nn / k, 1.0)
    two_tier = (
        reduce_scatter_s(s, k, topo.intra) + all_reduce_s(s / k, nodes, topo.inter) + all_gather_s(s, k, topo.intra)
    )
    flat = all_reduce_s(s, nn, topo.inter)
    t = np.where(k >= nn, intra_only, np.minimum(two_tier, flat))
    return _as(t, size_bytes, n, ranks_per_node)


def hierarchical_reduce_scatter_s(size_bytes: Num, n: Num, ranks_per_node: Num, topo: Topology) -> Num:
    """Two-tier reduce-scatter (or all-gather, same cost): intra-node step over ``k``, then ``S/k`` across nodes."""
    if topo.algorithms == "nccl":
        from twinloop.plan import nccl

        return _as(nccl.reduce_scatter_s(size_bytes, n, ranks_per_node, topo), size_bytes, n, ranks_per_node)
    nn, k = _steps(n), np.clip(_steps(ranks_per_node), 1, _steps(n))
    s = np.asarray(size_bytes, dtype=np.float64)
    nodes = np.maximum(nn / k, 1.0)
    t = reduce_scatter_s(s, k, topo.intra) + reduce_scatter_s(s / k, nodes, topo.inter)
    return _as(t, size_bytes, n, ranks_per_node)


def hierarchical_all_to_all_s(size_bytes: Num, n: Num, ranks_per_node: Num, topo: Topology) -> Num:
    """Two-tier all-to-all: ``(k-1)/n`` of the buffer over NVLink and ``(n-k)/n`` over the network at once."""
    nn, k = _steps(n), np.clip(_steps(ranks_per_node), 1, _steps(n))
    s = np.asarray(size_bytes, dtype=np.float64)
    intra = (k - 1) * topo.intra.latency_s + (k - 1) / nn * s / topo.intra.effective_bytes_per_s
    inter = (nn - k) * topo.inter.latency_s + (nn - k) / nn * s / topo.inter.effective_bytes_per_s
    return _as(np.maximum(intra, inter), size_bytes, n, ranks_per_node)


def p2p_s(size_bytes: Num, link: LinkTier) -> Num:
    """One point-to-point send of ``size_bytes``: ``α + S/B`` seconds."""
    t = link.latency_s + np.asarray(size_bytes, dtype=np.float64) / link.effective_bytes_per_s
    return _as(t, size_bytes)


def expected_distinct_nodes(copies: Num, nodes: Num, node_limit: int = 0) -> Num:
    """Expected number of distinct nodes ``copies`` uniformly routed copies land on among ``nodes`` nodes:
    ``n·(1 - (1 - 1/n)^k)``, capped at ``node_limit`` (DeepSeek-V3's node-limited routing) when > 0.
    """
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    d = n * (1.0 - (1.0 - 1.0 / n) ** np.asarray(copies, dtype=np.float64))
    if node_limit > 0:
        d = np.minimum(d, float(node_limit))
    return _as(d, copies, nodes)


def dedup_all_to_all_s(
    token_bytes: Num, copies: Num, n: Num, ranks_per_node: Num, topo: Topology, node_limit: int = 0
) -> Num:
    """MoE dispatch (or combine) with each token sent once per destination *node* over the network, then
    forwarded over NVLink to its experts' GPUs there (DeepEP / DeepSeek-V3 §3.2.2).

    Args:
        token_bytes: bytes of all of one rank's tokens (one copy each).
        copies: routed experts per token (``k``).
        n: EP group size (ranks).
        ranks_per_node: ranks of the group on one node.
        topo: the link tiers.
        node_limit: at most this many nodes per token (0 = none).
    """
    nn, k = _steps(n), np.clip(_steps(ranks_per_node), 1, _steps(n))
    s = np.asarray(token_bytes, dtype=np.float64)
    nodes = np.maximum(nn / k, 1.0)
    k_copies = np.asarray(copies, dtype=np.float64)
    distinct = np.minimum(nodes * (1.0 - (1.0 - 1.0 / nodes) ** k_copies), node_limit if node_limit > 0 else np.inf)
    off_node = distinct * (nodes - 1.0) / nodes
    inter = np.where(
        nodes > 1, (nodes - 1) * topo.inter.latency_s + off_node * s / topo.inter.effective_bytes_per_s, 0.0
    )
    fwd = np.asarray(copies, dtype=np.float64) * (k - 1) / k
    intra = (k - 1) * topo.intra.latency_s + fwd * s / topo.intra.effective_bytes_per_s
    return _as(np.maximum(intra, inter), token_bytes, copies, n, ranks_per_node)
