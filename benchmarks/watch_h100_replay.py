"""`twinloop watch` on the real H100 recordings: what the loop opens, phase by phase (docs/results.md).

Runs the CLI on ``shared/data/h100/nvml_ingest_1hz.duckdb`` (NVML at 1 Hz through `twinloop ingest nvml`) and on
``samples_20hz.csv`` (the NVML sampler at 20 Hz), in observe mode with no actuator, and prints a markdown table
per recording: each phase group of the workload, the incidents that opened in it (class, severity, root) and the
wall time of the replay.

Run: PYTHONPATH=src python benchmarks/watch_h100_replay.py [DATA_DIR]   (default ../shared/data/h100)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from twinloop.lab.phases import load_phases, phase_at, phase_group

FILES = ("nvml_ingest_1hz.duckdb", "samples_20hz.csv")


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    default = next((p for p in (here.parent / "shared/data/h100", here.parent.parent / "shared/data/h100")
                    if p.is_dir()), here.parent / "shared/data/h100")  # fmt: skip
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    phases = load_phases(data / "phases.csv")
    groups = list(dict.fromkeys(phase_group(name) for _, name in phases))
    for name in FILES:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "twinloop.cli.main", "watch", f"replay:{data / name}", "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        doc = json.loads(done.stdout)
        found: dict[str, list[str]] = {g: [] for g in groups}
        for inc in doc["incidents"]:
            group = phase_group(phase_at(phases, inc["opened_ts"]))
            closed = inc["closed_ts"]
            span = f"{inc['opened_ts'] - phases[0][0]:.0f}–{closed - phases[0][0]:.0f} s" if closed else "open at end"
            found.setdefault(group, []).append(
                f"{inc['class']} ({inc['severity']}) on {inc['root'].rsplit('/', 2)[-2:][-1]}, {span}"
            )
        c = doc["counts"]
        print(f"\n### `{name}`: {doc['samples']} samples, replayed in {wall:.1f} s wall (as fast as possible)\n")
        print(f"{c['incidents']} incidents, {c['incidents_warning_or_above']} of warning severity or above; "
              f"{c['actions']} actions (observe mode, no actuator); {c['warnings']} data warnings; "
              f"data quality {doc['data_quality']}.\n")  # fmt: skip
        print("| phase | opened there (times from the first phase's start) |")
        print("|---|---|")
        for group, items in found.items():
            print(f"| {group} | {'; '.join(items) if items else 'nothing'} |")


if __name__ == "__main__":
    main()
