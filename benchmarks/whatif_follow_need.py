"""Issue 14: what mixed_hall's cooling price buys — a what-if, not a loop decision.

On the packaged ``mixed_hall`` the site's reactive PID chases each row's hottest GPU; on the H100 row that is a GPU
with a failing thermal interface, so the PID sits at its coldest setpoint (22.5 C) and the cooling optimizer's
facility-water follow (coldest supply setpoint minus the approach) keeps the plant's water at 19.5 C where loop
off's fixed 22 C gives the row 25 C. This runs three passes of one seed: loop off, loop on, and loop on with the
follow counting a row whose hottest GPU has an open local thermal fault (the optimizer's ``local`` callback) at
the supply its *mean* GPU needs to sit at the target less the band (``supply + target - band - mean``, the
optimizer's own test for tightening such a row), not at the setpoint the PID asks: the water one GPU's fault no
longer sets. It prints each pass's outcome and, for the what-if, where its thermal throttling is and the facility
water by window (``--window-s``; ``--loop-off`` is not used: all three passes run).

Run (three 2 h passes of mixed_hall, about 3 min on a shared core):
    PYTHONPATH=src .venv/bin/python benchmarks/whatif_follow_need.py --seed 0
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np

from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.ops.detect.rules import CDU_SUPPLY, TEMP
from twinloop.ops.respond import cooling_optimizer as co
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.responder import Reader
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult

sys.path.insert(0, str(Path(__file__).parent))
from trace_job_mixed_hall import _spec, pass_parser  # the same scenario loader and options

_SHOWN = ("cooling_energy_kwh", "thermal_throttled_gpu_s", "energy_per_useful_token_j")


def _need_view(opt: co.CoolingOptimizer, read: Reader) -> Callable[[ActionKind, str], float | None]:
    """The optimizer's ``_current`` with a locally faulted row's setpoint read as its mean GPU's need (or higher)."""
    real, c = opt._current, opt.config

    def current(kind: ActionKind, target: str) -> float | None:
        value = real(kind, target)
        faulted = opt.local is not None and target in opt.rows and opt.local(target)
        if kind != ActionKind.CDU_SETPOINT or value is None or not faulted:
            return value
        mean, supply = read(TEMP, target, "mean"), read(CDU_SUPPLY, target)
        if mean is None or supply is None:
            return value
        return max(value, min(supply + c.target_gpu_temp_c - c.band_c - mean, c.supply_max_c))

    return current


def follow_need() -> Any:
    """A patch of the follow (:meth:`CoolingOptimizer._facility_water`) reading setpoints through :func:`_need_view`."""
    original = co.CoolingOptimizer._facility_water

    def patched(self: co.CoolingOptimizer, now: float, read: Any) -> list[Any]:
        with patch.object(self, "_current", _need_view(self, read)):
            return original(self, now, read)

    return patch.object(co.CoolingOptimizer, "_facility_water", patched)


class ThrottleByGpu:
    """An ``on_step`` hook: each GPU's seconds limited by temperature (the twin's ``limited & thermal_bound``) and the
    facility water per window of ``window_s``.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.gpu_s = np.zeros(0)
        self.gpu_ids: list[str] = []
        self.water_c: dict[int, list[float]] = {}

    def __call__(self, twin: Twin, result: StepResult) -> None:
        throttled = twin.physics.gpus.limited & twin.physics.gpus.thermal_bound
        if not self.gpu_ids:
            self.gpu_ids = [twin.topo.gpu_id(g) for g in range(throttled.size)]
            self.gpu_s = np.zeros(throttled.size)
        self.gpu_s += throttled * twin.dt_s
        water_c = float(twin.cooling.state.facility_water_setpoint_c)
        self.water_c.setdefault(int(result.t_s // self.window_s), []).append(water_c)


def main() -> None:
    args = pass_parser(__doc__).parse_args()
    spec = _spec(args.seed, None, args.scenario)
    passes = {"loop off": outcome_metrics(run_pass(spec, False)), "loop on": outcome_metrics(run_pass(spec, True))}
    hook = ThrottleByGpu(args.window_s)
    with follow_need():
        passes["loop on, follow the need"] = outcome_metrics(run_pass(spec, True, on_step=hook))
    goodputs = sorted(k for k in passes["loop off"] if k.startswith("goodput"))
    head = ["pass", *_SHOWN, *goodputs]
    print(f"{args.scenario} seed {args.seed}")
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for name, m in passes.items():
        print(f"| {name} | " + " | ".join(f"{m[k]:.4g}" for k in head[1:]) + " |")
    by_row: dict[str, float] = {}
    for gpu, s in zip(hook.gpu_ids, hook.gpu_s, strict=True):
        row = gpu.rsplit("/", 3)[0]
        by_row[row] = by_row.get(row, 0.0) + float(s)
    top = int(np.argmax(hook.gpu_s))
    print(f"\nwhat-if thermal throttling: {hook.gpu_ids[top]} {hook.gpu_s[top]:.0f} GPU-s; by row: {by_row}")
    water = ", ".join(f"{k * args.window_s:.0f}: {np.mean(v):.1f}" for k, v in sorted(hook.water_c.items()))
    print(f"what-if facility water C by {args.window_s:.0f} s window (from s): {water}")


if __name__ == "__main__":
    main()
