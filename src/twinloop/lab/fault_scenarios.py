"""Seeded random twin scenarios for labeled incident data: small halls, mixed jobs, two or three faults.

:func:`random_scenario` draws, from one seed, a liquid-cooled H100 hall of 128–256 GPUs (one or two rows), a
training job on half to three quarters of it, often a serving job replaying the packaged Azure trace, sometimes a
second training job that arrives mid-run (a benign workload change), checkpoints every 5–15 min, and two or three
injected faults of random kinds, targets, start times and magnitudes. The faults sit in separate time slots (a
fault, then at least two minutes of nothing before the next slot) so that each incident has at most one injected
cause. Same seed, same scenario. The ranges are guesses chosen so that most faults are visible within a few
minutes on a hall this size; they are not calibrated against any fleet.

Serving trace: Azure Public Dataset, AzureLLMInferenceTrace_conv (2023-11-16), CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from twinloop.hardware.gpu import get_gpu
from twinloop.twin.faults import FAULT_TARGETS
from twinloop.twin.scenario import NodeSpec, ScenarioSpec, node_nameplate_w, scenario_from_dict

#: The kinds the random scenarios draw from, in draw order: the twin's first eleven. New kinds are appended to
#: ``FAULT_TARGETS`` and left out here, so that a new twin fault kind does not move the draws of the studies built
#: on these scenarios.
FAULT_KINDS: tuple[str, ...] = tuple(FAULT_TARGETS)[:11]
#: The advisory classifier's training scenarios add operator power caps, an event a live cluster sees often.
ADVISORY_FAULT_KINDS: tuple[str, ...] = (*FAULT_KINDS, "operator_power_cap")
_NODE = NodeSpec()


def _magnitude(kind: str, rng: np.random.Generator, facility_w: float) -> float | None:
    """A random magnitude per fault kind (units as in :class:`~twinloop.twin.scenario.FaultSpec`)."""
    lo_hi: dict[str, tuple[float, float]] = {
        "cdu_pump_degradation": (0.1, 0.45),  # remaining pump fraction
        "cdu_capacity_loss": (0.2, 0.5),  # remaining capacity fraction
        "cooling_setpoint_drift": (20.0, 60.0),  # C per hour
        "heat_wave": (8.0, 16.0),  # C added to ambient
        "psu_loss": (3.0, 6.99),  # PSUs lost (of 6; 6 = the node goes dark)
        "gpu_thermal_interface": (2.0, 4.0),  # thermal resistance multiplier
        "straggler": (0.5, 0.85),  # speed fraction
        "sdc": (0.3, 0.8),  # loss perturbation
        "facility_power_cap": (0.55, 0.8),  # new budget as a fraction of the estimated facility power
        "operator_power_cap": (0.45, 0.8),  # power limit as a fraction of TDP
    }
    if kind not in lo_hi:
        return None
    lo, hi = lo_hi[kind]
    x = float(rng.uniform(lo, hi))
    if kind == "psu_loss":
        return float(int(x))
    if kind == "facility_power_cap":
        return round(x * facility_w, -2)
    return round(x, 3)


def random_scenario(seed: int, duration_s: float = 1500.0, kinds: tuple[str, ...] = FAULT_KINDS) -> ScenarioSpec:
    """A validated random scenario (see module docstring), deterministic in ``seed``.

    Args:
        seed: scenario seed (also the twin's seed).
        duration_s: simulated time, s (1 s steps); at least 900 s.
        kinds: the fault kinds to draw from (:data:`FAULT_KINDS`, or :data:`ADVISORY_FAULT_KINDS`).
    """
    rng = np.random.default_rng(seed)
    duration_s = max(900.0, float(duration_s))
    rows = int(rng.integers(1, 3))
    racks = 2
    nodes = int(rng.choice([4, 6, 8])) if rows == 2 else 8
    n_nodes = rows * racks * nodes
    n_gpus = n_nodes * 8
    node_w = node_nameplate_w(_NODE, get_gpu(_NODE.gpu))
    row_w = racks * nodes * node_w
    # Typical draw: ~75 % of nameplate on busy nodes; PUE ~1.2 (guesses for sizing only).
    facility_w = 0.75 * n_nodes * node_w * 1.2
    cdu = {
        "capacity_w": round(float(rng.uniform(1.0, 1.4)) * row_w, -3),
        "flow_kg_per_s": round(row_w / 20000.0, 2),
        "pump_power_w": round(row_w / 250.0),
    }
    jobs, train = _random_jobs(rng, n_nodes, n_gpus, duration_s)
    faults = _random_faults(rng, duration_s, (rows, racks, nodes), train, facility_w, kinds)
    raw = {
        "name": f"classify-{seed}",
        "site": "dc1",
        "duration_s": duration_s,
        "step_s": 1.0,
        "seed": seed,
        "rows": [{"count": rows, "racks": racks, "nodes_per_rack": nodes, "cooling": "liquid", "cdu": cdu}],
        "power_chain": {"facility_power_budget_w": round(1.3 * n_nodes * node_w * 1.2, -3)},
        "cooling": {"facility_water_setpoint_c": float(rng.uniform(22.0, 26.0))},
        "weather": {"start_hour": float(rng.uniform(0.0, 23.9)), "drybulb_mean_c": float(rng.uniform(12.0, 30.0))},
        "jobs": jobs,
        "faults": faults,
        "failures": "on",
        "telemetry": {"gpu_every_s": 1.0, "facility_every_s": 1.0, "aggregate": "sample"},
    }
    return scenario_from_dict(raw, f"classify-scenario-{seed}")


def _random_jobs(rng: np.random.Generator, n_nodes: int, n_gpus: int,
                 duration_s: float) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """The scenario's jobs (a training job on half to three quarters of the GPUs, maybe a serving fleet and a
    second training job) and the first training job's GPU count.
    """
    train = 8 * int(rng.integers(n_nodes // 2, 3 * n_nodes // 4 + 1))
    jobs: list[dict[str, Any]] = [
        {
            "name": "train-a",
            "kind": "training",
            "gpus": train,
            "submit_s": float(rng.integers(0, 60)),
            "checkpoint_interval_s": float(rng.integers(300, 900)),
            "checkpoint_write_s": float(rng.integers(10, 40)),
        }
    ]
    free = n_gpus - train
    if free >= 16 and rng.random() < 0.6:
        serve = 8 * int(rng.integers(1, min(free // 8, 6) + 1))
        jobs.append(
            {
                "name": "serve-a",
                "kind": "serving",
                "gpus": serve,
                "gpus_per_replica": 8,
                "trace": "package:azure_conv_sample.csv",
                "trace_rate_scale": float(rng.uniform(1.0, 4.0)),
                "submit_s": float(rng.integers(60, 180)),
            }
        )
        free -= serve
    if free >= 8 and rng.random() < 0.5:
        jobs.append(
            {
                "name": "train-b",
                "kind": "training",
                "gpus": 8 * int(rng.integers(1, free // 8 + 1)),
                "submit_s": float(rng.uniform(300.0, duration_s - 300.0)),
                "run_s": float(rng.uniform(300.0, 900.0)),
            }
        )
    return jobs, train


def _random_faults(rng: np.random.Generator, duration_s: float, shape: tuple[int, int, int], train: int,
                   facility_w: float, kinds: tuple[str, ...]) -> list[dict[str, Any]]:  # fmt: skip
    """Two or three faults, one per equal slot of the run after its first 300 s (``shape``: rows, racks per
    row, nodes per rack).
    """
    n_faults = int(rng.integers(2, 4))
    slot_s = (duration_s - 300.0) / n_faults
    faults = []
    for k in range(n_faults):
        kind = kinds[int(rng.integers(len(kinds)))]
        start = 300.0 + k * slot_s + float(rng.uniform(0.0, 0.3 * slot_s))
        dur = float(rng.uniform(0.35, 0.6)) * slot_s
        faults.append(
            {
                "kind": kind,
                "target": _target(kind, rng, *shape, train),
                "start_s": round(start),
                "duration_s": round(dur),
                "magnitude": _magnitude(kind, rng, facility_w),
            }
        )
    return faults


def _target(kind: str, rng: np.random.Generator, rows: int, racks: int, nodes: int, train_gpus: int) -> str:
    """A random target of the level the fault kind needs; GPU faults and operator caps land on the first training
    job's GPUs (first-fit places it first), so that a straggler, an SDC or a cap has a job to slow or corrupt.
    """
    level = FAULT_TARGETS[kind][0][0]
    on_job = kind == "operator_power_cap"
    if on_job:  # an operator caps a node, a rack or a whole row (demand response)
        level = ("node", "rack", "row")[int(rng.integers(3))]
    if level == "site":
        return "dc1"
    if level == "job":
        return "train-a"
    if level == "row" and not on_job:
        return f"dc1/r{int(rng.integers(rows)) + 1:02d}"
    if level == "node" and not on_job:
        node = int(rng.integers(rows * racks * nodes))
    else:
        gpu = int(rng.integers(train_gpus))
        node = gpu // 8
    row, rest = divmod(node, racks * nodes)
    rack, n = divmod(rest, nodes)
    base = f"dc1/r{row + 1:02d}/k{rack + 1:02d}/n{n + 1:02d}"
    if level == "gpu":
        return f"{base}/g{gpu % 8}"
    return {"row": base[:7], "rack": base[:11]}.get(level, base)
