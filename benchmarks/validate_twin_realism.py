"""Where the twin's messy-hall sizes come from, and what the twin does with them.

Part 1 reads the real H100 readings (``shared/data/h100/samples_20hz.csv``, NVML at 20 Hz, see its README) and
prints what the sensor and peak models are sized on: the 1 s power's noise at steady load, the clock bins, the
temperature resolution, the instant overshoot at each load step, and the steady 1 s ripple.
Part 2 runs the twin and prints the same quantities as it reports them, plus the clock spread that the
manufacturing variation gives a power-bound job (against the ~8 % published for identical GPUs).

Run: .venv/bin/python benchmarks/validate_twin_realism.py [--data PATH_TO/shared/data/h100]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from twinloop.twin import load_scenario
from twinloop.twin.engine import Twin

STEADY = ("gemm_peak", "cap_600", "cap_400", "memcopy", "decode_b32", "clock_1200", "train_steady")


def find_data(given: str | None) -> Path:
    if given:
        return Path(given)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data" / "h100"
        if cand.exists():
            return cand
    raise SystemExit("shared/data/h100 not found; pass --data")


def h100(data: Path) -> None:
    with open(data / "samples_20hz.csv") as f:
        rows = list(csv.DictReader(f))
    col = {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}
    with open(data / "phases.csv") as f:
        phases = list(csv.DictReader(f))
    starts = np.array([float(p["t"]) for p in phases])
    names = [p["phase"] for p in phases]
    t, inst, avg = col["t"], col["power_instant_mw"] / 1e3, col["power_mw"] / 1e3
    print("H100 readings (run 2, 20 Hz NVML)")
    print(f"  SM clock readings on 15 MHz bins: {bool((col['sm_mhz'] % 15 == 0).all())}; "
          f"temperatures whole degrees: {bool((col['gpu_temp_c'] % 1 == 0).all())}")  # fmt: skip
    print("  steady phase (after 3 s): 1 s power mean, std, std/mean; 1 s max of instant over 1 s mean (median)")
    for name in STEADY:
        i = names.index(name)
        m = (t >= starts[i] + 3) & (t < starts[i + 1])
        ripple = []
        for s in np.arange(starts[i] + 3, starts[i + 1] - 1, 1.0):
            w = (t >= s) & (t < s + 1)
            if w.sum() >= 15:
                ripple.append(inst[w].max() / inst[w].mean() - 1)
        rel = 100 * avg[m].std() / avg[m].mean()
        print(f"    {name:12s} {avg[m].mean():6.1f} W  {avg[m].std():5.2f} W  {rel:5.2f} %"
              f"   ripple {100 * np.median(ripple):4.1f} %")  # fmt: skip
    fracs, peaks = [], []
    for i, name in enumerate(names):
        if not name.startswith("burst") or name == "burst_0":  # burst_0 starts from load, not from a stall
            continue
        pre = inst[(t >= starts[i] - 0.6) & (t < starts[i])].mean()
        peak = inst[(t >= starts[i]) & (t < starts[i] + 1.5)].max()
        steady = avg[(t >= starts[i] + 1.5) & (t < starts[i + 1])].mean()
        fracs.append((peak - steady) / (steady - pre))
        peaks.append(peak)
    print(f"  load steps stall -> GEMM burst ({len(fracs)}): instant peak {min(peaks):.0f}..{max(peaks):.0f} W; "
          f"(peak - steady)/(step) {min(fracs):.2f}..{max(fracs):.2f}, median {np.median(fracs):.2f}")  # fmt: skip


def twin_side() -> None:
    print("Twin (default scenario)")
    spec = load_scenario(telemetry={"gpu_every_s": 1, "aggregate": "sample"})
    t = Twin(spec)
    job = t.jobs[0]
    errs, steps = [], 0
    while steps < 400:
        r = t.step()
        steps += 1
        if r.gpu is not None and job.phase.name == "SUSTAINED":
            p = t.physics.gpus.power_w[job.gpus].astype(np.float64)
            errs.append((r.gpu["DCGM_FI_DEV_POWER_USAGE"][job.gpus] - p) / p)
            clk = r.gpu["DCGM_FI_DEV_SM_CLOCK"]
            assert (clk % 15 == 0).all() and (r.gpu["DCGM_FI_DEV_GPU_TEMP"] % 1 == 0).all()
    print(f"  reported 1 s power minus the model's mean, relative std: {100 * np.concatenate(errs).std():.2f} %")
    print("  clock spread of the 512-GPU job, every GPU power-bound at a 550 W limit (seeds 0-2):")
    for seed in (0, 1, 2):
        t = Twin(load_scenario(seed=seed))
        job = t.jobs[0]
        t.physics.gpus.user_limit_w[:] = 550.0
        spread, cv = [], []
        for i in range(400):
            t.step()
            a = t.physics.gpus
            if i > 200 and job.phase.name == "SUSTAINED" and a.limited[job.gpus].all():
                x = t.physics.clock_x()[job.gpus]
                spread.append((x.max() - x.min()) / np.median(x))
                cv.append(x.std() / x.mean())
        idle = t.physics.gpus.power_w[t.job_of_gpu < 0]
        print(f"    seed {seed}: (max-min)/median {100 * np.mean(spread):.1f} %, CV {100 * np.mean(cv):.2f} % "
              f"over {len(spread)} steps; idle GPUs {idle.min():.1f}..{idle.max():.1f} W")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="the shared/data/h100 folder")
    args = parser.parse_args()
    h100(find_data(args.data))
    twin_side()


if __name__ == "__main__":
    main()
