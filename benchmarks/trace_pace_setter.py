"""Issue 14: which GPU sets a training job's pace, window by window, and the coolant it sees.

A synchronous job runs at its slowest GPU's work rate (each GPU at its own model's rates,
:mod:`twinloop.twin.gpu_rates`). Per window of one pass: the job's mean pace while it computes (1 = every rank at
full clock on the job's reference GPU); over the steps where some GPU is slower than the rest, the GPU that set it
most often, that GPU's mean and hottest die temperature, the coolant (or inlet air) its row's CDU supplies and that
CDU's setpoint, and the facility water setpoint. Run it for loop off and loop on to see whether a pace lost or
gained is the pace-setter's heat, its cap or its coolant.

Run (one 2 h pass of the packaged mixed_hall, about 2.5 min on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/trace_pace_setter.py --seed 0 --job pretrain
    PYTHONPATH=src .venv/bin/python benchmarks/trace_pace_setter.py --seed 0 --job pretrain --loop-off
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from twinloop.closedloop.passes import run_pass
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.gpu_rates import work_rate
from twinloop.twin.jobs import Phase

sys.path.insert(0, str(Path(__file__).parent))
from trace_job_mixed_hall import _spec, pass_parser  # the same scenario loader and options


@dataclass
class Window:
    """Sums over one window's steps."""

    pace: list[float] = field(default_factory=list)
    setter: Counter[str] = field(default_factory=Counter)
    setter_temp_c: list[float] = field(default_factory=list)
    supply_c: list[float] = field(default_factory=list)
    setpoint_c: list[float] = field(default_factory=list)
    facility_water_c: list[float] = field(default_factory=list)


class PaceSetter:
    """An ``on_step`` hook: each step the job computes, its slowest GPU and that GPU's row's coolant."""

    def __init__(self, job_name: str, window_s: float) -> None:
        self.job_name = job_name
        self.window_s = window_s
        self.windows: dict[int, Window] = {}

    def __call__(self, twin: Twin, result: StepResult) -> None:
        job = next(j for j in twin.jobs if j.spec.name == self.job_name)
        if job.phase != Phase.SUSTAINED or job.gpus.size == 0:
            return
        ph = twin.physics
        x = ph.x_of_g(ph.gpus.g[job.gpus]).astype(np.float64)
        if job.rates is None:
            rate = x
        else:
            kinds = twin.topo.gpu_kind[job.gpus]
            rate = work_rate(x, job.profile.compute_fraction, job.rates.compute[kinds], job.rates.memory[kinds])
        w = self.windows.setdefault(int(result.t_s // self.window_s), Window())
        w.pace.append(job.speed)
        if float(rate.max() - rate.min()) < 1e-6:
            return  # every rank at the same rate (between compute phases): no GPU sets the pace
        gpu = int(job.gpus[int(np.argmin(rate))])
        row = int(twin.topo.gpu_row[gpu])
        cs = twin.cooling.state
        w.setter[twin.topo.gpu_id(gpu)] += 1
        w.setter_temp_c.append(float(ph.gpus.temp_c[gpu]))
        w.supply_c.append(float(cs.supply_c[row]))
        w.setpoint_c.append(float(cs.setpoint_c[row]))
        w.facility_water_c.append(float(cs.facility_water_setpoint_c))


def main() -> None:
    ap = pass_parser(__doc__)
    ap.add_argument("--job", default="pretrain")
    args = ap.parse_args()
    hook = PaceSetter(args.job, args.window_s)
    run_pass(_spec(args.seed, None, args.scenario), not args.loop_off, on_step=hook)
    print(f"{args.scenario} seed {args.seed}, loop {'off' if args.loop_off else 'on'}, job {args.job}")
    head = ["from s", "pace", "pace-setter (share of steps)", "its die mean / max C", "row coolant C"]
    head += ["CDU setpoint C", "facility water C"]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for k in sorted(hook.windows):
        w = hook.windows[k]
        if not w.setter:
            print(f"| {k * args.window_s:.0f} | {np.mean(w.pace):.3f} | — | — | — | — | — |")
            continue
        gpu, n = w.setter.most_common(1)[0]
        print(
            f"| {k * args.window_s:.0f} | {np.mean(w.pace):.3f} | `{gpu}` ({n / len(w.setter_temp_c):.0%}) "
            f"| {np.mean(w.setter_temp_c):.1f} / {np.max(w.setter_temp_c):.1f} | {np.mean(w.supply_c):.1f} "
            f"| {np.mean(w.setpoint_c):.1f} | {np.mean(w.facility_water_c):.1f} |"
        )
    pace = [p for w in hook.windows.values() for p in w.pace]
    print(f"\nmean pace while computing: {np.mean(pace):.4f} over {len(pace)} steps")


if __name__ == "__main__":
    main()
