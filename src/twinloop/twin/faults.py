"""Fault injection from the scenario, with ground-truth labels (what, where, when).

Each fault draws what its scenario gives as a range (times, magnitude, a ``random-<level>`` target) from its own
stream of the scenario seed, and resolves its target at load (an unknown entity or the wrong level is an
:class:`InputError` naming ``faults.N.target``); it is switched on at ``start_s`` and off at
``start_s + duration_s``. Default magnitudes (guesses, overridable with ``magnitude``) are the second entry of
``FAULT_TARGETS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.twin.events import Event, FaultLabel
from twinloop.twin.operations import ClusterOps
from twinloop.twin.scenario import ScenarioSpec
from twinloop.twin.seeds import stream
from twinloop.twin.topology import Topology

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
    # A job name hangs the whole job (a serving fleet: every replica); a GPU or node hangs the replica on it (a
    # training job on it: the whole job, whose collectives wait for that rank). See `_job_hang`.
    "job_hang": (("job", "gpu", "node"), None),
    "facility_power_cap": (("site",), None),
    # An operator (or a site's demand-response script) lowers the GPUs' power limit, as `nvidia-smi -pl` does:
    # not a fault of the hardware, but an event the loop must tell apart from one (a real H200 run's cap was
    # called a facility power excursion by the advisory classifier before it had seen any). 0.65: a guess.
    "operator_power_cap": (("node", "rack", "row", "gpu"), 0.65),
    # Another user's process on a job's GPU (a notebook kernel, an MPS or time-sliced neighbour): the GPU's rank keeps
    # ``magnitude`` of its speed, power and clock unchanged, and the GPU lists one more compute process. 0.45: a real
    # H200 job's step went from 0.165 s to 0.365 s under a co-tenant's BF16 GEMMs at the same 693 W and clock
    # (docs/results.md, "A real training job's steps under `twinloop watch nvml`").
    "co_tenant": (("gpu",), 0.45),
}


#: Faults of a row's CDU (one per row): a rack target means its row's CDU. Others act on the rack they name (an
#: operator's power cap on one rack capped its whole row while this held for every kind allowing a row).
PER_ROW_KINDS = frozenset({"cdu_pump_degradation", "cdu_capacity_loss", "cooling_setpoint_drift"})


@dataclass(frozen=True)
class ResolvedFault:
    """A fault with its target resolved to (level, index)."""

    label: FaultLabel
    level: str
    index: int
    magnitude: float


#: ``random-<level>`` targets: the levels a random draw may pick from.
RANDOM_LEVELS = ("gpu", "node", "rack", "row")
RANDOM_PREFIX = "random-"


def resolve_faults(spec: ScenarioSpec, topo: Topology, source: str, seed: int | None = None) -> list[ResolvedFault]:
    """Resolve every fault: draw what the scenario gave as a range, resolve its target; raise for bad ones.

    Ranges (``start_s``, ``duration_s``, ``magnitude`` as ``[low, high]``; ``target`` as ``random-<level>`` or
    ``random-<level>:<entity>``) are drawn uniformly from the fault's own stream of ``seed`` (default: the
    scenario's): times on the step grid inside the range, PSUs lost as a whole number, other magnitudes as
    reals. A range is checked at both ends, so whether a scenario loads never depends on the seed.
    """
    job_names = [j.name for j in spec.jobs]
    base_seed = spec.seed if seed is None else seed
    out: list[ResolvedFault] = []
    for i, f in enumerate(spec.faults):
        levels, default = FAULT_TARGETS[f.kind]
        where = f"faults.{i}"
        rng = stream(base_seed, "faults", i)
        start_s = _draw_time(rng, f.start_s, spec.step_s)
        duration_s = None if f.duration_s is None else _draw_time(rng, f.duration_s, spec.step_s)
        raw = f.magnitude if f.magnitude is not None else default
        for end in raw if isinstance(raw, tuple) else (raw,):
            _check_magnitude(f.kind, end, source, f"{where}.magnitude")
        magnitude = _draw_magnitude(rng, f.kind, raw)
        target = f.target
        if target.startswith(RANDOM_PREFIX):
            target = _draw_target(rng, topo, target, levels, source, f"{where}.target")
        if "job" in levels and target in job_names:
            level, index = "job", job_names.index(target)
        else:
            try:
                level, index = topo.resolve(target)
            except KeyError:
                raise InputError(
                    source,
                    f"{where}.target",
                    f"unknown entity {target!r} "
                    f"(allowed: {' or '.join(levels)} ids like {_example(topo, levels[0])}"
                    + (f" or job names {job_names}" if "job" in levels else "")
                    + f", or {RANDOM_PREFIX}<level>[:<entity>])",
                ) from None
        if level == "rack" and f.kind in PER_ROW_KINDS:
            level, index = "row", int(topo.rack_row[index])
        if level not in levels:
            raise InputError(source, f"{where}.target", f"{f.kind} needs a {' or '.join(levels)} target, got a {level}")
        end_s = None if duration_s is None else start_s + duration_s
        entity = f"{spec.site}/jobs/{target}" if level == "job" else target.strip("/")
        out.append(ResolvedFault(FaultLabel(f.kind, entity, start_s, end_s, magnitude), level, index, magnitude))
    return out


def _check_magnitude(kind: str, magnitude: float | None, source: str, field: str) -> None:
    if magnitude is None:
        if kind == "facility_power_cap":
            raise InputError(source, field, "facility_power_cap needs the new budget in W (> 0)")
        return
    if kind in ("cdu_pump_degradation", "cdu_capacity_loss", "straggler") and not 0 < magnitude <= 1:
        raise InputError(source, field, f"{magnitude} (allowed: remaining fraction 0 < m <= 1)")
    if kind in ("gpu_thermal_interface",) and not 1 <= magnitude <= 20:
        raise InputError(source, field, f"{magnitude} (allowed: R multiplier 1..20)")
    if kind == "facility_power_cap" and not 0 < magnitude <= 1e10:
        raise InputError(source, field, f"{magnitude} (allowed: budget 0 < W <= 1e10)")
    # PSUs lost: a negative count would leave more PSUs alive than installed (issue 19); 16 is the most a node has.
    if kind == "psu_loss" and not 0 < magnitude <= 16:
        raise InputError(source, field, f"{magnitude} (allowed: PSUs lost 0 < m <= 16)")
    if kind == "heat_wave" and not -30 <= magnitude <= 30:
        raise InputError(source, field, f"{magnitude} (allowed: C added to ambient -30..30)")
    if kind == "cooling_setpoint_drift" and not -100 <= magnitude <= 100:
        raise InputError(source, field, f"{magnitude} (allowed: drift -100..100 C per hour)")
    if kind == "operator_power_cap" and not 0.1 <= magnitude <= 1:
        raise InputError(source, field, f"{magnitude} (allowed: power limit as a fraction of TDP 0.1..1)")
    if kind == "sdc" and not 0 < magnitude <= 100:
        raise InputError(source, field, f"{magnitude} (allowed: loss perturbation 0 < m <= 100 nats)")


def _draw_time(rng: np.random.Generator, value: float | tuple[float, float], step_s: float) -> float:
    """The time itself, or a uniform draw on the step grid inside ``[low, high]`` (the range itself when no grid
    point falls inside it).
    """
    if not isinstance(value, tuple):
        return float(value)
    lo, hi = value
    first, last = int(np.ceil(lo / step_s - 1e-9)), int(np.floor(hi / step_s + 1e-9))
    if first > last:
        return float(rng.uniform(lo, hi))
    return float(rng.integers(first, last + 1)) * step_s


def _draw_magnitude(rng: np.random.Generator, kind: str, value: float | tuple[float, float] | None) -> float:
    if value is None:
        return 0.0
    if not isinstance(value, tuple):
        return float(value)
    lo, hi = value
    if kind == "psu_loss":  # whole PSUs
        first, last = int(np.ceil(lo)), int(np.floor(hi))
        if first <= last:
            return float(rng.integers(first, last + 1))
    return float(rng.uniform(lo, hi))


def _draw_target(
    rng: np.random.Generator, topo: Topology, target: str, levels: tuple[str, ...], source: str, field: str
) -> str:
    """A uniformly drawn entity id for ``random-<level>[:<entity>]``."""
    level, _, scope = target[len(RANDOM_PREFIX) :].partition(":")
    allowed = [lv for lv in RANDOM_LEVELS if lv in levels or (lv == "rack" and "row" in levels)]
    if level not in allowed:
        takes = ", ".join(RANDOM_PREFIX + lv for lv in allowed) or "no random target"
        raise InputError(source, field, f"{target!r}: this fault takes {takes}")
    ids = topo.ids(level)
    if scope:
        scope = scope.strip("/")
        try:
            topo.resolve(scope)
        except KeyError:
            raise InputError(source, field, f"unknown entity {scope!r} after ':' (allowed: an entity id like "
                             f"{_example(topo, 'row')})") from None  # fmt: skip
        ids = [e for e in ids if e == scope or e.startswith(scope + "/")]
        if not ids:
            raise InputError(source, field, f"no {level} under {scope!r} (allowed: an entity above the {level} level)")
    return ids[int(rng.integers(len(ids)))]


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


def apply_fault(twin: ClusterOps, fault: ResolvedFault, on: bool) -> None:
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
    elif kind == "co_tenant":
        if on:
            twin.co_tenants[i] = m
        else:
            twin.co_tenants.pop(i, None)
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
        if on:
            _job_hang(twin, fault)
    elif kind == "facility_power_cap":
        twin.chain.budget_w = m if on else twin.spec.power_chain.facility_power_budget_w
    elif kind == "operator_power_cap":
        _operator_cap(twin, fault, on)
    twin.emit(Event(twin.t_s, "fault_start" if on else "fault_end", fault.label.entity, kind))


def _job_hang(twin: ClusterOps, fault: ResolvedFault) -> None:
    """A hang, at its start (it lasts until the job's hang timeout or a restart, whatever its ``duration_s``).

    * a job name: the whole job hangs, as before (a serving fleet: every replica at once; the loop's answer is a
      requeue of the fleet);
    * a GPU or node: on a real serving fleet a hang is almost always one replica's (one tensor-parallel group's
      collective stuck on a bad link or a wedged GPU process) while the others serve on, so only the replica(s)
      holding that GPU or a GPU of that node hang; a training job there hangs whole (its collectives wait for
      that rank). A GPU or node running no job then: nothing hangs.
    """
    if fault.level == "job":
        twin.hang_job(twin.jobs[fault.index])
        return
    gpus = twin.topo.gpus_of(fault.level, fault.index)
    owners = np.unique(twin.job_of_gpu[gpus])
    for j in owners[owners >= 0].tolist():
        job = twin.jobs[j]
        if job.kind != "serving":
            twin.hang_job(job)
            continue
        for r in twin.replicas_under(job, gpus):
            twin.hang_replica(job, r)


def _operator_cap(twin: ClusterOps, fault: ResolvedFault, on: bool) -> None:
    """Set the GPUs' power limit to ``magnitude`` × TDP (at least the GPU's lowest limit), or back to the TDP
    when the cap ends (the operator lifts it; a loop cap placed on the same GPUs meanwhile is lifted with it).
    """
    phys = twin.physics
    idx = twin.topo.gpus_of(fault.level, fault.index)
    limit = phys.tdp_w[idx] * np.float32(fault.magnitude if on else 1.0)
    phys.gpus.user_limit_w[idx] = np.maximum(limit, phys.limit_min_w[idx])
