"""Validation figures of the twin: power shapes, thermal response to a cooling cut, exactness, energy balance.

    python benchmarks/validate_twin.py

Prints one line per figure; docs/sections/calibration-twin.md records the output and compares it with the
published facts in shared/anchors/power.md.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.twin.engine import Twin
from twinloop.twin.jobs import Phase
from twinloop.twin.scenario import load_scenario, scenario_from_dict

H100 = get_gpu("h100-sxm")
BASE: dict[str, Any] = {
    "name": "validate",
    "duration_s": 3600,
    "rows": [
        {
            "racks": 2,
            "nodes_per_rack": 2,
            "cdu": {
                "capacity_w": 60000,
                "flow_kg_per_s": 2.0,
                "loop_heat_capacity_j_per_c": 2.0e5,
                "pump_power_w": 300,
            },
        }
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
}


def twin(**changes: Any) -> Twin:
    raw = copy.deepcopy(BASE)
    raw.update(changes)
    return Twin(scenario_from_dict(raw, "validate"))


def training_power() -> None:
    t = twin()
    powers, launch_mean, launch_peak, step_peaks = [], 0.0, 0.0, []
    nodes = np.arange(2)  # the job's 16 GPUs fill nodes 0 and 1
    prev = None
    for _ in range(400):
        t.step()
        p = t.physics.gpus.power_w[:16].copy()
        # instant peak per GPU: its node's peak over its mean, shared by the node's 8 GPUs, on top of the mean
        peak = (p.reshape(2, 8).mean(axis=1) + (t.node_peak_w[nodes] - t.node_dc_w[nodes]) / 8).max()
        if t.jobs[0].phase == Phase.LAUNCH:
            launch_mean, launch_peak = float(p.max()), float(peak)
        elif prev is not None and p.mean() - prev.mean() > 200:  # a load step inside the sustained phase
            step_peaks.append(float(peak))
        prev = p
        powers.append(p)
    p = np.array(powers[60:])
    site_mean = p.mean(axis=1)
    cv = (p.std(axis=1) / p.mean(axis=1)).max()
    print(
        f"training: peak GPU power (1 s mean) {p.max() / H100.tdp_w:.3f} x TDP, trough {p.min() / H100.tdp_w:.3f} x TDP"
    )
    print(
        f"training: job-mean power swings {site_mean.min():.0f}..{site_mean.max():.0f} W; "
        f"max spread across GPUs within a step {100 * cv:.2f} % (synchronous; manufacturing variation)"
    )
    print(
        f"training: kernel-launch step, 1 s mean <= {launch_mean / H100.tdp_w:.3f} x TDP, "
        f"instant peak per GPU {launch_peak:.0f} W (H100 readings: 767-890 W at load steps)"
    )
    if step_peaks:
        q = np.percentile(step_peaks, [0, 50, 100])
        print(
            f"training: instant peak per GPU at {len(step_peaks)} iteration load steps "
            f"min/median/max {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f} W"
        )


def serving_power() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for name, ctx, gen in (("decode-only", 10, 2000), ("prefill-heavy", 200000, 1)):
            lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
            lines += [f"2023-11-16 18:15:{s:02d}.1000000,{ctx},{gen}" for s in range(59)]
            path = Path(tmp) / f"{name}.csv"
            path.write_text("\n".join(lines) + "\n")
            jobs = [
                {"name": "s", "kind": "serving", "gpus": 8, "trace": str(path), "profile": {"load_bytes_per_gpu": 0}}
            ]
            t = twin(jobs=jobs)
            t.run(50)
            out[name] = float(np.median(t.physics.gpus.power_w[:8]))
    print(
        f"serving: decode-only median GPU power {out['decode-only'] / H100.tdp_w:.3f} x TDP; "
        f"prefill-heavy {out['prefill-heavy'] / H100.tdp_w:.3f} x TDP"
    )
    spec = load_scenario(duration_s=600)
    t = Twin(spec)
    t.run(600)
    job = next(j for j in t.jobs if j.kind == "serving")
    p = t.physics.gpus.power_w[job.gpus]
    print(
        f"serving (Azure conv trace x20, default scenario, t=600 s): GPU power median "
        f"{np.median(p) / H100.tdp_w:.3f} x TDP, max {p.max() / H100.tdp_w:.3f} x TDP"
    )


def cooling_cut() -> None:
    faults = [{"kind": "cdu_capacity_loss", "target": "dc1/r01", "start_s": 300, "duration_s": 900, "magnitude": 0.15}]
    t = twin(faults=faults)
    temp, clock, iters = [], [], []
    for _ in range(2400):
        t.step()
        temp.append(float(t.physics.gpus.temp_c[:16].max()))
        clock.append(float(t.physics.clock_x()[:16].mean()) * H100.sm_clock_max_mhz)
        iters.append(t.jobs[0].iterations)
    rate = np.diff(iters, prepend=0.0)
    windows = {
        "before (200-300 s)": slice(200, 300),
        "cut (1000-1200 s)": slice(1000, 1200),
        "restored (2200-2400 s)": slice(2200, 2400),
    }
    for name, w in windows.items():
        print(
            f"cooling cut to 15 % capacity, {name}: max GPU temp {np.mean(temp[w]):.1f} C, "
            f"mean SM clock {np.mean(clock[w]):.0f} MHz, iterations/s {np.mean(rate[w]):.4f}"
        )
    print(f"cooling cut: thermally throttled GPU-seconds {t.accounts.throttled_gpu_s['sw_thermal']:.0f}")


def exactness() -> None:
    finals = []
    for step in (1, 10):
        jobs = [{"name": "t", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 0, "comm_s": 0}}]
        t = twin(step_s=step, jobs=jobs, telemetry={"gpu_every_s": 10, "facility_every_s": 10})
        t.run(400)
        finals.append(float(t.physics.gpus.temp_c[:16].mean()))
    print(f"thermal exactness: GPU temp after 400 s at 1 s steps {finals[0]:.3f} C, at 10 s steps {finals[1]:.3f} C")


def energy() -> None:
    t = Twin(load_scenario())
    t.run()
    s = t.summary()
    e = s["energy"]
    print(
        f"default scenario 1 h: facility {e['facility_kwh']:.1f} kWh = IT {e['it_kwh']:.1f} + conversion "
        f"{e['conversion_loss_kwh']:.1f} + cooling {e['cooling_kwh']:.1f}; balance error {e['balance_error']:.2e}; "
        f"PUE {s['pue']:.3f}; emissions {e['emissions_kg_co2e']:.0f} kg CO2e"
    )
    for kind in ("ups", "hvdc"):
        raw = copy.deepcopy(BASE)
        raw["power_chain"] = {"kind": kind, "facility_power_budget_w": 1.0e5}
        t2 = Twin(scenario_from_dict(raw, "validate"))
        t2.run(600)
        acc = t2.accounts
        print(f"power chain {kind}: conversion losses {100 * acc.conversion_loss_j / acc.it_j:.1f} % of IT")


def diurnal() -> None:
    raw = copy.deepcopy(BASE)
    raw.update(
        step_s=1,
        duration_s=86400,
        cooling={"chiller": False, "facility_water_setpoint_c": 20},
        weather={"drybulb_mean_c": 24, "drybulb_amplitude_c": 8, "start_hour": 0},
        telemetry={"gpu_every_s": 600, "facility_every_s": 600},
        jobs=[
            {
                "name": "t",
                "kind": "training",
                "gpus": 32,
                "checkpoint_interval_s": "1d",
                "profile": {"load_bytes_per_gpu": 0},
            }
        ],
    )
    t = Twin(scenario_from_dict(raw, "validate"))
    temp, speed = [], []
    for _ in range(24):
        temps, speeds = [], []
        for _ in range(3600):
            t.step()
            temps.append(float(t.physics.gpus.temp_c.mean()))
            speeds.append(t.jobs[0].speed)
        temp.append(np.mean(temps))
        speed.append(np.mean(speeds[1:]))
    s = np.array(speed[1:])
    print(
        f"diurnal, towers only (no chiller), dry-bulb 16..32 C: hourly mean GPU temp "
        f"{min(temp):.1f}..{max(temp):.1f} C; "
        f"job speed varies {100 * (s.max() - s.min()) / s.mean():.2f} % over the day"
    )


def main() -> None:
    training_power()
    serving_power()
    cooling_cut()
    exactness()
    energy()
    diurnal()


if __name__ == "__main__":
    main()
