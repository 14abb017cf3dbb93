"""Seeded random job queues on a small hall, for training and evaluating the heat-load forecaster.

:func:`forecast_scenario` builds a 2-hour twin scenario (by default 8 liquid-cooled racks of 4 nodes of 8 H100s,
256 GPUs, 5 s steps) whose job queue is drawn from ``seed``: a backlog at t = 0 larger than the hall, then
Poisson arrivals; training jobs of 8-64 GPUs planned by the planner for Llama 3 8B/70B in BF16 or FP8-mixed,
serving jobs of Llama 3 8B/70B (BF16 or FP8 weights) on the packaged Azure conversation trace. Same seed → the
same scenario.

What the queue knows and when (:attr:`ForecastScenario.known_from_s`): a job is known once it is submitted;
a share of jobs (``notice_fraction``) is announced ``5-30 min`` earlier, as a job submitted with a deferred start
(Slurm ``--begin``) or a reservation would be. ``run_s`` is exact in the twin; on a real cluster it would be a
time limit that jobs often undercut, so the end times the forecaster relies on are optimistic here.

The mix (sizes, run times, arrival rate, notice share) is a guess shaped to keep the hall busy with a queue;
it is not fitted to any real cluster's job log.

The serving trace is derived from the Azure Public Dataset, AzureLLMInferenceTrace_conv (2023-11-16),
CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.twin.scenario import SCENARIO_DIR, ScenarioSpec, scenario_from_dict

TRACE = "package:azure_conv_sample.csv"
TRAIN_PLANS: tuple[tuple[str, str, int], ...] = (  # (model, precision, fewest GPUs that fit)
    ("llama-3-8b", "bf16", 8),
    ("llama-3-8b", "fp8-mixed", 8),
    ("llama-3-70b", "bf16", 16),
    ("llama-3-70b", "fp8-mixed", 16),
)
SERVE_PLANS: tuple[tuple[str, str], ...] = (
    ("llama-3-8b", "bf16"),
    ("llama-3-8b", "fp8"),
    ("llama-3-70b", "bf16"),
    ("llama-3-70b", "fp8"),
)
TRAIN_SIZES = (8, 16, 32, 64)


@dataclass(frozen=True)
class ForecastScenario:
    """A generated scenario and when each of its jobs became known to the queue.

    Attributes:
        spec: the twin scenario.
        known_from_s: per job (in ``spec.jobs`` order), simulation time (s) from which the queue knows it,
            ``<= submit_s``.
    """

    spec: ScenarioSpec
    known_from_s: tuple[float, ...]


def _job(rng: np.random.Generator, i: int, submit_s: float) -> dict[str, Any]:
    if rng.random() < 0.2:
        model, dtype = SERVE_PLANS[int(rng.integers(len(SERVE_PLANS)))]
        gpus = 8 * int(rng.integers(1, 4))
        job: dict[str, Any] = {
            "name": f"serve{i:02d}",
            "kind": "serving",
            "gpus": gpus,
            "plan": {"model": model, "weight_dtype": dtype},
            "trace": TRACE,
            "trace_rate_scale": float(np.round(rng.uniform(2.0, 12.0), 2)),
        }
        if rng.random() < 0.6:
            job["run_s"] = float(np.round(rng.uniform(20, 80)) * 60)
    else:
        model, precision, smallest = TRAIN_PLANS[int(rng.integers(len(TRAIN_PLANS)))]
        sizes = [g for g in TRAIN_SIZES if g >= smallest]
        job = {
            "name": f"train{i:02d}",
            "kind": "training",
            "gpus": sizes[int(rng.integers(len(sizes)))],
            "plan": {"model": model, "precision": precision},
            "run_s": float(np.round(rng.uniform(8, 50)) * 60),
        }
    job["submit_s"] = float(submit_s)
    return job


def forecast_scenario(
    seed: int,
    racks: int = 8,
    nodes_per_rack: int = 4,
    duration_s: float = 7200.0,
    step_s: float = 5.0,
    backlog_jobs: int = 8,
    arrivals_per_h: float = 9.0,
    notice_fraction: float = 0.5,
) -> ForecastScenario:
    """A seeded random job queue on a small liquid-cooled H100 hall (see module docstring).

    Args:
        seed: the only source of randomness (also the twin's seed).
        racks: racks in the single row.
        nodes_per_rack: 8-GPU nodes per rack.
        duration_s: run length, s.
        step_s: twin step, s (telemetry is kept every step, GPU blocks off).
        backlog_jobs: jobs already submitted at t = 0.
        arrivals_per_h: Poisson arrival rate of later jobs, per hour.
        notice_fraction: share of jobs announced 5-30 min before their submit time.
    """
    if not 0.0 <= notice_fraction <= 1.0:
        raise ValueError(f"notice_fraction = {notice_fraction} (allowed: 0..1)")
    rng = np.random.default_rng(seed)
    submits = [0.0] * backlog_jobs
    t = 0.0
    while True:
        t += float(rng.exponential(3600.0 / arrivals_per_h))
        if t >= duration_s - 900.0:
            break
        submits.append(round(t / step_s) * step_s)
    jobs = [_job(rng, i, s) for i, s in enumerate(submits)]
    known = []
    for job in jobs:
        lead_s = float(rng.uniform(300.0, 1800.0)) if rng.random() < notice_fraction else 0.0
        known.append(max(0.0, job["submit_s"] - lead_s))
    raw = {
        "name": f"forecast-{seed}",
        "site": "fc",
        "duration_s": duration_s,
        "step_s": step_s,
        "seed": seed,
        "rows": [{"racks": racks, "nodes_per_rack": nodes_per_rack, "node": {"gpu": "h100-sxm"}}],
        "power_chain": {"facility_power_budget_w": 5.0e6},
        "weather": {"start_hour": float(np.round(rng.uniform(0, 24), 2))},
        "scheduler": {"policy": "first_fit"},
        "jobs": jobs,
        "telemetry": {"keep_gpu": False, "facility_every_s": step_s, "gpu_every_s": step_s},
    }
    spec = scenario_from_dict(raw, f"forecast_scenario(seed={seed})", str(SCENARIO_DIR))
    return ForecastScenario(spec, tuple(known))
