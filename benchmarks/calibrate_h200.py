"""Check the GPU power, DVFS and thermal models against real H200 readings they were not fitted on.

Reads the device check in ``tests/fixtures/h200`` (one H200 SXM, 700 W limit, 2026-11-26; see its README): a
180 s heat soak of BF16 8192³ GEMMs with a 450 W cap set for 30 s inside it, a 120 s idle cool-down, the GEMM
sweep before them, ``actuator.json`` around the cap and ``nvidia-smi -q``. Every model input is the catalog's
``h200-sxm`` entry, whose power and thermal parameters are the H100 fit scaled (``sources`` in
``catalog/gpus.yaml``), so every "model" figure is a prediction; rows marked "fitted" are fits on these readings
(to say what the data give), not model parameters.

    python benchmarks/calibrate_h200.py [--data DIR]

``tests/hardware/test_h200_calibration.py`` keeps each prediction error inside the band in
docs/sections/calibration-power.md.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import CLOCK_EVENT_SW_POWER_CAP, REF_GEMM_ACTIVITY, GpuPowerModel, gemm_clock_mhz
from twinloop.hardware.readings import H100_BF16_FLOP_PER_CLOCK
from twinloop.hardware.thermal import HBM_DEFAULT, hbm_steady_c
from twinloop.lab.soak import HBM_TEMP_FIELD, SoakReadings, load_soak, settle_s
from twinloop.lab.thermal_poles import anchored, fit_poles, simulate
from twinloop.plan import efficiency as effc
from twinloop.plan.activity import gemm_work
from twinloop.plan.train_power import compute_clock_mhz
from twinloop.twin.actions import SetPowerLimit
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "fixtures" / "h200"
GPU = "h200-sxm"
NAN = float("nan")
#: Seconds after the restore before the 700 W window (the die's slow pole has settled: τ ≈ 1 min, 3 °C).
SETTLE_AFTER_RESTORE_S = 60.0


@dataclass(frozen=True)
class Figure:
    """One measured quantity and the model's value for it (NaN: the model has none); ``how`` says which."""

    section: str
    name: str
    unit: str
    measured: float
    model: float
    how: str

    @property
    def error(self) -> float:
        """Model minus measured, in the figure's unit."""
        return self.model - self.measured

    @property
    def rel_error(self) -> float:
        """Model over measured, minus 1."""
        return self.model / self.measured - 1.0


def windows(r: SoakReadings) -> dict[str, tuple[float, float]]:
    """Steady windows (s from the soak's start): 700 W before the cap and after it settled, capped, idle."""
    ps, cap = r.phase_start_s, r.cap
    return {
        "pre_cap": (5.0, cap.set_s),
        "capped": (cap.set_s + 5.0, cap.restore_s),
        "soak_700": (cap.restore_s + SETTLE_AFTER_RESTORE_S, ps["cooldown"]),
        "soak_end": (ps["cooldown"] - 10.0, ps["cooldown"]),
        "cap_end": (cap.restore_s - 10.0, cap.restore_s),
        "cool_end": (ps["end"] - 10.0, ps["end"]),
    }


def _grid_mean(grid: np.ndarray, values: np.ndarray, win: tuple[float, float]) -> float:
    return float(values[(grid >= win[0]) & (grid < win[1])].mean())


def h100_scaled_rc(gpu: GpuSpec) -> tuple[float, float]:
    """``(R, τ)`` the catalog's scaling rule gives ``gpu`` from the H100 fit: the same rise at TDP, same τ."""
    h100 = get_gpu("h100-sxm")
    r_c_per_w = h100.thermal_resistance_c_per_w * h100.tdp_w / gpu.tdp_w
    return r_c_per_w, h100.thermal_resistance_c_per_w * h100.thermal_capacitance_j_per_c


def thermal_figures(r: SoakReadings, label: str, rc: tuple[float, float], how: str, held_out: str) -> list[Figure]:
    """A one-RC die model ``rc = (R, τ)`` driven by the measured power from the cold-idle start (its coolant
    set so that start is steady), against the die readings.
    """
    w, ps = windows(r), r.phase_start_s
    model = anchored(r.t_s, r.power_w, r.temp_c, [rc[0]], [rc[1]])
    grid, pred = simulate(r.t_s, r.power_w, model)
    meas = np.interp(grid, r.t_s, r.temp_c)
    sec = f"thermal: {label}"
    out = [
        Figure(sec, f"die at end of {name}", "°C", _grid_mean(grid, meas, w[k]), _grid_mean(grid, pred, w[k]), how)
        for name, k in (("soak (700 W)", "soak_end"), ("450 W cap", "cap_end"), ("cool-down", "cool_end"))
    ]
    steady = ("pre_cap", "capped", "soak_700", "cool_end")
    p = [r.window(*w[k])[0] for k in steady]
    rise_meas = np.polyfit(p, [_grid_mean(grid, meas, w[k]) for k in steady], 1)[0]
    rise_pred = np.polyfit(p, [_grid_mean(grid, pred, w[k]) for k in steady], 1)[0]
    out.append(Figure(sec, "steady rise per watt (4 steady windows)", "°C/W", rise_meas, rise_pred, how))
    drop = _grid_mean(grid, meas, w["soak_end"]) - _grid_mean(grid, meas, w["cool_end"])
    drop_pred = _grid_mean(grid, pred, w["soak_end"]) - _grid_mean(grid, pred, w["cool_end"])
    for after in (1.0, 10.0):
        win = (ps["cooldown"] + after - 0.5, ps["cooldown"] + after + 0.5)
        done = (_grid_mean(grid, meas, w["soak_end"]) - _grid_mean(grid, meas, win)) / drop
        done_pred = (_grid_mean(grid, pred, w["soak_end"]) - _grid_mean(grid, pred, win)) / drop_pred
        out.append(Figure(sec, f"share of the cool-down drop done {after:.0f} s after the load", "", done,
                          done_pred, how))  # fmt: skip
    for name, win, tag in (
        ("soak + cool-down", (0.0, ps["end"]), how),
        ("GEMM sweep", (ps["gemm_shapes"], 0.0), held_out),
    ):
        m = (grid >= win[0]) & (grid < win[1])
        out.append(
            Figure(sec, f"RMS error over the {name}", "°C", NAN, float(np.sqrt(np.mean((pred[m] - meas[m]) ** 2))), tag)
        )
    return out


def pole_fit_figures(r: SoakReadings, gpu: GpuSpec) -> list[Figure]:
    """One- and two-pole fits on the soak and cool-down (what the readings give; the catalog holds the first)."""
    end = r.phase_start_s["end"]
    one = fit_poles(r.t_s, r.power_w, r.temp_c, [(0.0, end)], 1)
    two = fit_poles(r.t_s, r.power_w, r.temp_c, [(0.0, end)], 2)
    tau = gpu.thermal_resistance_c_per_w * gpu.thermal_capacitance_j_per_c
    sec = "thermal: fits on the soak and cool-down"
    return [
        Figure(sec, "one pole: R (model: catalog)", "°C/W", one.r_c_per_w[0], gpu.thermal_resistance_c_per_w, "fitted"),
        Figure(sec, "one pole: τ (model: catalog R·C)", "s", one.tau_s[0], tau, "fitted"),
        Figure(sec, "one pole: coolant", "°C", one.coolant_c, NAN, "fitted"),
        Figure(sec, "one pole: RMS error", "°C", one.rms_c, NAN, "fitted"),
        Figure(sec, "two poles: fast R", "°C/W", two.r_c_per_w[0], NAN, "fitted"),
        Figure(sec, "two poles: fast τ (not resolved below ~0.5 s)", "s", two.tau_s[0], NAN, "fitted"),
        Figure(sec, "two poles: slow R", "°C/W", two.r_c_per_w[1], NAN, "fitted"),
        Figure(sec, "two poles: slow τ", "s", two.tau_s[1], NAN, "fitted"),
        Figure(sec, "two poles: coolant", "°C", two.coolant_c, NAN, "fitted"),
        Figure(sec, "two poles: RMS error", "°C", two.rms_c, NAN, "fitted"),
    ]


def hbm_figures(r: SoakReadings, gpu: GpuSpec) -> list[Figure]:
    """Steady HBM temperature of the H100 HBM model (``HBM_DEFAULT``) from the measured die temperature and the
    model's memory power, the coolant that of the catalog die RC anchored at the cold-idle start.
    """
    w, model = windows(r), GpuPowerModel(gpu)
    coolant = float(r.temp_c[0] - gpu.thermal_resistance_c_per_w * r.power_w[0])
    out = []
    for name, k in (("700 W GEMM", "soak_700"), ("450 W cap", "capped"), ("end of cool-down", "cool_end")):
        die_c = r.window(*w[k])[1]
        mem_w = float(model.memory_dyn_w(r.mem_util(*w[k])))
        hbm_c = float(hbm_steady_c(coolant, die_c, mem_w, HBM_DEFAULT))
        out.append(Figure("hbm", f"HBM at {name}", "°C", r.watch_mean(HBM_TEMP_FIELD, *w[k]), hbm_c, "predicted"))
    return out


def _gemm_tflops(data: Path) -> float:
    rows = json.loads((data / "shapes.json").read_text())["gemm"]
    return next(g["tflops"] for g in rows if g["dtype"] == "bf16" and g["m"] == g["n"] == g["k"] == 8192)


def power_figures(r: SoakReadings, gpu: GpuSpec, data: Path) -> list[Figure]:
    """Clock and power of the dense GEMM at 700 W and under the 450 W cap; idle power."""
    w, cap = windows(r), r.cap
    model = GpuPowerModel(gpu)
    p700, t700, f700 = r.window(*w["soak_700"])
    pcap, tcap, fcap = r.window(*w["capped"])
    mem700, memcap = r.mem_util(*w["soak_700"]), r.mem_util(*w["capped"])
    limits = np.array([cap.default_limit_w, cap.cap_w])
    plan700, plancap = compute_clock_mhz(model, gemm_work(gpu, 2), limits)
    tensor = _gemm_tflops(data) * 1e12 / (H100_BF16_FLOP_PER_CLOCK * f700 * 1e6)
    act = (tensor, 1.0, mem700)
    hw700 = gemm_clock_mhz(model, cap.default_limit_w, act, f700, t700)
    hwcap = gemm_clock_mhz(model, cap.cap_w, act, f700, tcap)
    p_hw700 = float(model.power_w(hw700, tensor, 1.0, mem700 * hw700 / f700, t700))
    p_hwcap = float(model.power_w(hwcap, tensor, 1.0, mem700 * hwcap / f700, tcap))
    on700 = (cap.t_s < cap.set_s) | (cap.t_s > cap.restore_s + 1.0)
    capped_bit = float(np.mean((cap.reasons[on700] & CLOCK_EVENT_SW_POWER_CAP) > 0))
    t_end, f_end = r.window(*w["cool_end"])[1], gpu.sm_clock_max_mhz
    return [
        Figure("power", "SM clock, dense GEMM at 700 W: planner", "MHz", f700, plan700, "predicted"),
        Figure("power", "SM clock, dense GEMM at 700 W: model, measured activities", "MHz", f700, hw700, "predicted"),
        Figure("power", "SM clock, dense GEMM under the 450 W cap: planner", "MHz", fcap, plancap, "predicted"),
        Figure("power", "SM clock under the 450 W cap: model, measured activities", "MHz", fcap, hwcap, "predicted"),
        Figure("power", "clock ratio 450 W / 700 W: planner", "", fcap / f700, plancap / plan700, "predicted"),
        Figure(
            "power",
            "clock ratio 450 W / 700 W: model, measured activities",
            "",
            fcap / f700,
            hwcap / hw700,
            "predicted",
        ),
        Figure("power", "GEMM power at the 700 W limit", "W", p700, p_hw700, "predicted"),
        Figure("power", "GEMM power under the 450 W cap", "W", pcap, p_hwcap, "predicted"),
        Figure(
            "power",
            "share of 700 W samples with the SW power-cap reason (model: power-bound)",
            "",
            capped_bit,
            float(hw700 < gpu.sm_clock_max_mhz),
            "predicted",
        ),
        Figure(
            "power",
            "memory utilisation of the GEMM at 700 W (model: the H100's HBM bytes per FLOP)",
            "",
            mem700,
            effc.GEMM_HBM_BYTES_PER_FLOP
            * _gemm_tflops(data)
            * 1e12
            / (effc.HBM_EFFICIENCY * gpu.hbm_bandwidth_bytes_per_s),
            "predicted",
        ),
        Figure(
            "power",
            "memory utilisation under the cap (model: 700 W value × clock ratio)",
            "",
            memcap,
            mem700 * fcap / f700,
            "predicted",
        ),
        Figure(
            "power",
            "idle with a CUDA context, end of cool-down (1,980 MHz)",
            "W",
            r.window(*w["cool_end"])[0],
            float(model.power_w(f_end, 0.0, 0.0, 0.0, t_end, 1.0)),
            "predicted",
        ),
        Figure(
            "power",
            "cold idle, no context (first reading, 345 MHz)",
            "W",
            float(r.power_w[0]),
            float(model.power_w(gpu.sm_clock_min_mhz, 0.0, 0.0, 0.0, float(r.temp_c[0]), 0.0)),
            "predicted",
        ),
        Figure(
            "power",
            "tensor activity of the 8192³ GEMM at 700 W (model: the H100's)",
            "",
            tensor,
            REF_GEMM_ACTIVITY[0],
            "measured input",
        ),
    ]


def twin_cap_response_s(gpu: str = GPU, cap_w: float = 450.0) -> float:
    """Seconds from a power limit set on a busy twin GPU to its power within 5 % of the limit."""
    raw = {
        "name": "cap-response", "duration_s": 600,
        "rows": [{"racks": 1, "nodes_per_rack": 1, "node": {"gpu": gpu}}],
        "jobs": [{"name": "train", "kind": "training", "gpus": 8, "profile": {"load_bytes_per_gpu": 4e9}}],
    }  # fmt: skip
    twin = Twin(scenario_from_dict(raw, "calibrate_h200"), source="calibrate_h200")
    twin.run(120.0)
    target = "dc1/r01/k01/n01/g0"
    if not twin.apply(SetPowerLimit(target, cap_w)).ok:
        raise RuntimeError("the twin refused the power limit")
    t0 = twin.t_s
    for _ in range(60):
        twin.step()
        if twin.physics.gpus.power_w[0] <= 1.05 * cap_w:
            return twin.t_s - t0
    return NAN


def cap_figures(r: SoakReadings) -> list[Figure]:
    """How fast NVML shows the cap, against the twin's one step."""
    c = r.cap
    before = c.power_w[c.t_s < c.set_s]
    first = (c.t_s > c.set_s) & (c.t_s <= c.set_s + 1.0)
    after = np.flatnonzero(c.t_s > c.set_s)
    fall = float((-np.diff(c.power_w[after[:12]])).max())
    dt = float(np.median(np.diff(c.t_s)))
    i_cool = np.flatnonzero(r.t_s >= r.phase_start_s["cooldown"])
    hi, lo = r.window(*windows(r)["soak_end"])[0], r.window(*windows(r)["cool_end"])[0]
    seg = r.power_w[i_cool[:40]]
    t_seg = r.t_s[i_cool[:40]]
    t90 = t_seg[np.argmax(seg < lo + 0.9 * (hi - lo))]
    t10 = t_seg[np.argmax(seg < lo + 0.1 * (hi - lo))]
    return [
        Figure(
            "cap",
            "set → power within 5 % of the cap (model: the twin)",
            "s",
            settle_s(c.t_s, c.power_w, c.set_s, c.cap_w, 0.05),
            twin_cap_response_s(),
            "predicted",
        ),
        Figure(
            "cap",
            "set → power within 1 % of the cap",
            "s",
            settle_s(c.t_s, c.power_w, c.set_s, c.cap_w, 0.01),
            NAN,
            "measured",
        ),
        Figure(
            "cap",
            "restore → power within 5 % of the pre-cap power",
            "s",
            settle_s(c.t_s, c.power_w, c.restore_s, float(before.mean()), 0.05),
            NAN,
            "measured",
        ),
        Figure(
            "cap",
            "first 1 s mean after the set, over the cap",
            "",
            float(c.power_w[first].mean()) / c.cap_w - 1,
            NAN,
            "measured",
        ),
        Figure("cap", "largest fall of the reading in one sample after the set", "W", fall, NAN, "measured"),
        Figure(
            "cap",
            "most a 1 s moving average can fall in one sample (power → 0)",
            "W",
            float(before.mean()) * dt,
            NAN,
            "measured",
        ),
        Figure(
            "cap",
            "cool-down: reading 90 % → 10 % of its step (a 1 s average: 0.8 s)",
            "s",
            float(t10 - t90),
            NAN,
            "measured",
        ),
    ]


_SMI = {
    "power_limit_min_w": r"Min Power Limit\s*:\s*([\d.]+) W",
    "power_limit_max_w": r"Max Power Limit\s*:\s*([\d.]+) W",
    "tdp_w": r"Default Power Limit\s*:\s*([\d.]+) W",
    "sm_clock_max_mhz": r"Max Clocks\s+Graphics\s*:\s*\d+ MHz\s+SM\s*:\s*(\d+) MHz",
}


def catalog_figures(data: Path, gpu: GpuSpec) -> list[Figure]:
    """``nvidia-smi -q`` of the fixture against the catalog entry (T.Limit temperatures: T.Limit = current +
    margin; slowdown and shutdown at the offsets past it).
    """
    text = (data / "nvidia-smi-q.txt").read_text()
    out = []
    for field, pattern in _SMI.items():
        m = re.search(pattern, text)
        if m:
            out.append(Figure("catalog", field, "", float(m.group(1)), float(getattr(gpu, field)), "catalog"))
    num = {
        k: float(re.search(rf"{k}\s*:\s*(-?\d+) C", text).group(1))
        for k in (  # type: ignore[union-attr]
            "GPU Current Temp",
            "GPU T.Limit Temp",
            "GPU Slowdown T.Limit Temp",
            "GPU Shutdown T.Limit Temp",
        )
    }
    t_limit = num["GPU Current Temp"] + num["GPU T.Limit Temp"]
    out.append(
        Figure(
            "catalog",
            "slowdown_temp_c (T.Limit − slowdown offset)",
            "°C",
            t_limit - num["GPU Slowdown T.Limit Temp"],
            gpu.slowdown_temp_c,
            "catalog",
        )
    )
    out.append(
        Figure(
            "catalog",
            "shutdown_temp_c (T.Limit − shutdown offset)",
            "°C",
            t_limit - num["GPU Shutdown T.Limit Temp"],
            gpu.shutdown_temp_c,
            "catalog",
        )
    )
    return out


def figures(data: Path = DEFAULT_DATA) -> list[Figure]:
    """Every figure of the H200 check."""
    r, gpu = load_soak(data), get_gpu(GPU)
    tau = gpu.thermal_resistance_c_per_w * gpu.thermal_capacitance_j_per_c
    thermal = thermal_figures(r, "H100 fit scaled (before)", h100_scaled_rc(gpu), "predicted", "predicted")
    thermal += thermal_figures(r, "catalog h200-sxm", (gpu.thermal_resistance_c_per_w, tau), "fitted", "held out")
    thermal += pole_fit_figures(r, gpu)
    return thermal + hbm_figures(r, gpu) + power_figures(r, gpu, data) + cap_figures(r) + catalog_figures(data, gpu)


def _fmt(x: float) -> str:
    if np.isnan(x):
        return ""
    return f"{x:.4f}" if abs(x) < 0.1 and x != 0 else (f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}")


def markdown(rows: list[Figure]) -> str:
    """The tables for docs/sections/calibration-power.md, one per section."""
    out: list[str] = []
    for section in dict.fromkeys(f.section for f in rows):
        out += [
            "",
            f"**{section}**",
            "",
            "| quantity | unit | measured | model | model − measured | set |",
            "|---|---|---|---|---|---|",
        ]
        for f in (f for f in rows if f.section == section):
            err = _fmt(f.error)
            out.append(f"| {f.name} | {f.unit} | {_fmt(f.measured)} | {_fmt(f.model)} | {err} | {f.how} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    print(markdown(figures(args.data)))


if __name__ == "__main__":
    main()
