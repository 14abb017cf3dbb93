"""NCCL-like collectives (plan/nccl.py) vs published nccl-tests figures (catalog/nccl_tests.yaml).

    python benchmarks/calibrate_collectives.py

Prints (1) the three fitted constants re-derived from their cited points next to the shipped values,
(2) every published point, fitted and predicted, with the model's value and error, and (3) the model's
all-reduce bus bandwidth vs message size (8 B to 8 GiB) on 8 H100 (one node), 8 A100, and 128 H100
(16 nodes, 8 per node), with the algorithm/protocol the NCCL-like tuner picks at each size.
"""

from __future__ import annotations

import sys

import numpy as np

from twinloop.hardware.link import get_link
from twinloop.lab.nccl_anchors import busbw_curve, compare, points, topology_for
from twinloop.plan import nccl
from twinloop.plan.efficiency import NCCL_NETWORK_BUS_EFFICIENCY, NCCL_NVLINK_BUS_EFFICIENCY, NVLS_ALGBW_FRACTION


def refit() -> None:
    """Each fitted constant from its one cited point (closed form: large-message busbw / wire rate)."""
    by_id = {p.id: p for p in points()}
    nv = get_link("nvlink4").bandwidth_per_direction_bytes_per_s / 1e9
    ndr = get_link("ib-ndr").bandwidth_per_direction_bytes_per_s / 1e9
    ring = by_id["h100-nvlink-ring-simple"].busbw_gbps or 0.0
    nvls = by_id["h100-nvls-allreduce-peak"].busbw_gbps or 0.0
    nic = by_id["ndr-per-nic-ring"].busbw_gbps or 0.0
    print("Fitted constants (closed form from the cited point; shipped value):")
    print(
        f"  NCCL_NVLINK_BUS_EFFICIENCY  {ring / nv:.4f}  = {ring:.0f}/{nv:.0f}   shipped {NCCL_NVLINK_BUS_EFFICIENCY}"
    )
    print(f"  NCCL_NETWORK_BUS_EFFICIENCY {nic / ndr:.4f}  = {nic:.0f}/{ndr:.0f} shipped {NCCL_NETWORK_BUS_EFFICIENCY}")
    print(
        f"  NVLS_ALGBW_FRACTION         {nvls / 1.75 / nv:.4f} = {nvls:.0f}/1.75/{nv:.0f} shipped {NVLS_ALGBW_FRACTION}"
    )


def table() -> None:
    print("\nPublished nccl-tests points vs the model (role: fitted = in-sample; predicted = out of sample):")
    print(f"  {'point':26s} {'role':9s} {'quantity':11s} {'published':>9s} {'model':>9s} {'error':>7s}  algorithm")
    for c in compare():
        print(
            f"  {c.point.id:26s} {c.point.role:9s} {c.quantity:11s} {c.published:9.1f} {c.predicted:9.1f} "
            f"{100 * c.error:+6.1f} %  {c.algorithm}"
        )


def curves() -> None:
    sizes = 8.0 * 2.0 ** np.arange(0, 31, 3)
    cases = (("h100-sxm", 8, 8), ("a100-sxm-80gb", 8, 8), ("h100-sxm", 128, 8))
    print("\nModel all-reduce busbw (GB/s) vs size, and the chosen algorithm/protocol:")
    print(f"  {'size B':>12s} " + " ".join(f"{f'{g} n={n}':>34s}" for g, n, _ in cases))
    curves_ = [busbw_curve(g, n, k, sizes) for g, n, k in cases]
    for i, s in enumerate(sizes):
        row = []
        for (g, n, k), cur in zip(cases, curves_, strict=True):
            row.append(f"{cur[i]:8.1f} {nccl.choice(float(s), n, k, topology_for(g)):>25s}")
        print(f"  {s:12.0f} " + " ".join(row))


def main() -> int:
    refit()
    table()
    curves()
    return 0


if __name__ == "__main__":
    sys.exit(main())
