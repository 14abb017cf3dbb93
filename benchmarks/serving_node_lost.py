"""Issue 14, a lost node in a serving fleet: the ``serving-fleet`` hall (``sweeps/new-user/serving-fleet.yaml``) with
one more fault, a GPU of ``serve-chat`` (first-fit puts it on racks k01-k05) falling off the bus between 8 and 12 min;
its node stays down for the rest of the 40 min run (the twin's 4 h repair). Loop off and on per seed: the fleet's
ETTR, goodput and interruptions, and the loop-on actions on the lost GPU, its node and the fleet.

Run (6 passes, ~3 min on 2 shared cores):
    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/serving_node_lost.py --seeds 0 1 2 --workers 2
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.twin.scenario import scenario_from_dict

HALL = Path(__file__).resolve().parent.parent / "sweeps" / "new-user" / "serving-fleet.yaml"
FLEET = "serve-chat"
OFF_BUS = {"kind": "gpu_fall_off_bus", "target": "random-gpu:dc2/r01/k01", "start_s": ["8m", "12m"]}


def one_run(seed: int, loop_on: bool) -> dict[str, Any]:
    """One pass of the hall with the GPU off the bus: the fleet's figures and the loop's actions near the fault."""
    raw = yaml.safe_load(HALL.read_text())
    raw["seed"] = seed
    raw["faults"].append(OFF_BUS)
    r = run_pass(scenario_from_dict(raw, str(HALL), str(HALL.parent)), loop_on, mode="auto", source=HALL.stem)
    figures = outcome_metrics(r)
    job = next(j for j in r.summary["jobs"] if j["name"] == FLEET)
    lost = next(f for f in r.faults if f.kind == "gpu_fall_off_bus")
    node = lost.entity.rsplit("/", 1)[0]
    actions = [
        f"{a.ts:.0f} s {a.request.kind} {a.status}"
        for a in r.actions
        if a.request.target in (lost.entity, node, f"dc2/jobs/{FLEET}") and a.request.reason.find(lost.entity) >= 0
    ]
    return {
        "seed": seed,
        "loop": "on" if loop_on else "off",
        "lost": f"{lost.entity} at {lost.start_s:.0f} s",
        "ettr": figures[f"ettr[{FLEET}]"],
        "goodput": figures[f"goodput_tokens_per_s[{FLEET}]"],
        "interruptions": job["interruptions"],
        "actions": "; ".join(actions) or "-",
    }


def main() -> None:
    """Print one markdown row per seed and loop setting."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    cells = [(s, on) for s in args.seeds for on in (False, True)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(one_run, *zip(*cells, strict=True)))
    print(f"| seed | loop | GPU off the bus | {FLEET} ETTR | goodput tokens/s | interruptions | loop actions on it |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seed']} | {r['loop']} | {r['lost']} | {r['ettr']:.5f} | {r['goodput']:,.0f} | {r['interruptions']} "
            f"| {r['actions']} |"
        )


if __name__ == "__main__":
    main()
