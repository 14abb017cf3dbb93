"""Pydantic response and request models of the JSON API (they make the OpenAPI schema precise).

Units are in the field names. Timestamps are epoch seconds (UTC) as stored; ``None`` means "not reported".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorDetail(_Out):
    """An error answer (401, 403, 404, 409, 422 from the app's own checks)."""

    detail: str


def error_responses(*codes: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses`` entries for the error codes an endpoint can answer with."""
    text = {
        400: "malformed request body",
        401: "no bearer token",
        403: "wrong bearer token",
        404: "no such entity, job, field or file",
        409: "no loop or run factory attached",
        503: "telemetry store unavailable",
    }
    return {c: {"model": ErrorDetail, "description": text.get(c, "error")} for c in codes}


# ----------------------------------------------------------------------------------------------- overview
class SitePower(_Out):
    """Site power now: facility = IT + cooling + losses."""

    ts: float | None
    facility_power_w: float | None
    it_power_w: float | None
    cooling_power_w: float | None
    losses_w: float | None
    pue: float | None
    ambient_temp_c: float | None


class RackHeat(_Out):
    """One rack's GPU temperatures and power now."""

    rack: str
    row: str
    gpus: int
    max_gpu_temp_c: float | None
    mean_gpu_temp_c: float | None
    power_w: float | None
    throttled_gpus: int
    temp_headroom_c: float | None = Field(
        None, description="least headroom of the rack's GPUs to their own slowdown temperature, °C"
    )
    power_fraction: float | None = Field(None, description="the rack's GPU power over their enforced power limits")
    temp_level: int | None = Field(None, description="index into Floor.temp_levels")
    power_level: int | None = Field(None, description="index into Floor.power_levels")


class ColorLevel(_Out):
    """One colour band [min, max) of a quantity, with the text colour for contrast on it."""

    label: str
    min: float | None
    max: float | None
    color: str
    ink: str


class Throttling(_Out):
    """GPUs whose last clock-event reasons include a throttle bit (power cap, thermal, slowdown, brake)."""

    gpus_reporting: int
    gpus_throttled: int
    by_reason: dict[str, int]


class IncidentBrief(_Out):
    """An incident as the loop recorded it."""

    run: str
    incident_id: int
    event_class: str
    root: str
    severity: str
    start_ts: float
    end_ts: float
    n_members: int
    n_detections: int
    status: str


class Counts(_Out):
    """How many entities of each level the store holds."""

    sites: int
    rows: int
    racks: int
    nodes: int
    gpus: int
    jobs: int


class Overview(_Out):
    """The overview page."""

    site: str | None
    ts: float | None
    oldest_ts: float | None
    counts: Counts
    power: SitePower
    hottest_racks: list[RackHeat]
    throttling: Throttling
    open_incidents: list[IncidentBrief]
    open_incident_count: int
    pending_actions: int
    live: bool


# ----------------------------------------------------------------------------------------------- floor
class FloorRow(_Out):
    """One row of racks."""

    row: str
    racks: list[RackHeat]


class Floor(_Out):
    """The floor map: rows of racks with temperature and power now, and the color scale ranges."""

    ts: float | None
    rows: list[FloorRow]
    temp_range_c: tuple[float, float] | None
    power_range_w: tuple[float, float] | None
    temp_levels: list[ColorLevel] = Field(default_factory=list, description="headroom to slowdown, °C")
    power_levels: list[ColorLevel] = Field(default_factory=list, description="fraction of the power limit")
    slowdown_assumed_gpus: int = Field(0, description="GPUs of unknown model, judged against the default slowdown")
    slowdown_default_c: float | None = None


class Sparkline(_Out):
    """Aligned series (bucket means) of one entity."""

    ts: list[float]
    power_w: list[float | None]
    temp_c: list[float | None]
    clock_mhz: list[float | None]


class GpuNow(_Out):
    """One GPU now, with its sparklines."""

    gpu: str
    power_w: float | None
    temp_c: float | None
    clock_mhz: float | None
    clock_event_reasons: int | None
    reasons: list[str]
    spark: Sparkline


class NodeDetail(_Out):
    """One node with its GPUs."""

    node: str
    power_w: float | None
    gpus: list[GpuNow]


class RackDetail(_Out):
    """A rack: its power now and its nodes and GPUs with sparklines."""

    rack: str
    ts: float | None
    power_w: float | None
    inlet_temp_c: float | None
    since_ts: float | None
    until_ts: float | None
    nodes: list[NodeDetail]


class ReasonSpan(_Out):
    """A stretch of time with the same non-zero clock-event reasons."""

    start_ts: float
    end_ts: float
    mask: int
    reasons: list[str]


class GpuHistory(_Out):
    """A GPU's history: bucket means of power, temperature, clock and limit; OR of clock-event reasons."""

    gpu: str
    rack: str | None
    bucket_s: float | None
    ts: list[float]
    power_w: list[float | None]
    temp_c: list[float | None]
    clock_mhz: list[float | None]
    power_limit_w: list[float | None]
    slowdown_temp_c: float | None = Field(None, description="this GPU's slowdown temperature (catalog), °C")
    slowdown_assumed: bool = Field(False, description="the GPU's model is unknown: slowdown_temp_c is the default")
    clock_event_reasons: list[int | None]
    reason_spans: list[ReasonSpan]
    latest: GpuNow | None


class Series(_Out):
    """One field of one entity over time (bucket mean, min, max)."""

    entity: str
    field: str
    unit: str
    bucket_s: float | None
    ts: list[float]
    mean: list[float | None]
    min: list[float | None]
    max: list[float | None]


# ----------------------------------------------------------------------------------------------- jobs
class PhaseSpan(_Out):
    """A stretch of a job's lifecycle in one phase."""

    phase: str
    start_ts: float
    end_ts: float


class JobSummary(_Out):
    """A job: lifecycle, throughput and interruptions (from the job's telemetry fields)."""

    job: str
    name: str
    phase: str | None
    gpus: int | None
    step_time_s: float | None
    mean_step_time_s: float | None
    tokens_per_s: float | None
    goodput_tokens_per_s: float | None
    sustained_fraction: float | None
    checkpoints: int
    restarts: int
    phases: list[PhaseSpan]


class JobDetail(_Out):
    """A job with its time series; ``power_w`` sums the GPUs labelled with this job (empty if none are)."""

    summary: JobSummary
    bucket_s: float | None
    ts: list[float]
    step_time_s: list[float | None]
    tokens_per_s: list[float | None]
    phase: list[float | None]
    power_w: list[float | None]
    power_gpus: int


# ----------------------------------------------------------------------------------------------- loop
class ActionRow(_Out):
    """An action the loop's responder recorded (or one pending approval)."""

    run: str
    action_id: int
    ts: float
    kind: str
    target: str
    value: float | None
    status: str
    detail: str
    incident_id: int
    clamped: bool


class InjectedFault(_Out):
    """A fault the twin injected (the run's ground truth), on the same time axis as the incidents."""

    fault: str
    entity: str
    start_ts: float
    end_ts: float


class IncidentDetail(IncidentBrief):
    """An incident with the actions taken for it and their effect."""

    actions: list[ActionRow]
    effect: str
    injected: list[InjectedFault] = Field(
        default_factory=list,
        description="twin runs only: faults injected while the incident was open (where it really was)",
    )


class IncidentGroup(_Out):
    """Incidents of one cause."""

    event_class: str
    count: int
    worst_severity: str
    incidents: list[IncidentDetail]


class Incidents(_Out):
    """The incidents page: runs recorded, groups by cause, and live pending actions."""

    runs: list[str]
    run: str | None
    groups: list[IncidentGroup]
    pending: list[ActionRow]
    mode: str | None


class ActionLog(_Out):
    """The action log of one run (or all runs)."""

    run: str | None
    actions: list[ActionRow]


class Decision(_Out):
    """What came of an approval or rejection."""

    action_id: int
    status: str
    detail: str


class RunStart(BaseModel):
    """Ask the injected run factory to start a loop or simulation run."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    duration_s: float = Field(600.0, gt=0, le=7 * 86400, description="simulated or wall seconds to run")
    mode: Literal["observe", "approve", "auto"] = "approve"
    seed: int = Field(0, ge=0, le=2**31 - 1)


class RunStarted(_Out):
    """What the run factory said."""

    started: bool
    detail: dict[str, str | float | int | bool | None]


class ModeChange(BaseModel):
    """Change the responder's mode."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    mode: Literal["observe", "approve", "auto"]


class ControllerState(_Out):
    """The attached loop's status after a change."""

    controller: dict[str, str | float | int | bool | None]
    pending_actions: int


class Status(_Out):
    """Liveness of the data: newest sample, whether a loop is attached, and its status."""

    newest_ts: float | None
    oldest_ts: float | None
    samples: int
    live: bool
    controller: dict[str, str | float | int | bool | None] | None
    pending_actions: int
    open_read: bool


class ReportFile(_Out):
    """An HTML report in the data directory."""

    name: str
    bytes: int
