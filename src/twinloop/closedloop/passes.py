"""The closed loop's passes: a scenario with the loop off and on over the twin, scored against injected faults.

:func:`run_pass` runs a scenario once through :class:`~twinloop.ops.runner.LoopRunner` over a
:class:`~twinloop.closedloop.cluster.TwinCluster`: with the loop off (detection only, nothing acted on) or on (the
responder acts through the twin adapter between twin steps). It returns what happened: the twin's summary, the
incidents, the action log, and detection quality against the ground truth (:mod:`twinloop.closedloop.labels`).
:func:`compare` runs both passes with the same seed; :func:`outcome_metrics` flattens the figures the loop is
judged on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinloop.closedloop.cluster import TwinCluster
from twinloop.closedloop.labels import ground_truth
from twinloop.ops import (
    ActionResult,
    Advisor,
    AdvisoryModel,
    DetectionReport,
    Incident,
    Label,
    LoopRunner,
    Mode,
    PipelineConfig,
    Policy,
    RowHeatForecast,
    Sample,
    evaluate_detection,
    load_models,
)
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec
from twinloop.twin.summary import never_started


@dataclass(frozen=True)
class PassResult:
    """One pass over a scenario."""

    name: str
    loop_on: bool
    summary: dict[str, Any]
    incidents: tuple[Incident, ...]
    actions: tuple[ActionResult, ...]
    faults: tuple[Label, ...]
    background: tuple[Label, ...]
    detection: DetectionReport
    wall_s: float
    max_gpu_temp_c: float
    gpu_s_above_slowdown: float
    advisor: Advisor | None = None


def _heat_forecast() -> RowHeatForecast:
    models, sample_s = load_models()
    return RowHeatForecast(models, sample_s)


def run_pass(
    spec: ScenarioSpec,
    loop_on: bool,
    *,
    mode: Mode = "auto",
    policy: Policy | None = None,
    pipeline_config: PipelineConfig | None = None,
    duration_s: float | None = None,
    on_step: Callable[[Twin, StepResult], None] | None = None,
    on_incidents: Callable[[Twin, StepResult, Sequence[Incident]], None] | None = None,
    source: str = "scenario",
    optimize_cooling: bool = True,
    precool: bool = True,
    advisory: AdvisoryModel | None = None,
    keep_first_reports: bool = False,
) -> PassResult:
    """Run ``spec`` once with the loop off or on.

    ``on_step(twin, result)`` sees every step (progress, telemetry); ``on_incidents(twin, result, updates)`` sees
    every step's incident updates (new, updated and closed) as the detectors report them, before the responder acts.
    ``optimize_cooling`` adds the cooling optimizer to the loop; ``precool`` feeds it the packaged heat forecaster
    (:mod:`twinloop.ops.learn.precool`) on the twin's rack heat and queue, so it tightens a row's cooling before
    the queue's jobs heat it.
    ``advisory`` adds the learned classifier's second opinion (:class:`~twinloop.ops.classify.advisory.Advisor`,
    on the runner's ``on_sample`` / ``on_incidents`` hooks; it acts on nothing): ``PassResult.advisor.advice``.
    ``keep_first_reports`` keeps every incident's first report with its features (``advisor.first_reports``) even
    without a model (training data).
    """
    started = time.perf_counter()
    heat = _heat_forecast() if loop_on and optimize_cooling and precool else None
    cluster = TwinCluster(
        spec,
        source,
        duration_s=duration_s,
        rack_heat_every_s=heat.sample_s if heat else None,
        rack_heat_horizons_s=heat.horizons_s if heat else (),
        on_step=on_step,
    )

    advisor = None
    if advisory is not None or keep_first_reports:
        topo = cluster.topology()
        advisor = Advisor(topo.gpu_ids, topo.limits, advisory, dt_s=spec.step_s)

    def incidents_hook(sample: Sample, updates: Sequence[Incident]) -> None:
        if advisor is not None:
            advisor.on_incidents(sample, updates)
        if on_incidents is not None:
            assert cluster.last_result is not None
            on_incidents(cluster.twin, cluster.last_result, updates)

    runner = LoopRunner(
        cluster,
        mode=mode if loop_on else None,
        policy=policy,
        pipeline_config=pipeline_config,
        optimize_cooling=optimize_cooling,
        forecast=heat,
        on_sample=advisor.observe if advisor is not None else None,
        on_incidents=incidents_hook if on_incidents is not None or advisor is not None else None,
    )
    runner.run()
    faults, background = ground_truth(cluster.twin, cluster.adapter)
    all_incidents = tuple(runner.incidents.values())
    return PassResult(
        name="loop-on" if loop_on else "loop-off",
        loop_on=loop_on,
        summary=cluster.twin.summary(),
        incidents=all_incidents,
        actions=runner.actions,
        faults=faults,
        background=background,
        detection=evaluate_detection(all_incidents, faults, background),
        wall_s=time.perf_counter() - started,
        max_gpu_temp_c=cluster.max_gpu_temp_c,
        gpu_s_above_slowdown=cluster.gpu_s_above_slowdown,
        advisor=advisor,
    )


def outcome_metrics(r: PassResult) -> dict[str, float | None]:
    """The figures the loop is judged on, flat (lower is better unless the name says goodput/ettr)."""
    s = r.summary
    thr = s["throttled_gpu_s"]
    energy = s["energy"]
    useful_tokens = sum(j["goodput_tokens_per_s"] * s["simulated_s"] + j["served_tokens"] for j in s["jobs"])
    out: dict[str, float | None] = {
        "thermal_throttled_gpu_s": thr["sw_thermal"] + thr["hw_slowdown"],
        "power_throttled_gpu_s": s["power_throttled_below_tdp_gpu_s"],
        "power_bound_gpu_s": thr["sw_power_cap"],  # NVML SW power cap bit, TDP included (informational)
        "max_gpu_temp_c": r.max_gpu_temp_c,
        "gpu_s_above_slowdown": r.gpu_s_above_slowdown,
        "peak_facility_power_w": s["peak_facility_power_w"],
        "psu_trips": float(s["psu_overloads"]),
        "cooling_energy_kwh": energy["cooling_kwh"],
        "pue": s["pue"],
        "energy_per_useful_token_j": energy["facility_kwh"] * 3.6e6 / useful_tokens if useful_tokens else None,
    }
    for j in s["jobs"]:
        out[f"goodput_tokens_per_s[{j['name']}]"] = j["goodput_tokens_per_s"]
        out[f"ettr[{j['name']}]"] = None if never_started(j) else j["ettr"]
    return out


def compare(spec: ScenarioSpec, **kwargs: Any) -> tuple[PassResult, PassResult]:
    """Loop off, then loop on, same scenario and seed."""
    return run_pass(spec, False, **kwargs), run_pass(spec, True, **kwargs)


def default_out_dir() -> Path:
    """Where ``twinloop run`` writes when no ``--out`` is given."""
    return Path("twinloop-out")
