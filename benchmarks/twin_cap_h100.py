"""The twin's H100 under a power limit against the real H100's GEMM under ``nvidia-smi -pl``.

One node of 8 H100s runs the default training profile with no context load; after ``--settle`` seconds at TDP
the node's limit is set to each ``--limits`` value in turn and held ``--hold`` seconds. Printed per limit: the
mean power and SM clock of the GPUs over the last ``--average`` seconds of the hold, the share of those
GPU-seconds wholly inside the compute phase, and that phase's power and clock alone (the real GEMM's counterpart).
The real readings (``/work/shared/data/h100``, phases ``cap_*``; docs/calibration.md "GPU power model"): at
-pl 200 the H100's BF16 GEMM sits at its 345 MHz floor drawing 204-211 W (mean 207.6 W).

    python benchmarks/twin_cap_h100.py [--limits 700,400,300,200] [--hold 60]
"""

from __future__ import annotations

import argparse

import numpy as np

from twinloop.twin.actions import SetPowerLimit
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import scenario_from_dict


def node_twin(steps: int) -> Twin:
    """One liquid-cooled node of 8 H100s with the default training job on all of them."""
    raw = {
        "name": "cap-h100",
        "duration_s": steps,
        "rows": [{"racks": 1, "nodes_per_rack": 1, "cdu": {"capacity_w": 20000}}],
        "power_chain": {"facility_power_budget_w": 1.0e5},
        "jobs": [{"name": "train", "kind": "training", "gpus": 8, "profile": {"load_bytes_per_gpu": 0}}],
    }
    return Twin(scenario_from_dict(raw, "cap.yaml"), source="cap.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", default="700,400,300,200", help="power limits (W), applied in turn")
    parser.add_argument("--settle", type=int, default=60, help="seconds at TDP before the first limit")
    parser.add_argument("--hold", type=int, default=60, help="seconds each limit is held")
    parser.add_argument("--average", type=int, default=30, help="last seconds of each hold averaged")
    args = parser.parse_args()
    limits = [float(v) for v in args.limits.split(",")]
    twin = node_twin(args.settle + args.hold * len(limits) + 1)
    for _ in range(args.settle):
        twin.step()
    head = ("limit W", "power W", "clock MHz", "compute share", "compute-phase W", "compute-phase MHz")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (8, 8, 10, 14, 16, 17), strict=True)))
    for limit in limits:
        result = twin.apply(SetPowerLimit("dc1", limit))
        if not result.ok:
            raise SystemExit(f"set_power_limit {limit} refused: {result.reason}")
        power, clock, compute = [], [], []
        for i in range(args.hold):
            twin.step()
            if i >= args.hold - args.average:
                power.append(twin.state["gpu_power_w"].copy())
                clock.append(twin.physics.clock_mhz().copy())
                # A second wholly inside the compute phase (mean activity = the phase's): the GEMM's counterpart.
                whole = bool(np.isclose(twin.slot_activity[1, 0], twin.jobs[0].profile.compute.tensor_active))
                compute.append(np.full(8, whole))
        p, c, busy = np.array(power), np.array(clock), np.array(compute)
        busy_w = float(p[busy].mean()) if busy.any() else float("nan")
        busy_mhz = float(c[busy].mean()) if busy.any() else float("nan")
        print(f"{limit:8.0f} {p.mean():8.1f} {c.mean():10.0f} {busy.mean():14.2f} {busy_w:16.1f} {busy_mhz:17.0f}")


if __name__ == "__main__":
    main()
