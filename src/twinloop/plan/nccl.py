"""NCCL-like collective costs: algorithm and protocol chosen per message size, NVLS and SHARP where the links
have them, vectorized over configurations.

NCCL's tuner (``src/graph/tuning.cc`` in github.com/NVIDIA/nccl, 2.19-era) models each (algorithm, protocol)
as ``time = latency + size / bandwidth`` and runs the cheapest. This module keeps that structure and NCCL's
own latency table and protocol factors (*published*: the tuner's constants), and takes the large-message bus
bandwidths from nccl-tests figures that NVIDIA's NCCL maintainers quoted (*fitted*, one number per tier, see
:mod:`twinloop.plan.efficiency`): NVLink Simple bus efficiency (H100: ~370 of 450 GB/s), network Simple bus
efficiency (NDR: 46-48 of 50 GB/s per NIC) and the NVLS all-reduce algorithm bandwidth (H100, 8 GPUs: ~480
GB/s bus bandwidth). ``benchmarks/calibrate_collectives.py`` prints the fit and the predicted points.

Groups: ``n`` ranks, ``k`` of them per node (``nodes = n/k``), each GPU with its own NIC (so a group's
network bandwidth per node is ``k`` NICs). Bus bandwidth (nccl-tests' ``busbw``) of a ring over one node is
the NVLink rate; across nodes the ring's node crossings spread over the ``k`` NICs, so it is
``min(NVLink, k·NIC)``. Candidates and their ``(latency, time)``:

* ring × {LL, LL128, Simple} (every collective): latency ``base + steps·hw_intra + inter_steps·hw_net``;
  bandwidth ``busbw·proto`` with NCCL's protocol factors (LL 1/4, or 1/3 for one-node reduce-scatter and
  all-gather; LL128 0.92; Simple 1);
* tree × {LL, LL128, Simple} (all-reduce): latency ``base + 2((k-1)·hw_intra + ⌊log2 nodes⌋·hw_net)``,
  time term ``2S/(0.92·busbw·proto)`` (a double binary tree moves each byte up and down);
* NVLS (all-reduce in one node, NVSwitch with SHARP, at least two ranks on it): latency 23 µs, algorithm
  bandwidth ``NVLS_ALGBW_FRACTION × NVLink``;
* NVLS-tree (all-reduce over nodes, NVLS hardware): NVLS inside each node, a tree between nodes:
  ``min(NVLS, k·NIC·(1 if 2 nodes else 1/2))``, latency ``23 + 2⌊log2 nodes⌋·14`` µs;
* CollNet/SHARP (all-reduce over nodes, ``sharp`` network): the switch reduces, each NIC sends and
  receives its shard once: ``0.9·min(intra, k·NIC)``, latency ``2(k-1)·2.8 + 30`` µs (GUESS: no cited
  SHARP figure; NCCL's constants).

Simplifications (stated): NCCL's per-channel bandwidth caps, tree correction factors, channel counts and
PXN are left out; reduce-scatter/all-gather use the ring only (NCCL 2.19+ also has NVLS for them); the
all-to-all is not a NCCL collective (it is grouped send/recv) and keeps the α–β form of
:mod:`twinloop.plan.collectives`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.plan.efficiency import NVLS_ALGBW_FRACTION

if TYPE_CHECKING:
    from twinloop.plan.topology import Topology

F64 = NDArray[np.float64]
Coll = Literal["all_reduce", "reduce_scatter"]

US = 1e-6
PROTOCOLS = ("LL", "LL128", "Simple")

#: NCCL tuner base latency per algorithm and protocol (µs), tuning.cc ``baseLat``.
BASE_LAT_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 0.0)}
#: Per-step hardware latency over NVLink and over the network (µs), tuning.cc ``hwLat``.
HW_LAT_NVLINK_US = {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 28.0)}
HW_LAT_NET_US = {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 28.0)}
NVLS_LAT_US, NVLS_TREE_NET_LAT_US = 23.0, 14.0
COLLNET_INTRA_LAT_US, COLLNET_NET_LAT_US = 2.8, 30.0
#: Extra network post overhead per ring step across nodes (µs; tuning.cc ``getNetOverhead``, ×3 for Simple).
NET_OVERHEAD_US = 1.0
#: Protocol bandwidth factors (tuning.cc): LL sends 8-byte lines with 4 bytes of data and a flag, read by
#: polling; LL128 keeps 120 of every 128 bytes; Simple is the full rate.
LL128_FACTOR = 0.92
TREE_FACTOR = 0.92
TREE_LL_FACTOR = 1.0 / 3.8
COLLNET_FACTOR = 0.9


def _f(x: Any) -> F64:
    return np.asarray(x, dtype=np.float64)


def _group(n: Any, k: Any, topo: Topology) -> tuple[F64, F64, F64]:
    """(n, k, nodes) as float arrays, ``1 ≤ k ≤ min(n, gpus_per_node)``."""
    nn = np.maximum(_f(n), 1.0)
    kk = np.clip(_f(k), 1.0, np.minimum(nn, float(topo.gpus_per_node)))
    return nn, kk, np.maximum(np.round(nn / kk), 1.0)


def bus_bandwidths(n: Any, k: Any, topo: Topology) -> tuple[F64, F64, F64]:
    """(ring Simple bus bandwidth, NVLink bus bandwidth, network bandwidth per node) in bytes/s."""
    _, kk, nodes = _group(n, k, topo)
    nv = topo.intra.bandwidth_per_direction_bytes_per_s * topo.intra.efficiency
    net_node = kk * topo.inter.bandwidth_per_direction_bytes_per_s * topo.inter.efficiency
    ring = np.where(nodes > 1, np.minimum(nv, net_node), nv)
    return ring, np.full_like(ring, nv), net_node


def _ring_candidates(s: F64, n: Any, k: Any, topo: Topology, coll: Coll) -> dict[str, F64]:
    nn, _, nodes = _group(n, k, topo)
    ring, _, _ = bus_bandwidths(n, k, topo)
    multi = nodes > 1
    if coll == "all_reduce":
        steps, inter_steps, volume = 2 * (nn - 1), np.where(multi, 2 * nodes, 0.0), 2 * (nn - 1) / nn
    else:
        steps, inter_steps, volume = nn - 1, nodes - 1, (nn - 1) / nn
    ll = np.where(multi | (coll == "all_reduce"), 0.25, 1.0 / 3.0)
    out = {}
    for p, name in enumerate(PROTOCOLS):
        overhead = NET_OVERHEAD_US * (3.0 if name == "Simple" else 1.0)
        intra_lat = np.where(multi, np.maximum(HW_LAT_NVLINK_US["ring"][p], overhead), HW_LAT_NVLINK_US["ring"][p])
        intra_steps = np.maximum(steps - inter_steps, 0.0)
        lat = BASE_LAT_US["ring"][p] + intra_steps * intra_lat + inter_steps * HW_LAT_NET_US["ring"][p]
        factor = ll if name == "LL" else (LL128_FACTOR if name == "LL128" else 1.0)
        out[f"ring/{name}"] = lat * US + volume * s / (ring * factor)
    return out


def _tree_candidates(s: F64, n: Any, k: Any, topo: Topology) -> dict[str, F64]:
    _, kk, nodes = _group(n, k, topo)
    ring, _, _ = bus_bandwidths(n, k, topo)
    out = {}
    log_nodes = np.floor(np.log2(nodes))
    for p, name in enumerate(PROTOCOLS):
        lat = BASE_LAT_US["tree"][p] + 2 * (
            (kk - 1) * HW_LAT_NVLINK_US["tree"][p] + log_nodes * HW_LAT_NET_US["tree"][p]
        )
        if name == "LL":
            factor: F64 | float = TREE_LL_FACTOR
        elif name == "LL128":
            factor = np.where(nodes > 1, 120.0 / 128.0, 7.0 / 9.0)
        else:
            factor = 1.0
        out[f"tree/{name}"] = lat * US + 2 * s / (TREE_FACTOR * ring * factor)
    return out


def _in_network_candidates(s: F64, n: Any, k: Any, topo: Topology, nvls_fraction: float) -> dict[str, F64]:
    """NVLS (one node), NVLS-tree (several nodes) and CollNet/SHARP where the links have them."""
    _, kk, nodes = _group(n, k, topo)
    _, nv, net_node = bus_bandwidths(n, k, topo)
    out: dict[str, F64] = {}
    inf = np.full_like(s, np.inf)
    nvls_bw = nvls_fraction * topo.intra.bandwidth_per_direction_bytes_per_s
    if topo.intra.nvls:
        log_nodes = np.floor(np.log2(nodes))
        # NVLS needs at least two GPUs of the group on one NVSwitch
        out["NVLS"] = np.where((nodes == 1) & (kk > 1), NVLS_LAT_US * US + s / nvls_bw, inf)
        tree_bw = np.minimum(nvls_bw, net_node * np.where(nodes <= 2, 1.0, 0.5))
        lat = (NVLS_LAT_US + 2 * log_nodes * NVLS_TREE_NET_LAT_US) * US
        out["NVLS-tree"] = np.where((nodes > 1) & (kk > 1), lat + s / tree_bw, inf)
    if topo.inter.sharp:
        intra_bw = np.where(kk > 1, nvls_bw if topo.intra.nvls else nv / 2, np.inf)
        bw = COLLNET_FACTOR * np.minimum(intra_bw, net_node)
        lat = (2 * (kk - 1) * COLLNET_INTRA_LAT_US + COLLNET_NET_LAT_US) * US
        out["CollNet"] = np.where(nodes > 1, lat + s / bw, inf)
    return out


def candidates(
    size_bytes: Any, n: Any, ranks_per_node: Any, topo: Topology, coll: Coll = "all_reduce", nvls_fraction: float = 0.0
) -> dict[str, F64]:
    """Time (s) of every (algorithm/protocol) NCCL could run, broadcast over the inputs."""
    s = np.broadcast_to(_f(size_bytes), np.broadcast(_f(size_bytes), _f(n), _f(ranks_per_node)).shape).copy()
    out = _ring_candidates(s, n, ranks_per_node, topo, coll)
    if coll == "all_reduce":
        out |= _tree_candidates(s, n, ranks_per_node, topo)
        out |= _in_network_candidates(s, n, ranks_per_node, topo, nvls_fraction)
    return out


def _best(cands: dict[str, F64], n: Any) -> F64:
    t = np.minimum.reduce(list(cands.values()))
    return np.asarray(np.where(_f(n) > 1, t, 0.0), dtype=np.float64)


def all_reduce_s(size_bytes: Any, n: Any, ranks_per_node: Any, topo: Topology) -> F64:
    """All-reduce of ``size_bytes`` over ``n`` ranks (``ranks_per_node`` per node): the cheapest candidate."""
    return _best(candidates(size_bytes, n, ranks_per_node, topo, "all_reduce", NVLS_ALGBW_FRACTION), n)


def reduce_scatter_s(size_bytes: Any, n: Any, ranks_per_node: Any, topo: Topology) -> F64:
    """Reduce-scatter of a ``size_bytes`` input (or all-gather producing it; same cost): ring, best protocol."""
    return _best(candidates(size_bytes, n, ranks_per_node, topo, "reduce_scatter"), n)


def choice(size_bytes: float, n: int, ranks_per_node: int, topo: Topology, coll: Coll = "all_reduce") -> str:
    """Name of the algorithm/protocol NCCL-like selection picks for one collective (for reports and tests)."""
    cands = candidates(size_bytes, n, ranks_per_node, topo, coll, NVLS_ALGBW_FRACTION)
    return min(cands, key=lambda name: float(cands[name]))


def bus_bandwidth_bytes_per_s(
    size_bytes: Any, n: Any, ranks_per_node: Any, topo: Topology, coll: Coll = "all_reduce"
) -> F64:
    """nccl-tests' ``busbw`` the model predicts: ``S/t · 2(n-1)/n`` (all-reduce) or ``S/t · (n-1)/n``."""
    nn = np.maximum(_f(n), 2.0)
    if coll == "all_reduce":
        t, factor = all_reduce_s(size_bytes, n, ranks_per_node, topo), 2 * (nn - 1) / nn
    else:
        t, factor = reduce_scatter_s(size_bytes, n, ranks_per_node, topo), (nn - 1) / nn
    return np.asarray(_f(size_bytes) / t * factor, dtype=np.float64)
