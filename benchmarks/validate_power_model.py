"""Print the shared GPU power/DVFS model's figures for the cases published facts speak to.

Run: .venv/bin/python benchmarks/validate_power_model.py
"""

from __future__ import annotations

from twinloop.hardware.gpu import gpu_catalog
from twinloop.hardware.power import GpuPowerModel, relative_speed

# (tensor_active, sm_active, dram_active) per workload class; chosen to represent, not measured.
WORKLOADS = {
    "idle": (0.0, 0.0, 0.0),
    "dense GEMM (training compute phase)": (1.0, 1.0, 0.3),
    "prefill (compute-bound)": (0.85, 1.0, 0.35),
    "decode (memory-bound)": (0.05, 0.5, 0.8),
    "communication phase (NCCL)": (0.0, 0.3, 0.2),
}


def main() -> None:
    print(f"{'gpu':<14} {'workload':<38} {'P@fmax W':>9} {'%TDP':>6} {'clock@TDP MHz':>14} {'P capped W':>10}")
    for gpu in gpu_catalog().values():
        m = GpuPowerModel(gpu)
        for name, (t, s, d) in WORKLOADS.items():
            p = m.power_w(gpu.sm_clock_max_mhz, t, s, d, 60.0 if name != "idle" else 40.0)
            f = m.max_clock_for_power(gpu.tdp_w, t, s, d, 60.0)
            pc = m.power_w(f, t, s, d, 60.0 if name != "idle" else 40.0)
            print(f"{gpu.name:<14} {name:<38} {p:9.0f} {100 * p / gpu.tdp_w:6.0f} {f:14.0f} {pc:10.0f}")
    h100 = GpuPowerModel(gpu_catalog()["h100-sxm"])
    print("\nH100 power sweep, dense GEMM: limit W -> clock MHz -> relative speed (compute-bound share 0.9)")
    for limit in (300, 400, 500, 600, 700):
        f = h100.max_clock_for_power(float(limit), 1.0, 1.0, 0.3, 60.0)
        print(f"  {limit:4d} W -> {f:6.0f} MHz -> {relative_speed(f, 1980.0, 0.9):.3f}")


if __name__ == "__main__":
    main()
