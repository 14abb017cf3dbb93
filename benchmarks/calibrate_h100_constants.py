"""Derive the planner's measured constants from the real H100 SXM readings in /work/shared/data/h100.

Source: one NVIDIA H100 80GB HBM3 SXM (700 W limit), measured 2026-11-23 with ``tools/workload.py`` (runs 1
and 2); see ``/work/shared/data/h100/README.md``. Prints each constant of ``twinloop.plan.efficiency`` that
is measured there, the value the data give, and the value in the code, so a drift shows.

Run: ``python benchmarks/calibrate_h100_constants.py``
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.plan import efficiency as effc

#: The shared data next to the checkout (``/work/main`` → ``/work/shared``), else ``/work/shared`` (a worktree).
_CANDIDATES = (Path(__file__).resolve().parents[2] / "shared" / "data" / "h100", Path("/work/shared/data/h100"))
DATA = next((p for p in _CANDIDATES if p.exists()), _CANDIDATES[-1])
RUNS = ("results_run1.json", "results_run2.json")
#: Decode rows that are memory-bound (batch ≤ 32: ≤ 32 FLOP per weight byte, far below the ~200 FLOP/B ridge).
DECODE_BATCHES = (1, 8, 32)
#: NVML ``fb_used`` with no CUDA context: the driver's reservation (nvidia-smi -q "Reserved: 480 MiB").
MIB = 1024**2


def _phase_samples(phase: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, die °C, W, fb used MiB) of run 2's 20 Hz samples inside the first ``phase`` window."""
    with open(DATA / "phases.csv") as f:
        marks = list(csv.DictReader(f))
    i = next(k for k, m in enumerate(marks) if m["phase"] == phase)
    t0, t1 = float(marks[i]["t"]), float(marks[i + 1]["t"])
    with open(DATA / "samples_20hz.csv") as f:
        rows = [r for r in csv.DictReader(f) if t0 <= float(r["t"]) < t1]
    col = lambda k: np.array([float(r[k]) for r in rows])  # noqa: E731
    return col("t") - t0, col("gpu_temp_c"), col("power_mw") / 1e3, col("fb_used_mib")


def _gemm_bytes_per_flop(copy_gbps: float) -> None:
    """GEMM_HBM_BYTES_PER_FLOP from gemm_peak (NVML memory utilisation x the copy's rate / TFLOP/s), and the same
    ratio over the clock and power-limit sweep of that GEMM (not used for the value).
    """
    from twinloop.hardware.readings import load_readings

    phases = load_readings(DATA).phases
    ratio = {
        n: p.dram_active * copy_gbps * 1e9 / (p.throughput * 1e12)
        for n, p in phases.items()
        if p.group == "gemm" and p.throughput > 0
    }
    peak = phases["gemm_peak"]
    got = ratio["gemm_peak"] * 1e3
    print(f"\nGEMM_HBM_BYTES_PER_FLOP: gemm_peak memory utilisation {peak.dram_active:.3f} x {copy_gbps:,.0f} GB/s")
    print(f"  / {peak.throughput:.1f} TFLOP/s = {got:.3f}e-3 B/FLOP; code {effc.GEMM_HBM_BYTES_PER_FLOP:.3g}")
    rest = [v for n, v in ratio.items() if n != "gemm_peak"]
    print(f"  the {len(rest)} capped / clock-locked GEMM phases: {min(rest) * 1e3:.3f}-{max(rest) * 1e3:.3f}e-3 B/FLOP")


def main() -> int:
    """Print the measured constants next to the code's values."""
    if not (DATA / RUNS[0]).exists():
        print(f"{DATA}: not present, nothing to derive")
        return 0
    runs = [json.loads((DATA / r).read_text()) for r in RUNS]
    hbm = get_gpu("h100-sxm").hbm_bandwidth_bytes_per_s / 1e9
    print(f"H100 SXM datasheet HBM bandwidth (catalog): {hbm:,.0f} GB/s")

    copy = [r["memcopy"]["GBps_rw"] for r in runs]
    print(f"\nHBM_EFFICIENCY: 4 GiB D2D copy, read + write: {copy[0]:,.0f} / {copy[1]:,.0f} GB/s")
    print(f"  measured {np.mean(copy) / hbm:.3f}   code {effc.HBM_EFFICIENCY}")

    _gemm_bytes_per_flop(float(np.mean(copy)))

    dec = [row["weight_GBps"] for r in runs for row in r["decode_like"]["rows"] if row["batch"] in DECODE_BATCHES]
    print(f"\nDECODE_HBM_EFFICIENCY: Llama-3-8B weight streaming, batch {DECODE_BATCHES}: ", end="")
    print(", ".join(f"{v:,.0f}" for v in dec) + " GB/s")
    print(f"  measured {np.mean(dec) / hbm:.3f}   code {effc.DECODE_HBM_EFFICIENCY}")

    t, temp, w, _ = _phase_samples("gemm_peak")
    last = t >= t[-1] - 10.0
    print(f"\nTRAIN_DIE_TEMP_C: 60 s BF16 GEMMs at the 700 W limit, last 10 s: {temp[last].mean():.1f} °C at")
    print(f"  {w[last].mean():.0f} W (max {temp.max():.0f} °C); code {effc.TRAIN_DIE_TEMP_C}")
    t, temp, w, _ = _phase_samples("train_steady")
    last = t >= t[-1] - 10.0
    print(f"  cross-check, 1.1B Llama training 60 s: last 10 s {temp[last].mean():.1f} °C", end="")
    print(f" at {w[last].mean():.0f} W (still rising)")

    _, _, _, fb_idle = _phase_samples("idle")
    _, _, _, fb_train = _phase_samples("train_steady")
    driver_mib = float(fb_idle.min())
    for name, r in zip(RUNS, runs, strict=True):
        alloc_mib = r["train_small"]["peak_mem_gb"] * 1e9 / MIB
        print(f"  ({name}: torch max allocated {alloc_mib:,.0f} MiB)")
    alloc_mib = runs[1]["train_small"]["peak_mem_gb"] * 1e9 / MIB
    rest = (fb_train.max() - driver_mib - alloc_mib) * MIB
    print(f"\nRESERVED_BYTES: training peak NVML fb used {fb_train.max():,.0f} MiB − driver {driver_mib:,.0f} MiB")
    print(f"  − torch max allocated {alloc_mib:,.0f} MiB = {rest / 1e9:.2f} GB (context, cuBLAS, allocator cache)")
    print(f"  code {effc.RESERVED_BYTES / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
