"""Issue 14: where a scenario's power-throttled GPU-s and training work go, second by second, loop off and on.

Every step's increment of the twin's ``power_throttled_below_tdp_gpu_s`` (and every PSU trip) is filed under what
the node that lost PSUs was doing: its job computing or writing a checkpoint, with or without the loop's cap, the
node idle after its job moved, or no PSU fault open. Beside it: what the same
steps would have counted before the twin counted each GPU-second once (a GPU capped and braked twice, a braked GPU
with no job as throttled), and the PSU node's draw while the job writes its checkpoint.

The 70B training job's work (``job[...]``): iterations kept while a PSU fault is open and while none is, and the
iterations each interruption threw away (by its reason). A gain the loop makes on the PSU node can be lost at a later,
unrelated interruption when the forced checkpoint and restart moved the job's checkpoint schedule
(``--scenario power-events``: the GPU off the bus at 46-50 min).

Variants of the packaged policy's `power-delivery-fault` rule: ``--without-cap`` (no power cap; the checkpoint,
drain and requeue stay), ``--fixed-wait-s 30`` (drain and requeue no earlier than 30 s after the rule fires, the
policy before commit 7c42e23), ``--stay-capped`` (the cap only: the job stays on the capped node).

Run (two ~1 h passes per seed, ~25-50 s each on this machine):
    PYTHONPATH=src .venv/bin/python benchmarks/psu_response_trace.py --seeds 0 1 2 3 4
    PYTHONPATH=src .venv/bin/python benchmarks/psu_response_trace.py --seeds 0 1 2 3 4 --loop-on-only --without-cap
    PYTHONPATH=src .venv/bin/python benchmarks/psu_response_trace.py --scenario power-events --seeds 0 1 2 3 4
    PYTHONPATH=src .venv/bin/python benchmarks/psu_response_trace.py --scenario power-events --seeds 0 1 2 3 4 \
        --without-fault gpu_fall_off_bus
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

import twinloop
from twinloop.closedloop.passes import run_pass
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import Policy, default_policy
from twinloop.twin.engine import BELOW_TDP_FRACTION, Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict

RULE = "power-delivery-fault"
JOB = "train-llama-70b"


def spec_for(seed: int, scenario: str = "default", without: tuple[str, ...] = ()) -> ScenarioSpec:
    """The packaged ``scenario`` with ``seed``, less its injected faults of the kinds ``without``."""
    path = Path(twinloop.__file__).parent / "scenarios" / f"{scenario}.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["seed"] = seed
    raw["faults"] = [f for f in raw.get("faults", []) if f["kind"] not in without]
    return scenario_from_dict(raw, str(path), str(path.parent))


def policy_variant(without_cap: bool, fixed_wait_s: float, stay_capped: bool = False) -> Policy:
    """The packaged policy with its PSU rule changed as asked."""
    base = default_policy()
    rules = []
    for rule in base.rules:
        if rule.name == RULE:
            actions = [a for a in rule.actions if not (without_cap and a.kind == ActionKind.POWER_CAP)]
            if stay_capped:
                actions = [a for a in actions if a.kind == ActionKind.POWER_CAP]
            if fixed_wait_s > 0:
                moves = (ActionKind.DRAIN, ActionKind.REQUEUE)
                actions = [a.model_copy(update={"after_s": fixed_wait_s}) if a.kind in moves else a for a in actions]
            rule = rule.model_copy(update={"actions": tuple(actions)})
        rules.append(rule)
    return base.model_copy(update={"rules": tuple(rules)})


@dataclass
class Trace:
    """Per category: GPU-s counted now, GPU-s the old accounting counted, PSU trips; the checkpoint write's draw."""

    gpu_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    old_gpu_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    trips: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    write_gpu_w: list[float] = field(default_factory=list)
    write_node_peak_w: list[float] = field(default_factory=list)
    job_kept: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    job_lost: list[tuple[float, str, float]] = field(default_factory=list)
    _counted: float = 0.0
    _trips: int = 0
    _iterations: float = 0.0

    def __call__(self, twin: Twin, result: StepResult) -> None:
        acc = twin.accounts
        d = acc.power_throttled_below_tdp_gpu_s - self._counted
        trips = acc.psu_overloads - self._trips
        self._counted, self._trips = acc.power_throttled_below_tdp_gpu_s, acc.psu_overloads
        self._job_work(twin, result)
        a = twin.physics.gpus
        capped = a.limited & ~a.thermal_bound & (a.limit_w < twin.physics.tdp_w * np.float32(BELOW_TDP_FRACTION))
        old = (int(np.count_nonzero(capped)) + twin.braked_gpus.size) * twin.dt_s
        cat = self._category(twin)
        if d == 0 and old == 0 and trips == 0:
            return
        self.gpu_s[cat] += d
        self.old_gpu_s[cat] += old
        self.trips[cat] += trips

    def _job_work(self, twin: Twin, result: StepResult) -> None:
        """The 70B job's iterations gained this step, filed by whether a PSU fault is open; a rewind to its last
        checkpoint is recorded with the interruption's reason.
        """
        job = twin.job_by_name(JOB)
        if job is None:
            return
        delta = job.iterations - self._iterations
        self._iterations = job.iterations
        if delta < 0:
            # No interruption in the step: the loop's requeue, applied between steps, dropped work since the save.
            details = [e.detail for e in result.events if e.kind == "job_interrupted" and JOB in e.entity]
            reason = details[0] if details else "loop requeue"
            self.job_lost.append((result.t_s, reason.split(" on ")[0].split(";")[0], -delta))
            return
        psu_open = bool((twin.chain.psus_alive < twin.chain.psus_installed).any())
        self.job_kept["PSU fault open" if psu_open else "no PSU fault open"] += delta

    def _category(self, twin: Twin) -> str:
        """What the node that lost PSUs is doing; its draw while its job writes a checkpoint is recorded."""
        short = np.flatnonzero(twin.chain.psus_alive < twin.chain.psus_installed)
        if short.size == 0:
            return "no PSU fault open"
        node = int(short[0])
        owner = int(twin.scheduler.node_owner[node])
        if owner < 0:
            return "node idle (job moved)"
        s = int(twin.topo.node_start[node])
        gpus = slice(s, s + int(twin.topo.node_gpus[node]))
        cap = "cap" if float(twin.physics.gpus.user_limit_w[gpus].max()) < float(twin.physics.tdp_w[s]) else "no cap"
        if twin.jobs[owner].phase.name == "CHECKPOINT":
            self.write_gpu_w.append(float(twin.physics.gpus.power_w[gpus].mean()))
            self.write_node_peak_w.append(float(twin.node_peak_w[node]))
            return f"{cap}, checkpoint write"
        return f"{cap}, job computing"


def run(
    seed: int, loop_on: bool, policy: Policy | None, scenario: str = "default", without: tuple[str, ...] = ()
) -> dict[str, object]:
    """One pass; its totals and the trace by category."""
    trace = Trace()
    r = run_pass(spec_for(seed, scenario, without), loop_on, policy=policy, on_step=trace)
    goodput = {j["name"]: j["goodput_tokens_per_s"] for j in r.summary["jobs"]}
    return {
        "seed": seed,
        "loop": "on" if loop_on else "off",
        "power_throttled_gpu_s": r.summary["power_throttled_below_tdp_gpu_s"],
        "old_accounting_gpu_s": sum(trace.old_gpu_s.values()),
        "psu_trips": r.summary["psu_overloads"],
        "gpu_s": dict(trace.gpu_s),
        "old_gpu_s": dict(trace.old_gpu_s),
        "trips": dict(trace.trips),
        "write_gpu_w_mean": float(np.mean(trace.write_gpu_w)) if trace.write_gpu_w else None,
        "write_node_peak_w_max": max(trace.write_node_peak_w) if trace.write_node_peak_w else None,
        f"goodput[{JOB}]": goodput.get(JOB),
        f"job[{JOB}] iterations kept": dict(trace.job_kept),
        f"job[{JOB}] iterations lost (t_s, reason, iterations)": trace.job_lost,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="default", help="a packaged scenario (default: default)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--without-fault", nargs="*", default=[], help="leave out the scenario's faults of these kinds")
    ap.add_argument("--loop-on-only", action="store_true")
    ap.add_argument("--without-cap", action="store_true", help=f"no power cap in the {RULE} rule")
    ap.add_argument("--fixed-wait-s", type=float, default=0.0, help="drain and requeue no earlier than this")
    ap.add_argument("--stay-capped", action="store_true", help=f"the {RULE} rule's cap only: the job stays")
    args = ap.parse_args()
    policy = policy_variant(args.without_cap, args.fixed_wait_s, args.stay_capped)
    for seed in args.seeds:
        for loop_on in (True,) if args.loop_on_only else (False, True):
            out = run(seed, loop_on, policy if loop_on else None, args.scenario, tuple(args.without_fault))
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
