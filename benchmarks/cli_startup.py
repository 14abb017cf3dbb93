"""Start-up time of the `twinloop` command line: wall and CPU time per command, median of several runs.

    python benchmarks/cli_startup.py               # 9 runs of each command
    python benchmarks/cli_startup.py --runs 15 --json
    python benchmarks/cli_startup.py --before /tmp/before/src   # the same commands from another source tree,
                                                               # run alternately with this one (same load)
    python benchmarks/cli_startup.py --instructions  # also: instructions executed (valgrind), independent of load
    python benchmarks/cli_startup.py --importtime  # also: the slowest imports of `plan train` (python -X importtime)
    python benchmarks/cli_startup.py --no-bytecode-cache  # as with PYTHONDONTWRITEBYTECODE=1: recompile every run

Each command runs in a fresh interpreter (`python -m twinloop.cli.main ...`, the measured tree's `src/` first on
the path), as a user's shell would start it. Wall time is what the user waits; CPU time (user + system of the
child) is what the command costs. Both are reported as the median and the best of the runs. The machine this
project develops on is shared (2 cores, 8 engineers): other processes stretch wall time by waiting for a core
and CPU time too (shared caches), so the load average is printed with every table, ``--before`` interleaves the
two trees' runs so that both see the same load, and ``--instructions`` counts the instructions one run executes
(``valgrind --tool=cachegrind --cache-sim=no``: the same count whatever the load; ~20x slower to run).

Bytecode: an installed twinloop has its ``.pyc`` files (pip compiles them at install) and a source checkout
writes them on first run, so the children run with bytecode caching on (the warm-up run writes ``__pycache__``)
even where the calling environment sets ``PYTHONDONTWRITEBYTECODE`` (the development VM does: every module is
then compiled from source on every run). ``--no-bytecode-cache`` measures that case. Likewise the user cache
(``twinloop.user_cache``: parsed catalogs, compiled dataclass methods) is a fresh temporary directory per tree,
filled by the warm-up run, as a user's is after their first command; ``--cold-cache`` empties it before every run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
GPU = "h100-sxm"  # the H100 SXM entry of catalog/gpus.yaml
PLAN_TRAIN = f"twinloop plan train --model llama-3-8b --gpu {GPU} --gpus 8"

COMMANDS: dict[str, list[str]] = {
    "python -c pass (interpreter alone)": ["-c", "pass"],
    "twinloop --help": ["-m", "twinloop.cli.main", "--help"],
    PLAN_TRAIN: ["-m", "twinloop.cli.main", "plan", "train", "--model", "llama-3-8b", "--gpu", GPU, "--gpus", "8"],
    "twinloop models": ["-m", "twinloop.cli.main", "models"],
}


class Tree:
    """One source tree to measure, with its own user cache directory."""

    def __init__(self, label: str, src: Path, bytecode_cache: bool, cold_cache: bool) -> None:
        self.label = label
        self.src = src
        self.cache = Path(tempfile.mkdtemp(prefix=f"twinloop-startup-{label}-"))
        self.bytecode_cache = bytecode_cache
        self.cold_cache = cold_cache

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.src), "COLUMNS": "80", "TWINLOOP_CACHE_DIR": str(self.cache)}
        env.pop("OPENBLAS_NUM_THREADS", None)  # as a user's shell has it, unless they set it
        if self.bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def time_once(self, args: list[str]) -> tuple[float, float]:
        """(wall s, CPU s of the child) of one run of ``python ARGS``."""
        if self.cold_cache:
            shutil.rmtree(self.cache, ignore_errors=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], env=self.env(), stdout=subprocess.DEVNULL, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def instructions(self, args: list[str]) -> int | None:
        """Instructions one run of ``python ARGS`` executes (valgrind's cachegrind), None without valgrind."""
        if shutil.which("valgrind") is None:
            return None
        out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                              sys.executable, *args], env=self.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, check=True)  # fmt: skip
        for line in out.stderr.splitlines():
            if "I" in line and "refs:" in line:
                return int(line.split("refs:")[1].replace(",", "").strip())
        return None


def _row(tree: Tree, name: str, walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {
        "tree": tree.label,
        "command": name,
        "runs": len(walls),
        "wall_median_s": statistics.median(walls),
        "wall_min_s": min(walls),
        "wall_max_s": max(walls),
        "cpu_median_s": statistics.median(cpus),
        "cpu_min_s": min(cpus),
    }


def measure(trees: list[Tree], runs: int, instructions: bool) -> list[dict[str, Any]]:
    """Median and range of wall and CPU time per command and tree; the trees' runs alternate."""
    out = []
    for name, args in COMMANDS.items():
        samples: dict[str, tuple[list[float], list[float]]] = {t.label: ([], []) for t in trees}
        for tree in trees:
            tree.time_once(args)  # warm-up: .pyc files, the user cache and the page cache
        for _ in range(runs):
            for tree in trees:
                wall, cpu = tree.time_once(args)
                samples[tree.label][0].append(wall)
                samples[tree.label][1].append(cpu)
        for tree in trees:
            row = _row(tree, name, *samples[tree.label])
            if instructions and name != "twinloop models":
                row["instructions"] = tree.instructions(args)
            out.append(row)
    return out


def slowest_imports(tree: Tree, n: int = 12) -> list[tuple[str, float]]:
    """The ``n`` imports with the largest cumulative time during `plan train` (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *COMMANDS[PLAN_TRAIN]], env=tree.env(),
                          capture_output=True, text=True)  # fmt: skip
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
    parser.add_argument("--runs", type=int, default=9, help="runs per command and tree (median reported)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--before", type=Path, help="another tree's src/ to run alternately with this one")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports of plan train")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="compile every module on every run")
    parser.add_argument("--cold-cache", action="store_true", help="empty the user cache before every run")
    a = parser.parse_args()
    bytecode = not a.no_bytecode_cache
    trees = [Tree("before", a.before.resolve(), bytecode, a.cold_cache)] if a.before else []
    trees.append(Tree("after" if a.before else "this", SRC, bytecode, a.cold_cache))
    load_start = os.getloadavg()[0]
    try:
        rows = measure(trees, a.runs, a.instructions)
        imports = slowest_imports(trees[-1]) if a.importtime else []
    finally:
        for tree in trees:
            shutil.rmtree(tree.cache, ignore_errors=True)
    load = (load_start, os.getloadavg()[0])
    if a.json:
        print(json.dumps({"load_average_1min": load, "rows": rows, "slowest_imports_s": imports}, indent=2))
        return
    print(f"bytecode cache: {'on' if bytecode else 'off'}; user cache: {'cold' if a.cold_cache else 'warm'}; "
          f"load average (1 min) {load[0]:.1f} at start, {load[1]:.1f} at end; {a.runs} runs")  # fmt: skip
    header = f"{'command':62} {'tree':>6} {'wall median':>11} {'wall best':>9} {'CPU median':>10} {'CPU best':>8}"
    print(header + f"{'instructions':>14}" * a.instructions)
    for r in rows:
        ins = f" {r['instructions'] / 1e6:>10,.0f} M" if r.get("instructions") else " " * 13 * a.instructions
        print(f"{r['command']:62} {r['tree']:>6} {r['wall_median_s']:>9.3f} s {r['wall_min_s']:>7.3f} s "
              f"{r['cpu_median_s']:>8.3f} s {r['cpu_min_s']:>6.3f} s{ins}")  # fmt: skip
    if imports:
        print("\nslowest top-level imports of plan train (cumulative, one run):")
        for name, s in imports:
            print(f"  {name:40} {s * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
