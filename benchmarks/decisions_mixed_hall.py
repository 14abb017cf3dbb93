"""Issue 14, stragglers located and explained: the packaged ``mixed_hall`` scenario (a job over an H100 row and an
A100 row), loop off vs on; prints per-job goodput, the loop's applied drains and requeues, and the straggler
incidents with their roots (markdown), plus one JSON line per seed (with the `gpu-cooling-fault` power caps and
the figure each was computed from).

Run (each seed is two 2 h simulated passes, a few minutes on a quiet core):
    PYTHONPATH=src .venv/bin/python benchmarks/decisions_mixed_hall.py --seeds 7
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import yaml

import twinloop
from twinloop.closedloop.passes import PassResult, compare, outcome_metrics
from twinloop.ops.events import EventClass
from twinloop.ops.respond.policy import Policy, default_policy
from twinloop.ops.respond.restart_cost import RestartWhen
from twinloop.twin.scenario import scenario_from_dict


def _actions(r: PassResult, kind: str) -> int:
    return sum(1 for a in r.actions if str(a.request.kind) == kind and a.status == "applied")


def _stragglers(r: PassResult) -> list[str]:
    return sorted({i.root for i in r.incidents if i.event_class == EventClass.STRAGGLER})


def _straggler_decisions(r: PassResult) -> list[str]:
    """The straggler rules' first applied action per incident: when and why (the restart cost model's line)."""
    seen: dict[int, str] = {}
    for a in r.actions:
        rule = a.request.reason.split(" on incident", 1)[0]
        if rule.startswith("straggler") and a.status == "applied" and a.request.incident_id not in seen:
            seen[a.request.incident_id] = f"t={a.ts:.0f} {a.request.reason}"
    return list(seen.values())


def _forced(restart: RestartWhen) -> Policy:
    """The default policy with every straggler answered by one option (what-if: ``never`` = drain only)."""
    pol = default_policy()
    rules = [
        r if r.restart is None else r.model_copy(update={"restart": None})
        for r in pol.rules
        if r.restart in (None, restart)
    ]
    return pol.model_copy(update={"rules": tuple(rules)})


def run(seed: int, duration_s: float | None, restart: RestartWhen | None = None) -> dict[str, object]:
    """One seed, loop off and on (with ``restart``, the loop-on pass answers every straggler that way)."""
    path = Path(twinloop.__file__).parent / "scenarios" / "mixed_hall.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["seed"] = seed
    if duration_s is not None:
        raw["duration_s"] = duration_s
    policy = None if restart is None else _forced(restart)
    off, on = compare(scenario_from_dict(raw, str(path), str(path.parent)), policy=policy)
    mo, mn = outcome_metrics(off), outcome_metrics(on)
    return {
        "seed": seed,
        "goodput_off": {k: v for k, v in mo.items() if k.startswith("goodput")},
        "goodput_on": {k: v for k, v in mn.items() if k.startswith("goodput")},
        "drains_on": _actions(on, "drain"),
        "requeues_on": _actions(on, "requeue"),
        "actions_on": dict(Counter(f"{a.request.kind}:{a.status}" for a in on.actions)),
        "straggler_roots_off": _stragglers(off),
        "straggler_roots_on": _stragglers(on),
        "straggler_decisions_on": _straggler_decisions(on),
        "kept_back_on": [
            f"t={a.ts:.0f} {a.request.reason.split(' on incident', 1)[0]}: {a.detail}"
            for a in on.actions
            if "kept back" in a.detail or "kept back" in a.request.reason
        ],
        "thermal_caps_on": [
            f"t={a.ts:.0f} {a.status} {a.request.value:.0f} W: {a.request.reason.split('): ', 1)[-1]}"
            for a in on.actions
            if a.request.kind == "power_cap"
            and a.request.reason.startswith("gpu-cooling-fault")
            and a.status in ("applied", "refused")
            and a.request.value is not None
        ],
        "injected_stragglers": [f.entity for f in (*off.faults, *off.background) if "straggler" in f.kind],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7])
    ap.add_argument("--duration-s", type=float, default=None, help="override the scenario's 2 h")
    ap.add_argument(
        "--straggler-restart",
        choices=["now", "at_checkpoint", "never"],
        default=None,
        help="what-if: answer every straggler this way instead of by the restart cost model",
    )
    args = ap.parse_args()
    rows = [run(s, args.duration_s, args.straggler_restart) for s in args.seeds]
    for r in rows:
        print(json.dumps(r))
    print("\n| seed | job | goodput off (tok/s) | goodput on (tok/s) | drains on | requeues on |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        off, on = r["goodput_off"], r["goodput_on"]
        assert isinstance(off, dict) and isinstance(on, dict)
        for k in off:
            print(
                f"| {r['seed']} | {k[len('goodput_tokens_per_s[') : -1]} | {off[k]:.4g} | {on[k]:.4g}"
                f" | {r['drains_on']} | {r['requeues_on']} |"
            )


if __name__ == "__main__":
    main()
