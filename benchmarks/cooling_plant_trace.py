"""Where the loop's energy per useful token goes: one scenario and seed, loop off against loop on with parts removed.

Per variant: facility, IT and cooling energy, the 70B job's kept iterations and interruptions, useful tokens and
energy per useful token, and per minute the training job's slowest relative clock, hottest GPU and the row
setpoints. The variants remove one part of the loop at a time, so each one's change against the full loop is what
that part costs or saves:

* ``no optimizer``: the incident rules alone (the cooling optimizer off);
* ``optimizer only``: the optimizer with no incident rule (every rule of the default policy removed but one that
  never fires: a policy needs one);
* ``no cooling rule``: the full loop less the ``cooling-degradation`` rule (the capacity loss and pump degradation
  are answered by the optimizer alone);
* ``no sdc/hang rule``: the full loop less the ``suspected-sdc`` and ``job-hang`` rules;
* ``referee``: the full loop with the optimizer's referee on (:class:`~twinloop.ops.respond.relax_value.RelaxValue`,
  ``CoolingOptimizerConfig.referee``, off by default), ``referee, optimizer only`` and ``referee, no cooling rule``.

Run: PYTHONPATH=src python benchmarks/cooling_plant_trace.py [--scenario cooling-plant] [--seed 0]
     [--variants "loop off" "loop on"] [--minutes]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import twinloop
from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.ops.respond.cooling_optimizer import CoolingOptimizerConfig
from twinloop.ops.respond.policy import Policy, default_policy
from twinloop.twin.engine import StepResult, Twin
from twinloop.twin.jobs import Phase
from twinloop.twin.scenario import ScenarioSpec, load_scenario

#: variant -> (loop on, optimizer on, rules of the default policy removed, referee on)
VARIANTS: dict[str, tuple[bool, bool, frozenset[str], bool]] = {
    "loop off": (False, False, frozenset(), False),
    "loop on": (True, True, frozenset(), False),
    "no optimizer": (True, False, frozenset(), False),
    "optimizer only": (True, True, frozenset({"*"}), False),
    "no cooling rule": (True, True, frozenset({"cooling-degradation"}), False),
    "no sdc/hang rule": (True, True, frozenset({"suspected-sdc", "job-hang"}), False),
    "referee": (True, True, frozenset(), True),
    "referee, optimizer only": (True, True, frozenset({"*"}), True),
    "referee, no cooling rule": (True, True, frozenset({"cooling-degradation"}), True),
}


@dataclass(frozen=True)
class _RefereeOn(CoolingOptimizerConfig):
    referee: bool = True


class MinuteTrace:
    """Per minute: the training job's slowest relative clock and mean power, the hottest GPU, row setpoints."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.rows: list[tuple[float, float, float, float, float, tuple[float, ...]]] = []
        self._acc: list[tuple[float, float, float, float]] = []
        self.twin: Twin | None = None

    def hung_unsaved_tokens(self) -> float:
        """Tokens of work since the last checkpoint of the job if it is still hung at the end (0 otherwise): a hung
        job's unsaved work is lost whenever it is restarted, so it is useful only until someone restarts it.
        """
        job = next((j for j in self.twin.jobs if j.spec.name == self.job), None) if self.twin else None
        if job is None or job.phase != Phase.HUNG:
            return 0.0
        return (job.iterations - job.iterations_at_checkpoint) * job.profile.tokens_per_step

    def __call__(self, twin: Twin, result: StepResult) -> None:
        self.twin = twin
        st = twin.state
        job = next((j for j in twin.jobs if j.spec.name == self.job), None)
        if job is not None and job.running and job.gpus.size:
            x = st["gpu_clock_x"][job.gpus]
            self._acc.append(
                (
                    float(x.min()),
                    float(x.mean()),
                    float(st["gpu_power_w"][job.gpus].mean()),
                    float(st["gpu_temp_c"][job.gpus].max()),
                )
            )
        if round(twin.t_s) % 60 == 0 and self._acc:
            a = np.array(self._acc)
            sp = tuple(float(s) for s in st["cdu_setpoint_c"])
            self.rows.append((twin.t_s, *a.mean(axis=0)[:3], float(a[:, 3].max()), sp))
            self._acc = []


def _scenario(name: str, seed: int) -> ScenarioSpec:
    return load_scenario(Path(twinloop.__file__).parent / "scenarios" / f"{name}.yaml", seed=seed)


def _policy(removed: frozenset[str]) -> Policy | None:
    if not removed:
        return None
    base = default_policy()
    if "*" in removed:
        # A policy needs one rule: keep one for a class this scenario never raises.
        rules = tuple(r for r in base.rules if r.name == "facility-power-excursion")
    else:
        rules = tuple(r for r in base.rules if r.name not in removed)
    return Policy(name=f"{base.name}-less", mode=base.mode, rules=rules)


def run_variant(spec: ScenarioSpec, name: str, job: str) -> tuple[dict[str, Any], MinuteTrace, float]:
    """One pass of ``name``: its figures, its minute trace and its wall seconds."""
    loop, optimizer, removed, referee = VARIANTS[name]
    trace = MinuteTrace(job)
    t0 = time.perf_counter()
    with mock.patch("twinloop.ops.runner.CoolingOptimizerConfig", _RefereeOn if referee else CoolingOptimizerConfig):
        result = run_pass(spec, loop, optimize_cooling=optimizer, policy=_policy(removed), on_step=trace)
    s = result.summary
    m = outcome_metrics(result)
    j = next(j for j in s["jobs"] if j["name"] == job)
    useful = s["energy"]["facility_kwh"] * 3.6e6 / m["energy_per_useful_token_j"]
    out = {
        "facility_kwh": s["energy"]["facility_kwh"],
        "it_kwh": s["energy"]["it_kwh"],
        "cooling_kwh": s["energy"]["cooling_kwh"],
        "iterations": j["iterations"],
        "lost_iterations": j["lost_iterations"],
        "interruptions": j["interruptions"],
        "useful_tokens": useful,
        "energy_per_useful_token_j": m["energy_per_useful_token_j"],
        "saved_only_j": s["energy"]["facility_kwh"] * 3.6e6 / (useful - trace.hung_unsaved_tokens()),
        "power_bound_gpu_s": m["power_bound_gpu_s"],
        "max_gpu_temp_c": m["max_gpu_temp_c"],
        "failures": s["failures"],
        "actions": len(result.actions),
    }
    return out, trace, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="cooling-plant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--job", default="train-llama-70b")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--minutes", action="store_true", help="print each variant's minute trace")
    args = parser.parse_args()
    spec = _scenario(args.scenario, args.seed)
    names = ["loop off"] + [v for v in args.variants if v != "loop off"]
    res: dict[str, dict[str, Any]] = {}
    for name in names:
        res[name], trace, wall = run_variant(spec, name, args.job)
        print(f"{name}: {wall:.0f} s", flush=True)
        if args.minutes:
            print("| min | slowest clock x | mean clock x | mean power W | hottest GPU C | CDU setpoints C |")
            print("|---|---|---|---|---|---|")
            for t, xmin, xmean, p, hot, sp in trace.rows:
                sps = ", ".join(f"{v:.1f}" for v in sp)
                print(f"| {t / 60:.0f} | {xmin:.4f} | {xmean:.4f} | {p:.1f} | {hot:.1f} | {sps} |")
    off = res["loop off"]
    print(f"\n{args.scenario}, seed {args.seed}, job {args.job}")
    print("| variant | facility kWh | IT kWh | cooling kWh | iterations | lost | interruptions | useful tokens "
          "| J/token (vs off) | J/token, hung unsaved lost (vs off) | power-bound GPU-s | max GPU C |")  # fmt: skip
    print("|---" * 12 + "|")
    for name in names:
        r = res[name]
        d = 100.0 * (r["energy_per_useful_token_j"] / off["energy_per_useful_token_j"] - 1.0)
        d2 = 100.0 * (r["saved_only_j"] / off["saved_only_j"] - 1.0)
        print(
            f"| {name} | {r['facility_kwh']:.2f} | {r['it_kwh']:.2f} | {r['cooling_kwh']:.2f} | "
            f"{r['iterations']:.0f} | {r['lost_iterations']:.0f} | {r['interruptions']} | {r['useful_tokens']:.4g} | "
            f"{r['energy_per_useful_token_j']:.4f} ({d:+.1f} %) | {r['saved_only_j']:.4f} ({d2:+.1f} %) | "
            f"{r['power_bound_gpu_s']:,.0f} | {r['max_gpu_temp_c']:.1f} |"
        )


if __name__ == "__main__":
    main()
