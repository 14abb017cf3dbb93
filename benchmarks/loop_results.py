"""Run `twinloop run` on the packaged default scenario and print docs/results.md's tables (markdown).

Run: .venv/bin/python benchmarks/loop_results.py > /tmp/results-tables.md
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile


def main() -> None:
    with tempfile.TemporaryDirectory() as out:
        doc = json.loads(
            subprocess.run(
                [sys.executable, "-m", "twinloop.cli.main", "run", "--out", out, "--json"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    off, on = doc["loop_off"], doc["loop_on"]
    print(f"Scenario `{doc['scenario']}`, seed {doc['seed']}.\n")
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


if __name__ == "__main__":
    main()
