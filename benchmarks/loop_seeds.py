"""`twinloop run --json` over N seeds for the packaged loop scenarios: each figure as mean and 95 % interval.

The twin's hall is messy (manufacturing variation, sensor noise, power peaks, background stragglers and
failures, fault times and places drawn from the seed), so one seed is one sample. This runs every scenario of
``loop_results.SCENARIOS`` with seeds ``first .. first + N - 1`` and prints loop_results' tables, each figure as
``mean [low, high]``: the mean over seeds and the 95 % confidence interval of that mean (Student t, the seeds
taken as independent samples). Counts (faults, detected, false alarms, actions) are totals over the seeds.

Run: .venv/bin/python benchmarks/loop_seeds.py [--seeds 5] [--first 0] [--scenarios default,power-events]
(about 100 s per scenario and seed on one core).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import twinloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_results import SCENARIOS, print_tables, run_json

#: Student t quantile 0.975 by degrees of freedom (1..30); beyond 30 the normal 1.96.
T_975 = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131),
    *(2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)


class Interval(float):
    """A mean over seeds that formats as ``mean [low, high]`` (its 95 % t-interval); arithmetic uses the mean."""

    low: float
    high: float

    def __new__(cls, values: list[float]) -> Interval:
        mean = statistics.fmean(values)
        obj = super().__new__(cls, mean)
        n = len(values)
        half = T_975[min(n - 1, 30) - 1] * statistics.stdev(values) / math.sqrt(n) if n > 1 else 0.0
        obj.low, obj.high = mean - half, mean + half
        return obj

    def __format__(self, spec: str) -> str:
        spec = spec or ".4g"
        f = float.__format__
        return f"{f(float(self), spec)} [{f(self.low, spec)}, {f(self.high, spec)}]"

    def __str__(self) -> str:
        return format(self, ".4g")


def aggregate(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One document shaped like a `twinloop run --json` document, with every figure an :class:`Interval`."""
    first = docs[0]
    out: dict[str, Any] = {
        "scenario": first["scenario"],
        "seed": f"{docs[0]['seed']}..{docs[-1]['seed']} ({len(docs)} seeds; counts are totals, figures mean [95 % CI])",
    }
    for side in ("loop_off", "loop_on"):
        passes = [d[side] for d in docs]
        outcome = {
            k: Interval([float(p["outcome"][k]) for p in passes])
            for k, v in passes[0]["outcome"].items()
            if v is not None and all(p["outcome"].get(k) is not None for p in passes)
        }
        detection = []
        for q0 in passes[0]["detection"]:
            qs = [q for p in passes for q in p["detection"] if q["fault"] == q0["fault"]]
            ttd = [q["median_time_to_detect_s"] for q in qs if q["median_time_to_detect_s"] is not None]
            detection.append(
                {
                    "fault": q0["fault"],
                    "faults": sum(q["faults"] for q in qs),
                    "detected": sum(q["detected"] for q in qs),
                    "precision": Interval([q["precision"] for q in qs]),
                    "recall": Interval([q["recall"] for q in qs]),
                    "median_time_to_detect_s": Interval(ttd) if ttd else None,
                }
            )
        out[side] = {
            "outcome": outcome,
            "detection": detection,
            "false_alarms": [a for p in passes for a in p["false_alarms"]],
            "incidents": Interval([float(p["incidents"]) for p in passes]),
            "actions": [a for p in passes for a in p["actions"]],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per scenario (>= 2 for an interval)")
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated packaged scenario names")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    for name in args.scenarios.split(","):
        path = Path(twinloop.__file__).parent / "scenarios" / f"{name}.yaml"
        if not path.exists():
            parser.error(f"--scenarios: no packaged scenario {name!r} (allowed: {', '.join(SCENARIOS)})")
        docs = [run_json(path, seed) for seed in range(args.first, args.first + args.seeds)]
        print_tables(aggregate(docs), path)


if __name__ == "__main__":
    main()
