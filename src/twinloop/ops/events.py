"""The event vocabulary shared by detect, classify and respond: classes, detections, incidents, severity.

A :class:`Detection` is one detector or rule firing on one entity at one time. An :class:`Incident` is what an
operator (or the respond stage) acts on: all detections of one class that one cause explains, rooted at the
entity up the topology that covers them (a GPU, a node, a rack, a row/CDU, the site, or a job).

Severity comes from impact, not from the detector score: GPU-hours at risk, temperature margin to the
slowdown threshold and power margin to the limit (:func:`severity`). The thresholds are guesses chosen so that
a single-GPU event on a small job is ``minor`` and anything that puts a large job or a whole rack at risk, or
leaves less than a few degrees / watts of margin, is ``major`` or ``critical``; they are not calibrated.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Literal

DetectionKind = Literal["anomaly", "change_point"]


class EventClass(enum.StrEnum):
    """The event taxonomy. ``UNCLASSIFIED`` is a change no rule explains (e.g. a lone series in a file)."""

    THERMAL_THROTTLE = "thermal_throttle"
    POWER_THROTTLE = "power_throttle"
    COOLING_DEGRADATION = "cooling_degradation"
    POWER_DELIVERY_FAULT = "power_delivery_fault"
    FACILITY_POWER_EXCURSION = "facility_power_excursion"
    GPU_HARDWARE_ERROR = "gpu_hardware_error"
    STRAGGLER = "straggler"
    SUSPECTED_SDC = "suspected_sdc"
    JOB_HANG = "job_hang"
    BENIGN_PHASE_CHANGE = "benign_phase_change"
    UNCLASSIFIED = "unclassified"


#: Classes that describe a fault (the respond stage may act on them); the others are informational.
FAULT_CLASSES: frozenset[EventClass] = frozenset(EventClass) - {
    EventClass.BENIGN_PHASE_CHANGE,
    EventClass.UNCLASSIFIED,
}


class Severity(enum.IntEnum):
    """Ordered severity: compare with ``<`` / ``max``."""

    INFO = 0
    MINOR = 1
    MAJOR = 2
    CRITICAL = 3


@dataclass(frozen=True)
class Detection:
    """One detector or rule firing on one entity.

    Attributes:
        ts: time of the sample that fired, seconds (UNIX epoch or simulation time).
        entity: entity id (``site/row/rack/node/gpu``, ``<site>/jobs/<id>`` or a column name).
        source: the field a detector watched, or the rule name (``rule:<name>``).
        score: detector statistic at firing (z-score, CUSUM sum, rule margin); larger is stronger.
        kind: ``anomaly`` (an outlier that lasts while it lasts) or ``change_point`` (a level shift).
        event_class: what it most likely is.
        detector: the detector or rule name.
        detail: what a person should read about this firing beyond its class (a co-tenant's GPU, processes and the
            slowdown measured); empty for most.
    """

    ts: float
    entity: str
    source: str
    score: float
    kind: DetectionKind
    event_class: EventClass
    detector: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Impact:
    """What an incident puts at risk.

    Attributes:
        gpu_hours_at_risk: GPU-hours that would be lost if the incident interrupts the affected jobs
            (affected GPUs x the horizon, by default the time since a checkpoint; a guess of 1 h).
        temp_margin_c: smallest margin of a member GPU to its slowdown temperature, °C (``inf`` = unknown).
        power_margin_w: smallest margin of a member GPU (or facility) to its power limit, W (``inf`` = unknown).
        n_gpus: GPUs covered by the incident.
        job_slowdown: fraction of its job's throughput the incident costs while it lasts (a straggler's: a
            synchronous job runs at its slowest rank's pace, so 0 when the job waits for a slower rank anyway);
            None when not measured.
    """

    gpu_hours_at_risk: float = 0.0
    temp_margin_c: float = math.inf
    power_margin_w: float = math.inf
    n_gpus: int = 0
    job_slowdown: float | None = None


@dataclass(frozen=True)
class SeverityThresholds:
    """Where severity steps up (guesses, see module docstring)."""

    critical_gpu_hours: float = 1000.0
    major_gpu_hours: float = 64.0
    minor_gpu_hours: float = 1.0
    critical_temp_margin_c: float = 2.0
    major_temp_margin_c: float = 5.0
    critical_power_margin_w: float = 0.0
    major_power_margin_w: float = 10.0
    idle_temp_margin_c: float = 15.0


def severity(event_class: EventClass, impact: Impact, thresholds: SeverityThresholds | None = None) -> Severity:
    """Severity of an incident of ``event_class`` from its impact.

    Non-fault classes are always ``INFO``. A fault on GPUs that run no work (0 GPU-hours at risk) and are far from
    every limit is ``INFO`` too. Otherwise a fault is the worst of what its GPU-hours at risk, its temperature
    margin and its power margin say, and at least ``MINOR``.

    Args:
        event_class: the incident's class.
        impact: GPU-hours at risk, temperature margin (°C), power margin (W).
        thresholds: where severity steps up; defaults to :class:`SeverityThresholds`.
    """
    if event_class not in FAULT_CLASSES:
        return Severity.INFO
    t = thresholds or SeverityThresholds()
    if (
        impact.n_gpus > 0
        and impact.gpu_hours_at_risk <= 0.0
        and impact.temp_margin_c > t.idle_temp_margin_c
        and impact.power_margin_w > t.major_power_margin_w
    ):
        return Severity.INFO  # idle GPUs far from every limit: nothing is at risk yet
    level = Severity.MINOR
    if impact.gpu_hours_at_risk >= t.critical_gpu_hours:
        level = max(level, Severity.CRITICAL)
    elif impact.gpu_hours_at_risk >= t.major_gpu_hours:
        level = max(level, Severity.MAJOR)
    if impact.temp_margin_c <= t.critical_temp_margin_c:
        level = max(level, Severity.CRITICAL)
    elif impact.temp_margin_c <= t.major_temp_margin_c:
        level = max(level, Severity.MAJOR)
    if impact.power_margin_w <= t.critical_power_margin_w and event_class in (
        EventClass.FACILITY_POWER_EXCURSION,
        EventClass.POWER_DELIVERY_FAULT,
    ):
        level = max(level, Severity.CRITICAL)
    elif impact.power_margin_w <= t.major_power_margin_w and event_class == EventClass.FACILITY_POWER_EXCURSION:
        level = max(level, Severity.MAJOR)
    return Severity(level)


IncidentStatus = Literal["open", "closed", "merged"]


@dataclass(frozen=True)
class Incident:
    """One cause, with everything that fired because of it.

    Attributes:
        incident_id: stable id across updates of the same incident.
        event_class: the class of every member detection.
        root: the entity up the topology that covers the members (GPU, node, rack, row, CDU, site or job).
        members: member entity ids (sorted).
        start_ts: first member detection, s.
        end_ts: last member detection so far (or at closing), s.
        severity: from :attr:`impact` via :func:`severity`.
        impact: impact estimate.
        evidence: the first detections (onsets) that opened or grew the incident, capped.
        n_detections: detections folded in so far (evidence is capped, this is not).
        status: ``open``, ``closed`` (quiet for the quiet period) or ``merged`` (into ``merged_into``).
        merged_into: the surviving incident id when ``status == "merged"``.
    """

    incident_id: int
    event_class: EventClass
    root: str
    members: tuple[str, ...]
    start_ts: float
    end_ts: float
    severity: Severity
    impact: Impact = field(default_factory=Impact)
    evidence: tuple[Detection, ...] = ()
    n_detections: int = 0
    status: IncidentStatus = "open"
    merged_into: int | None = None
