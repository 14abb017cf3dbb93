"""The planner's job failure model vs published MTTF figures (all four are *fitted on*) and Llama 3's ETTR.

python benchmarks/validate_plan_failures.py          # shipped constants vs the figures
python benchmarks/validate_plan_failures.py --fit    # refit the job-scale term
"""

from __future__ import annotations

import argparse

from twinloop.plan import failures as f


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    if ap.parse_args().fit:
        rate, sat, worst = f.fit_infra_term()
        print(f"fit: INFRA_RATE_PER_NODE_H={rate:.2e} INFRA_SATURATION_NODES={sat:.0f} worst {100 * worst:.1f} %")
    print(f"{'published figure (fitted on)':52s} {'GPUs':>6s} {'MTTF h':>8s} {'model h':>8s} {'error':>7s}")
    for label, gpus, mttf in f.FIT_TARGETS:
        pred = 1.0 / f.job_rate_per_h(gpus)
        print(f"{label:52s} {gpus:6d} {mttf:8.2f} {pred:8.2f} {100 * f.symmetric_error(pred, mttf):6.1f} %")
    r = f.job_reliability(16384, 405e9)
    n54 = 54 * r.interruptions_per_day
    print(f"\nLlama 3 405B, 16,384 GPUs: {n54:.0f} interruptions in 54 days (published 466), ")
    print(
        f"  checkpoint write {r.checkpoint_write_s:.1f} s, Young/Daly interval {60 * r.checkpoint_interval_h:.1f} min,"
    )
    print(f"  expected ETTR {100 * r.expected_ettr:.1f} % (predicted; published: above 90 %)")
    print("  rate by component (per h):", {k: round(v, 4) for k, v in r.rate_by_component_per_h.items()})


if __name__ == "__main__":
    main()
