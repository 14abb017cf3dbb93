"""An operator's power cap on one node of a training job, loop off vs on over seeds (issue 14, decisions).

The scenario is :func:`twinloop.lab.operator_cap.operator_cap_scenario`: 32 H100s (2 racks x 2 nodes), one 32-GPU
training job, an operator caps node ``dc9/r01/k02/n01`` to 50 % of TDP from 200 s to 400 s of a 10 min run. Per seed
and pass it prints the incidents by class, the loop's checkpoint / drain / requeue actions and the job's goodput.

    PYTHONPATH=src .venv/bin/python benchmarks/operator_cap_decisions.py --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
from collections import Counter

from twinloop.closedloop.passes import run_pass
from twinloop.lab.operator_cap import operator_cap_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = ap.parse_args()
    print(f"{'seed':>4s} {'loop':4s} {'goodput tok/s':>13s} {'moves':>5s}  incidents by class")
    for seed in args.seeds:
        spec = operator_cap_scenario(seed)
        for loop in (False, True):
            r = run_pass(spec, loop, optimize_cooling=False)
            classes = Counter(i.event_class.value for i in r.incidents)
            moves = sum(1 for a in r.actions if a.request.kind in ("checkpoint", "drain", "requeue"))
            goodput = r.summary["jobs"][0]["goodput_tokens_per_s"]
            print(f"{seed:4d} {'on' if loop else 'off':4s} {goodput:13.0f} {moves:5d}  {dict(sorted(classes.items()))}")


if __name__ == "__main__":
    main()
