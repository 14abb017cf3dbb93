"""The planner's compute-phase activities, clock and power against a real H100 training run it was not fitted on.

The H100 readings' ``train_steady`` phase (``/work/shared/data/h100``; the reduced copy in
``tests/fixtures/h100_power`` gives the same figures): a 1.14 B Llama (``train_model_config.json``) trained with
Hugging Face Transformers in eager mode, FP32 master weights + BF16 autocast, SDPA attention, micro-batch 8 ×
2,048 tokens, one GPU at its 700 W limit. Measured: the SM clock, NVML memory utilisation (``dram``), board power
and the tensor activity the readings derive (achieved FLOP/s over the peak at the measured clock).

Nothing in the activity rules (:mod:`twinloop.plan.activity`) or their constants was fitted on this phase. Three
predictions, each printed against the measurement:

* ``planner``: ``plan train`` for that job as it stands (framework ``megatron-core-2024``, the default);
* ``planner, step time matched``: the same with the element-wise HBM passes set (bisection) so that the planned
  step at its own DVFS clock takes the measured step time — HF eager runs unfused norms, SiLU, RoPE and casts
  that the Megatron profile does not, and this puts that extra time where the profile puts element-wise work
  (memory-bound). Fitted on the step time only; activities, clock and power stay predictions;
* ``power model, measured activities``: the power model alone given the measured tensor and DRAM activity at the
  measured die temperature (the best the planner's DVFS could do with perfect activities).

Also the GEMM rows: the planner's dense BF16 GEMM alone (:func:`twinloop.plan.activity.gemm_work`) at the
limits of the H100's power-limit sweep, and its DRAM activity, against ``gemm_peak`` and ``cap_*`` (the bytes per
FLOP were measured on ``gemm_peak``; the caps are held out).

Run: ``python benchmarks/validate_activity_h100.py [--data DIR]``. Before/after a change, run it with
``PYTHONPATH`` pointing at each tree's ``src`` (the GEMM rows need :mod:`twinloop.plan.activity`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import GpuPowerModel
from twinloop.hardware.readings import PhaseReading, load_readings
from twinloop.plan.evaluate import TrainArrays
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train import evaluate_one
from twinloop.plan.train_request import TrainContext, make_request, resolve

ROOT = Path(__file__).resolve().parents[1]
_CANDIDATES = (ROOT.parent / "shared" / "data" / "h100", Path("/work/shared/data/h100"))
DEFAULT_DATA = next(
    (p for p in _CANDIDATES if (p / "samples_20hz.csv").exists()), ROOT / "tests" / "fixtures" / "h100_power"
)
#: The job of phase ``train_steady`` (shared/data/h100/README.md, tools/workload.py).
MICRO_BATCH, SEQ_LEN = 8, 2048
CAPS = ("gemm_peak", "cap_600", "cap_500", "cap_400", "cap_300", "cap_200")


def _context(data: Path) -> TrainContext:
    """The planner's context for the training phase's job on one H100 (its model config from ``data``)."""
    cfg = data / "train_model_config.json"
    if not cfg.exists():
        cfg = ROOT / "tests" / "fixtures" / "h100" / "train_model_config.json"
    req = make_request(
        source="validate_activity_h100",
        model=str(cfg),
        gpu="h100-sxm",
        gpus=1,
        tp=1,
        pp=1,
        dp=1,
        cp=1,
        zero=0,
        recompute="none",
        micro_batch=MICRO_BATCH,
        global_batch=MICRO_BATCH,
        seq_len=SEQ_LEN,
    )
    return resolve(req)


def _plan(ctx: TrainContext, passes: float | None = None) -> TrainArrays:
    cfg = ctx.parallel_config()
    assert cfg is not None
    if passes is not None:
        ctx = dataclasses.replace(ctx, efficiency=dataclasses.replace(ctx.efficiency, elementwise_hbm_passes=passes))
    return evaluate_one(ctx, ConfigArrays.from_configs([cfg]))


def matched_passes(ctx: TrainContext, step_s: float) -> float:
    """Element-wise HBM passes at which the planned step (at its own DVFS clock) takes ``step_s``."""
    lo, hi = 0.0, 200.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(_plan(ctx, mid).time.step_s[0]) < step_s else (lo, mid)
    return 0.5 * (lo + hi)


def _row(name: str, step_s: float, tensor: float, dram: float, clock: float, power: float) -> str:
    return f"| {name} | {step_s:.3f} | {tensor:.3f} | {dram:.3f} | {clock:,.0f} | {power:.0f} |"


def _plan_row(name: str, a: TrainArrays) -> str:
    p = a.power
    step = float(a.time.step_s[0])
    return _row(name, step, float(p.tensor_active[0]), float(p.dram_active[0]), float(p.compute_clock_mhz[0]),
                float(p.average_power_w[0]))  # fmt: skip


def training_table(data: Path) -> list[str]:
    """The training phase: measured against the three predictions (module docstring)."""
    r = load_readings(data).phases["train_steady"]
    step_s = MICRO_BATCH * SEQ_LEN / r.throughput
    ctx = _context(data)
    passes = matched_passes(ctx, step_s)
    model = GpuPowerModel(get_gpu("h100-sxm"))
    limit = r.power_limit_w or 700.0
    clock = float(model.max_clock_for_power(limit, r.tensor_active, 1.0, r.dram_active, r.temp_c))
    power = float(model.power_w(clock, r.tensor_active, 1.0, r.dram_active, r.temp_c))
    return [
        "| train_steady (1.14 B Llama, HF eager, 1 H100, 700 W) | step s | tensor | dram | clock MHz | power W |",
        "|---|---|---|---|---|---|",
        _row("measured", step_s, r.tensor_active, r.dram_active, r.clock_mhz, r.power_w),
        _plan_row(f"planner ({ctx.request.framework})", _plan(ctx)),
        _plan_row(f"planner, step time matched ({passes:.1f} element-wise passes)", _plan(ctx, passes)),
        _row("power model, measured activities", step_s, r.tensor_active, r.dram_active, clock, power),
    ]


def gemm_table(data: Path) -> list[str]:
    """The planner's dense GEMM alone under the sweep's limits against the measured GEMM phases."""
    try:
        from twinloop.plan.activity import compute_activity, gemm_work
        from twinloop.plan.train_power import compute_clock_mhz
    except ImportError:  # a tree before plan/activity.py
        return ["(no twinloop.plan.activity in this tree: GEMM rows skipped)"]
    phases: dict[str, PhaseReading] = load_readings(data).phases
    gpu = get_gpu("h100-sxm")
    model = GpuPowerModel(gpu)
    rows = [
        "| GEMM 8192³ BF16 | limit W | clock MHz measured | planner | dram measured | planner |",
        "|---|---|---|---|---|---|",
    ]
    for name in CAPS:
        r = phases[name]
        limit = float(r.power_limit_w or 700.0)
        work = gemm_work(gpu, 1)
        clock = float(compute_clock_mhz(model, work, limit)[0])
        dram = float(compute_activity(work, clock / gpu.sm_clock_max_mhz)[2][0])
        rows.append(f"| {name} | {limit:.0f} | {r.clock_mhz:,.0f} | {clock:,.0f} | {r.dram_active:.3f} | {dram:.3f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print both tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="H100 readings (raw or reduced copy)")
    args = ap.parse_args(argv)
    np.set_printoptions(precision=4)
    print("\n".join(training_table(args.data)))
    print()
    print("\n".join(gemm_table(args.data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
