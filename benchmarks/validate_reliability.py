"""Validate the failure model and the reliability Monte-Carlo against Llama 3's 54-day interruption table.

Prints (1) interruption counts by cause, simulated mean +- std over Monte-Carlo runs of 16,384 GPUs x 54 days,
against the paper, with per-cause z-scores and a chi-square test of the simulated means; (2) ETTR at the
Young/Daly interval for the documented checkpoint/restart guesses, and its sensitivity to them; (3) the
checkpoint-interval sweep, simulated optimum vs sqrt(2C/lambda); (4) job MTTF at 1k, 4k, 16k and 64k GPUs;
(5) the cost of one FailureModel.draw per twin step.

    .venv/bin/python benchmarks/validate_reliability.py [--runs 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from twinloop.twin.failures import CAUSES, LLAMA3_DAYS, LLAMA3_GPUS, LLAMA3_TABLE, FailureModel
from twinloop.twin.reliability import job_mttf_h, simulate_job, sweep_checkpoint_interval, young_daly_interval_s

# Checkpoint of Llama 3 405B: bf16 weights (2 B) + fp32 master weights (4 B) + fp32 Adam moments (8 B) = 14 B per
# parameter = 5.7 TB; Llama 3's Tectonic storage sustains 2 TB/s (paper section 3.3.1), i.e. ~3 s of transfer.
# 30 s is a guess that adds serialization, barriers and bursty-write contention. Restart: 3 min (detect,
# reschedule, load the checkpoint, NCCL init at 16k ranks) is a guess too.
CHECKPOINT_BYTES = 405e9 * 14
CHECKPOINT_WRITE_S = 30.0
RESTART_OVERHEAD_S = 180.0


def section_counts(runs: int, seed: int) -> None:
    t0 = time.perf_counter()
    r = simulate_job(LLAMA3_GPUS, LLAMA3_DAYS, 1200.0, CHECKPOINT_WRITE_S, RESTART_OVERHEAD_S, seed=seed, n_runs=runs)
    elapsed = time.perf_counter() - t0
    print(f"## (1) Interruptions by cause: {LLAMA3_GPUS} GPUs x {LLAMA3_DAYS} days, {runs} Monte-Carlo runs")
    print(f"(Monte-Carlo took {elapsed:.3f} s)\n")
    print("| cause | scope | paper | model expectation | simulated mean ± std | Poisson std | z of mean |")
    print("|---|---|---:|---:|---:|---:|---:|")
    mean, std, expected = r.mean_counts, r.std_counts, r.expected_counts
    z = (mean - expected) / np.sqrt(expected / runs)
    for i, (cause, row) in enumerate(zip(CAUSES, LLAMA3_TABLE, strict=True)):
        print(
            f"| {row[1]} | {cause.scope} | {cause.llama3_count} | {expected[i]:.1f} | {mean[i]:.2f} ± {std[i]:.2f} "
            f"| {np.sqrt(expected[i]):.2f} | {z[i]:+.2f} |"
        )
    totals = r.total_interruptions
    planned = r.counts[:, [c.planned for c in CAUSES]].sum(axis=1)
    print(
        f"| **total** | | 466 | {expected.sum():.1f} | {totals.mean():.2f} ± {totals.std(ddof=1):.2f} | "
        f"{np.sqrt(expected.sum()):.2f} | {(totals.mean() - expected.sum()) / np.sqrt(expected.sum() / runs):+.2f} |"
    )
    print(f"| planned | | 47 | | {planned.mean():.2f} ± {planned.std(ddof=1):.2f} | | |")
    unexpected = totals - planned
    print(f"| unexpected | | 419 | | {unexpected.mean():.2f} ± {unexpected.std(ddof=1):.2f} | | |")
    chi2 = float(np.sum(z**2))
    p = float(stats.chi2.sf(chi2, df=len(CAUSES)))
    print(f"\nchi-square of the simulated means vs the table: {chi2:.1f} on {len(CAUSES)} dof, p = {p:.3f}")
    hw = sum(c.llama3_count for c in CAUSES if c.hardware) / 419
    print(f"hardware share of unexpected interruptions in the table: {hw:.1%} (paper: ~78 %)")
    disp = std**2 / np.maximum(mean, 1e-9)
    print(f"variance/mean per cause (Poisson = 1): {disp.min():.2f}..{disp.max():.2f}\n")


def section_ettr(runs: int, seed: int) -> None:
    mttf_h = job_mttf_h(LLAMA3_GPUS)
    print("## (2) ETTR of the Llama 3 setting")
    print(
        f"checkpoint bytes (405B x 14 B) = {CHECKPOINT_BYTES / 1e12:.2f} TB -> "
        f"{CHECKPOINT_BYTES / 2e12:.1f} s at 2 TB/s;"
        f" guess C = {CHECKPOINT_WRITE_S:.0f} s, restart R = {RESTART_OVERHEAD_S:.0f} s; job MTTF = {mttf_h:.2f} h\n"
    )
    print(
        "| checkpoint write C (s) | restart R (s) | Young/Daly interval (s) | ETTR mean ± std | lost work h | "
        "checkpoint h | restart h |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for write_s in (10.0, 30.0, 60.0, 120.0):
        for restart_s in (60.0, 180.0, 600.0):
            tau = young_daly_interval_s(1.0 / (mttf_h * 3600.0), write_s)
            r = simulate_job(LLAMA3_GPUS, LLAMA3_DAYS, tau, write_s, restart_s, seed=seed, n_runs=runs)
            mark = " **(default)**" if (write_s, restart_s) == (CHECKPOINT_WRITE_S, RESTART_OVERHEAD_S) else ""
            print(
                f"| {write_s:.0f}{mark} | {restart_s:.0f} | {tau:.0f} | {r.ettr_mean:.4f} ± {r.ettr.std():.4f} | "
                f"{r.lost_work_s.mean() / 3600:.1f} | {r.checkpoint_s.mean() / 3600:.1f} | "
                f"{r.restart_s.mean() / 3600:.1f} |"
            )
    print()


def section_sweep(runs: int, seed: int, use_ray: bool = False) -> None:
    print("## (3) Checkpoint-interval sweep (16,384 GPUs, 54 days)")
    for write_s in (CHECKPOINT_WRITE_S, 120.0):
        t0 = time.perf_counter()
        s = sweep_checkpoint_interval(
            LLAMA3_GPUS, LLAMA3_DAYS, write_s, RESTART_OVERHEAD_S, seed=seed, n_runs=runs, ray=use_ray
        )
        elapsed = time.perf_counter() - t0
        print(
            f"\nC = {write_s:.0f} s, R = {RESTART_OVERHEAD_S:.0f} s, lambda = {s.job_failure_rate_per_s * 3600:.4f}/h "
            f"({len(s.intervals_s)} intervals x {runs} runs in {elapsed:.2f} s)\n"
        )
        print("| interval (s) | interval / Young-Daly | ETTR mean ± std |")
        print("|---:|---:|---:|")
        for tau, m, sd in list(zip(s.intervals_s, s.ettr_mean, s.ettr_std, strict=True))[::4]:
            print(f"| {tau:.0f} | {tau / s.young_daly_s:.2f} | {m:.4f} ± {sd:.4f} |")
        print(
            f"\nsimulated optimum {s.best_interval_s:.0f} s (ETTR {s.ettr_mean.max():.4f}) vs sqrt(2C/lambda) = "
            f"{s.young_daly_s:.0f} s: ratio {s.best_interval_s / s.young_daly_s:.2f}"
        )
    print()


def section_mttf(runs: int, seed: int) -> None:
    print("## (4) Job MTTF (unexpected interruptions) vs GPU count, 8 GPUs per node, 65 C")
    print("\n| GPUs | MTTF model (h) | MTTF simulated (h) | Young/Daly interval at C=30 s (s) | ETTR at it |")
    print("|---:|---:|---:|---:|---:|")
    for n in (1024, 4096, 16384, 65536):
        mttf = job_mttf_h(n)
        tau = young_daly_interval_s(1.0 / (mttf * 3600.0), CHECKPOINT_WRITE_S)
        r = simulate_job(n, LLAMA3_DAYS, tau, CHECKPOINT_WRITE_S, RESTART_OVERHEAD_S, seed=seed, n_runs=runs)
        planned = np.array([c.planned for c in CAUSES])
        sim_mttf = r.wall_s / 3600.0 / r.counts[:, ~planned].sum(axis=1).mean()
        print(f"| {n} | {mttf:.2f} | {sim_mttf:.2f} | {tau:.0f} | {r.ettr_mean:.4f} |")


def section_draw_cost(seed: int, steps: int = 200_000) -> None:
    model = FailureModel()
    print("\n## (5) Cost of FailureModel.draw per twin step (dt = 1 s, all GPUs busy)")
    print("\n| GPUs | GPU temperatures | steps | events | us per step |")
    print("|---:|---|---:|---:|---:|")
    for n_gpus, label in (
        (1024, "uniform 65 C"),
        (LLAMA3_GPUS, "uniform 65 C"),
        (LLAMA3_GPUS, "random 40..90 C"),
        (262_144, "random 40..90 C"),
    ):
        if label.startswith("uniform"):
            temps = np.full(n_gpus, 65.0, dtype=np.float32)
        else:
            temps = np.random.default_rng(seed).uniform(40.0, 90.0, n_gpus).astype(np.float32)
        jobs = np.zeros(n_gpus, dtype=np.int64)
        rng = np.random.default_rng(seed)
        events = 0
        t0 = time.perf_counter()
        for _ in range(steps):
            events += model.draw(rng, 1.0, temps, 8, jobs).n_events
        per_step_us = (time.perf_counter() - t0) / steps * 1e6
        print(f"| {n_gpus} | {label} | {steps} | {events} | {per_step_us:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", action="store_true", help="run the interval sweep's chunks as Ray tasks (same result)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    section_counts(args.runs, args.seed)
    section_ettr(args.runs, args.seed)
    section_sweep(args.runs, args.seed, args.ray)
    section_mttf(args.runs, args.seed)
    section_draw_cost(args.seed)
    print(f"\ntotal time {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
