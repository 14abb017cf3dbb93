"""A real training job's own step reports under `twinloop watch nvml` on an H200: what the loop saw, when.

Reads ``tests/fixtures/h200_job_progress`` (taken by ``tools/gpu/check_job_progress.sh``) and prints two markdown
tables for docs/results.md: (1) the job's steps and the GPU's NVML readings in each stretch of the run (the truth
``tools/gpu/train_job.py`` recorded); (2) the incidents three watchers open, replayed from their stores: at 1 s and at
5 s with the job's heartbeats, and at 1 s without them (GPU telemetry alone, as before), each against its cause.

Run: PYTHONPATH=src python benchmarks/validate_job_progress_h200.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np

from twinloop.lab.source_agreement import long_parquet_series
from twinloop.ops.live.watcher import observe

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h200_job_progress"
#: The incident class each injected trouble should open, and its event in ``train_job.json``.
CAUSE = {"straggler": "contend_start", "job_hang": "hang_start", "suspected_sdc": "bit_flip"}


def _truth() -> tuple[dict[str, float], list[list[float]], float]:
    """The events (Unix s, ``checkpoint_end`` added), the steps, and the 1 s watcher's first sample."""
    run = json.loads((FIX / "train_job.json").read_text())
    events = {e["what"]: e["t"] for e in run["events"]}
    events["checkpoint_end"] = next(e["end"] for e in run["events"] if e["what"] == "checkpoint")
    t0 = json.loads((FIX / "watch_1s.json").read_text())["first_ts"]
    return events, run["steps"], t0


def phases_table() -> None:
    ev, steps, t0 = _truth()
    series = long_parquet_series(FIX / "watch_1s.parquet")
    stretches = [
        ("training", steps[0][0] + 5.0, ev["contend_start"]),
        ("a co-tenant's GEMMs", ev["contend_start"] + 5.0, ev["contend_end"]),
        ("training", ev["contend_end"] + 2.0, ev["hang_start"]),
        ("hung (no step)", ev["hang_start"], ev["hang_end"]),
        ("training", ev["hang_end"] + 2.0, ev["checkpoint"]),
        ("checkpoint (torch.save)", ev["checkpoint"], ev["checkpoint_end"]),
        ("training, the flip at its middle", ev["checkpoint_end"] + 2.0, steps[-1][0]),
    ]
    print(f"Job: {len(steps)} steps; t = 0 at the 1 s watcher's first sample; first step at {steps[0][0] - t0:.1f} s\n")
    print("| stretch | from, s | to, s | steps | step, s (median) | NVML power, W (mean) | SM clock, MHz (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, a, b in stretches:
        st = [s[2] for s in steps if a <= s[0] < b]
        vals = []
        for field in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK"):
            ts, v = series[field]
            vals.append(v[(ts >= a) & (ts < b)])
        step = f"{statistics.median(st):.3f}" if st else "–"
        print(f"| {name} | {a - t0:.1f} | {b - t0:.1f} | {len(st)} | {step} | {np.mean(vals[0]):.0f} | "
              f"{np.median(vals[1]):.0f} |")  # fmt: skip
    print(f"\nThe flipped bit: step at {ev['bit_flip'] - t0:.1f} s.")


def incidents_table() -> None:
    ev, steps, t0 = _truth()
    last_before = {"hang_start": max(s[0] for s in steps if s[0] <= ev["hang_start"])}
    runs = [
        ("1 s, heartbeats", "watch_1s.parquet", True),
        ("5 s, heartbeats", "watch_5s.parquet", True),
        ("1 s, GPU telemetry only", "watch_1s.parquet", False),
    ]
    print("\n| watcher | incident | severity | opened, s | last evidence, s | cause | opened after the cause, s |")
    print("|---|---|---|---:|---:|---|---:|")
    for name, store, beats in runs:
        incidents = observe(f"replay:{FIX / store}", FIX / "jobs.yaml", FIX if beats else None)
        for inc in incidents:
            cause = CAUSE.get(str(inc.event_class))
            at = ev.get(cause, np.nan) if cause else np.nan
            after = f"{inc.start_ts - at:+.1f}" if np.isfinite(at) and inc.start_ts >= at else "–"
            what = cause if after != "–" else "–"
            print(f"| {name} | {inc.event_class} | {inc.severity.name.lower()} | {inc.start_ts - t0:.1f} | "
                  f"{inc.end_ts - t0:.1f} | {what} | {after} |")  # fmt: skip
    print(
        f"\n(last step before the hang: {last_before['hang_start'] - t0:.1f} s; the hang's limit is "
        "max(3 steps, 15 s) without progress)"
    )


if __name__ == "__main__":
    phases_table()
    incidents_table()
