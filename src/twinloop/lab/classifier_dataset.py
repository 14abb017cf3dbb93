"""Labeled incidents from twin runs: features at first report, the rule-based class, and the true class.

:func:`collect_run` runs one scenario with the loop off (detection only) through
:func:`twinloop.closedloop.passes.run_pass` and keeps every incident *as first reported* together with its
feature vector (:class:`~twinloop.ops.classify.features.FeatureExtractor`) at that step.

Labels. An incident is labeled by the true event it overlaps, never by its own class: an injected fault that
could have caused it (``_touches``: same subtree at most one topology level apart, or the same job) and that
started at most ``lead_s`` after and ended at most ``grace_s`` before its first detection; of several, the
latest to start. Its label is the fault kind's canonical class (:data:`CANONICAL_CLASS`). Failing that, a
background event of the twin's failure process on a touched entity (:func:`background_class`; events outside the
taxonomy, such as a software crash, make the incident ambiguous and it is left out). Anything else is
``benign_phase_change``: no fault caused it (a workload change or a false alarm). The label is only as good as
this overlap rule: a benign checkpoint that falls inside a fault's window on the fault's job is labeled with the
fault (label noise the benchmark cannot remove).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from twinloop.closedloop.adapter import TwinAdapter
from twinloop.closedloop.cluster import gpu_limits
from twinloop.closedloop.passes import run_pass
from twinloop.hardware.failure_rates import CAUSES
from twinloop.lab.fault_scenarios import FAULT_KINDS, random_scenario
from twinloop.ops import N_FEATURES, EventClass, FeatureExtractor, Incident, Label
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec

C = EventClass
F64 = NDArray[np.float64]

#: The one class each injected fault kind *is* (``twinloop.ops.evaluate.FAULT_CLASSES`` lists every class it
#: may *show as*; the canonical one is the root cause an operator would file it under).
CANONICAL_CLASS: dict[str, EventClass] = {
    "cdu_pump_degradation": C.COOLING_DEGRADATION,
    "cdu_capacity_loss": C.COOLING_DEGRADATION,
    "cooling_setpoint_drift": C.COOLING_DEGRADATION,
    "heat_wave": C.COOLING_DEGRADATION,  # the plant loses headroom; the facility-power side effect is secondary
    "psu_loss": C.POWER_DELIVERY_FAULT,
    "gpu_thermal_interface": C.THERMAL_THROTTLE,  # one GPU runs hot on healthy coolant
    "straggler": C.STRAGGLER,
    "sdc": C.SUSPECTED_SDC,
    "gpu_fall_off_bus": C.GPU_HARDWARE_ERROR,
    "job_hang": C.JOB_HANG,
    "facility_power_cap": C.FACILITY_POWER_EXCURSION,
    "operator_power_cap": C.POWER_THROTTLE,  # the GPUs do what their (lowered) limit tells them
    "co_tenant": C.STRAGGLER,  # someone else's process slows the job's rank
}

_CAUSE = {c.name: c for c in CAUSES}


def background_class(kind: str) -> EventClass | None:
    """Canonical class of a background event label kind (``<event>:<detail>``); None if outside the taxonomy.

    ``failure:<cause>``: silent data corruption → suspected SDC; a power supply → power delivery; any other GPU
    or node hardware cause (the GPU or server drops out) → GPU hardware error; job-scope causes (software bug,
    NCCL watchdog, maintenance) → None. ``psu_overload``/``power_brake`` → power delivery, ``gpu_fell_off_bus``
    → GPU hardware error, ``thermal_shutdown`` → thermal throttle, ``straggler`` (the hall's background
    stragglers) → straggler.
    """
    event, _, detail = kind.partition(":")
    if event == "straggler":
        return C.STRAGGLER
    if event in ("psu_overload", "power_brake"):
        return C.POWER_DELIVERY_FAULT
    if event == "gpu_fell_off_bus":
        return C.GPU_HARDWARE_ERROR
    if event == "thermal_shutdown":
        return C.THERMAL_THROTTLE
    cause = _CAUSE.get(detail) if event == "failure" else None
    if cause is None:
        return None
    if cause.name == "silent_data_corruption":
        return C.SUSPECTED_SDC
    if cause.name == "power_supply":
        return C.POWER_DELIVERY_FAULT
    if cause.hardware and cause.scope in ("gpu", "node"):
        return C.GPU_HARDWARE_ERROR
    return None


@dataclass(frozen=True)
class Reported:
    """One incident as first reported, what the loop knew then, and the jobs its GPUs ran."""

    incident: Incident
    features: F64
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class RunIncidents:
    """The first reports of one run and its ground truth."""

    name: str
    seed: int
    reported: tuple[Reported, ...]
    faults: tuple[Label, ...]
    background: tuple[Label, ...]
    wall_s: float


def _depth(entity: str) -> int:
    return entity.count("/")


def _touches(inc: Incident, jobs: Sequence[str], label: Label) -> bool:
    """Could ``label`` have caused ``inc``? Job-rooted incidents: a fault on the job or on (above) one of its GPUs.
    Topology-rooted ones: the root inside the label's subtree, or at most one level above the label's entity
    (a row-wide incident is not one GPU's fault); or a fault on a job its GPUs run.
    """
    root = inc.root
    if "/jobs/" in root:
        if label.entity == root or label.job == root:
            return True
        return any(m == label.entity or m.startswith(label.entity + "/") for m in inc.members)
    if label.entity in jobs or root == label.entity or root.startswith(label.entity + "/"):
        return True
    return label.entity.startswith(root + "/") and _depth(label.entity) - _depth(root) <= 1


def label_incident(
    rep: Reported, faults: Sequence[Label], background: Sequence[Label], lead_s: float = 5.0, grace_s: float = 60.0
) -> tuple[EventClass | None, str]:
    """(true class, what it matched: a fault kind, ``background:<kind>`` or ``none``); class None = ambiguous."""
    t = rep.incident.start_ts

    def hits(labels: Sequence[Label]) -> list[Label]:
        found = [
            b for b in labels if b.start_s - lead_s <= t <= b.end_s + grace_s and _touches(rep.incident, rep.jobs, b)
        ]
        return sorted(found, key=lambda b: (b.start_s, len(b.entity)), reverse=True)

    fault_hits = hits(faults)
    if fault_hits:
        return CANONICAL_CLASS[fault_hits[0].kind], fault_hits[0].kind
    bg_hits = hits(background)
    if bg_hits:
        return background_class(bg_hits[0].kind), "background:" + bg_hits[0].kind.partition(":")[0]
    return C.BENIGN_PHASE_CHANGE, "none"


class FaultJobs:
    """A ``run_pass`` step hook: the job each GPU/node fault struck (a fault that takes a GPU down also unassigns
    its job in that step, so the jobs *before* the step are looked at).
    """

    def __init__(self) -> None:
        self.fault_jobs: dict[tuple[str, str], str | None] = {}
        self._adapter: TwinAdapter | None = None
        self._job_ids: list[str] = []
        self._jobs_before: NDArray[np.int64] | None = None

    def on_step(self, twin: Twin, result: StepResult) -> None:
        """Record, for each fault that starts this step, the job that held most of the struck GPUs."""
        if self._adapter is None:
            self._adapter = TwinAdapter(twin)
            self._job_ids = twin.telemetry.entities("job")
        before = twin.job_of_gpu if self._jobs_before is None else self._jobs_before
        for e in result.events:
            if e.kind == "fault_start":
                gpus = self._adapter.gpus_of(e.entity)
                owners = before[gpus] if gpus is not None else np.zeros(0, np.int64)
                owners = owners[owners >= 0]
                job = self._job_ids[int(np.bincount(owners).argmax())] if owners.size else None
                self.fault_jobs.setdefault((e.detail, e.entity), job)
        self._jobs_before = twin.job_of_gpu.copy()

    @property
    def jobs_before(self) -> NDArray[np.int64] | None:
        """Every GPU's job index before the last step (None before the first)."""
        return self._jobs_before

    def with_jobs(self, faults: Sequence[Label]) -> tuple[Label, ...]:
        """``faults`` with the job each struck filled in (a fault on a GPU or node is also on the job that ran
        there when it struck; the job may move afterwards).
        """
        return tuple(replace(f, job=f.job or self.fault_jobs.get((f.kind, f.entity))) for f in faults)


class _FirstReports:
    """run_pass hooks that keep each incident's first report with its features and the jobs its GPUs ran."""

    def __init__(self) -> None:
        self.reported: dict[int, Reported] = {}
        self.faults = FaultJobs()
        self._extractor: FeatureExtractor | None = None
        self._job_ids: list[str] = []
        self._level_ids: dict[str, list[str]] = {}

    def _setup(self, twin: Twin) -> FeatureExtractor:
        """The extractor and entity ids, made on the first step (run_pass makes the twin)."""
        if self._extractor is None:
            topo, limits = twin.topo, gpu_limits(twin)
            clock_max = np.array([k.sm_clock_max_mhz for k in topo.kinds], dtype=np.float64)[topo.gpu_kind]
            self._extractor = FeatureExtractor(
                twin.telemetry.entities("gpu"), limits.slowdown_temp_c, limits.tdp_w, clock_max, dt_s=twin.dt_s
            )
            self._job_ids = twin.telemetry.entities("job")
            self._level_ids = {lvl: twin.telemetry.entities(lvl) for lvl in ("row", "rack", "node")}
        return self._extractor

    def on_step(self, twin: Twin, result: StepResult) -> None:
        extractor = self._setup(twin)
        self.faults.on_step(twin, result)
        extractor.observe(
            result.t_s, result.gpu, result.facility, self._level_ids, self.faults.jobs_before, self._job_ids
        )

    def on_incidents(self, twin: Twin, result: StepResult, updates: Sequence[Incident]) -> None:
        extractor = self._setup(twin)
        jobs_now = twin.job_of_gpu
        for inc in updates:
            if inc.incident_id not in self.reported:
                idx = extractor.member_index(inc)
                owners = np.unique(jobs_now[idx][jobs_now[idx] >= 0]) if idx.size else np.zeros(0, np.int64)
                self.reported[inc.incident_id] = Reported(
                    inc, extractor.features(inc), tuple(self._job_ids[int(j)] for j in owners)
                )


def collect_run(spec: ScenarioSpec, source: str = "scenario") -> RunIncidents:
    """Run ``spec`` with detection only (:func:`run_pass`, loop off) and keep every incident's first report."""
    hooks = _FirstReports()
    result = run_pass(spec, False, on_step=hooks.on_step, on_incidents=hooks.on_incidents, source=source)
    faults = hooks.faults.with_jobs(result.faults)
    return RunIncidents(spec.name, spec.seed, tuple(hooks.reported.values()), faults, result.background, result.wall_s)


def collect_sample_run(spec: ScenarioSpec, source: str = "scenario") -> RunIncidents:
    """:func:`collect_run` with the features the loop's advisory classifier computes from the samples it sees
    (:class:`~twinloop.ops.classify.advisory.Advisor`: what a live cluster offers, no twin internals), so a model
    trained on them sees in use what it saw in training.
    """
    faults = FaultJobs()
    result = run_pass(spec, False, on_step=faults.on_step, keep_first_reports=True, source=source)
    assert result.advisor is not None
    reported = tuple(Reported(r.incident, r.features, r.jobs) for r in result.advisor.first_reports.values())
    return RunIncidents(
        spec.name, spec.seed, reported, faults.with_jobs(result.faults), result.background, result.wall_s
    )


@dataclass(frozen=True)
class Dataset:
    """Labeled incidents (rows) from one or more runs.

    Attributes:
        features: (n, N_FEATURES) feature matrix.
        labels: true class per row.
        rule_classes: the rule-based class at first report per row.
        matched: what each row's label came from (fault kind, ``background:<event>`` or ``none``).
        seeds: the run seed of each row.
        n_runs: runs the rows came from.
        n_ambiguous: incidents left out (matched only a background event outside the taxonomy).
        wall_s: time to simulate and collect, s.
    """

    features: F64
    labels: tuple[EventClass, ...]
    rule_classes: tuple[EventClass, ...]
    matched: tuple[str, ...]
    seeds: tuple[int, ...]
    n_runs: int
    n_ambiguous: int
    wall_s: float

    def __len__(self) -> int:
        return len(self.labels)


def dataset_from_runs(runs: Iterable[RunIncidents]) -> Dataset:
    """Label every first report of ``runs`` (see module docstring)."""
    rows: list[F64] = []
    labels: list[EventClass] = []
    rules: list[EventClass] = []
    matched: list[str] = []
    seeds: list[int] = []
    n_runs = n_amb = 0
    wall = 0.0
    for run in runs:
        n_runs += 1
        wall += run.wall_s
        for rep in run.reported:
            cls, what = label_incident(rep, run.faults, run.background)
            if cls is None:
                n_amb += 1
                continue
            rows.append(rep.features)
            labels.append(cls)
            rules.append(rep.incident.event_class)
            matched.append(what)
            seeds.append(run.seed)
    x = np.vstack(rows) if rows else np.zeros((0, N_FEATURES))
    return Dataset(x, tuple(labels), tuple(rules), tuple(matched), tuple(seeds), n_runs, n_amb, wall)


def build_dataset(
    seeds: Sequence[int],
    duration_s: float = 1500.0,
    progress: Callable[[int, RunIncidents], None] | None = None,
    from_samples: bool = False,
    kinds: tuple[str, ...] = FAULT_KINDS,
) -> Dataset:
    """Simulate :func:`~twinloop.lab.fault_scenarios.random_scenario` for every seed and label the incidents.

    Args:
        seeds: scenario seeds (same seeds → identical dataset).
        duration_s: simulated time per run, s.
        progress: called after each run with (index, run).
        from_samples: features as the loop's advisory classifier computes them (:func:`collect_sample_run`).
        kinds: the fault kinds the scenarios draw from.
    """
    runs = []
    collect = collect_sample_run if from_samples else collect_run
    for k, seed in enumerate(seeds):
        run = collect(random_scenario(seed, duration_s, kinds), f"classify-scenario-{seed}")
        runs.append(run)
        if progress is not None:
            progress(k, run)
    return dataset_from_runs(runs)
