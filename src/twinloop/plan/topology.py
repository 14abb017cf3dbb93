"""The cluster's two link tiers as the collective cost models see them (scale-up NVLink, scale-out network).

Apart from :mod:`twinloop.plan.collectives` so that the NCCL-like model (:mod:`twinloop.plan.nccl`) and the
α–β one can both take a :class:`Topology` without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

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
        return as_num(np.clip(per_node, 1, np.maximum(np.asarray(n), 1)), n, stride)


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
        intra_eff: achievable-bandwidth efficiency of the scale-up tier.
        inter_eff: achievable-bandwidth efficiency of the scale-out tier.
        algorithms: the collective cost model (see :class:`Topology`).
    """
    name = scaleout or DEFAULT_SCALEOUT_BY_SCALEUP.get(gpu.scaleup_link, DEFAULT_SCALEOUT)
    intra = LinkTier.from_link(get_link(gpu.scaleup_link), intra_eff)
    inter = LinkTier.from_link(get_link(name, source="--scaleout"), inter_eff)
    return Topology(intra=intra, inter=inter, gpus_per_node=gpu.gpus_per_node, algorithms=algorithms)


def as_num(result: ArrayLike, *inputs: Num) -> Num:
    """Return a float when every input was a scalar, else an array (keeps the Num TypeVar honest)."""
    arr = np.asarray(result, dtype=np.float64)
    out: float | NDArray[np.float64] = float(arr) if all(np.ndim(x) == 0 for x in inputs) else arr
    # Num is bound to float exactly when the inputs are scalars: the ndim test makes at run time the choice
    # the type checker cannot follow.
    return cast(Num, out)
