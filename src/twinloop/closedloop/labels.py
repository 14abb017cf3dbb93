"""Ground truth of a twin run: the injected faults and the background failures, as labels to score the loop on."""

from __future__ import annotations

import numpy as np

from twinloop.closedloop.adapter import TwinAdapter
from twinloop.ops import Label
from twinloop.twin.engine import Twin

#: Twin events that are true faults even though no scenario injected them (background failure process).
BACKGROUND_EVENTS = frozenset({"failure", "gpu_fell_off_bus", "psu_overload", "power_brake", "thermal_shutdown"})


def ground_truth(twin: Twin, adapter: TwinAdapter) -> tuple[tuple[Label, ...], tuple[Label, ...]]:
    """(injected faults up to now, background failure events) of ``twin``'s run so far.

    A fault on a job is labeled with its job id (``<site>/jobs/<name>``); a background event lasts 600 s as a
    label and carries the job that ran on its entity at the end of the run.
    """
    site = twin.topo.site
    end = float(twin.t_s)
    faults = tuple(
        Label(
            f.kind,
            f"{site}/jobs/{f.entity}" if twin.job_by_name(f.entity) is not None else f.entity,
            f.start_s,
            end if f.end_s is None else min(f.end_s, end),
        )
        for f in twin.ground_truth
        if f.start_s < end
    )
    background = tuple(
        Label(f"{e.kind}:{e.detail}", e.entity, e.t_s, e.t_s + 600.0, job=adapter.job_of(e.entity))
        for e in twin.events
        if e.kind in BACKGROUND_EVENTS
    )
    return faults, background + background_stragglers(twin, adapter, end) + configured_caps(twin, end)


def background_stragglers(twin: Twin, adapter: TwinAdapter, end_s: float) -> tuple[Label, ...]:
    """The hall's background stragglers (slow GPUs drawn at reset, ``straggler_fraction``): true slow GPUs for
    the whole run, so an incident that names one is a true event, not a false alarm.
    """
    gpu_ids = twin.telemetry.entities("gpu")
    return tuple(
        Label(f"straggler:speed {speed:.3f}", gpu_ids[i], 0.0, end_s, job=adapter.job_of(gpu_ids[i]))
        for i, speed in zip(twin.background_stragglers.tolist(), twin.background_speed.tolist(), strict=True)
    )


def configured_caps(twin: Twin, end_s: float) -> tuple[Label, ...]:
    """Racks and rows the scenario caps (``rack_cap_w`` / ``row_cap_w``): their GPUs run under a power limit by
    design, so a power-throttle incident there is a true condition, not a false alarm (``mixed_hall``'s capped
    H100 row at its ramp-up). Kind ``power_limit:...``: it explains power-throttle incidents only
    (:func:`twinloop.ops.evaluate.evaluate_detection`).
    """
    chain, topo = twin.chain, twin.topo
    racks = [
        Label("power_limit:rack cap", topo.rack_id(int(k)), 0.0, end_s)
        for k in np.flatnonzero(np.isfinite(chain.rack_cap_w))
    ]
    rows = [
        Label("power_limit:row cap", topo.row_id(int(r)), 0.0, end_s)
        for r in np.flatnonzero(np.isfinite(chain.row_cap_w))
    ]
    return tuple(racks + rows)
