"""The run summary: energy (with losses, cooling and emissions), PUE, throttling, peaks, failures, jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twinloop.twin.actions import ActionResult
from twinloop.twin.site import SiteState

J_PER_KWH = 3.6e6


def never_started(job: dict[str, Any]) -> bool:
    """Whether a job of :func:`summarize`'s ``jobs`` never ran: still queued, with no work, tokens or interruption. Its
    ETTR reads 0.0 in the summary (kept for JSON readers), which is no figure: it lost no time, it had none.
    """
    return job["phase"] == "queued" and not job["iterations"] and not job["served_tokens"] and not job["interruptions"]


def summarize(twin: SiteState, action_log: Sequence[ActionResult], faults_injected: int) -> dict[str, Any]:
    """A JSON-ready summary of the run so far (``action_log``: the results of the commands applied so far).

    ``energy.balance_error`` is ``|IT + conversion losses + cooling − facility| / facility`` with IT measured
    bottom-up from the GPU energy counters plus host power — the conservation check.
    """
    acc = twin.accounts
    gpu_j = float(twin.physics.gpus.energy_j.sum())
    it_bottom_up_j = gpu_j + acc.host_j
    balance = it_bottom_up_j + acc.conversion_loss_j + acc.cooling_j
    facility = acc.facility_j
    jobs = []
    for j in twin.jobs:
        jobs.append(
            {
                "name": j.spec.name,
                "kind": j.kind,
                "gpus": j.spec.gpus,
                "phase": j.phase.name.lower(),
                "ettr": round(j.ettr(twin.t_s), 6),
                "goodput_tokens_per_s": round(j.goodput_tokens_per_s(twin.t_s), 3),
                "iterations": round(j.kept_iterations, 3),
                "lost_iterations": round(j.lost_iterations + j.iterations - j.kept_iterations, 3),
                "interruptions": j.interruptions,
                "served_tokens": round(j.served_tokens, 1),
            }
        )
    events: dict[str, int] = {}
    for e in twin.events:
        events[e.kind] = events.get(e.kind, 0) + 1
    return {
        "scenario": twin.spec.name,
        "seed": twin.seed,
        "simulated_s": twin.t_s,
        "step_s": twin.dt_s,
        "gpus": twin.topo.n_gpus,
        "nodes": twin.topo.n_nodes,
        "racks": twin.topo.n_racks,
        "energy": {
            "facility_kwh": facility / J_PER_KWH,
            "it_kwh": acc.it_j / J_PER_KWH,
            "gpu_kwh": gpu_j / J_PER_KWH,
            "conversion_loss_kwh": acc.conversion_loss_j / J_PER_KWH,
            "cooling_kwh": acc.cooling_j / J_PER_KWH,
            "emissions_kg_co2e": acc.carbon_g / 1000.0,
            "balance_error": abs(balance - facility) / facility if facility > 0 else 0.0,
        },
        "pue": facility / acc.it_j if acc.it_j > 0 else None,
        "peak_facility_power_w": acc.peak_facility_w,
        "peak_it_power_w": acc.peak_it_w,
        "peak_it_power_instant_w": acc.peak_it_instant_w,
        "throttled_gpu_s": dict(acc.throttled_gpu_s),
        "power_throttled_below_tdp_gpu_s": acc.power_throttled_below_tdp_gpu_s,
        "psu_overloads": acc.psu_overloads,
        "thermal_shutdowns": acc.thermal_shutdowns,
        "failures": dict(sorted(acc.failures.items())),
        "events": dict(sorted(events.items())),
        "faults_injected": faults_injected,
        "actions": {"applied": sum(r.ok for r in action_log), "refused": sum(not r.ok for r in action_log)},
        "jobs": jobs,
    }
