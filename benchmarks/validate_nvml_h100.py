"""twinloop's NVML source on a real H100: against nvidia-smi, its energy counter, and an operator's power cap.

Reads ``tests/fixtures/h100_nvml`` (taken by ``tools/gpu/check_nvml.sh``) and prints three markdown tables for
docs/calibration.md and docs/results.md: (1) per field, NVML (``twinloop ingest nvml``, 10 Hz) vs nvidia-smi's CSV
(100 ms) over their shared minute; (2) the energy counter vs the integral of the sampled power; (3) the training-like
step before, under and after the operator's 400 W cap, and what ``twinloop watch`` opened, replayed from its store.

Run: PYTHONPATH=src python benchmarks/validate_nvml_h100.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from twinloop.lab.source_agreement import agreement, energy_vs_power, long_parquet_series, smi_series
from twinloop.ops.live.watcher import observe

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h100_nvml"


def sources_table() -> None:
    nvml = long_parquet_series(FIX / "nvml_10hz.parquet")
    smi, report = smi_series(FIX / "smi.csv")
    print(f"nvidia-smi CSV: {report.rows_in} values read, {report.dropped} dropped\n")
    print(
        "| field | NVML samples | nvidia-smi samples | NVML mean | nvidia-smi mean | pairs ≤ 50 ms apart "
        "| mean abs diff | equal |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in agreement(nvml, smi):
        print(f"| `{r.field.removeprefix('DCGM_FI_DEV_')}` | {r.n_a} | {r.n_b} | {r.mean_a:.2f} | {r.mean_b:.2f} | "
              f"{r.matched} | {r.mean_abs_diff:.2f} | {100 * r.equal_share:.1f} % |")  # fmt: skip
    ts, energy = nvml["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    counter_j, integral_j = energy_vs_power(ts, energy, nvml["DCGM_FI_DEV_POWER_USAGE"][1])
    print(f"\nEnergy over {ts[-1] - ts[0]:.1f} s: counter {counter_j:.0f} J, ∫power dt {integral_j:.0f} J "
          f"({100 * (counter_j / integral_j - 1):+.2f} %)")  # fmt: skip


def cap_table() -> None:
    rec = json.loads((FIX / "operator_cap.json").read_text())
    cap_ts, restore_ts = (e["t"] for e in rec["events"][:2])

    def phase(t: float) -> str:
        return "before" if t < cap_ts else ("under the cap" if t < restore_ts else "after")

    print(f"\nOperator cap: {rec['cap_w']:.0f} W by {rec['events'][0]['how']} for {restore_ts - cap_ts:.0f} s\n")
    print(
        "| phase | steps | GEMM part, s (median) | copy part, s (median) | NVML power, W (mean) "
        "| SM clock, MHz (median) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in ("before", "under the cap", "after"):
        steps = [s for s in rec["steps"] if phase(s[0]) == name][2:]  # the first steps of a phase straddle it
        samples = [s for s in rec["samples"] if phase(s[0]) == name]
        print(f"| {name} | {len(steps)} | {statistics.median(s[1] for s in steps):.3f} | "
              f"{statistics.median(s[2] for s in steps):.3f} | {statistics.mean(s[1] for s in samples):.0f} | "
              f"{statistics.median(s[2] for s in samples):.0f} |")  # fmt: skip
    print("\n| incident | severity | opened (s from the cap) | last evidence (s from the cap) | status |")
    print("|---|---|---:|---:|---|")
    for inc in observe(f"replay:{FIX / 'watch_cap.parquet'}"):
        print(f"| {inc.event_class} | {inc.severity.name.lower()} | {inc.start_ts - cap_ts:+.1f} | "
              f"{inc.end_ts - cap_ts:+.1f} | {inc.status} |")  # fmt: skip
    print(f"\n(the cap was lifted at {restore_ts - cap_ts:+.1f} s)")


if __name__ == "__main__":
    sources_table()
    cap_table()
