"""docs/results.md's tables from a `twinloop sweep sweeps/loop-robustness.yaml` run (its ``runs.parquet``).

For each scenario: every outcome figure loop off and loop on as ``mean [95 % interval]`` across the seeds, and the
loop's effect as the per-seed *paired* change (loop on minus loop off on the same seed, so the hall's seed-to-seed
spread cancels), with its Student-t interval and the number of seeds where the loop helped. Detection quality
per injected fault class is summed over the seeds. Then the issue 5 targets, one row per target.

Run: .venv/bin/twinloop sweep sweeps/loop-robustness.yaml --out loop-robustness
     .venv/bin/python benchmarks/loop_robustness_tables.py loop-robustness/runs.parquet
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from twinloop.sweep.summary import t_interval

#: Figures where a larger value is better (everything else: lower is better).
HIGHER_IS_BETTER = ("goodput_tokens_per_s", "ettr")


def load(path: Path) -> list[dict[str, Any]]:
    """The ok rows of a sweep's Parquet file, maps as dicts."""
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r["metrics"] = dict(r["metrics"] or [])
        r["detection"] = dict(r["detection"] or [])
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        print(f"note: {len(failed)} failed cell(s) left out: " + ", ".join(str(r["cell"]) for r in failed))
    return [r for r in rows if r["status"] == "ok"]


def by_seed(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """scenario -> loop ('off'/'on') -> seed -> row."""
    out: dict[str, dict[str, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        out[r["scenario"]]["off" if r["loop"] in ("off", "false", "False") else "on"][int(r["seed"])] = r
    return out


def fmt(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1e5 or a < 1e-2:
        return f"{x:.3g}"
    return f"{x:,.4g}" if a < 1e3 else f"{x:,.0f}"


def interval(values: list[float]) -> str:
    if not values:
        return "—"
    mean, half = t_interval(values)
    return fmt(mean) if half is None else f"{fmt(mean)} [{fmt(mean - half)}, {fmt(mean + half)}]"


def paired(off: dict[int, dict[str, Any]], on: dict[int, dict[str, Any]], metric: str) -> tuple[str, str]:
    """The loop's change on the same seeds (relative where loop off is never 0) and 'helped in k/n seeds'."""
    seeds = sorted(s for s in off if s in on and metric in off[s]["metrics"] and metric in on[s]["metrics"])
    if not seeds:
        return "—", "—"
    a = [off[s]["metrics"][metric] for s in seeds]
    b = [on[s]["metrics"][metric] for s in seeds]
    better = (lambda x, y: y > x) if metric.startswith(HIGHER_IS_BETTER) else (lambda x, y: y < x)
    helped = sum(better(x, y) for x, y in zip(a, b, strict=True))
    same = sum(x == y for x, y in zip(a, b, strict=True))
    tally = f"{helped}/{len(seeds)}" + (f" ({same} equal)" if same else "")
    if all(x != 0 for x in a):
        mean, half = t_interval([100.0 * (y - x) / abs(x) for x, y in zip(a, b, strict=True)])
        text = f"{mean:+.1f} %" if half is None else f"{mean:+.1f} % [{mean - half:+.1f}, {mean + half:+.1f}]"
        return text, tally
    diff = [y - x for x, y in zip(a, b, strict=True)]
    return "Δ " + interval(diff), tally


def metric_table(name: str, groups: dict[str, dict[int, dict[str, Any]]]) -> None:
    off, on = groups.get("off", {}), groups.get("on", {})
    metrics = list(dict.fromkeys(m for r in [*off.values(), *on.values()] for m in r["metrics"]))
    print(f"\n### `{name}`: {len(off)} seeds loop off, {len(on)} loop on\n")
    print("| metric | loop off | loop on | paired change | loop better in |")
    print("|---|---|---|---|---|")
    for m in metrics:
        col = [interval([r["metrics"][m] for r in g.values() if m in r["metrics"]]) for g in (off, on)]
        change, tally = paired(off, on, m)
        print(f"| {m} | {col[0]} | {col[1]} | {change} | {tally} |")


def detection_table(groups: dict[str, dict[int, dict[str, Any]]]) -> None:
    totals: dict[str, list[float]] = defaultdict(list)
    false_alarms = 0.0
    incidents = 0.0
    for loop in ("off", "on"):
        for r in groups.get(loop, {}).values():
            d = r["detection"]
            false_alarms += d.get("false_alarms", 0.0)
            incidents += d.get("incidents", 0.0)
            for k, v in d.items():
                if k.startswith(("precision[", "recall[", "median_time_to_detect_s[")):
                    totals[k].append(v)
    faults = sorted({k.split("[", 1)[1].rstrip("]") for k in totals})
    print("\n| injected fault | runs | precision (mean) | recall (mean) | median time to detect s (mean, min–max) |")
    print("|---|---|---|---|---|")
    for f in faults:
        prec, rec = totals[f"precision[{f}]"], totals[f"recall[{f}]"]
        ttd = totals.get(f"median_time_to_detect_s[{f}]", [])
        spread = f"{fmt(sum(ttd) / len(ttd))} ({fmt(min(ttd))}–{fmt(max(ttd))})" if ttd else "—"
        print(f"| {f} | {len(rec)} | {sum(prec) / len(prec):.2f} | {sum(rec) / len(rec):.2f} | {spread} |")
    print(f"\nFalse alarms over all runs (loop off and on): {false_alarms:.0f}; incidents: {incidents:.0f}.")


TARGETS = (
    ("thermal-throttled GPU-s down ≥ 90 %", "thermal_throttled_gpu_s"),
    ("power-throttled GPU-s down ≥ 90 %", "power_throttled_gpu_s"),
    ("PSU trips (preventable: none)", "psu_trips"),
    ("GPU-s above slowdown (none)", "gpu_s_above_slowdown"),
    ("cooling energy down ≥ 15 %", "cooling_energy_kwh"),
    ("energy per useful token", "energy_per_useful_token_j"),
)


def targets_table(data: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> None:
    names = list(data)
    print("\n| target | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, metric in TARGETS:
        cells = []
        for sc in names:
            change, tally = paired(data[sc].get("off", {}), data[sc].get("on", {}), metric)
            cells.append(f"{change} ({tally})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    jobs = sorted({m for sc in names for g in data[sc].values() for r in g.values() for m in r["metrics"]
                   if m.startswith("goodput_tokens_per_s[")})  # fmt: skip
    for m in jobs:
        cells = []
        for sc in names:
            change, tally = paired(data[sc].get("off", {}), data[sc].get("on", {}), m)
            cells.append("—" if change == "—" else f"{change} ({tally})")
        print(f"| {m.replace('goodput_tokens_per_s', 'goodput')} up | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="?", default=Path("loop-robustness/runs.parquet"))
    args = ap.parse_args()
    data = by_seed(load(args.runs))
    print("## Targets: paired change loop on vs off, mean [95 % interval] over seeds (seeds where the loop is better)")
    targets_table(data)
    for sc, groups in data.items():
        metric_table(sc, groups)
        detection_table(groups)


if __name__ == "__main__":
    main()
