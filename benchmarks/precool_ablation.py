"""Precooling on and off: the loop with the cooling optimizer, with and without the heat forecast.

Runs a packaged scenario twice, loop on in ``auto`` both times, with ``precool`` off and on
(:func:`twinloop.closedloop.passes.run_pass`), and prints, for every job that starts after the optimizer's warm-up, the
hottest GPU on the rows it lands on over its first ``--window-s`` seconds, plus the whole run's cooling energy,
thermal-throttled GPU-seconds and the number of precooling moves.

Run: .venv/bin/python benchmarks/precool_ablation.py [--scenario default] [--window-s 600]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import twinloop
from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.twin.engine import StepResult, Twin
from twinloop.twin.scenario import load_scenario


class ArrivalPeaks:
    """Per late job: the hottest GPU on the rows it runs on, from its first start for ``window_s``."""

    def __init__(self, after_s: float, window_s: float) -> None:
        self.after_s, self.window_s = after_s, window_s
        self.peak_c: dict[str, float] = {}
        self._start: dict[str, float] = {}

    def __call__(self, twin: Twin, result: StepResult) -> None:
        for job in twin.jobs:
            if job.first_start_s is None or job.first_start_s < self.after_s:
                continue
            start = self._start.setdefault(job.spec.name, job.first_start_s)
            if twin.t_s - start > self.window_s:
                continue
            rows = np.unique(twin.topo.gpu_row[job.gpus])
            hottest = float(twin.state["gpu_temp_c"][np.isin(twin.topo.gpu_row, rows)].max())
            self.peak_c[job.spec.name] = max(self.peak_c.get(job.spec.name, -np.inf), hottest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--window-s", type=float, default=600.0)
    args = parser.parse_args()
    spec = load_scenario(Path(twinloop.__file__).parent / "scenarios" / f"{args.scenario}.yaml")
    print(f"scenario {spec.name} (seed {spec.seed}), loop on, precool off vs on")
    rows = []
    for precool in (False, True):
        peaks = ArrivalPeaks(after_s=300.0, window_s=args.window_s)
        t0 = time.perf_counter()
        result = run_pass(spec, True, precool=precool, on_step=peaks)
        m = outcome_metrics(result)
        moves = sum(1 for a in result.actions if "forecast to arrive" in a.request.reason)
        rows.append((precool, peaks.peak_c, m, moves, time.perf_counter() - t0))
    jobs = sorted(set(rows[0][1]) | set(rows[1][1]))
    print("| precool | " + " | ".join(f"hottest GPU on {j}'s rows, first {args.window_s:.0f} s, C" for j in jobs)
          + " | cooling energy kWh | thermal-throttled GPU-s | max GPU C | precool moves | wall s |")  # fmt: skip
    print("|---" * (len(jobs) + 6) + "|")
    for precool, peak, m, moves, wall in rows:
        cells = " | ".join(f"{peak.get(j, float('nan')):.1f}" for j in jobs)
        print(
            f"| {'on' if precool else 'off'} | {cells} | {m['cooling_energy_kwh']:.2f} | "
            f"{m['thermal_throttled_gpu_s']:,.0f} | {m['max_gpu_temp_c']:.1f} | {moves} | {wall:.0f} |"
        )


if __name__ == "__main__":
    main()
