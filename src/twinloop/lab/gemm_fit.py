"""Measured GEMM cells, their clocks, the fit of :mod:`twinloop.plan.gemm` and its out-of-sample errors.

Four measurements, all at the 700 W limit and clock-normalised by the SM clock each cell ran at:

* the H100 SXM squares in :data:`twinloop.plan.gemm.H100_SQUARE_GEMMS` (eager loop, one clock reading per cell);
* ``tests/fixtures/h200/shapes.json``: 63 (M, N, K) × BF16/FP8 on an H200, eager loop (``tools/gpu/shapes.py``).
  It has no per-cell clock, so :func:`estimate_clocks` rebuilds the timeline: the cells ran in the listed order,
  each for ``ms · 5·⌈0.6 s / (5·ms)⌉`` plus one warm-up call (the script's loop), the time left over in the phase
  spread evenly over the cells; the clock of a cell is the mean of the 10 Hz NVML SM clock readings from 0.15 s
  after its estimated start to 0.05 s before its estimated end;
* ``tests/fixtures/h100_shapes/shapes.json``: the same 63 shapes × BF16/FP8 on an H100 SXM (the GPU the planner
  targets), same script, clocks estimated the same way (:func:`eager_cells`); not fitted on: predicted;
* ``tests/fixtures/h200/gemm_graphs.json``: 23 shapes × BF16/FP8 on an H200 timed as CUDA graphs of 20 calls
  (``tools/gpu/gemm_graphs.py``; no host overhead), with the mean 20 Hz SM clock inside each cell.

Eager-loop cells are predicted as ``max(t_gpu, floor_dtype)``: the host cost of one eager call (a harness property,
fitted; the planner does not use it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
from scipy.optimize import least_squares

from twinloop.hardware.gpu import get_gpu
from twinloop.lab.phases import load_phases
from twinloop.lab.soak import load_trace
from twinloop.plan import gemm

Harness = Literal["eager", "graph"]

#: (N, K) families of the H200 files that the curves are fitted on; the other families are held out.
FIT_FAMILIES: frozenset[tuple[int, int]] = frozenset({(4096, 4096), (14336, 4096), (2048, 7168)})


@dataclass(frozen=True)
class MeasuredGemm:
    """One measured GEMM: shape, dtype, achieved TFLOP/s, the SM clock it ran at, GPU and timing harness."""

    dtype: str
    m: int
    n: int
    k: int
    tflops: float
    clock_mhz: float
    gpu: str
    harness: Harness

    @property
    def family(self) -> tuple[int, int]:
        """``(N, K)``: the shape family (the H100 squares are their own)."""
        return (self.n, self.k)

    @property
    def seconds(self) -> float:
        """Measured time of one GEMM."""
        return 2.0 * self.m * self.n * self.k / (self.tflops * 1e12)


@dataclass(frozen=True)
class GemmFit:
    """A fit: the curves, the per-clock level of each GPU's measurements (H100 = 1) and the eager-call floors."""

    curves: dict[str, gemm.GemmCurve]
    level: dict[str, float]
    floor_s: dict[str, float]


def h100_cells() -> list[MeasuredGemm]:
    """The H100 squares as measured cells."""
    cells = zip(gemm.H100_SQUARE_GEMMS, gemm.H100_SQUARE_GEMM_CLOCKS_MHZ, strict=True)
    return [MeasuredGemm(d, n, n, n, t, f, "h100-sxm", "eager") for (d, n, t, _), f in cells]


def _loop_seconds(ms: float) -> float:
    """Wall time of one cell of ``tools/gpu/shapes.py``: a warm-up call, then batches of 5 until >= 0.6 s."""
    s = ms / 1e3
    return s * (5 * math.ceil(0.6 / (5 * s)) + 1)


def estimate_clocks(
    rows: list[dict[str, float]], soak_csv: Path, phases_csv: Path, shift_s: float = 0.0
) -> list[float]:
    """Mean SM clock (MHz) of each eager cell of ``shapes.json``, from the 10 Hz soak log (module docstring);
    ``shift_s`` moves every window (to show how much the figures depend on the reconstructed timeline).
    """
    t, _, _, mhz = load_trace(soak_csv)
    phases = {phase: start for start, phase in load_phases(phases_csv)}
    durations = np.asarray([_loop_seconds(float(r["ms"])) for r in rows])
    start, end = phases["gemm_shapes"], phases["sdpa"]
    extra = ((end - start) - durations.sum()) / len(rows)
    starts = start + np.concatenate([[0.0], np.cumsum(durations + extra)[:-1]])
    clocks = []
    for s0, dur in zip(starts, durations + extra, strict=True):
        s0 = s0 + shift_s
        sel = (t >= s0 + 0.15) & (t <= s0 + dur - 0.05)
        clocks.append(float(mhz[sel].mean()) if sel.any() else float(mhz[np.argmin(abs(t - s0 - dur / 2))]))
    return clocks


def eager_cells(fixture_dir: Path, gpu: str, shift_s: float = 0.0) -> list[MeasuredGemm]:
    """The cells of a ``shapes.json`` sweep on ``gpu`` with their estimated clocks (windows moved by ``shift_s``)."""
    rows = json.loads((fixture_dir / "shapes.json").read_text())["gemm"]
    clocks = estimate_clocks(rows, fixture_dir / "soak_10hz.csv", fixture_dir / "soak_phases.csv", shift_s)
    return [
        MeasuredGemm(r["dtype"], r["m"], r["n"], r["k"], r["tflops"], f, gpu, "eager")
        for r, f in zip(rows, clocks, strict=True)
    ]


def h200_eager_cells(fixture_dir: Path, shift_s: float = 0.0) -> list[MeasuredGemm]:
    """The cells of ``tests/fixtures/h200/shapes.json`` (H200 SXM)."""
    return eager_cells(fixture_dir, "h200-sxm", shift_s)


def graph_cells(path: Path, gpu: str) -> list[MeasuredGemm]:
    """The cells of a ``tools/gpu/gemm_graphs.py`` file (CUDA-graph timing, clock measured inside each cell)."""
    rows = json.loads(path.read_text())
    return [MeasuredGemm(r["dtype"], r["m"], r["n"], r["k"], r["tflops"], r["mhz"], gpu, "graph") for r in rows]


def h200_graph_cells(fixture_dir: Path) -> list[MeasuredGemm]:
    """The cells of ``gemm_graphs.json`` on the H200."""
    return graph_cells(fixture_dir / "gemm_graphs.json", "h200-sxm")


def planner_seconds(c: MeasuredGemm, large_gemm_efficiency: float, shape: tuple[int, int, int] | None = None) -> float:
    """What the training planner charges for a measured cell at the clock it ran at: the dtype's peak × the
    profile's large-GEMM efficiency × :func:`gemm.relative_efficiency` of ``shape`` (default the cell's own; the
    planner times a backward GEMM by its forward shape).
    """
    g = get_gpu(c.gpu)
    machine = gemm.GemmMachine(g.tflops("bf16") * 1e12, gemm.HBM_USABLE_SHARE * g.hbm_bandwidth_bytes_per_s)
    rel = float(gemm.relative_efficiency(c.dtype, *(shape or (c.m, c.n, c.k)), machine=machine))
    rate = machine.bf16_flops_per_s * c.clock_mhz / g.peak_clock_mhz * gemm.rate_factor(c.dtype)
    return 2.0 * c.m * c.n * c.k / (rate * large_gemm_efficiency * rel)


def is_fit_cell(c: MeasuredGemm) -> bool:
    """In the fit subset: every H100 cell, and the H200 cells of :data:`FIT_FAMILIES`."""
    return c.gpu == "h100-sxm" or c.family in FIT_FAMILIES


def machine_of(c: MeasuredGemm, level: float = 1.0) -> gemm.GemmMachine:
    """The cell's GPU at the clock it ran at (× its measurements' per-clock ``level``), usable HBM bandwidth."""
    g = get_gpu(c.gpu)
    rate = g.tflops("bf16") * 1e12 * c.clock_mhz / g.peak_clock_mhz * level
    return gemm.GemmMachine(rate, gemm.HBM_USABLE_SHARE * g.hbm_bandwidth_bytes_per_s)


def predict_seconds(c: MeasuredGemm, fit: GemmFit) -> float:
    """Predicted time of a measured cell under ``fit`` (eager cells floored by the host cost of a call)."""
    curve = fit.curves[gemm.curve_name(c.dtype)]
    t = float(gemm.gemm_time_s(c.dtype, c.m, c.n, c.k, machine_of(c, fit.level.get(c.gpu, 1.0)), curve))
    return max(t, fit.floor_s[c.dtype]) if c.harness == "eager" else t


def tflops_error(c: MeasuredGemm, fit: GemmFit) -> float:
    """Relative error of the predicted TFLOP/s (``+0.1``: 10 % too fast)."""
    return c.seconds / predict_seconds(c, fit) - 1.0


def _unpack(x: np.ndarray) -> GemmFit:
    curves = {
        name: gemm.GemmCurve(float(x[i]), float(x[i + 1]), float(x[i + 2]), float(x[i + 3]) * 1e-6)
        for name, i in (("bf16", 0), ("fp8", 4))
    }
    return GemmFit(curves, {"h100-sxm": 1.0, "h200-sxm": float(x[8])}, {"bf16": x[9] * 1e-6, "fp8": x[10] * 1e-6})


def fit(cells: list[MeasuredGemm]) -> GemmFit:
    """Least squares on log(time) (soft-L1, 5 % scale, so one odd kernel choice does not steer the curve)."""

    def residuals(x: np.ndarray) -> list[float]:
        f = _unpack(x)
        return [math.log(predict_seconds(c, f) / c.seconds) for c in cells]

    x0 = [0.9, 300.0, 100.0, 3.0, 0.9, 600.0, 200.0, 5.0, 1.0, 17.0, 20.0]
    lo = [0.3, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.7, 1.0, 1.0]
    hi = [1.5, 5000.0, 5000.0, 30.0, 1.5, 5000.0, 5000.0, 30.0, 1.3, 60.0, 60.0]
    r = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05)
    return _unpack(r.x)


def shipped_fit(fitted: GemmFit) -> GemmFit:
    """``fitted`` with the curves that :mod:`twinloop.plan.gemm` ships (its level and floors kept)."""
    return replace(fitted, curves=dict(gemm.CURVES))


def measured_large_share(cells: list[MeasuredGemm], dtype: str = "bf16", min_dim: int = 4096) -> float:
    """Median clock-normalised share of the dense peak over the ``dtype`` cells with M, N, K ≥ ``min_dim``.

    The measured large-GEMM efficiency of today's stacks (``efficiency.H100_GEMM_EFFICIENCY``, from the H100
    sweep ``tests/fixtures/h100_shapes``): large enough that tiles and fill cost little, the median so one odd
    kernel choice or clock window does not move it.
    """
    shares = []
    for c in cells:
        if c.dtype == dtype and min(c.m, c.n, c.k) >= min_dim:
            g = get_gpu(c.gpu)
            shares.append(gemm.clock_normalised_share(c.tflops, g.tflops(dtype), c.clock_mhz, g.peak_clock_mhz))
    if not shares:
        raise ValueError(f"no {dtype} cell with every dimension >= {min_dim}")
    return float(np.median(shares))
