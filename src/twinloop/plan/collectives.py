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

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.link import LinkSpec, get_link

Num = TypeVar("Num", float, NDArray[np.float64])

#: Scale-out link assumed when the caller names none: HDR for A100-class nodes (Korthikanti et al. 2022
#: used 8 x HDR 200 Gb/s per DGX A100), NDR 400 Gb/s (one NIC per GPU) for everything newer.
DEFAULT_SCALEOUT_BY_SCALEUP = {"nvlink3": "ib-hdr"}
DEFAULT_SCALEOUT = "ib-ndr"


@dataclass(frozen=True)
class LinkTier:
    """One link tier as the α–β model sees it.

    Attributes:
        name: the link's catalog name.
        bandwidth_per_direction_bytes_per_s: wire rate per GPU per direction (bytes/s).
        latency_s: α, the start-up cost of one message step (s).
        efficiency: achievable fraction of the wire rate for large messages (0..1].
        nvls: the switch of this tier reduces in-network (NVLink SHARP; only used by the NCCL model).
        sharp: the fabric of this tier reduces in-network (InfiniBand SHARP; only used by the NCCL model).
    """

    name: str
    bandwidth_per_direction_bytes_per_s: float
    latency_s: float
    efficiency: float = 1.0
    nvls: bool = False
    sharp: bool = False

    @classmethod
    def from_link(cls, link: LinkSpec, efficiency: float = 1.0) -> LinkTier:
        """A tier from a catalog :class:`LinkSpec` with the given achievable-bandwidth efficiency."""
        return cls(
            link.name, link.bandwidth_per_direction_bytes_per_s, link.latency_s, efficiency, link.nvls, link.sharp
        )

    @property
    def effective_bytes_per_s(self) -> float:
        """Bandwidth a large collective actually reaches (bytes/s)."""
        return self.bandwidth_per_direction_bytes_per_s * self.efficiency


@dataclass(frozen=True)
class Topology:
    """Two link tiers and how many GPUs share the fast one.

    Attributes:
        intra: the scale-up tier (NVLink) between GPUs of one node.
        inter: the scale-out tier (InfiniBand/RoCE) between nodes, per GPU (one NIC per GPU).
        gpus_per_node: GPUs joined by ``intra``.
        algorithms: ``"alpha-beta"`` (the textbook costs of this module) or ``"nccl"`` (NCCL-like algorithm
            and protocol choice per message size, NVLS/SHARP where the links have them:
            :mod:`twinloop.plan.nccl`); the all-reduce, reduce-scatter and all-gather functions dispatch on it.
    """

    intra: LinkTier
    inter: LinkTier
    gpus_per_node: int
    algorithms: Literal["alpha-beta", "nccl"] = "alpha-beta"

    def ranks_per_node(self, n: Num, stride: Num) -> Num:
        """Ranks of a group that share one node.

        A group of ``n`` ranks whose members are ``stride`` apart in the global rank order (ranks fill
        nodes in order) has ``clip(gpus_per_node // stride, 1, n)`` members per node.
        """
        per_node = np.floor_divide(self.gpus_per_node, np.maximum(np.asarray(stride), 1))
        return _as(np.clip(per_node, 1, np.maximum(np.asarray(n), 1)), n, stride)


def default_topology(
    gpu: GpuSpec,
    scaleout: str | None = None,
    intra_eff: float = 1.0,
    inter_eff: float = 1.0,
    algorithms: Literal["alpha-beta", "nccl"] = "alpha-beta",
) -> Topology:
    """The topology of a node of ``gpu``: its scale-up link and ``scaleout`` (default per link generation).

    Args:
        gpu: the GPU kind (gives the scale-up link and GPUs per node).
        scaleout: catalog name of the network link; ``None`` picks ib-hdr for NVLink3 (A100) nodes and
            ib-ndr otherwise.
        intra_eff / inter_eff: achievable-bandwidth efficiencies of the two tiers.
        algorithms: the collective cost model (see :class:`Topology`).
    """
    name = scaleout or DEFAULT_SCALEOUT_BY_SCALEUP.get(gpu.scaleup_link, DEFAULT_SCALEOUT)
    intra = LinkTier.from_link(get_link(gpu.scaleup_link), intra_eff)
    inter = LinkTier.from_link(get_link(name, source="--scaleout"), inter_eff)
    return Topology(intra=intra, inter=inter, gpus_per_node=gpu.gpus_per_node, algorithms=algorithms)


def _as(result: Any, *inputs: Any) -> Any:
    """Return a float when every input was a scalar, else an array (keeps the Num TypeVar honest)."""
    arr = np.asarray(result, dtype=np.float64)
    if all(np.ndim(x) == 0 for x in inputs):
        return float(arr)
    return arr


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
    ``n·(1 - (1 - 1/n)^k)``, capped at ``node_limit`` (DeepSeek-V3's node-limited routing) when > 0."""
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
        n / ranks_per_node: EP group size and its ranks per node.
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
