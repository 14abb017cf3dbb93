"""Issue 14, the new user's check: the loop on halls nobody tuned on (``sweeps/new-user/``), loop off vs on.

For each scenario and seed, one pass loop off and one loop on (auto mode, the packaged policy, cooling optimizer
and precooling as ``twinloop run`` has them; the same calls as ``twinloop sweep sweeps/new-user.yaml``). Prints per
scenario: loop off vs on as mean [95 % Student-t interval] over the seeds for goodput per job, energy per useful
token, cooling energy, throttled GPU-s, incidents and false alarms; the injected faults found (recall); and the
loop-on actions counted by kind and status (applied, refused, rolled back...). ``--log`` adds every loop-on
action of one scenario (time, kind, target, value, status, source, reason) for an audit by hand. ``--save`` keeps
the per-run figures and actions as JSON; ``--load`` prints the tables from such a file without running anything.
``--no-cooling-optimizer`` runs loop on without the cooling optimizer (what the optimizer adds to a difference).

Round 1 is the four halls of ``sweeps/new-user.yaml``, round 2 (``--round 2``) the five of ``sweeps/new-user-2.yaml``,
round 3 (``--round 3``) five more of ``sweeps/new-user/`` (an H200 hall, two jobs' faults within a minute, a job
saving once an hour, a hall at its power budget in a heat wave, serving fleets with a lost GPU and a hang), round 4
(``--round 4``) serving-hang with one replica hung instead of the whole fleet, round 5 (``--round 5``) four more (a
thermal-interface fault on a job that can move to a free node of its model beside one that cannot, the packaged
mixed_hall with its faults moved, checkpoints every 3 min with slow GPUs from the start and a PSU loss, a serving hall
in a utility demand-response event).

``--progress SCENARIO:SEED`` runs only that pair of passes (a hall here, else a packaged scenario by name) and prints,
every 60 s of the run, loop off and on: each training job's iterations, the cooling power, the facility-water
setpoint and the hottest GPU (where a goodput difference comes from).

Run (40 passes, ~8 min on 2 shared cores):
    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/new_user_halls.py --workers 2 --save /tmp/new-user.json
    PYTHONPATH=src .venv/bin/python benchmarks/new_user_halls.py --load /tmp/new-user.json --log same-place:0
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import twinloop
from loop_robustness_tables import fmt, interval, paired  # benchmarks/ (this script's directory)
from twinloop.closedloop.passes import outcome_metrics, run_pass
from twinloop.twin.scenario import load_scenario

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "sweeps" / "new-user"
#: The halls of each round of the check (round 1: ``sweeps/new-user.yaml``; round 2: ``sweeps/new-user-2.yaml``;
#: rounds 3 to 5: only here).
ROUNDS = {
    "1": ("quiet-hall", "a100-air-hall", "same-place", "large-hall"),
    "2": ("slow-checkpoint", "serving-fleet", "b200-hall", "slow-telemetry", "sdc-restart"),
    "3": ("h200-pump", "two-jobs", "long-checkpoint", "budget-heatwave", "serving-hang"),
    "4": ("replica-hang",),
    "5": ("thermal-move", "mixed-shifted", "frequent-checkpoint", "demand-response"),
}
#: Outcome rows printed per scenario (goodput and ETTR per job are added from the runs).
FIGURES = (
    "energy_per_useful_token_j",
    "cooling_energy_kwh",
    "thermal_throttled_gpu_s",
    "power_throttled_gpu_s",
    "psu_trips",
    "max_gpu_temp_c",
    "incidents",
    "false_alarms",
    "actions_applied",
)


def one_run(
    scenario: str, seed: int, loop_on: bool, drop: tuple[str, ...] = (), optimize_cooling: bool = True
) -> dict[str, Any]:
    """One pass of ``sweeps/new-user/<scenario>.yaml`` at ``seed`` (without its faults of the kinds in ``drop``; loop
    on without the cooling optimizer where ``optimize_cooling`` is False): its figures, detection and actions."""
    spec = load_scenario(SCENARIO_DIR / f"{scenario}.yaml", seed=seed)
    if drop:
        spec = spec.model_copy(update={"faults": tuple(f for f in spec.faults if f.kind not in drop)})
    r = run_pass(spec, loop_on, mode="auto", source=scenario, optimize_cooling=optimize_cooling)
    figures = {k: v for k, v in outcome_metrics(r).items() if v is not None and math.isfinite(v)}
    figures["incidents"] = float(len(r.incidents))
    figures["false_alarms"] = float(len(r.detection.false_alarms))
    figures["actions_applied"] = float(sum(a.status == "applied" for a in r.actions))
    actions = [
        {
            "ts": a.ts,
            "kind": str(a.request.kind),
            "target": a.request.target,
            "value": a.request.value,
            "status": str(a.status),
            "source": a.source,
            "incident": a.request.incident_id,
            "reason": a.request.reason,
            "detail": a.detail,
        }
        for a in r.actions
    ]
    incidents = {i.incident_id: f"{i.event_class} {i.root} [{i.start_ts:.0f}-{i.end_ts:.0f} s]" for i in r.incidents}
    return {
        "scenario": scenario,
        "seed": seed,
        "loop": "on" if loop_on else "off",
        "wall_s": r.wall_s,
        "metrics": figures,
        "recall": {q.fault: q.recall for q in r.detection.per_fault},
        "faults": [f"{f.kind} {f.entity} {f.start_s:.0f}-{f.end_s:.0f} s" for f in r.faults],
        "false_alarms": [f"{i.event_class} {i.root} at {i.start_ts:.0f} s" for i in r.detection.false_alarms],
        "incidents": {str(k): v for k, v in incidents.items()},
        "actions": actions,
    }


def _spec_path(scenario: str) -> Path:
    """A hall of ``sweeps/new-user/``, else the packaged scenario of that name."""
    hall = SCENARIO_DIR / f"{scenario}.yaml"
    return hall if hall.exists() else Path(twinloop.__file__).parent / "scenarios" / f"{scenario}.yaml"


def progress(scenario: str, seed: int, every_s: float = 60.0) -> list[str]:
    """Loop off vs on, every ``every_s``: training iterations per job (and on - off), cooling kW, facility water °C,
    hottest GPU °C."""
    rows: dict[bool, list[tuple[float, list[float], float, float, float]]] = {False: [], True: []}
    for on in (False, True):

        def sample(twin: Any, result: Any, on: bool = on) -> None:
            if abs(twin.t_s % every_s) < 1e-6:
                its = [j.iterations for j in twin.jobs if j.kind == "training"]
                fw = float(twin.cooling.state.facility_water_setpoint_c)
                rows[on].append((twin.t_s, its, twin.cooling_w / 1e3, fw, float(twin.state["gpu_temp_c"].max())))

        run_pass(load_scenario(_spec_path(scenario), seed=seed), on, mode="auto", on_step=sample, source=scenario)
    out = [
        f"\n### {scenario} seed {seed}: loop off | on every {every_s:g} s\n",
        "| t s | iterations off | on | on - off | cooling kW off | on | facility water C off | on | hottest off | on |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (t, i0, c0, f0, g0), (_, i1, c1, f1, g1) in zip(rows[False], rows[True], strict=False):
        diff = ", ".join(f"{b - a:+.0f}" for a, b in zip(i0, i1, strict=False))
        its0, its1 = ", ".join(f"{x:.0f}" for x in i0), ", ".join(f"{x:.0f}" for x in i1)
        out.append(
            f"| {t:.0f} | {its0} | {its1} | {diff} | {c0:.0f} | {c1:.0f} | {f0:g} | {f1:g} | {g0:.1f} | {g1:.1f} |"
        )
    return out


def run_all(
    scenarios: list[str], seeds: list[int], workers: int, drop: tuple[str, ...] = (), optimize_cooling: bool = True
) -> list[dict[str, Any]]:
    """Every (scenario, seed, loop off/on) pass, ``workers`` processes at a time."""
    cells = [(s, seed, on, drop, optimize_cooling) for s in scenarios for seed in seeds for on in (False, True)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one_run, *zip(*cells, strict=True)))


def scenario_table(scenario: str, runs: list[dict[str, Any]]) -> list[str]:
    """Markdown for one scenario: figures off vs on, recall per injected fault, actions by kind and status."""
    off = {r["seed"]: r for r in runs if r["scenario"] == scenario and r["loop"] == "off"}
    on = {r["seed"]: r for r in runs if r["scenario"] == scenario and r["loop"] == "on"}
    if not off and not on:
        return []
    jobs = sorted({k for r in (*off.values(), *on.values()) for k in r["metrics"] if k.startswith(("goodput", "ettr"))})
    lines = [f"### `{scenario}`: {len(off)} seeds loop off, {len(on)} loop on", ""]
    lines += ["| figure | loop off | loop on | paired change | loop better in |", "|---|---|---|---|---|"]
    for key in (*jobs, *FIGURES):
        cells = [interval([r["metrics"][key] for r in g.values() if key in r["metrics"]]) for g in (off, on)]
        change, tally = paired(off, on, key)
        lines.append(f"| {key} | {cells[0]} | {cells[1]} | {change} | {tally} |")
    recall: dict[str, list[float]] = {}
    for r in (*off.values(), *on.values()):
        for fault, value in r["recall"].items():
            recall.setdefault(fault, []).append(value)
    if recall:
        found = ", ".join(f"{f} {sum(v) / len(v):.2f}" for f, v in sorted(recall.items()))
        lines += ["", f"Recall of the injected faults (mean over {len(off) + len(on)} runs): {found}."]
    counts = Counter((a["kind"], a["status"]) for r in on.values() for a in r["actions"])
    lines += ["", f"Loop-on actions over {len(on)} seeds, by kind and status:", ""]
    lines += ["| action | status | count |", "|---|---|---|"]
    lines += [f"| {k} | {s} | {n} |" for (k, s), n in sorted(counts.items())] or ["| — | — | 0 |"]
    return [*lines, ""]


def action_log(runs: list[dict[str, Any]], scenario: str, seed: int) -> list[str]:
    """Every loop-on action of one run, with the incidents and faults it can be checked against."""
    run = next(r for r in runs if r["scenario"] == scenario and r["seed"] == seed and r["loop"] == "on")
    lines = [f"#### `{scenario}` seed {seed}, loop on", "", "Faults: " + "; ".join(run["faults"]), ""]
    lines += ["Incidents: " + "; ".join(f"#{k} {v}" for k, v in run["incidents"].items()), ""]
    lines += ["| t s | kind | target | value | status | source | incident | reason |", "|---" * 8 + "|"]
    for a in run["actions"]:
        value = "" if a["value"] is None else fmt(a["value"])
        lines.append(
            f"| {a['ts']:.0f} | {a['kind']} | {a['target']} | {value} | {a['status']} | {a['source']} "
            f"| {a['incident']} | {a['reason'][:90]} |"
        )
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--round", choices=sorted(ROUNDS), default="1", help="which round's halls to run (default 1)")
    ap.add_argument("--scenarios", help="comma-separated names under sweeps/new-user (default: the round's)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--drop-fault", default="", help="comma-separated fault kinds left out of every scenario")
    ap.add_argument(
        "--no-cooling-optimizer", action="store_true", help="loop on without the cooling optimizer (what it adds)"
    )
    ap.add_argument("--save", type=Path, help="write the per-run figures and actions here (JSON)")
    ap.add_argument("--load", type=Path, help="print from a --save file instead of running")
    ap.add_argument("--log", action="append", default=[], help="SCENARIO:SEED whose loop-on actions to list")
    ap.add_argument("--progress", help="SCENARIO:SEED: loop off vs on over time, only (see module docstring)")
    args = ap.parse_args()
    if args.progress:
        name, seed = args.progress.rsplit(":", 1)
        print("\n".join(progress(name, int(seed))))
        return
    scenarios = [s for s in args.scenarios.split(",") if s] if args.scenarios else list(ROUNDS[args.round])
    started = time.perf_counter()
    if args.load:
        runs = json.loads(args.load.read_text())
        for r in runs:  # files saved before the key was renamed
            r.setdefault("metrics", r.pop("figures", {}))
    else:
        drop = tuple(k for k in args.drop_fault.split(",") if k)
        seeds = [int(s) for s in args.seeds.split(",")]
        runs = run_all(scenarios, seeds, args.workers, drop, not args.no_cooling_optimizer)
        if args.save:
            args.save.write_text(json.dumps(runs))
    for scenario in scenarios:
        print("\n".join(scenario_table(scenario, runs)))
    for item in args.log:
        name, seed = item.rsplit(":", 1)
        print("\n".join(action_log(runs, name, int(seed))))
    print(
        f"{len(runs)} passes; {time.perf_counter() - started:.0f} s wall here (pass wall sum "
        f"{sum(r['wall_s'] for r in runs):.0f} s)"
    )


if __name__ == "__main__":
    main()
