"""`twinloop detect`'s detectors on Numenta Anomaly Benchmark series: windows found, false alarms/day, NAB score.

Needs a NAB checkout's ``data/`` folder and ``labels/combined_windows.json`` (https://github.com/numenta/NAB);
the series are not packaged in this repository yet (no fixtures, no per-signal profiles, no figures: issue 14,
"Real series", is still open). Scoring: ``twinloop.ops.detect.windows`` (NAB standard profile, with the
simplification documented there).

    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py --data NAB/data --labels NAB/labels/combined_windows.json
    PYTHONPATH=src .venv/bin/python benchmarks/detect_nab.py ... -d ewma_zscore -d seasonal
"""

from __future__ import annotations

import argparse
from pathlib import Path

from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import DEFAULT_DETECTORS, detect_blocks, read_series
from twinloop.ops.detect.windows import WindowScore, load_windows, score_alarms

SERIES = (
    "realKnownCause/ambient_temperature_system_failure.csv",
    "realKnownCause/ec2_request_latency_system_failure.csv",
    "realKnownCause/cpu_utilization_asg_misconfiguration.csv",
    "realKnownCause/machine_temperature_system_failure.csv",
)


def score_series(csv: Path, labels: Path, key: str, detectors: list[str]) -> WindowScore:
    """Run the offline detectors on one NAB CSV (its ``value`` column) and score the alarm onsets."""
    blocks, _ = read_series(csv, ["value"])
    detections = detect_blocks(blocks, detectors)
    ts = blocks[0].ts
    return score_alarms([d.ts for d in detections], load_windows(labels, key), float(ts[0]), float(ts[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="NAB data/ folder")
    ap.add_argument("--labels", type=Path, required=True, help="NAB labels/combined_windows.json")
    ap.add_argument("--series", nargs="*", default=list(SERIES), help="series keys (paths under data/)")
    ap.add_argument("-d", "--detector", action="append", help="detector (repeatable)")
    args = ap.parse_args()
    load_variants()
    detectors = args.detector or list(DEFAULT_DETECTORS)
    print(f"detectors: {', '.join(detectors)}")
    print(f"{'series':55s} {'found':>7s} {'FA/day':>7s} {'NAB':>7s}")
    for key in args.series:
        s = score_series(args.data / key, args.labels, key, detectors)
        print(f"{key:55s} {s.found:>3d}/{s.windows:<3d} {s.false_alarms_per_day:7.2f} {s.nab_score:7.1f}")


if __name__ == "__main__":
    main()
