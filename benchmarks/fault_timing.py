"""Issue 14: the loop's gain on a job as a function of *when* one injected fault lands.

A packaged scenario draws each fault's start from a window (``start_s: [46m, 50m]``), the same few minutes on every
seed. Where that window sits against the job's checkpoint cadence decides how much work the fault throws away: a
GPU that falls off the bus just after a checkpoint costs little, just before one costs a whole interval. A loop that
moves the job (forced checkpoint, requeue) re-phases its checkpoints, so a fixed window can favour loop off or on on
every seed by its position alone. This benchmark pins the fault's start at each of a grid of times and runs the
scenario loop off and on at each, so the gain can be read across a whole checkpoint interval rather than at one
phase of it.

Run (power-events' GPU off the bus from 34 to 64 min every 2 min, seed 0; two ~1 h passes per start, ~20 s each):
    PYTHONPATH=src .venv/bin/python benchmarks/fault_timing.py --scenario power-events --kind gpu_fall_off_bus \
        --job train-llama-70b --starts-min 34 36 38 40 42 44 46 48 50 52 54 56 58 --seeds 0
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import twinloop
from twinloop.closedloop.passes import run_pass
from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict


def spec_at(scenario: str, seed: int, kind: str, start_min: float) -> ScenarioSpec:
    """The packaged ``scenario`` with ``seed`` and its (single) ``kind`` fault starting at ``start_min``."""
    path = Path(twinloop.__file__).parent / "scenarios" / f"{scenario}.yaml"
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    raw["seed"] = seed
    hits = [f for f in raw.get("faults", []) if f["kind"] == kind]
    if len(hits) != 1:
        raise SystemExit(f"{path}: faults: expected one fault of kind {kind!r}, found {len(hits)}")
    hits[0]["start_s"] = f"{start_min:g}m"
    spec = scenario_from_dict(raw, str(path), str(path.parent))
    if start_min * 60.0 >= spec.duration_s:
        raise SystemExit(f"--starts-min {start_min:g}: at or after the scenario's end ({spec.duration_s:g} s)")
    return spec


def goodput(spec: ScenarioSpec, loop_on: bool, job: str) -> float:
    """The job's goodput (tokens/s over the run) in one pass."""
    summary = run_pass(spec, loop_on).summary
    return float(next(j["goodput_tokens_per_s"] for j in summary["jobs"] if j["name"] == job))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="power-events")
    ap.add_argument("--kind", default="gpu_fall_off_bus", help="the fault kind whose start is moved (one in the file)")
    ap.add_argument("--job", default="train-llama-70b")
    ap.add_argument("--starts-min", type=float, nargs="+", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = ap.parse_args()
    print(f"| seed | {args.kind} at min | {args.job} loop off | loop on | on vs off |")
    print("|---|---|---|---|---|")
    gains = []
    for seed in args.seeds:
        for start in args.starts_min:
            spec = spec_at(args.scenario, seed, args.kind, start)
            off, on = goodput(spec, False, args.job), goodput(spec, True, args.job)
            gains.append(on / off - 1.0)
            print(f"| {seed} | {start:g} | {off:.4g} | {on:.4g} | {100 * gains[-1]:+.1f} % |", flush=True)
    g = 100.0 * np.array(gains)
    print(
        f"\nloop on vs off over {g.size} starts: mean {g.mean():+.1f} %, median {np.median(g):+.1f} %, "
        f"min {g.min():+.1f} %, max {g.max():+.1f} %, loop on ahead at {int((g > 0).sum())} of {g.size}"
    )


if __name__ == "__main__":
    main()
