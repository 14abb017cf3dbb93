"""The published nccl-tests points (``catalog/nccl_tests.yaml``) and what :mod:`twinloop.plan.nccl` predicts for them.

Each point names its role: *fitted* (a constant in :mod:`twinloop.plan.efficiency` was derived from it) or
*predicted* (no fit used it). :func:`compare` evaluates the model at every point the way nccl-tests reports it
(``busbw``, ``algbw`` or ``time``), for ``benchmarks/calibrate_collectives.py`` and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from twinloop.catalog import CATALOG_DIR
from twinloop.hardware.gpu import get_gpu
from twinloop.plan import nccl
from twinloop.plan.collectives import Topology, default_topology
from twinloop.plan.efficiency import NCCL_NETWORK_BUS_EFFICIENCY, NCCL_NVLINK_BUS_EFFICIENCY, NVLS_ALGBW_FRACTION


class NcclPoint(BaseModel):
    """One published nccl-tests figure (units as nccl-tests prints them: GB/s = 1e9 B/s, µs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    role: Literal["fitted", "predicted"]
    gpu: str
    collective: Literal["all_reduce", "reduce_scatter"]
    ranks: int = Field(ge=2)
    ranks_per_node: int = Field(ge=1)
    size_bytes: float = Field(gt=0)
    source: str
    constant: str | None = None
    network: str | None = None
    algorithm: str | None = None
    busbw_gbps: float | None = Field(default=None, gt=0)
    busbw_range_gbps: tuple[float, float] | None = None
    algbw_gbps: float | None = Field(default=None, gt=0)
    time_us: float | None = Field(default=None, gt=0)


@cache
def points() -> tuple[NcclPoint, ...]:
    """Every point of ``catalog/nccl_tests.yaml`` (validated; cached)."""
    raw = yaml.safe_load((CATALOG_DIR / "nccl_tests.yaml").read_text())
    return tuple(NcclPoint(**p) for p in raw["points"])


def topology_for(gpu: str, network: str | None = None) -> Topology:
    """The NCCL-model topology of a node of ``gpu`` with the fitted bus efficiencies."""
    return default_topology(
        get_gpu(gpu), network, NCCL_NVLINK_BUS_EFFICIENCY, NCCL_NETWORK_BUS_EFFICIENCY, algorithms="nccl"
    )


@dataclass(frozen=True)
class Comparison:
    """A published point and the model's value of the same quantity."""

    point: NcclPoint
    quantity: str
    published: float
    predicted: float
    algorithm: str

    @property
    def error(self) -> float:
        """Relative error ``predicted / published - 1``."""
        return self.predicted / self.published - 1


def predict(p: NcclPoint) -> Comparison:
    """The model's value of the quantity ``p`` publishes (busbw, algbw in GB/s or time in µs)."""
    topo = topology_for(p.gpu, p.network)
    cands = nccl.candidates(p.size_bytes, p.ranks, p.ranks_per_node, topo, p.collective, NVLS_ALGBW_FRACTION)
    name = p.algorithm or min(cands, key=lambda k: float(cands[k]))
    t = float(cands[name])
    n = p.ranks
    bus_factor = 2 * (n - 1) / n if p.collective == "all_reduce" else (n - 1) / n
    algbw = p.size_bytes / t / 1e9
    if p.busbw_gbps is not None:
        return Comparison(p, "busbw GB/s", p.busbw_gbps, algbw * bus_factor, name)
    if p.algbw_gbps is not None:
        return Comparison(p, "algbw GB/s", p.algbw_gbps, algbw, name)
    assert p.time_us is not None
    return Comparison(p, "time µs", p.time_us, t * 1e6, name)


def compare() -> list[Comparison]:
    """Model vs every published point."""
    return [predict(p) for p in points()]


def busbw_curve(gpu: str, ranks: int, ranks_per_node: int, sizes_bytes: np.ndarray) -> np.ndarray:
    """Model all-reduce bus bandwidth (GB/s) over ``sizes_bytes`` (an nccl-tests-style sweep)."""
    topo = topology_for(gpu)
    n = np.full_like(sizes_bytes, float(ranks))
    return nccl.bus_bandwidth_bytes_per_s(sizes_bytes, n, np.full_like(n, float(ranks_per_node)), topo) / 1e9
