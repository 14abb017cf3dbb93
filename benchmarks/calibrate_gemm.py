"""GEMM efficiency curves vs the measured H100 GEMMs (shared/data/h100/precision_bf16_fp8.json).

    python benchmarks/calibrate_gemm.py

Refits ``(e_inf, a)`` per dtype (:func:`twinloop.plan.gemm.fit_curve`), prints the shipped curves against each
measured cell (all are *fitted on*), and the relative factors the planner applies at a few training shapes.
"""

from __future__ import annotations

from twinloop.plan import gemm


def main() -> None:
    print("fit (grid over a, geometric-mean e_inf):")
    for dtype in ("bf16", "fp8"):
        pts = [(n, t / p) for d, n, t, p in gemm.H100_SQUARE_GEMMS if d == dtype]
        curve, worst = gemm.fit_curve(pts)
        print(f"  {dtype}: e_inf={curve.e_inf:.4f} a={curve.penalty_elems:.0f} worst {100 * worst:.1f} %")
    print("\nshipped curves vs measured (H100 SXM, 700 W; fitted on):")
    print(f"  {'dtype':5s} {'n':>5s} {'measured':>9s} {'model':>7s} {'error':>7s}")
    for dtype, n, tflops, peak in gemm.H100_SQUARE_GEMMS:
        pred = float(gemm.shape_efficiency(dtype, n, n, n)) * peak
        print(f"  {dtype:5s} {n:5d} {tflops:9.1f} {pred:7.1f} {100 * (pred / tflops - 1):+6.1f} %")
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
