"""Detection quality against ground truth: precision, recall and time to detect per fault class.

An incident *matches* an injected fault when its class is one the fault can show as (``FAULT_CLASSES``), it
touches the fault's entity subtree (or its job), and it opens between ``start - lead_s`` and ``end + grace_s``.
Incidents that match no injected fault but sit on an entity where the twin's background failure process struck
shortly before are *explained by a background failure* (true events, reported apart); the rest are false alarms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from twinloop.ops.events import EventClass, Incident, Severity

C = EventClass
#: What each injected fault kind may be detected as.
FAULT_CLASSES: dict[str, frozenset[EventClass]] = {
    "cdu_pump_degradation": frozenset({C.COOLING_DEGRADATION, C.THERMAL_THROTTLE}),
    "cdu_capacity_loss": frozenset({C.COOLING_DEGRADATION, C.THERMAL_THROTTLE}),
    "cooling_setpoint_drift": frozenset({C.COOLING_DEGRADATION, C.THERMAL_THROTTLE}),
    "heat_wave": frozenset({C.COOLING_DEGRADATION, C.THERMAL_THROTTLE, C.FACILITY_POWER_EXCURSION}),
    "psu_loss": frozenset({C.POWER_DELIVERY_FAULT, C.POWER_THROTTLE}),
    "gpu_thermal_interface": frozenset({C.COOLING_DEGRADATION, C.THERMAL_THROTTLE}),
    "straggler": frozenset({C.STRAGGLER}),
    "sdc": frozenset({C.SUSPECTED_SDC}),
    "gpu_fall_off_bus": frozenset({C.GPU_HARDWARE_ERROR}),
    "job_hang": frozenset({C.JOB_HANG}),
    "facility_power_cap": frozenset({C.FACILITY_POWER_EXCURSION, C.POWER_THROTTLE}),
    "operator_power_cap": frozenset({C.POWER_THROTTLE}),
    "co_tenant": frozenset({C.STRAGGLER}),  # a straggler the co-tenant explains (detections from rule:co_tenant)
}


@dataclass(frozen=True)
class Label:
    """One true event: an injected fault or a background failure (``kind`` ``failure:<cause>``)."""

    kind: str
    entity: str
    start_s: float
    end_s: float
    job: str | None = None


@dataclass(frozen=True)
class ClassQuality:
    """Detection quality for one injected fault kind."""

    fault: str
    n_faults: int
    n_detected: int
    n_incidents: int
    n_true_incidents: int
    times_to_detect_s: tuple[float, ...] = ()

    @property
    def recall(self) -> float:
        """Detected faults / faults."""
        return self.n_detected / self.n_faults if self.n_faults else 1.0

    @property
    def precision(self) -> float:
        """Incidents attributed to this fault kind that were true / all attributed."""
        return self.n_true_incidents / self.n_incidents if self.n_incidents else 1.0

    @property
    def median_time_to_detect_s(self) -> float | None:
        """Median delay from fault start to the first matching incident."""
        return float(np.median(self.times_to_detect_s)) if self.times_to_detect_s else None


@dataclass(frozen=True)
class DetectionReport:
    """Per-fault-kind quality plus the incidents that matched nothing."""

    per_fault: tuple[ClassQuality, ...]
    false_alarms: tuple[Incident, ...]
    background: tuple[Incident, ...]
    incidents_per_fault: Mapping[str, float] = field(default_factory=dict)


def _touches(incident: Incident, label: Label) -> bool:
    ents = (incident.root, *incident.members)
    if label.job and any(e == label.job for e in ents):
        return True
    return any(e.startswith(label.entity) or label.entity.startswith(e + "/") or e == label.entity for e in ents)


def _can_explain(label: Label, incident: Incident) -> bool:
    """A background label explains any class, but a power limit by design (``power_limit:...``, a capped rack
    or row) explains only power throttling: it must not hide another false alarm on that rack.
    """
    return not label.kind.startswith("power_limit:") or incident.event_class == C.POWER_THROTTLE


def _depth(label: Label) -> int:
    """How local a fault is: entity depth (site 1 ... gpu 5); a job's fault counts as a node's."""
    return 4 if label.job is not None or "/jobs/" in label.entity else label.entity.count("/") + 1


def _covers_root(incident: Incident, label: Label) -> bool:
    root = incident.root
    return root == label.entity or root.startswith(label.entity + "/") or (label.job is not None and root == label.job)


def evaluate_detection(
    incidents: Iterable[Incident],
    faults: Sequence[Label],
    background: Sequence[Label] = (),
    lead_s: float = 5.0,
    grace_s: float = 120.0,
) -> DetectionReport:
    """Score fault-class incidents (severity ≥ minor) against injected faults and background failures."""
    relevant = [i for i in incidents if i.severity >= Severity.MINOR and i.status != "merged"]
    matched: dict[int, str] = {}
    first_seen: dict[int, float] = {}
    per_fault_hits: dict[int, int] = {}
    for inc in sorted(relevant, key=lambda i: i.start_ts):
        candidates = [
            k
            for k, lab in enumerate(faults)
            if inc.event_class in FAULT_CLASSES.get(lab.kind, frozenset())
            and lab.start_s - lead_s <= inc.start_ts <= lab.end_s + grace_s
            and _touches(inc, lab)
        ]
        if not candidates:
            continue
        # A fault whose entity covers the incident's root explains it better than one that a member merely
        # touches (a site-wide incident touches every GPU fault in the hall); among those, the most local one (a
        # GPU's fault over the heat wave that covers the whole site), then the one that began closest before
        # the incident. The order of the scenario's fault list never decides.
        k = min(
            candidates,
            key=lambda c: (
                not _covers_root(inc, faults[c]),
                -_depth(faults[c]),
                abs(inc.start_ts - faults[c].start_s),
                faults[c].kind,
                faults[c].entity,
            ),
        )
        matched[inc.incident_id] = faults[k].kind
        per_fault_hits[k] = per_fault_hits.get(k, 0) + 1
        first_seen.setdefault(k, inc.start_ts - faults[k].start_s)
    unmatched = [i for i in relevant if i.incident_id not in matched]
    explained = [
        i for i in unmatched
        if any(b.start_s - lead_s <= i.start_ts <= b.end_s + grace_s and _touches(i, b) and _can_explain(b, i)
               for b in background)
    ]  # fmt: skip
    explained_ids = {i.incident_id for i in explained}
    false_alarms = [i for i in unmatched if i.incident_id not in explained_ids]
    out = []
    for kind in sorted({lab.kind for lab in faults}):
        idx = [k for k, lab in enumerate(faults) if lab.kind == kind]
        classes = FAULT_CLASSES.get(kind, frozenset())
        true_inc = sum(1 for v in matched.values() if v == kind)
        # A false alarm counts against every fault kind whose classes it carries.
        false_inc = sum(1 for i in false_alarms if i.event_class in classes)
        out.append(
            ClassQuality(
                fault=kind,
                n_faults=len(idx),
                n_detected=sum(1 for k in idx if k in first_seen),
                n_incidents=true_inc + false_inc,
                n_true_incidents=true_inc,
                times_to_detect_s=tuple(max(0.0, first_seen[k]) for k in idx if k in first_seen),
            )
        )
    per_fault = {faults[k].kind + f"@{faults[k].entity}": float(per_fault_hits.get(k, 0)) for k in range(len(faults))}
    return DetectionReport(tuple(out), tuple(false_alarms), tuple(explained), per_fault)
