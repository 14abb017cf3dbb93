"""Where a facility power budget's throttling comes from: one scenario and seed, one pass, minute by minute.

Per minute: facility and cooling power (kW), the facility water setpoint and the CDU setpoints (°C), the hottest
GPU (°C), and the power-throttled GPU-seconds so far (GPU-seconds held below the workload's at-TDP clock by a
limit under the TDP, the ``power_throttled_gpu_s`` outcome figure), then each job's first start and goodput. Put
loop off and loop on side by side to see when each pass reaches the budget and which jobs it was running then.

Run (one 45 min pass of the round-3 hall, about 2 min on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/facility_budget_trace.py sweeps/new-user/budget-heatwave.yaml \
        --seed 0 --loop on
"""

from __future__ import annotations

import argparse
from pathlib import Path

from twinloop.closedloop.passes import run_pass
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import load_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop", choices=("off", "on"), default="on")
    parser.add_argument("--every-s", type=float, default=60.0)
    args = parser.parse_args()
    spec = load_scenario(args.scenario, seed=args.seed)
    print(f"{spec.name}, seed {args.seed}, loop {args.loop}")
    head = ["t s", "facility kW", "cooling kW", "facility water C", "CDU setpoints C", "hottest GPU C"]
    head.append("power-throttled GPU-s")
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")

    started: dict[str, float | None] = {}

    def minute(twin: Twin, result: StepResult) -> None:
        started.update({j.spec.name: j.first_start_s for j in twin.jobs})
        if result.t_s % args.every_s >= twin.dt_s:
            return
        cs = twin.cooling.state
        print(
            f"| {result.t_s:.0f} | {twin.facility_w / 1e3:.1f} | {twin.cooling_w / 1e3:.1f} | "
            f"{cs.facility_water_setpoint_c:.1f} | {', '.join(f'{c:.1f}' for c in cs.setpoint_c)} | "
            f"{float(twin.physics.gpus.temp_c.max()):.1f} | {twin.accounts.power_throttled_below_tdp_gpu_s:,.0f} |"
        )

    passed = run_pass(spec, args.loop == "on", mode="auto", on_step=minute)
    for job in passed.summary["jobs"]:
        first = started.get(job["name"])
        since = "never started" if first is None else f"first started at {first:.0f} s"
        print(f"{job['name']}: {since}, goodput {job['goodput_tokens_per_s']:,.0f} tokens/s, phase {job['phase']}")


if __name__ == "__main__":
    main()
