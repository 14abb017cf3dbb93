"""Precooling on and off, and where the loop's cooling energy goes: the loop with parts of the optimizer removed.

Default mode: runs a packaged scenario twice, loop on in ``auto`` both times, with ``precool`` off and on
(:func:`twinloop.closedloop.passes.run_pass`), and prints, for every job that starts after the optimizer's warm-up,
the hottest GPU on the rows it lands on over its first ``--window-s`` seconds, plus the whole run's cooling energy,
thermal-throttled GPU-seconds and the number of precooling moves.

``--ablation``: per scenario and seed, the cooling energy of loop off, of the full loop, and of the loop without
precooling, without the optimizer's hold while a heat-wave or cooling incident is open (the hold is bypassed in
this script only, by patching :meth:`CoolingOptimizer._held`), without both, and without the optimizer at all;
each variant's change against loop off is what that part of the loop costs or saves.

Run: .venv/bin/python benchmarks/precool_ablation.py [--scenario default] [--window-s 600]
     .venv/bin/python benchmarks/precool_ablation.py --ablation --scenarios default hot-afternoon --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import twinloop
from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizer
from twinloop.twin.engine import StepResult, Twin
from twinloop.twin.scenario import ScenarioSpec, load_scenario

#: Ablation variants: name -> (loop on, optimizer on, precool on, hold on).
VARIANTS: dict[str, tuple[bool, bool, bool, bool]] = {
    "loop off": (False, False, False, False),
    "loop on (as shipped)": (True, True, True, True),
    "no precool": (True, True, False, True),
    "no hold": (True, True, True, False),
    "no precool, no hold": (True, True, False, False),
    "no optimizer": (True, False, False, False),
}


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


def _scenario(name: str, seed: int | None = None) -> ScenarioSpec:
    return load_scenario(Path(twinloop.__file__).parent / "scenarios" / f"{name}.yaml", seed=seed)


def _precool_moves(result: Any) -> int:
    return sum(1 for a in result.actions if "forecast to arrive" in a.request.reason)


def arrival_table(scenario: str, window_s: float) -> None:
    """Precool off vs on, loop on: the late jobs' arrival peaks and the run's cooling energy."""
    spec = _scenario(scenario)
    print(f"scenario {spec.name} (seed {spec.seed}), loop on, precool off vs on")
    rows = []
    for precool in (False, True):
        peaks = ArrivalPeaks(after_s=300.0, window_s=window_s)
        t0 = time.perf_counter()
        result = run_pass(spec, True, precool=precool, on_step=peaks)
        rows.append((precool, peaks.peak_c, outcome_metrics(result), _precool_moves(result), time.perf_counter() - t0))
    jobs = sorted(set(rows[0][1]) | set(rows[1][1]))
    print("| precool | " + " | ".join(f"hottest GPU on {j}'s rows, first {window_s:.0f} s, C" for j in jobs)
          + " | cooling energy kWh | thermal-throttled GPU-s | max GPU C | precool moves | wall s |")  # fmt: skip
    print("|---" * (len(jobs) + 6) + "|")
    for precool, peak, m, moves, wall in rows:
        cells = " | ".join(f"{peak.get(j, float('nan')):.1f}" for j in jobs)
        print(
            f"| {'on' if precool else 'off'} | {cells} | {m['cooling_energy_kwh']:.2f} | "
            f"{m['thermal_throttled_gpu_s']:,.0f} | {m['max_gpu_temp_c']:.1f} | {moves} | {wall:.0f} |"
        )


def _run_variant(spec: ScenarioSpec, loop: bool, optimizer: bool, precool: bool, hold: bool) -> tuple[dict, int]:
    if hold or not loop or not optimizer:
        result = run_pass(spec, loop, optimize_cooling=optimizer, precool=precool)
    else:
        with mock.patch.object(CoolingOptimizer, "_held", return_value=None):
            result = run_pass(spec, loop, optimize_cooling=optimizer, precool=precool)
    return outcome_metrics(result), _precool_moves(result)


def ablation(scenarios: list[str], seeds: list[int], variants: list[str]) -> None:
    """Cooling energy per variant (see the module docstring), mean over ``seeds``, and its change vs loop off."""
    names = ["loop off"] + [v for v in VARIANTS if v in variants and v != "loop off"]
    for scenario in scenarios:
        kwh: dict[str, list[float]] = {v: [] for v in names}
        thr: dict[str, list[float]] = {v: [] for v in names}
        moves: dict[str, list[int]] = {v: [] for v in names}
        t0 = time.perf_counter()
        for seed in seeds:
            spec = _scenario(scenario, seed)
            for name in names:
                flags = VARIANTS[name]
                m, n = _run_variant(spec, *flags)
                kwh[name].append(float(m["cooling_energy_kwh"] or 0.0))
                thr[name].append(float(m["thermal_throttled_gpu_s"] or 0.0))
                moves[name].append(n)
                print(f"  {scenario} seed {seed} {name}: {kwh[name][-1]:.2f} kWh, {n} precool moves", flush=True)
        off = np.array(kwh["loop off"])
        print(f"\n{scenario}, seeds {seeds} ({time.perf_counter() - t0:.0f} s)")
        print("| variant | cooling energy kWh (mean) | change vs loop off (mean of paired) | thermal-throttled GPU-s "
              "| precool moves |")  # fmt: skip
        print("|---|---|---|---|---|")
        for name in names:
            change = 100.0 * np.mean(np.array(kwh[name]) / off - 1.0)
            print(
                f"| {name} | {np.mean(kwh[name]):.2f} | {change:+.1f} % | {np.mean(thr[name]):,.0f} "
                f"| {np.mean(moves[name]):.1f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--window-s", type=float, default=600.0)
    parser.add_argument("--ablation", action="store_true", help="cooling energy by part of the loop")
    parser.add_argument("--scenarios", nargs="+", default=["default", "hot-afternoon"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), help="ablation variants (loop off always)")
    args = parser.parse_args()
    if args.ablation:
        ablation(args.scenarios, args.seeds, args.variants)
    else:
        arrival_table(args.scenario, args.window_s)


if __name__ == "__main__":
    main()
