"""Fault injection from the scenario, with ground-truth labels (what, where, when).

Each fault resolves its target at load (an unknown entity or the wrong level is an :class:`InputError` naming
``faults.N.target``) and is switched on at ``start_s`` and off at ``start_s + duration_s``. Default magnitudes
(guesses, overridable with ``magnitude``) are the second entry of ``FAULT_TARGETS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from twinloop.errors import InputError
from twinloop.twin.events import Event, FaultLabel
from twinloop.twin.scenario import ScenarioSpec
from twinloop.twin.topology import Topology

if TYPE_CHECKING:
    from twinloop.twin.engine import Twin

# kind → (allowed target levels, default magnitude)
FAULT_TARGETS: dict[str, tuple[tuple[str, ...], float | None]] = {
    "cdu_pump_degradation": (("row", "rack"), 0.4),
    "cdu_capacity_loss": (("row", "rack"), 0.3),
    "cooling_setpoint_drift": (("row", "rack"), 6.0),
    "heat_wave": (("site",), 10.0),
    "psu_loss": (("node",), 1.0),
    "gpu_thermal_interface": (("gpu",), 2.5),
    "straggler": (("gpu",), 0.7),
    "sdc": (("gpu", "job"), 0.5),
    "gpu_fall_off_bus": (("gpu",), None),
    "job_hang": (("job",), None),
    "facility_power_cap": (("site",), None),
}


@dataclass(frozen=True)
class ResolvedFault:
    """A fault with its target resolved to (level, index)."""

    label: FaultLabel
    level: str
    index: int
    magnitude: float


def resolve_faults(spec: ScenarioSpec, topo: Topology, source: str) -> list[ResolvedFault]:
    """Resolve every fault's target; raise :class:`InputError` for bad ones."""
    job_names = [j.name for j in spec.jobs]
    out: list[ResolvedFault] = []
    for i, f in enumerate(spec.faults):
        levels, default = FAULT_TARGETS[f.kind]
        where = f"faults.{i}"
        if "job" in levels and f.target in job_names:
            level, index = "job", job_names.index(f.target)
        else:
            try:
                level, index = topo.resolve(f.target)
            except KeyError:
                raise InputError(
                    source,
                    f"{where}.target",
                    f"unknown entity {f.target!r} "
                    f"(allowed: {' or '.join(levels)} ids like {_example(topo, levels[0])}"
                    + (f" or job names {job_names}" if "job" in levels else "")
                    + ")",
                ) from None
        if level == "rack" and "row" in levels:
            level, index = "row", int(topo.rack_row[index])
        if level not in levels:
            raise InputError(source, f"{where}.target", f"{f.kind} needs a {' or '.join(levels)} target, got a {level}")
        magnitude = f.magnitude if f.magnitude is not None else default
        if magnitude is None:
            if f.kind == "facility_power_cap":
                raise InputError(source, f"{where}.magnitude", "facility_power_cap needs the new budget in W (> 0)")
            magnitude = 0.0
        if f.kind in ("cdu_pump_degradation", "cdu_capacity_loss", "straggler") and not 0 < magnitude <= 1:
            raise InputError(source, f"{where}.magnitude", f"{magnitude} (allowed: remaining fraction 0 < m <= 1)")
        if f.kind in ("gpu_thermal_interface",) and not 1 <= magnitude <= 20:
            raise InputError(source, f"{where}.magnitude", f"{magnitude} (allowed: R multiplier 1..20)")
        if f.kind == "facility_power_cap" and magnitude <= 0:
            raise InputError(source, f"{where}.magnitude", f"{magnitude} (allowed: budget > 0 W)")
        end = None if f.duration_s is None else f.start_s + f.duration_s
        entity = f"{spec.site}/jobs/{f.target}" if level == "job" else f.target.strip("/")
        out.append(ResolvedFault(FaultLabel(f.kind, entity, f.start_s, end, magnitude), level, index, magnitude))
    return out


def _example(topo: Topology, level: str) -> str:
    if level == "site":
        return topo.site
    if level == "job":
        return "a job name"
    return {"row": topo.row_id, "rack": topo.rack_id, "node": topo.node_id, "gpu": topo.gpu_id}[level](0)


def timeline(faults: list[ResolvedFault]) -> list[tuple[float, int, bool]]:
    """(time, fault index, on) sorted by time, 'off' before 'on' at equal times."""
    items: list[tuple[float, int, bool]] = []
    for i, f in enumerate(faults):
        items.append((f.label.start_s, i, True))
        if f.label.end_s is not None:
            items.append((f.label.end_s, i, False))
    return sorted(items, key=lambda e: (e[0], e[2], e[1]))


def apply_fault(twin: Twin, fault: ResolvedFault, on: bool) -> None:
    """Switch a fault on or off in the twin's state."""
    kind, i, m = fault.label.kind, fault.index, fault.magnitude
    cs = twin.cooling.state
    if kind == "cdu_pump_degradation":
        cs.pump_health[i] = m if on else 1.0
    elif kind == "cdu_capacity_loss":
        cs.capacity_health[i] = m if on else 1.0
    elif kind == "cooling_setpoint_drift":
        twin.drift_rate_c_per_s[i] = m / 3600.0 if on else 0.0
        if not on:
            cs.drift_c[i] = 0.0
    elif kind == "heat_wave":
        twin.extra_ambient_c = m if on else 0.0
    elif kind == "psu_loss":
        installed = float(twin.chain.psus_installed[i])
        twin.chain.psus_alive[i] = max(0.0, installed - m) if on else installed
        if on and twin.chain.psus_alive[i] <= 0:
            twin.node_lost(i, "psu_loss", repair_at_s=fault.label.end_s)
    elif kind == "gpu_thermal_interface":
        idx = np.array([i], dtype=np.int64)
        base = twin.physics.r_c_per_w[idx]
        twin.physics.set_thermal_resistance(idx, base * np.float32(m if on else 1.0))
    elif kind == "straggler":
        if on:
            twin.straggle[i] = m
        else:
            twin.straggle.pop(i, None)
    elif kind == "sdc":
        job = twin.jobs[i] if fault.level == "job" else twin.job_on_gpu(i)
        if job is not None:
            job.sdc_until_s = (fault.label.end_s or float("inf")) if on else twin.t_s
            job.sdc_magnitude = m
    elif kind == "gpu_fall_off_bus":
        if on:
            twin.gpu_lost(i, xid=79, reason="gpu_fell_off_bus", repair_at_s=fault.label.end_s)
        else:
            twin.node_repaired(int(twin.topo.gpu_node[i]))
    elif kind == "job_hang":
        job = twin.jobs[i]
        if on:
            twin.hang_job(job)
    elif kind == "facility_power_cap":
        twin.chain.budget_w = m if on else twin.spec.power_chain.facility_power_budget_w
    twin.emit(Event(twin.t_s, "fault_start" if on else "fault_end", fault.label.entity, kind))
