"""Feedback learning evaluated on twin runs, with labels that arrive late.

A sequence of seeded twin runs stands for consecutive shifts of one cluster: run ``k`` covers
``[k·spacing, k·spacing + duration)`` of one simulated clock (back to back by default). Thresholds and policy
are fixed within a run (the pipeline and responder are built at its start) and change only between runs.

* **Alarms** are the incidents that page a person: fault classes at ``minor`` severity or above (the set
  :func:`~twinloop.ops.evaluate.evaluate_detection` scores). Each gets its true/false-alarm label from ground
  truth (:func:`~twinloop.lab.classifier_dataset.label_incident`: a real fault or background failure overlapped
  it, whatever its class) ``label_delay_s`` after it opened; an incident only an out-of-taxonomy event explains
  gets no label. A fault no alarm caught (per :func:`~twinloop.ops.evaluate.evaluate_detection`) is reported as
  a miss ``label_delay_s`` after its run ended, against every source that raises its class.
* :func:`train_thresholds` feeds the labels that have *arrived* before each run to a
  :class:`~twinloop.ops.learn.feedback.ThresholdTuner`; the next run's pipeline gets the start scale times the
  tuner's multipliers through ``PipelineConfig.threshold_scale``. Labels still in flight when training ends are
  not used.
* :func:`train_rules` runs the loop (responder on) and feeds each run's judged actions to a
  :class:`~twinloop.ops.learn.feedback.RuleOutcomeLearner`; the next run uses
  :func:`~twinloop.ops.learn.feedback.learned_policy`.
* :func:`score` measures alarms, false alarms and misses per class over runs; the benchmark compares default,
  mis-set start and learned settings on seeds never used for labels.

Labels come from the twin's ground truth, not from people: a person mislabels, and labels some alarms only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twinloop.closedloop.passes import PassResult, outcome_metrics, run_pass
from twinloop.lab.classifier_dataset import CANONICAL_CLASS, Reported, label_incident
from twinloop.lab.fault_scenarios import random_scenario
from twinloop.ops import (
    RULE_THRESHOLDS,
    DetectionPipeline,
    EventClass,
    Incident,
    PipelineConfig,
    Policy,
    RuleOutcomeLearner,
    Severity,
    ThresholdTuner,
    learned_policy,
    rule_outcomes,
)
from twinloop.ops.events import FAULT_CLASSES
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec


@dataclass(frozen=True)
class Alarm:
    """One alarm and its ground-truth label.

    Attributes:
        incident_id: the incident.
        event_class: its class.
        sources: the rules (``rule:<name>``) or fields whose detections opened or grew it.
        start_s: when it opened, s of run time.
        true_alarm: a real event caused it; None when only an event outside the taxonomy did (no label).
        matched: what the label came from (fault kind, ``background:<event>`` or ``none``).
    """

    incident_id: int
    event_class: EventClass
    sources: tuple[str, ...]
    start_s: float
    true_alarm: bool | None
    matched: str


@dataclass(frozen=True)
class RunOutcome:
    """What one run gives the learners and the scoring.

    Attributes:
        seed: scenario seed.
        duration_s: simulated time, s.
        alarms: the alarms with their labels.
        faults: per injected fault kind, (faults, detected).
        judged: (rule, event class, status) of each verified / rolled-back responder action.
        metrics: :func:`~twinloop.closedloop.passes.outcome_metrics` plus action counts by status
            (``actions_<status>``).
        wall_s: wall time of the run, s.
    """

    seed: int
    duration_s: float
    alarms: tuple[Alarm, ...]
    faults: Mapping[str, tuple[int, int]]
    judged: tuple[tuple[str, str, str], ...] = ()
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    wall_s: float = 0.0


class _JobsAtReport:
    """run_pass hook: the jobs an incident's GPUs ran when it was first reported (labels match faults on jobs)."""

    def __init__(self) -> None:
        self.jobs: dict[int, tuple[str, ...]] = {}
        self._gpu_index: dict[str, int] = {}

    def __call__(self, twin: Twin, result: StepResult, updates: Sequence[Incident]) -> None:
        if not self._gpu_index:
            self._gpu_index = {g: i for i, g in enumerate(twin.telemetry.entities("gpu"))}
        job_ids = twin.telemetry.entities("job")
        for inc in updates:
            if inc.incident_id in self.jobs:
                continue
            idx = np.fromiter((self._gpu_index[m] for m in inc.members if m in self._gpu_index), dtype=np.int64)
            owners = twin.job_of_gpu[idx]
            self.jobs[inc.incident_id] = tuple(job_ids[int(j)] for j in np.unique(owners[owners >= 0]))


def alarms_of(result: PassResult, jobs: Mapping[int, tuple[str, ...]] | None = None) -> tuple[Alarm, ...]:
    """The alarms of a run (fault classes, severity ≥ minor, not merged away), labeled from its ground truth."""
    out = []
    for inc in sorted(result.incidents, key=lambda i: (i.start_ts, i.incident_id)):
        if inc.status == "merged" or inc.event_class not in FAULT_CLASSES or inc.severity < Severity.MINOR:
            continue
        rep = Reported(inc, np.zeros(0), (jobs or {}).get(inc.incident_id, ()))
        cls, matched = label_incident(rep, result.faults, result.background)
        true_alarm = None if cls is None else cls != EventClass.BENIGN_PHASE_CHANGE
        sources = tuple(sorted({d.source for d in inc.evidence}))
        out.append(Alarm(inc.incident_id, inc.event_class, sources, inc.start_ts, true_alarm, matched))
    return tuple(out)


def run_outcome(
    spec: ScenarioSpec,
    *,
    threshold_scale: Mapping[str, float] | None = None,
    loop_on: bool = False,
    policy: Policy | None = None,
) -> RunOutcome:
    """Run ``spec`` (detection only, or with the loop on under ``policy``) and keep what the learners need."""
    hook = _JobsAtReport()
    config = PipelineConfig(threshold_scale=dict(threshold_scale or {}))
    r = run_pass(spec, loop_on, policy=policy, pipeline_config=config, on_incidents=hook)
    faults = {q.fault: (q.n_faults, q.n_detected) for q in r.detection.per_fault}
    metrics: dict[str, float | None] = dict(outcome_metrics(r))
    for a in r.actions:
        key = f"actions_{a.status}"
        metrics[key] = (metrics.get(key) or 0.0) + 1.0
    judged = tuple((rule, cls, res.status) for rule, cls, res in rule_outcomes(r.actions))
    return RunOutcome(spec.seed, spec.duration_s, alarms_of(r, hook.jobs), faults, judged, metrics, r.wall_s)


#: ``observe(seed, threshold_scale)`` → the outcome of one detection-only run (a twin run or a fake in tests).
Observe = Callable[[int, Mapping[str, float]], RunOutcome]


def twin_observer(duration_s: float = 900.0) -> Observe:
    """Detection-only runs of :func:`~twinloop.lab.fault_scenarios.random_scenario` of ``duration_s``."""

    def observe(seed: int, scale: Mapping[str, float]) -> RunOutcome:
        return run_outcome(random_scenario(seed, duration_s), threshold_scale=scale)

    return observe


def sources_of_class() -> dict[EventClass, tuple[str, ...]]:
    """Event class → the alarm sources that raise it, from the pipeline's own rules (a miss is charged to them)."""
    pipeline = DetectionPipeline(["s/r/k/n/g"])
    out: dict[EventClass, list[str]] = {}
    per_gpu = (pipeline.straggler, pipeline.rank_straggler, pipeline.replica_straggler, pipeline.replica_hang)
    for rule in (*pipeline.hw_rules, *per_gpu, *pipeline.job_rules):
        out.setdefault(rule.event_class, []).append(f"rule:{rule.name}")
    for cls in (EventClass.FACILITY_POWER_EXCURSION, EventClass.COOLING_DEGRADATION):
        out.setdefault(cls, []).append("rule:facility")
    return {cls: tuple(sorted(set(v))) for cls, v in out.items()}


class LabelQueue:
    """Labels in flight: each becomes visible at its arrival time, in arrival order (ties: push order)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Any]] = []
        self._n = 0

    def push(self, arrival_s: float, item: Any) -> None:
        """Send ``item``, to arrive at ``arrival_s`` (simulated clock, s)."""
        heapq.heappush(self._heap, (arrival_s, self._n, item))
        self._n += 1

    def release(self, now_s: float) -> list[Any]:
        """Every item that has arrived by ``now_s``, oldest first (removed from the queue)."""
        out = []
        while self._heap and self._heap[0][0] <= now_s:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def __len__(self) -> int:
        return len(self._heap)


@dataclass(frozen=True)
class TuningStep:
    """One training run: the scale it ran with, how many labels had arrived before it, what it raised."""

    seed: int
    scale: Mapping[str, float]
    labels_before: int
    n_alarms: int
    n_false: int
    n_missed: int


@dataclass(frozen=True)
class TuningResult:
    """Threshold training over a sequence of runs.

    Attributes:
        steps: one per run.
        final_scale: the scale the next run would use (start scale × learned multipliers).
        multipliers: the tuner's multipliers of every source it has seen (tunable or not).
        labels_used: labels and miss reports folded in by the end of the last run.
        labels_pending: those still in flight then (not used).
    """

    steps: tuple[TuningStep, ...]
    final_scale: Mapping[str, float]
    multipliers: Mapping[str, float]
    labels_used: int
    labels_pending: int


def effective_scale(start: Mapping[str, float], tuner: ThresholdTuner, tunable: Iterable[str]) -> dict[str, float]:
    """Start scale × the tuner's multiplier for every tunable source that has either (others stay at 1)."""
    out = {}
    for source in tunable:
        s = start.get(source, 1.0) * tuner.multiplier(source)
        if s != 1.0:
            out[source] = s
    return out


def train_thresholds(
    seeds: Sequence[int],
    observe: Observe,
    *,
    tuner: ThresholdTuner | None = None,
    start_scale: Mapping[str, float] | None = None,
    label_delay_s: float = 1800.0,
    duration_s: float = 900.0,
    run_spacing_s: float | None = None,
    tunable: Iterable[str] = tuple(RULE_THRESHOLDS),
) -> TuningResult:
    """Online threshold tuning over ``seeds`` with labels that arrive ``label_delay_s`` late.

    Args:
        seeds: one run per seed, in order.
        observe: runs one seed with a threshold scale (:func:`twin_observer`).
        tuner: the tuner (default :class:`ThresholdTuner()`); it is updated in place.
        start_scale: source → threshold factor to start from (a mis-set configuration; default all 1).
        label_delay_s: from an alarm opening (or a run ending, for misses) to its label arriving, s.
        duration_s: simulated time of each run, s.
        run_spacing_s: start-to-start time of consecutive runs, s (default ``duration_s``: back to back).
        tunable: the sources whose thresholds the pipeline can scale.
    """
    tuner = tuner or ThresholdTuner()
    start = dict(start_scale or {})
    tunable = tuple(tunable)
    spacing = duration_s if run_spacing_s is None else run_spacing_s
    by_class = sources_of_class()
    queue = LabelQueue()
    used = alarm_id = 0
    steps = []

    def deliver(now_s: float) -> None:
        nonlocal used
        for kind, key, value in queue.release(now_s):
            used += 1
            if kind == "label":
                tuner.label(key, value)
            else:
                tuner.missed(key)

    for k, seed in enumerate(seeds):
        t0 = k * spacing
        deliver(t0)
        scale = effective_scale(start, tuner, tunable)
        out = observe(seed, scale)
        for alarm in out.alarms:
            if alarm.true_alarm is None:
                continue
            for source in alarm.sources:
                tuner.alarm(alarm_id, source)
                queue.push(t0 + alarm.start_s + label_delay_s, ("label", alarm_id, alarm.true_alarm))
                alarm_id += 1
        n_missed = 0
        for kind, (n_faults, n_detected) in sorted(out.faults.items()):
            cls = CANONICAL_CLASS.get(kind)
            for _ in range(n_faults - n_detected):
                n_missed += 1
                for source in by_class.get(cls, ()) if cls is not None else ():
                    queue.push(t0 + duration_s + label_delay_s, ("miss", source, None))
        n_false = sum(1 for a in out.alarms if a.true_alarm is False)
        steps.append(TuningStep(seed, scale, used, len(out.alarms), n_false, n_missed))
    deliver(len(seeds) * spacing)
    final = effective_scale(start, tuner, tunable)
    return TuningResult(tuple(steps), final, tuner.multipliers, used, len(queue))


@dataclass(frozen=True)
class Quality:
    """Alarms and faults over a set of runs.

    Attributes:
        n_runs: runs scored.
        alarms: alarm class → (labeled alarms, false alarms); alarms with no label are left out.
        faults: fault kind → (faults, detected).
    """

    n_runs: int
    alarms: Mapping[str, tuple[int, int]]
    faults: Mapping[str, tuple[int, int]]

    @property
    def n_alarms(self) -> int:
        """Labeled alarms."""
        return sum(n for n, _ in self.alarms.values())

    @property
    def n_false(self) -> int:
        """False alarms."""
        return sum(f for _, f in self.alarms.values())

    @property
    def precision(self) -> float:
        """True alarms / labeled alarms (1 when none)."""
        return 1.0 - self.n_false / self.n_alarms if self.n_alarms else 1.0

    @property
    def n_faults(self) -> int:
        """Injected faults."""
        return sum(n for n, _ in self.faults.values())

    @property
    def n_detected(self) -> int:
        """Injected faults an alarm caught."""
        return sum(d for _, d in self.faults.values())

    @property
    def recall(self) -> float:
        """Detected / injected faults (1 when none)."""
        return self.n_detected / self.n_faults if self.n_faults else 1.0


def score(outcomes: Iterable[RunOutcome]) -> Quality:
    """Sum alarms (by class) and faults (by kind) over runs."""
    alarms: dict[str, list[int]] = {}
    faults: dict[str, list[int]] = {}
    n = 0
    for out in outcomes:
        n += 1
        for a in out.alarms:
            if a.true_alarm is not None:
                c = alarms.setdefault(a.event_class.value, [0, 0])
                c[0] += 1
                c[1] += int(not a.true_alarm)
        for kind, (n_faults, n_detected) in out.faults.items():
            f = faults.setdefault(kind, [0, 0])
            f[0] += n_faults
            f[1] += n_detected
    return Quality(
        n, {k: (v[0], v[1]) for k, v in sorted(alarms.items())}, {k: (v[0], v[1]) for k, v in sorted(faults.items())}
    )


@dataclass(frozen=True)
class RuleTrainingResult:
    """Rule-outcome training: the policy each run used, what was judged, and the policy to use next."""

    policies: tuple[Policy, ...]
    judged: tuple[tuple[str, str, str], ...]
    final_policy: Policy
    learner: RuleOutcomeLearner


#: ``run(seed, policy)`` → the outcome of one loop-on run.
LoopRun = Callable[[int, Policy], RunOutcome]


def twin_loop_runner(duration_s: float = 900.0) -> LoopRun:
    """Loop-on runs of :func:`~twinloop.lab.fault_scenarios.random_scenario` of ``duration_s``."""

    def run(seed: int, policy: Policy) -> RunOutcome:
        return run_outcome(random_scenario(seed, duration_s), loop_on=True, policy=policy)

    return run


def train_rules(
    seeds: Sequence[int], run: LoopRun, policy: Policy, learner: RuleOutcomeLearner | None = None
) -> RuleTrainingResult:
    """Run the loop over ``seeds`` in order; after each run, fold its judged actions into ``learner`` and
    switch off, for the next runs, the (rule, class) pairs it no longer allows.
    """
    learner = learner or RuleOutcomeLearner()
    used: list[Policy] = []
    judged: list[tuple[str, str, str]] = []
    current = learned_policy(policy, learner)
    for seed in seeds:
        used.append(current)
        out = run(seed, current)
        for rule, cls, status in out.judged:
            judged.append((rule, cls, status))
            if status in ("verified", "rolled_back"):
                learner.observe_status(rule, cls, status)
        current = learned_policy(policy, learner)
    return RuleTrainingResult(tuple(used), tuple(judged), current, learner)
