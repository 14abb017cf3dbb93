"""Issue 14, checkpoint before requeue: the default scenario with its 70B job's checkpoint write at 20 s and 30 s,
loop off vs on, over seeds; prints the training goodput change (markdown table) and one JSON line per run.

Run (each seed is two ~1 h simulated passes, about 3 min on a quiet core):
    PYTHONPATH=src .venv/bin/python benchmarks/decisions_checkpoint.py --seeds 0 1 2 3 4 --write-s 20 30
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

import twinloop
from twinloop.closedloop.passes import compare, outcome_metrics
from twinloop.twin.scenario import scenario_from_dict

JOB = "train-llama-70b"


def run(seed: int, write_s: float) -> dict[str, float | int | str]:
    """One seed, loop off and on; the 70B job's goodput and the loop's requeues."""
    path = Path(twinloop.__file__).parent / "scenarios" / "default.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["seed"] = seed
    next(j for j in raw["jobs"] if j["name"] == JOB)["checkpoint_write_s"] = write_s
    off, on = compare(scenario_from_dict(raw, str(path), str(path.parent)))
    key = f"goodput_tokens_per_s[{JOB}]"
    a, b = outcome_metrics(off)[key], outcome_metrics(on)[key]
    assert a is not None and b is not None
    requeues = [r for r in on.actions if r.request.kind == "requeue" and r.status == "applied"]
    return {
        "seed": seed,
        "checkpoint_write_s": write_s,
        "goodput_off": a,
        "goodput_on": b,
        "gain_pct": 100.0 * (b - a) / a,
        "requeues_applied": len(requeues),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--write-s", type=float, nargs="+", default=[20.0, 30.0])
    args = ap.parse_args()
    rows = [run(seed, w) for w in args.write_s for seed in args.seeds]
    for r in rows:
        print(json.dumps(r))
    print("\n| checkpoint write | seed | goodput off (tok/s) | goodput on (tok/s) | gain | requeues |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['checkpoint_write_s']:g} s | {r['seed']} | {r['goodput_off']:.4g} | {r['goodput_on']:.4g}"
            f" | {r['gain_pct']:+.1f} % | {r['requeues_applied']} |"
        )


if __name__ == "__main__":
    main()
