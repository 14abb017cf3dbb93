"""Run `twinloop run` on the four packaged loop scenarios and print docs/results.md's tables (markdown).

Run: .venv/bin/python benchmarks/loop_results.py > /tmp/results-tables.md
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import twinloop

SCENARIOS = ("default", "hot-afternoon", "power-events", "cooling-plant")


def main() -> None:
    for name in SCENARIOS:
        report(Path(twinloop.__file__).parent / "scenarios" / f"{name}.yaml")


def report(path: Path) -> None:
    print_tables(run_json(path), path)


def run_json(path: Path, seed: int | None = None) -> dict[str, Any]:
    """`twinloop run PATH --json` (with ``--seed`` when given): its JSON document."""
    seed_args = [] if seed is None else ["--seed", str(seed)]
    with tempfile.TemporaryDirectory() as out:
        doc: dict[str, Any] = json.loads(
            subprocess.run(
                [sys.executable, "-m", "twinloop.cli.main", "run", str(path), "--out", out, "--json", *seed_args],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    return doc


def print_tables(doc: dict[str, Any], path: Path) -> None:
    """Print one run's (or an aggregate's) outcome, detection and action tables as markdown."""
    off, on = doc["loop_off"], doc["loop_on"]
    print(f"### Scenario `{doc['scenario']}` (`{path.name}`), seed {doc['seed']}\n")
    print("| metric | loop off | loop on | change |\n|---|---|---|---|")
    for k, a in off["outcome"].items():
        b = on["outcome"][k]
        change = f"{(b - a) / abs(a):+.1%}" if a else "—"
        print(f"| {k} | {a:,.4g} | {b:,.4g} | {change} |")
    print(
        "\n| injected fault | faults | detected | precision | recall | median time to detect s |"
        "\n|---|---|---|---|---|---|"
    )
    for q in on["detection"]:
        ttd = q["median_time_to_detect_s"]
        print(
            f"| {q['fault']} | {q['faults']} | {q['detected']} | {q['precision']:.2f} | {q['recall']:.2f} | "
            f"{'—' if ttd is None else f'{ttd:.0f}'} |"
        )
    print(f"\nFalse alarms (loop on): {len(on['false_alarms'])}; incidents: {on['incidents']}.\n")
    counts: dict[tuple[str, str], int] = {}
    for a in on["actions"]:
        counts[(a["kind"], a["status"])] = counts.get((a["kind"], a["status"]), 0) + 1
    print("| action | status | count |\n|---|---|---|")
    for (kind, status), n in sorted(counts.items()):
        print(f"| {kind} | {status} | {n} |")
    print()


if __name__ == "__main__":
    main()
