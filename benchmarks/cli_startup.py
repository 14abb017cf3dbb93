"""Start-up time of the `twinloop` command line: wall and CPU time per command, median of several runs.

    python benchmarks/cli_startup.py               # 7 runs of each command
    python benchmarks/cli_startup.py --runs 15 --json
    python benchmarks/cli_startup.py --importtime  # also: the slowest imports of `plan train` (python -X importtime)
    python benchmarks/cli_startup.py --no-bytecode-cache  # as with PYTHONDONTWRITEBYTECODE=1: recompile every run

Each command runs in a fresh interpreter (`python -m twinloop.cli.main ...`, this checkout's `src/` first on
the path), as a user's shell would start it. Wall time is what the user waits; CPU time (user + system of the
child) is what the command costs, and it is the figure to compare on a shared machine, where other processes
stretch wall time but not CPU time. Both are reported as the median and the best of the runs (the best wall is
the closest to an idle machine).

Bytecode: an installed twinloop has its ``.pyc`` files (pip compiles them at install) and a source checkout
writes them on first run, so the children run with bytecode caching on (the warm-up run writes ``__pycache__``)
even where the calling environment sets ``PYTHONDONTWRITEBYTECODE`` (the development VM does: every module is
then compiled from source on every run, ~0.06 s more for ``plan train``). ``--no-bytecode-cache`` measures
that case. The GPU/link catalogs' JSON cache (``twinloop.hardware.yaml_cache``) is likewise warm after the
warm-up run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
GPU = "h100-sxm"  # the H100 SXM entry of catalog/gpus.yaml

COMMANDS: dict[str, list[str]] = {
    "python -c pass (interpreter alone)": ["-c", "pass"],
    "twinloop --help": ["-m", "twinloop.cli.main", "--help"],
    f"twinloop plan train --model llama-3-8b --gpu {GPU} --gpus 8": [
        "-m",
        "twinloop.cli.main",
        "plan",
        "train",
        "--model",
        "llama-3-8b",
        "--gpu",
        GPU,
        "--gpus",
        "8",
    ],
    "twinloop models": ["-m", "twinloop.cli.main", "models"],
}


BYTECODE_CACHE = True  # main() sets it from --no-bytecode-cache


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "80"}
    if BYTECODE_CACHE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def time_once(args: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run of ``python ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=_env(), stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(runs: int) -> list[dict[str, Any]]:
    """Median and range of wall and CPU time per command (one warm-up run each, not counted)."""
    out = []
    for name, args in COMMANDS.items():
        time_once(args)  # warm-up: .pyc files and the page cache
        walls, cpus = zip(*(time_once(args) for _ in range(runs)), strict=True)
        out.append(
            {
                "command": name,
                "runs": runs,
                "wall_median_s": statistics.median(walls),
                "wall_min_s": min(walls),
                "wall_max_s": max(walls),
                "cpu_median_s": statistics.median(cpus),
                "cpu_min_s": min(cpus),
            }
        )
    return out


def slowest_imports(n: int = 12) -> list[tuple[str, float]]:
    """The ``n`` imports with the largest cumulative time during `plan train` (``python -X importtime``)."""
    args = COMMANDS[f"twinloop plan train --model llama-3-8b --gpu {GPU} --gpus 8"]
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], env=_env(), capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if not name.startswith(" " * 3):  # top-level imports only (indent of one level)
            rows.append((name.strip(), int(cumulative) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (median reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports of plan train")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="compile every module on every run")
    a = parser.parse_args()
    global BYTECODE_CACHE
    BYTECODE_CACHE = not a.no_bytecode_cache
    rows = measure(a.runs)
    imports = slowest_imports() if a.importtime else []
    if a.json:
        print(json.dumps({"rows": rows, "slowest_imports_s": imports}, indent=2))
        return
    print(f"bytecode cache: {'on' if BYTECODE_CACHE else 'off'}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':62} {'wall median':>11} {'wall best':>9} {'CPU median':>10} {'CPU best':>8}")
    for r in rows:
        print(
            f"{r['command']:62} {r['wall_median_s']:>9.3f} s {r['wall_min_s']:>7.3f} s {r['cpu_median_s']:>8.3f} s "
            f"{r['cpu_min_s']:>6.3f} s"
        )
    if imports:
        print("\nslowest top-level imports of plan train (cumulative, one run):")
        for name, s in imports:
            print(f"  {name:40} {s * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
