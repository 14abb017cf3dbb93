"""Feedback learning on twin runs with delayed labels: threshold tuning and rule-outcome learning, scored on
held-apart seeds.

Every run is a :func:`twinloop.lab.fault_scenarios.random_scenario` (128-256 H100s, 2-3 random faults) of
``--duration`` seconds; runs follow each other back to back on one simulated clock
(:mod:`twinloop.lab.feedback_eval`).

1. Thresholds. Starting from mis-set configurations (every tunable rule threshold × 0.5 / × 0.25 = 2× / 4× too
   sensitive, × 2 / × 4 = too dull) and from the default (× 1), a
   :class:`~twinloop.ops.learn.feedback.ThresholdTuner` learns from ground-truth labels that arrive ``--delay``
   seconds after each alarm (misses: after the run), over the training seeds; the most sensitive start is also
   trained with the labels at once (0 s) and with ``--long-delay``.
   Then default, start and learned settings run on the test seeds (never labeled).
2. Rules. The default policy, and a mis-set one whose cooling rule raises the coolant setpoint instead of
   lowering it, run with the loop on over the training seeds; a
   :class:`~twinloop.ops.learn.feedback.RuleOutcomeLearner` switches off (rule, class) pairs whose actions keep
   being rolled back. Start and learned policies then run on the test seeds.

    python benchmarks/feedback_twin.py [--train 8] [--test 8] [--duration 900] [--starts 0.5,2,0.25,4] [--workers 2]

The serving trace is derived from the Azure Public Dataset, AzureLLMInferenceTrace_conv, CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from twinloop.lab.feedback_eval import (
    RunOutcome,
    TuningResult,
    score,
    train_rules,
    train_thresholds,
    twin_loop_runner,
    twin_observer,
)
from twinloop.ops.detect.pipeline import RULE_THRESHOLDS
from twinloop.ops.events import EventClass
from twinloop.ops.respond.actions import ActionKind
from twinloop.ops.respond.policy import ActionTemplate, ExpectTemplate, Policy, Rule, default_policy

Scale = tuple[tuple[str, float], ...]


def misset_policy() -> Policy:
    """The default policy with its cooling rule replaced by one that warms the coolant (a sign error)."""
    bad = Rule(
        name="cooling-warm-supply",
        when=(EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE),
        at=("row", "rack", "node", "gpu"),
        actions=(ActionTemplate(kind=ActionKind.CDU_SETPOINT, target="cdu", change=3.0),),
        expect=ExpectTemplate(field="DCGM_FI_DEV_GPU_TEMP", direction="down", within_s=120, aggregate="max",
                              min_change=0.5),
    )  # fmt: skip
    pol = default_policy()
    rules = tuple(bad if r.name == "cooling-degradation" else r for r in pol.rules)
    if all(r.name != "cooling-degradation" for r in pol.rules):
        rules = (bad, *rules)
    return pol.model_copy(update={"rules": rules})


# --- jobs (module level so a process pool can run them) ----------------------------------------------------------
def train_job(seeds: Sequence[int], start: float, delay_s: float, duration_s: float) -> TuningResult:
    start_scale = {s: start for s in RULE_THRESHOLDS} if start != 1.0 else {}
    return train_thresholds(
        seeds, twin_observer(duration_s), start_scale=start_scale, label_delay_s=delay_s, duration_s=duration_s
    )


def detect_job(seed: int, scale: Scale, duration_s: float) -> RunOutcome:
    return twin_observer(duration_s)(seed, dict(scale))


def rules_job(seeds: Sequence[int], policy: Policy, duration_s: float) -> tuple[Policy, dict[str, Any]]:
    res = train_rules(seeds, twin_loop_runner(duration_s), policy)
    return res.final_policy, {"judged": res.judged, "rates": res.learner.judged}


def loop_job(seed: int, policy: Policy, duration_s: float) -> RunOutcome:
    return twin_loop_runner(duration_s)(seed, policy)


def pmap(workers: int, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    if workers <= 1:
        return [fn(*c) for c in calls]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(fn, *zip(*calls, strict=True)))


# --- printing ------------------------------------------------------------------------------------------------------
def fmt_scale(scale: Mapping[str, float]) -> str:
    if not scale:
        return "all 1"
    vals = sorted(scale.items())
    return " ".join(f"{k.removeprefix('rule:')}={v:.2f}" for k, v in vals)


def quality_row(name: str, outs: Sequence[RunOutcome]) -> str:
    q = score(outs)
    by_cls = ", ".join(f"{c}:{f}" for c, (_, f) in q.alarms.items() if f)
    return (
        f"  {name:<26} {q.n_alarms:>6} {q.n_false:>6} {q.precision:>9.2f} {q.n_faults:>6} {q.n_detected:>8}"
        f" {q.recall:>6.2f}   {by_cls or '-'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=8, help="training runs (seeds 1000...)")
    ap.add_argument("--test", type=int, default=8, help="held-apart test runs (seeds 5000...)")
    ap.add_argument("--duration", type=float, default=900.0, help="simulated seconds per run (>= 900)")
    ap.add_argument("--delay", type=float, default=1800.0, help="label delay, s")
    ap.add_argument("--long-delay", type=float, default=3600.0, help="the long label delay, s")
    ap.add_argument("--starts", default="0.5,2,0.25,4", help="mis-set start factors on every tunable rule threshold")
    ap.add_argument("--workers", type=int, default=2, help="processes")
    ap.add_argument("--skip-rules", action="store_true", help="thresholds only")
    args = ap.parse_args()
    train = list(range(1000, 1000 + args.train))
    test = list(range(5000, 5000 + args.test))
    d = args.duration
    started = time.perf_counter()
    print(f"feedback on twin runs: {len(train)} training seeds, {len(test)} test seeds, {d:.0f} s runs,"
          f" back to back; labels from ground truth")  # fmt: skip

    # 1. thresholds -------------------------------------------------------------------------------------------------
    starts = [float(s) for s in args.starts.split(",")]
    touchy = min(starts)  # the delay sweep runs on the most sensitive start
    configs = [(s, args.delay) for s in (*starts, 1.0)] + [(touchy, 0.0), (touchy, args.long_delay)]
    t = time.perf_counter()
    trained: list[TuningResult] = pmap(args.workers, train_job, [(train, s, dl, d) for s, dl in configs])
    train_s = time.perf_counter() - t
    print(f"\nthreshold training ({len(configs)} sequences, {train_s:.0f} s): learned scale = start x multiplier")
    for (start, delay), res in zip(configs, trained, strict=True):
        fa = " ".join(str(s.n_false) for s in res.steps)
        miss = " ".join(str(s.n_missed) for s in res.steps)
        print(f"  start x{start:<4} delay {delay:>5.0f} s: labels used {res.labels_used:>3}, in flight"
              f" {res.labels_pending:>3}; false alarms per run [{fa}], misses per run [{miss}]")  # fmt: skip
        print(f"      learned: {fmt_scale(res.final_scale)}")
    settings: dict[str, Scale] = {"default (x1)": ()}
    for s in starts:
        settings[f"start x{s}"] = tuple((src, s) for src in sorted(RULE_THRESHOLDS))
    for (start, delay), res in zip(configs, trained, strict=True):
        settings[f"learned x{start} d={delay:.0f}s"] = tuple(sorted(res.final_scale.items()))
    unique = sorted(set(settings.values()))
    t = time.perf_counter()
    outs = pmap(args.workers, detect_job, [(seed, sc, d) for sc in unique for seed in test])
    test_s = time.perf_counter() - t
    by_scale = {sc: outs[i * len(test) : (i + 1) * len(test)] for i, sc in enumerate(unique)}
    print(f"\nheld-apart test seeds ({len(unique)} distinct settings x {len(test)} runs, {test_s:.0f} s)")
    print(f"  {'setting':<26} {'alarms':>6} {'false':>6} {'precision':>9} {'faults':>6} {'detected':>8} {'recall':>6}"
          "   false alarms by class")  # fmt: skip
    for name, sc in settings.items():
        print(quality_row(name, by_scale[sc]))
    print("\n  detected / injected faults per kind on the test seeds:")
    names = ["default (x1)"] + [n for s in starts for n in (f"start x{s}", f"learned x{s} d={args.delay:.0f}s")]
    qs = {n: score(by_scale[settings[n]]) for n in names}
    print(f"  {'fault kind':<24}" + "".join(f"{n:>22}" for n in names))
    for kind in sorted({k for q in qs.values() for k in q.faults}):
        cells = [qs[n].faults.get(kind, (0, 0)) for n in names]
        row = "".join(f"{f'{det}/{n}':>22}" for n, det in cells)
        print(f"  {kind:<24}{row}")

    # 2. rules -------------------------------------------------------------------------------------------------------
    if not args.skip_rules:
        policies = {"default": default_policy(), "mis-set": misset_policy()}
        t = time.perf_counter()
        learned = pmap(args.workers, rules_job, [(train, p, d) for p in policies.values()])
        print(f"\nrule-outcome training (loop on, {len(policies)} policies x {len(train)} runs,"
              f" {time.perf_counter() - t:.0f} s): (rule, class) -> verified / rolled back")  # fmt: skip
        test_policies: dict[str, Policy] = dict(policies)
        for (name, pol), (final, info) in zip(policies.items(), learned, strict=True):
            rates = ", ".join(f"{r}/{c}: {int(w)}/{int(lo)}" for (r, c), (w, lo) in info["rates"].items())
            off = [
                f"{r.name}/{c}" for r in pol.rules for c in r.when
                if not any(f.name == r.name and c in f.when for f in final.rules)
            ]  # fmt: skip
            print(f"  {name:<8}: {rates or 'nothing judged'}; switched off: {', '.join(off) or 'nothing'}")
            if final != pol:
                test_policies[f"{name} learned"] = final
        t = time.perf_counter()
        calls = [(seed, pol, d) for pol in test_policies.values() for seed in test]
        outs = pmap(args.workers, loop_job, calls)
        print(f"\nheld-apart test seeds, loop on ({len(calls)} runs, {time.perf_counter() - t:.0f} s; sums over runs)")
        keys = ["actions_applied", "actions_verified", "actions_rolled_back", "thermal_throttled_gpu_s",
                "gpu_s_above_slowdown", "cooling_energy_kwh"]  # fmt: skip
        print(f"  {'policy':<18}" + "".join(f"{k.removeprefix('actions_'):>24}" for k in keys) + f"{'max temp C':>12}")
        for i, name in enumerate(test_policies):
            runs = outs[i * len(test) : (i + 1) * len(test)]
            sums = [sum(float(o.metrics.get(k) or 0.0) for o in runs) for k in keys]
            tmax = max(float(o.metrics.get("max_gpu_temp_c") or 0.0) for o in runs)
            print(f"  {name:<18}" + "".join(f"{v:>24.1f}" for v in sums) + f"{tmax:>12.1f}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
