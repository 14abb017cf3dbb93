"""GEMM efficiency curves vs the measured H100 GEMMs (shared/data/h100/precision_bf16_fp8.json).

    python benchmarks/calibrate_gemm.py

Refits ``(e_inf, a)`` per dtype (:func:`twinloop.plan.gemm.fit_curve`) on the clock-normalised cells (achieved
TFLOP/s over the peak at the clock each GEMM ran at), prints the shipped curves against each measured cell at its
measured clock (all are *fitted on*), and the relative factors the planner applies at a few training shapes.
"""

from __future__ import annotations

from twinloop.plan import gemm


def main() -> None:
    print("fit (grid over a, geometric-mean e_inf):")
    for dtype in ("bf16", "fp8"):
        pts = gemm.h100_points(dtype)
        curve, worst = gemm.fit_curve(pts)
        print(f"  {dtype}: e_inf={curve.e_inf:.4f} a={curve.penalty_elems:.0f} worst {100 * worst:.1f} %")
    print("\nshipped curves vs measured (H100 SXM, 700 W, at each cell's measured clock; fitted on):")
    print(f"  {'dtype':5s} {'n':>5s} {'MHz':>5s} {'share/clk':>9s} {'measured':>9s} {'model':>7s} {'error':>7s}")
    cells = zip(gemm.H100_SQUARE_GEMMS, gemm.H100_SQUARE_GEMM_CLOCKS_MHZ, strict=True)
    for (dtype, n, tflops, peak), mhz in cells:
        share = gemm.clock_normalised_share(tflops, peak, mhz, gemm.H100_PEAK_CLOCK_MHZ)
        pred = float(gemm.shape_efficiency(dtype, n, n, n)) * peak * mhz / gemm.H100_PEAK_CLOCK_MHZ
        print(
            f"  {dtype:5s} {n:5d} {mhz:5.0f} {share:9.3f} {tflops:9.1f} {pred:7.1f} {100 * (pred / tflops - 1):+6.1f} %"
        )
    print("\nrelative factor on GEMM_EFFICIENCY (1 = BF16 8192^3):")
    shapes = [
        ("Llama-3-8B FFN up, 8K tokens, TP1", 8192, 28672, 4096),
        ("Llama-3-405B FFN up, 8K tokens, TP8", 8192, 13312, 16384),
        ("DeepSeek-V3 expert up, 128 tokens (EP1)", 128, 4096, 7168),
        ("DeepSeek-V3 expert up, 8192 tokens (EP64)", 8192, 4096, 7168),
    ]
    for label, m, n, k in shapes:
        b = float(gemm.relative_efficiency("bf16", m, n, k))
        f = float(gemm.relative_efficiency("fp8", m, n, k))
        fb = float(gemm.relative_efficiency("fp8", m, n, k, "block"))
        print(f"  {label:44s} bf16 {b:.3f}  fp8 {f:.3f}  fp8-block {fb:.3f}")


if __name__ == "__main__":
    main()
