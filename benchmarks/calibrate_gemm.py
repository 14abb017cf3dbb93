"""GEMM model (plan/gemm.py): the former H100-only curve predicted on the H200 shapes, the refit, held-out errors.

    python benchmarks/calibrate_gemm.py                     # ~5 s
    python benchmarks/calibrate_gemm.py --clock-shift 0.1   # every eager cell's clock window moved by 0.1 s

1. *Predicted, before any change*: the former curve (fitted on the six H100 squares only; no memory term) against
   every H200 cell of ``tests/fixtures/h200/shapes.json`` at each cell's estimated clock (lab/gemm_fit.py).
2. *Fitted on*: the six H100 squares and the H200 cells of three (N, K) families (``gemm_fit.FIT_FAMILIES``).
3. *Predicted*: the other four families of ``shapes.json`` (eager) and ``gemm_graphs.json`` (CUDA graphs).
4. The relative factors the planner applies at a few training shapes.
5. End to end: 8192³ at the clock the shared power model allows at 700 W vs the measured rates.
6. *Predicted on the H100*: the shipped curves on ``tests/fixtures/h100_shapes/shapes.json`` (the same shapes on a
   real H100 SXM, measured after the fit), at each cell's estimated clock; the measured large-GEMM share the modern
   framework profiles use; and whether adding the H100 cells of the fit families to the fit improves the held-out
   error (it does not, so the curves stay fitted on the subset of step 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import REF_GEMM_ACTIVITY, REF_GEMM_TEMP_C, GpuPowerModel
from twinloop.lab import gemm_fit as gf
from twinloop.plan import gemm

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h200"
H100_SHAPES = FIXTURES.parent / "h100_shapes"

#: The former curve (main before this change): ``E·tile/(1 + a·(1/M+1/N+1/K))``, dimensions capped at 8192.
FORMER = {"bf16": (1.1062, 602.0), "fp8": (1.6215, 2181.0)}
M_RANGES = ((64, 256), (512, 1024), (2048, 16384))


def former_tflops(c: gf.MeasuredGemm) -> float:
    """The former curve's TFLOP/s for a cell at the clock it ran at."""
    e_inf, a = FORMER[gemm.curve_name(c.dtype)]
    dims = np.asarray([c.m, c.n, c.k], dtype=np.float64)
    tile = np.prod(dims / (np.asarray([128, 128, 64]) * np.ceil(dims / np.asarray([128, 128, 64]))))
    share = e_inf * tile / (1 + a * float(np.sum(1 / np.minimum(dims, 8192))))
    return share * gf.machine_of(c).bf16_flops_per_s * gemm.rate_factor(c.dtype) / 1e12


def summary(label: str, cells: list[gf.MeasuredGemm], errors: list[float], worst: int = 4) -> None:
    """MAPE by dtype and M range, and the worst cells."""
    e = np.asarray(errors)
    print(f"  {label}: {len(e)} cells, MAPE {100 * np.mean(np.abs(e)):.1f} %, median {100 * np.median(e):+.1f} %")
    for dtype in ("bf16", "fp8"):
        parts = []
        for lo, hi in M_RANGES:
            sel = [abs(x) for c, x in zip(cells, e, strict=True) if c.dtype == dtype and lo <= c.m <= hi]
            parts.append(f"M {lo}-{hi}: {100 * np.mean(sel):5.1f} % ({len(sel)})" if sel else f"M {lo}-{hi}: -")
        print(f"    {dtype}: " + "   ".join(parts))
    for i in np.argsort(-np.abs(e))[:worst]:
        c = cells[i]
        print(
            f"    worst: {c.dtype} {c.m}x{c.n}x{c.k} {c.harness} measured {c.tflops:.1f} TFLOP/s, {100 * e[i]:+.1f} %"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clock-shift", type=float, default=0.0, help="move the eager cells' clock windows (s)")
    shift = parser.parse_args().clock_shift
    h100, eager, graphs = gf.h100_cells(), gf.h200_eager_cells(FIXTURES, shift), gf.h200_graph_cells(FIXTURES)
    print("1. PREDICTED (before): the former H100-only curve on the H200 shapes at each cell's estimated clock")
    summary("shapes.json (eager)", eager, [former_tflops(c) / c.tflops - 1 for c in eager])
    summary("gemm_graphs.json (CUDA graphs)", graphs, [former_tflops(c) / c.tflops - 1 for c in graphs])
    fit_cells = [c for c in h100 + eager + graphs if gf.is_fit_cell(c)]
    refit = gf.fit(fit_cells)
    print("\n2. FIT (least squares on log time) on the H100 squares + H200 families", sorted(gf.FIT_FAMILIES))
    for name, cv in refit.curves.items():
        print(
            f"  {name}: E {cv.e_inf:.3f}  a_K {cv.k_fill_elems:.0f}  a_MN {cv.mn_fill_elems:.0f}  "
            f"t_fixed {cv.fixed_s * 1e6:.2f} us   shipped: {gemm.CURVES[name]}"
        )
    print(
        f"  H200 per-clock level {refit.level['h200-sxm']:.3f} (H100 = 1); eager-call floor "
        f"bf16 {refit.floor_s['bf16'] * 1e6:.1f} us, fp8 {refit.floor_s['fp8'] * 1e6:.1f} us"
    )
    shipped = gf.shipped_fit(refit)
    print("  H100 squares (fitted on), shipped curves at each cell's clock:")
    for c in h100:
        pred = c.tflops * (1 + gf.tflops_error(c, shipped))
        print(
            f"    {c.dtype} {c.m}^3 {c.clock_mhz:5.0f} MHz measured {c.tflops:7.1f} model {pred:7.1f} "
            f"{100 * gf.tflops_error(c, shipped):+6.1f} %"
        )
    h200_fit = [c for c in fit_cells if c.gpu == "h200-sxm"]
    summary("H200 fit cells (fitted on)", h200_fit, [gf.tflops_error(c, shipped) for c in h200_fit])
    print("\n3. PREDICTED (held out): the other families")
    for label, cells in (("shapes.json (eager)", eager), ("gemm_graphs.json (CUDA graphs)", graphs)):
        held = [c for c in cells if not gf.is_fit_cell(c)]
        summary(label, held, [gf.tflops_error(c, shipped) for c in held])
        own = float(np.mean([abs(gf.tflops_error(c, refit)) for c in held]))
        print(f"    (with this run's own fit instead of the shipped curves: MAPE {100 * own:.1f} %)")
    print("\n4. relative factor on GEMM_EFFICIENCY (1 = BF16 8192^3), H100 SXM at its peak clock:")
    shapes = [
        ("Llama-3-8B FFN up, 8K tokens, TP1", 8192, 28672, 4096),
        ("Llama-3-405B FFN up, 8K tokens, TP8", 8192, 13312, 16384),
        ("GPT-175B FFN up, 2K tokens, TP8", 2048, 6144, 12288),
        ("DeepSeek-V3 expert up, 128 tokens (EP1)", 128, 4096, 7168),
        ("DeepSeek-V3 expert up, 8192 tokens (EP64)", 8192, 4096, 7168),
    ]
    for label, m, n, k in shapes:
        b, f = (float(gemm.relative_efficiency(d, m, n, k)) for d in ("bf16", "fp8"))
        fb = float(gemm.relative_efficiency("fp8", m, n, k, "block"))
        print(f"  {label:44s} bf16 {b:.3f}  fp8 {f:.3f}  fp8-block {fb:.3f}")
    end_to_end(graphs)
    h100_predicted(h100, eager, graphs, shipped, shift)


def _held_out_mape(cells: list[gf.MeasuredGemm], fit: gf.GemmFit) -> float:
    held = [c for c in cells if c.family not in gf.FIT_FAMILIES]
    return 100 * float(np.mean([abs(gf.tflops_error(c, fit)) for c in held]))


def h100_predicted(
    h100: list[gf.MeasuredGemm],
    eager: list[gf.MeasuredGemm],
    graphs: list[gf.MeasuredGemm],
    shipped: gf.GemmFit,
    shift: float,
) -> None:
    """Step 6: the H100 sweep predicted, its large-GEMM share, and the refit that was tried and not kept."""
    cells = gf.eager_cells(H100_SHAPES, "h100-sxm", shift)
    print("\n6. PREDICTED on the H100 (tests/fixtures/h100_shapes, not fitted on), shipped curves, estimated clocks")
    summary("h100_shapes/shapes.json (eager)", cells, [gf.tflops_error(c, shipped) for c in cells])
    e = [abs(gf.tflops_error(c, shipped)) for c in cells if c.m >= 2048]
    print(f"    M >= 2048: MAPE {100 * np.mean(e):.1f} % ({len(e)} cells)")
    for dtype in ("bf16", "fp8"):
        share = gf.measured_large_share(cells, dtype)
        print(f"  measured large-GEMM share (median, M, N, K >= 4096) {dtype}: {share:.3f}")
    base_fit = [c for c in h100 + eager + graphs if gf.is_fit_cell(c)]
    wider = gf.fit(base_fit + [c for c in cells if c.family in gf.FIT_FAMILIES])
    for label, f in (("shipped (H100 squares + H200 fit families)", shipped), ("+ H100 fit families", wider)):
        parts = [
            (n, _held_out_mape(x, f)) for n, x in (("H100", cells), ("H200 eager", eager), ("H200 graphs", graphs))
        ]
        held = [c for x in (cells, eager, graphs) for c in x if c.family not in gf.FIT_FAMILIES]
        total = 100 * float(np.mean([abs(gf.tflops_error(c, f)) for c in held]))
        print(
            f"  held-out MAPE, {label:44s}: " + "  ".join(f"{n} {v:.1f} %" for n, v in parts) + f"  all {total:.1f} %"
        )


def end_to_end(graphs: list[gf.MeasuredGemm]) -> None:
    """8192³ at the power model's 700 W clock (what the planner does) vs the H100 and H200 measurements."""
    print("\n5. 8192^3 at the shared power model's 700 W clock (predicted) vs measured:")
    tensor, sm, dram = REF_GEMM_ACTIVITY
    for name in ("h100-sxm", "h200-sxm"):
        g = get_gpu(name)
        model = GpuPowerModel(g)
        for dtype in ("bf16", "fp8"):
            weight = float(model.tensor_weight(1.0 if dtype == "fp8" else 0.0))
            mhz = float(model.max_clock_for_power(700.0, tensor * weight, sm, dram, REF_GEMM_TEMP_C))
            cell = gf.MeasuredGemm(dtype, 8192, 8192, 8192, 1.0, mhz, name, "graph")
            pred = float(gemm.shape_efficiency(dtype, 8192, 8192, 8192, gf.machine_of(cell))) * g.tflops(dtype) * mhz
            pred /= g.peak_clock_mhz
            if name == "h100-sxm":
                meas = next(t for d, n, t, _ in gemm.H100_SQUARE_GEMMS if d == dtype and n == 8192)
            else:
                meas = next(c.tflops for c in graphs if c.dtype == dtype and c.m == c.n == c.k == 8192)
            print(
                f"  {name} {dtype}: {mhz:5.0f} MHz, predicted {pred:7.1f}, measured {meas:7.1f} TFLOP/s, "
                f"{100 * (pred / meas - 1):+.1f} %"
            )


if __name__ == "__main__":
    main()
