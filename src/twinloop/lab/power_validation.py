"""Per-phase comparison of the power model with real readings, against the calibration targets (issue 13).

For each phase the model gets only what a planner or the twin would know: the power limit or locked clock,
the die temperature, and the phase's activities. A GEMM phase under a limit or a lock takes the activities of
the unconstrained GEMM (``gemm_peak``) with DRAM activity following its clock (a compute-bound GEMM moves bytes
in proportion to its FLOP rate), so its clock and throughput are *predicted*, not read back. Throughput ratios
assume the GEMM is compute-bound (throughput ∝ clock), as the measured throughput per MHz confirms to ~3 %.

Targets: power-limit points within 5 % in throughput ratio and 3 % in power; GEMM power at each locked clock
within 5 %; decode-like and copy power within 10 %; idle within 5 W.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.hardware.power import GpuPowerModel, gemm_clock_mhz
from twinloop.hardware.power_fit import CONTEXT_PHASE, FIT_PHASES, FP8_PHASE
from twinloop.hardware.readings import PhaseReading, Readings

BASE_PHASE = "gemm_peak"
FITTED = frozenset({*FIT_PHASES, CONTEXT_PHASE, FP8_PHASE, "idle"})


@dataclass(frozen=True)
class Row:
    """One phase: measured vs model, the target that applies and whether it holds.

    ``ratio_*`` is throughput relative to the 700 W GEMM (GEMM phases) or FP8 over BF16 (``fp8_8192``).
    """

    phase: str
    fitted: bool
    power_meas_w: float
    power_model_w: float
    clock_meas_mhz: float
    clock_model_mhz: float
    ratio_meas: float | None
    ratio_model: float | None
    target: str
    met: bool | None

    @property
    def power_err(self) -> float:
        """Relative power error (model/measured − 1)."""
        return self.power_model_w / self.power_meas_w - 1.0

    @property
    def ratio_err(self) -> float | None:
        """Relative throughput-ratio error, where there is a ratio."""
        if self.ratio_meas is None or self.ratio_model is None:
            return None
        return self.ratio_model / self.ratio_meas - 1.0


def _gemm_clock(model: GpuPowerModel, base: PhaseReading, limit_w: float, lock: float | None, temp_c: float) -> float:
    """DVFS clock of the base GEMM under ``limit_w`` (and a clock lock), DRAM activity following the clock."""
    activity = (base.tensor_active, base.sm_active, base.dram_active)
    return gemm_clock_mhz(model, limit_w, activity, base.clock_mhz, temp_c, lock)


def _gemm_power(model: GpuPowerModel, base: PhaseReading, f: float, temp_c: float) -> float:
    dram = base.dram_active * f / base.clock_mhz
    return float(model.power_w(f, base.tensor_active, base.sm_active, dram, temp_c))


def validate(readings: Readings, model: GpuPowerModel) -> list[Row]:
    """One row per phase with a target or a ratio (see the module docstring)."""
    ph = readings.phases
    base = ph[BASE_PHASE]
    limit0 = readings.default_limit_w
    f700 = _gemm_clock(model, base, limit0, None, base.temp_c)
    rows: list[Row] = []
    for p in ph.values():
        fitted = p.name in FITTED
        if p.group == "gemm":
            lock = p.clock_lock_mhz
            limit = p.power_limit_w or limit0
            f = _gemm_clock(model, base, limit, lock, p.temp_c)
            power = _gemm_power(model, base, f, p.temp_c)
            ratio_meas = p.throughput / base.throughput
            ratio_model = f / f700
            if lock is not None:
                ok = abs(power / p.power_w - 1) <= 0.05
                target = "power ±5 %"
            elif p.name == BASE_PHASE:
                ok = abs(power / p.power_w - 1) <= 0.03
                target = "power ±3 %"
            else:
                ok = abs(ratio_model / ratio_meas - 1) <= 0.05 and abs(power / p.power_w - 1) <= 0.03
                target = "ratio ±5 %, power ±3 %"
            rows.append(Row(p.name, fitted, p.power_w, power, p.clock_mhz, f, ratio_meas, ratio_model, target, ok))
        elif p.group in ("memory", "decode", "train", "idle"):
            f = float(
                model.max_clock_for_power(limit0, p.tensor_active, p.sm_active, p.dram_active, p.temp_c, p.context)
            )
            if p.context == 0:
                f = model.gpu.sm_clock_min_mhz  # no context: the driver parks the clock at its lowest
            power = float(model.power_w(f, p.tensor_active, p.sm_active, p.dram_active, p.temp_c, p.context))
            met: bool | None = None
            target = "(no target)"
            if p.group == "idle":
                met, target = abs(power - p.power_w) <= 5.0, "±5 W"
            elif p.group in ("memory", "decode"):
                met, target = abs(power / p.power_w - 1) <= 0.10, "power ±10 %"
            rows.append(Row(p.name, fitted, p.power_w, power, p.clock_mhz, f, None, None, target, met))
        elif p.group == "precision" and p.name.startswith("fp8"):
            bf = ph.get(p.name.replace("fp8", "bf16"))
            if bf is None:
                continue
            rows.append(_precision_row(model, p, bf, limit0, fitted))
    return rows


def _precision_row(model: GpuPowerModel, fp8: PhaseReading, bf16: PhaseReading, limit: float, fitted: bool) -> Row:
    """FP8 over BF16 throughput at the same limit, each GEMM at its measured activities."""
    w = model.tensor_weight(fp8.fp8_share)
    f8 = float(model.max_clock_for_power(limit, fp8.tensor_active * w, fp8.sm_active, fp8.dram_active, fp8.temp_c))
    f16 = float(model.max_clock_for_power(limit, bf16.tensor_active, bf16.sm_active, bf16.dram_active, bf16.temp_c))
    p8 = float(model.power_w(f8, fp8.tensor_active * w, fp8.sm_active, fp8.dram_active, fp8.temp_c))
    ratio_model = 2.0 * fp8.tensor_active * f8 / (bf16.tensor_active * f16)
    ratio_meas = fp8.throughput / bf16.throughput
    ok = abs(ratio_model / ratio_meas - 1) <= 0.05
    return Row(fp8.name, fitted, fp8.power_w, p8, fp8.clock_mhz, f8, ratio_meas, ratio_model, "FP8/BF16 ±5 %", ok)


def markdown(rows: list[Row]) -> str:
    """The table for docs/calibration.md."""
    out = [
        "| phase | set | P measured W | P model W | P err | clock measured MHz | clock model MHz "
        "| ratio measured | ratio model | ratio err | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        re = r.ratio_err
        out.append(
            f"| {r.phase} | {'fitted' if r.fitted else 'predicted'} | {r.power_meas_w:.1f} | {r.power_model_w:.1f} "
            f"| {100 * r.power_err:+.1f} % | {r.clock_meas_mhz:.0f} | {r.clock_model_mhz:.0f} "
            f"| {'' if r.ratio_meas is None else f'{r.ratio_meas:.3f}'} "
            f"| {'' if r.ratio_model is None else f'{r.ratio_model:.3f}'} "
            f"| {'' if re is None else f'{100 * re:+.1f} %'} | {r.target} "
            f"| {'—' if r.met is None else ('yes' if r.met else '**no**')} |"
        )
    return "\n".join(out)


def summary(rows: list[Row]) -> dict[str, float]:
    """Counts of targets met and missed, and the worst errors."""
    with_target = [r for r in rows if r.met is not None]
    return {
        "targets": float(len(with_target)),
        "met": float(sum(bool(r.met) for r in with_target)),
        "max_abs_power_err": float(np.max([abs(r.power_err) for r in rows])),
    }
