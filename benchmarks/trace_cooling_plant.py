"""Issue 14: where a pass's cooling energy goes and what each row's coolant did, window by window.

Per window of one pass, for each row: the CDU's (or air handler's) setpoint, the supply it reached, its flow
(fraction of nominal: pump or fan), its movers' power, the heat it carried and its GPUs held at their thermal limit;
and for the site: the facility water, the chiller's COP and share of the heat, the plant's power. Then the pass's
cooling energy split into plant (chiller and towers), each row's movers. Run it loop off and loop on to see which
equipment a loop-on difference in cooling energy comes from, and whether a row's throttling is the supply's ramp,
the facility water's floor (supply at water + approach) or its capacity.

Run (one 2 h pass of the packaged mixed_hall, about 1 min on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/trace_cooling_plant.py --seed 0            # and --loop-off
    PYTHONPATH=src .venv/bin/python benchmarks/trace_cooling_plant.py --scenario sweeps/new-user/thermal-move.yaml
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from twinloop.closedloop.passes import run_pass
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult

sys.path.insert(0, str(Path(__file__).parent))
from trace_job_mixed_hall import _spec, pass_parser  # the same scenario loader and options


class PlantTrace:
    """An ``on_step`` hook summing, per window, each row's coolant state and the site's plant."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.sums: dict[int, dict[str, np.ndarray]] = defaultdict(dict)
        self.steps: dict[int, int] = defaultdict(int)
        self.energy_j: dict[str, float] = defaultdict(float)
        self.rows: list[str] = []

    def __call__(self, twin: Twin, result: StepResult) -> None:
        cs, cooling, topo = twin.cooling.state, twin.cooling, twin.topo
        if not self.rows:
            self.rows = list(topo.ids("row"))
        wetbulb = float(twin.ambient.wetbulb_c)
        g = twin.physics.gpus
        held = np.bincount(topo.gpu_row[g.limited & g.thermal_bound], minlength=topo.n_rows)
        values = {
            "setpoint": cs.setpoint_c,
            "supply": cs.supply_c,
            "flow": cs.flow_fraction,
            "movers_kw": cs.mover_power_w / 1e3,
            "heat_kw": cs.heat_removed_w / 1e3,
            "held": held.astype(float),
            "site": np.array(
                [cooling.facility_water_c(wetbulb), wetbulb, cooling.cop(wetbulb), cooling.chiller_share(wetbulb)]
            ),
            "plant_kw": np.array([cs.plant_power_w / 1e3]),
        }
        w = int(result.t_s // self.window_s)
        for key, value in values.items():
            self.sums[w][key] = self.sums[w].get(key, 0.0) + np.asarray(value, dtype=float)
        self.steps[w] += 1
        self.energy_j["plant"] += cs.plant_power_w * twin.dt_s
        for row, watts in zip(self.rows, cs.mover_power_w, strict=True):
            self.energy_j[f"{row} movers"] += float(watts) * twin.dt_s

    def print(self, title: str) -> None:
        print(title)
        rows = " | ".join(f"{r}: setpoint / supply C, flow, movers kW, heat kW, GPUs held" for r in self.rows)
        print(f"| from s | {rows} | facility water C | wet-bulb C | chiller COP | chiller share | plant kW |")
        print("|---" * (2 + len(self.rows) + 4) + "|")
        for w in sorted(self.sums):
            m = {k: v / self.steps[w] for k, v in self.sums[w].items()}
            per_row = " | ".join(
                f"{m['setpoint'][i]:.1f} / {m['supply'][i]:.1f}, {m['flow'][i]:.2f}, {m['movers_kw'][i]:.1f},"
                f" {m['heat_kw'][i]:.0f}, {m['held'][i]:.1f}"
                for i in range(len(self.rows))
            )
            fw, wb, cop, share = m["site"]
            print(
                f"| {w * self.window_s:.0f} | {per_row} | {fw:.1f} | {wb:.1f} | {cop:.2f} | {share:.2f} |"
                f" {m['plant_kw'][0]:.1f} |"
            )
        total = sum(self.energy_j.values()) / 3.6e6
        parts = ", ".join(f"{k} {v / 3.6e6:.1f}" for k, v in self.energy_j.items())
        print(f"\ncooling energy {total:.1f} kWh: {parts}")


def main() -> None:
    args = pass_parser(__doc__).parse_args()
    hook = PlantTrace(args.window_s)
    run_pass(_spec(args.seed, None, args.scenario), not args.loop_off, on_step=hook)
    hook.print(f"{args.scenario} seed {args.seed}, loop {'off' if args.loop_off else 'on'}")


if __name__ == "__main__":
    main()
