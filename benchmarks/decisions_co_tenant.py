"""Issue 14, a co-tenant is not a straggler: a small H100 hall whose 24-GPU training job meets another process on
one of its GPUs (a ``co_tenant`` fault, the rank keeping 0.45 of its speed: the real H200's 0.165 -> 0.365 s steps)
against the same slowdown as a ``straggler`` fault, loop off vs on, over seeds (the fault's start, its length and
the hall's noise drawn from the seed). Prints one JSON line per run and a markdown table: the job's goodput, what the
loop moved (drains, requeues applied) and what it asked a person (approvals pending).

Run (each seed is four 40-min passes of 32 GPUs; about 4 min for 5 seeds on a quiet core):
    PYTHONPATH=src .venv/bin/python benchmarks/decisions_co_tenant.py --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from twinloop.closedloop.passes import compare, outcome_metrics
from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict

GPU = "dc9/r01/k02/n01/g3"
JOB = "train"
SPEED_KEPT = 0.45


def spec(kind: str, seed: int) -> ScenarioSpec:
    """The hall of ``tests/closedloop/test_co_tenant_scenario.py``, 40 min, the fault drawn from the seed."""
    raw: dict[str, Any] = {
        "name": f"{kind}-decision",
        "site": "dc9",
        "duration_s": "40m",
        "step_s": "1s",
        "seed": seed,
        "rows": [{"racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}],
        "jobs": [
            {"name": JOB, "kind": "training", "gpus": 24, "checkpoint_interval_s": "10m", "checkpoint_write_s": "5s"}
        ],
        "faults": [
            {
                "kind": kind,
                "target": GPU,
                "start_s": [120, 600],
                "duration_s": [600, 1500],
                "magnitude": SPEED_KEPT,
            }
        ],
        "failures": "off",
    }
    return scenario_from_dict(raw, "benchmarks/decisions_co_tenant.py", ".")


def run(kind: str, seed: int) -> dict[str, float | int | str]:
    """One seed, loop off and on: the job's goodput, the loop's moves and the approvals it left to a person."""
    off, on = compare(spec(kind, seed), optimize_cooling=False)
    key = f"goodput_tokens_per_s[{JOB}]"
    a, b = outcome_metrics(off)[key], outcome_metrics(on)[key]
    assert a is not None and b is not None
    applied = [str(r.request.kind) for r in on.actions if r.status == "applied"]
    return {
        "fault": kind,
        "seed": seed,
        "goodput_off": a,
        "goodput_on": b,
        "gain_pct": 100.0 * (b - a) / a,
        "drains": applied.count("drain"),
        "requeues": applied.count("requeue"),
        "pending": sum(r.status == "pending" for r in on.actions),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--faults", nargs="+", default=["co_tenant", "straggler"], choices=["co_tenant", "straggler"])
    args = ap.parse_args()
    rows = [run(kind, seed) for kind in args.faults for seed in args.seeds]
    for r in rows:
        print(json.dumps(r))
    print("\n| fault | seed | goodput off (tok/s) | goodput on (tok/s) | change | drains | requeues | asked a person |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| `{r['fault']}` | {r['seed']} | {r['goodput_off']:.4g} | {r['goodput_on']:.4g} | {r['gain_pct']:+.1f} %"
            f" | {r['drains']} | {r['requeues']} | {r['pending']} |"
        )


if __name__ == "__main__":
    main()
