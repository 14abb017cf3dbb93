"""Issue 14: where a pass's thermal-throttled GPU-seconds are, row by row, and what the coolant did meanwhile.

The outcome table gives one figure for the whole hall; a GPU with its own thermal fault that no coolant fixes and
a row that throttles for want of cold water look the same there. Per window of one pass: each row's GPU-seconds
limited by temperature (the twin's count, ``limited & thermal_bound``, as ``thermal_throttled_gpu_s``), its hottest
die, its supply setpoint and supply, the facility water, the wet-bulb, the cooling power, and the GPUs that carried
most of it; then each GPU's total over the pass for the GPUs that carried the most.

Run (one 2 h pass of the packaged mixed_hall, about 2.5 min on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/throttle_by_row.py --seed 0
    PYTHONPATH=src .venv/bin/python benchmarks/throttle_by_row.py --seed 0 --loop-off
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult

sys.path.insert(0, str(Path(__file__).parent))
from trace_job_mixed_hall import _spec, pass_parser  # the same scenario loader and options


@dataclass
class Window:
    """Sums and extremes over one window's steps."""

    throttled_gpu_s: np.ndarray  # per row
    hottest_c: np.ndarray  # per row, the window's max
    setpoint_c: list[np.ndarray] = field(default_factory=list)
    supply_c: list[np.ndarray] = field(default_factory=list)
    facility_water_c: list[float] = field(default_factory=list)
    wetbulb_c: list[float] = field(default_factory=list)
    cooling_w: list[float] = field(default_factory=list)
    gpu_s: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per GPU


class RowThrottle:
    """An ``on_step`` hook: each step, the GPUs limited by temperature, counted per row and per GPU."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.windows: dict[int, Window] = {}
        self.gpu_ids: list[str] = []

    def __call__(self, twin: Twin, result: StepResult) -> None:
        topo, gpus, cs = twin.topo, twin.physics.gpus, twin.cooling.state
        throttled = gpus.limited & gpus.thermal_bound
        k = int(result.t_s // self.window_s)
        w = self.windows.get(k)
        if w is None:
            w = self.windows[k] = Window(np.zeros(topo.n_rows), np.full(topo.n_rows, -np.inf))
            w.gpu_s = np.zeros(throttled.size)
            self.gpu_ids = self.gpu_ids or [topo.gpu_id(g) for g in range(throttled.size)]
        rows = topo.gpu_row
        w.throttled_gpu_s += np.bincount(rows[throttled], minlength=topo.n_rows) * twin.dt_s
        hottest = np.full(topo.n_rows, -np.inf)
        np.maximum.at(hottest, rows, gpus.temp_c.astype(np.float64))
        w.hottest_c = np.maximum(w.hottest_c, hottest)
        w.setpoint_c.append(cs.setpoint_c.copy())
        w.supply_c.append(cs.supply_c.copy())
        w.facility_water_c.append(float(cs.facility_water_setpoint_c))
        w.wetbulb_c.append(float(twin.ambient.wetbulb_c))
        w.cooling_w.append(float(twin.cooling_w))
        w.gpu_s += throttled * twin.dt_s

    def most(self, gpu_s: np.ndarray, n: int) -> list[tuple[str, float]]:
        """The ``n`` GPUs with the most of ``gpu_s`` (none with 0), most first; ties in topology order."""
        top = np.argsort(-gpu_s, kind="stable")[:n]
        return [(self.gpu_ids[g], float(gpu_s[g])) for g in top if gpu_s[g] > 0]


def _slash(values: np.ndarray) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def main() -> None:
    ap = pass_parser(__doc__)
    ap.add_argument("--top", type=int, default=5, help="GPUs listed with their pass totals")
    ap.add_argument("--duration-s", type=float, default=None, help="shorter than the scenario's (default: its own)")
    args = ap.parse_args()
    hook = RowThrottle(args.window_s)
    passed = run_pass(_spec(args.seed, args.duration_s, args.scenario), not args.loop_off, on_step=hook)
    m = outcome_metrics(passed)
    print(
        f"{args.scenario} seed {args.seed}, loop {'off' if args.loop_off else 'on'}: thermal-throttled"
        f" {m['thermal_throttled_gpu_s']:.0f} GPU-s, cooling {m['cooling_energy_kwh']:.1f} kWh (rows in topology order)"
    )
    head = ["from s", "throttled GPU-s per row", "hottest die C", "supply setpoint C", "supply C"]
    head += ["facility water C", "wet-bulb C", "cooling kW", "most throttled GPUs (s)"]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for k in sorted(hook.windows):
        w = hook.windows[k]
        top = ", ".join(f"`{gpu}` {s:.0f}" for gpu, s in hook.most(w.gpu_s, 2)) or "—"
        print(
            f"| {k * args.window_s:.0f} | {_slash(w.throttled_gpu_s)} | {_slash(w.hottest_c)} "
            f"| {_slash(np.mean(w.setpoint_c, axis=0))} | {_slash(np.mean(w.supply_c, axis=0))} "
            f"| {np.mean(w.facility_water_c):.1f} | {np.mean(w.wetbulb_c):.1f} | {np.mean(w.cooling_w) / 1e3:.1f} "
            f"| {top} |"
        )
    per_gpu = np.sum([w.gpu_s for w in hook.windows.values()], axis=0)
    total = float(per_gpu.sum())
    print(f"\nthermal-throttled GPU-s over the pass: {total:.0f}; the GPUs that carried the most:")
    for gpu, s in hook.most(per_gpu, args.top):
        print(f"- `{gpu}`: {s:.0f} ({s / total:.0%})")


if __name__ == "__main__":
    main()
