"""Validate the shared GPU power and thermal models against the real H100 readings, phase by phase.

Reads ``../shared/data/h100/`` (relative to the repository root; ``--data`` to point elsewhere, a reduced copy
such as ``tests/fixtures/h100_power`` works too), refits the coefficients (to show that the shipped defaults are
the fit), and prints per phase the measured and modelled power, clock and throughput ratio, with the target
that applies and whether it holds; then the thermal fit.

    python benchmarks/validate_power_h100.py [--data DIR] [--write-fixture DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import DEFAULT_COEFFICIENTS, GpuPowerModel
from twinloop.hardware.power_fit import fit_power, rounded
from twinloop.hardware.readings import load_readings, write_reduced
from twinloop.hardware.thermal import HBM_DEFAULT, fit_die_rc, fit_hbm, simulate
from twinloop.lab.power_validation import markdown, summary, validate

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data/h100 from the repository root; a git worktree one level deeper (wt/NAME) finds it one up.
_CANDIDATES = (ROOT / ".." / "shared" / "data" / "h100", ROOT / ".." / ".." / "shared" / "data" / "h100")
DEFAULT_DATA = next((p for p in _CANDIDATES if p.is_dir()), _CANDIDATES[0])


def thermal_report(data: Path) -> str:
    """Fit the die RC on the heat-up and cool-down, the HBM model through the memory phases; RMS errors."""
    r = load_readings(data)
    tr, s = r.trace, r.trace.phase_start_s
    heat = (s["idle"] + 5.0, s["cap_600"])
    cool = (s["cooldown"], float(tr.t_s[-1]) + 1.0)
    die = fit_die_rc(tr, [heat, cool])
    model = GpuPowerModel(get_gpu("h100-sxm"))
    mem_w = np.asarray(model.memory_dyn_w(tr.util_mem / 100.0))
    hbm_fit_window = (s["idle"] + 5.0, s["train_setup"])
    hbm = fit_hbm(tr, [hbm_fit_window], die.coolant_c, mem_w)
    lines = [
        f"die: R = {die.r_c_per_w:.4f} °C/W, τ = {die.tau_s:.1f} s (C = {die.tau_s / die.r_c_per_w:.0f} J/°C), "
        f"coolant {die.coolant_c:.1f} °C; fitted on the heat-up (idle → end of gemm_peak) and the cool-down",
        f"HBM: coupling {hbm.coupling:.3f}, R = {hbm.r_c_per_w:.4f} °C per W of memory power, τ = {hbm.tau_s:.1f} s; "
        f"fitted from idle to the end of decode_b512 (shipped: {HBM_DEFAULT})",
        "",
        "| window | set | die RMS °C | die max °C | HBM RMS °C | HBM max °C |",
        "|---|---|---|---|---|---|",
    ]
    windows = [
        ("heat-up (idle → gemm_peak end)", heat, "fitted (die, HBM)"),
        ("caps, clock locks, copy, decode", (s["cap_600"], s["train_setup"]), "predicted (die), fitted (HBM)"),
        ("training, bursts and stalls", (s["train_setup"], s["cooldown"]), "predicted"),
        ("cool-down", cool, "fitted (die), predicted (HBM)"),
    ]
    for name, win, tag in windows:
        w, d, h = simulate(tr, win, die, hbm, mem_w)
        de, he = d - tr.temp_c[w], h - tr.hbm_temp_c[w]
        lines.append(
            f"| {name} | {tag} | {np.sqrt(np.mean(de**2)):.2f} | {np.abs(de).max():.1f} "
            f"| {np.sqrt(np.mean(he**2)):.2f} | {np.abs(he).max():.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--write-fixture", type=Path, default=None, help="write the reduced copy here and stop")
    args = ap.parse_args(argv)
    try:
        if args.write_fixture is not None:
            write_reduced(args.data, args.write_fixture)
            print(f"wrote {args.write_fixture}")
            return 0
        gpu = get_gpu("h100-sxm")
        readings = load_readings(args.data)
        fit = fit_power(readings, gpu)
        refit = rounded(fit.coeff)
        print(f"refit:    {refit}")
        print(f"shipped:  {DEFAULT_COEFFICIENTS}")
        same = refit == DEFAULT_COEFFICIENTS
        print(f"shipped defaults are the fit: {same}; fit RMS error {100 * fit.rms_rel_error:.1f} %")
        print(f"fitted on: {', '.join(fit.fit_phases)} (+ idle, idle_context, cool-down trace, fp8_8192)\n")
        rows = validate(readings, GpuPowerModel(gpu))
        print(markdown(rows))
        s = summary(rows)
        print(f"\ntargets met: {int(s['met'])} of {int(s['targets'])}\n")
        print(thermal_report(args.data))
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
