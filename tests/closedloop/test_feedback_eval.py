from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.lab.fault_scenarios import random_scenario
from twinloop.lab.feedback_eval import (
    Alarm,
    LabelQueue,
    RunOutcome,
    run_outcome,
    score,
    sources_of_class,
    train_rules,
    train_thresholds,
)
from twinloop.ops.detect.pipeline import RULE_THRESHOLDS, DetectionPipeline, PipelineConfig
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.learn.feedback import RuleOutcomeLearner, ThresholdTuner, learned_policy, rule_outcomes
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply
from twinloop.ops.respond.policy import ActionTemplate, ExpectTemplate, Policy, Rule
from twinloop.ops.respond.responder import Responder

GPUS = [f"dc/r1/k1/n1/g{i}" for i in range(8)]
C = EventClass


def _rules(p: DetectionPipeline) -> dict[str, object]:
    rules = (*p.hw_rules, p.straggler, p.rank_straggler, p.replica_straggler, p.replica_hang, *p.job_rules)
    out: dict[str, object] = {f"rule:{r.name}": r for r in rules}
    out["rule:facility"] = p.facility_rules
    return out


# --- the pipeline hook ----------------------------------------------------------------------------------------------
def test_every_tunable_source_scales_its_rule_thresholds() -> None:
    base = _rules(DetectionPipeline(GPUS))
    scaled = _rules(DetectionPipeline(GPUS, config=PipelineConfig(threshold_scale=dict.fromkeys(RULE_THRESHOLDS, 2.5))))
    for source, attrs in RULE_THRESHOLDS.items():
        for attr in attrs:
            assert getattr(scaled[source], attr) == pytest.approx(2.5 * getattr(base[source], attr)), (source, attr)


def test_threshold_scale_reaches_field_detectors_and_keeps_their_overrides() -> None:
    config = PipelineConfig(
        detector_params={"cusum": {"k": 0.7}},
        threshold_scale={"DCGM_FI_DEV_GPU_TEMP": 1.5, "DCGM_FI_DEV_POWER_USAGE": 0.5},
    )
    p = DetectionPipeline(GPUS, config=config)
    default = DetectionPipeline(GPUS)
    temp = p.detectors["DCGM_FI_DEV_GPU_TEMP"].params
    assert temp.threshold == pytest.approx(1.5 * default.detectors["DCGM_FI_DEV_GPU_TEMP"].params.threshold)  # type: ignore[attr-defined]
    power = p.detectors["DCGM_FI_DEV_POWER_USAGE"].params
    assert power.h == pytest.approx(0.5 * default.detectors["DCGM_FI_DEV_POWER_USAGE"].params.h)  # type: ignore[attr-defined]
    assert power.k == pytest.approx(0.7)  # type: ignore[attr-defined]
    # an unscaled cusum field keeps the default threshold
    assert p.detectors["DCGM_FI_DEV_SM_CLOCK"].params.h == default.detectors["DCGM_FI_DEV_SM_CLOCK"].params.h  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("scale", "needle"),
    [({"rule:xid": 2.0}, "no tunable threshold"), ({"rule:cooling": 0.0}, "> 0"), ({"nope": 1.0}, "allowed")],
)
def test_bad_threshold_scale_is_one_clear_error(scale: dict[str, float], needle: str) -> None:
    with pytest.raises(InputError, match=needle) as err:
        DetectionPipeline(GPUS, config=PipelineConfig(threshold_scale=scale))
    assert "threshold_scale." in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError):
        DetectionPipeline(GPUS, config=PipelineConfig(threshold_scale={"rule:cooling": math.nan}))


# --- delayed labels -------------------------------------------------------------------------------------------------
class FakeRuns:
    """Each run: one false alarm of ``source`` at 100 s, and ``missed`` faults of ``miss_kind``; records scales."""

    def __init__(self, source: str = "rule:hang", missed: int = 0, miss_kind: str = "straggler") -> None:
        self.source, self.missed, self.miss_kind = source, missed, miss_kind
        self.scales: list[dict[str, float]] = []

    def __call__(self, seed: int, scale: Mapping[str, float]) -> RunOutcome:
        self.scales.append(dict(scale))
        alarms = (Alarm(1, C.JOB_HANG, (self.source,), 100.0, False, "none"),) if self.source else ()
        return RunOutcome(seed, 900.0, alarms, {self.miss_kind: (self.missed, 0)} if self.missed else {})


def test_tuned_multiplier_reaches_the_next_runs_pipeline() -> None:
    runs = FakeRuns("rule:cooling")
    res = train_thresholds(range(8), runs, tuner=ThresholdTuner(min_labels=1), label_delay_s=0.0)
    assert runs.scales[0] == {}
    assert runs.scales[1]["rule:cooling"] > 1.0  # run 0's label arrived before run 1
    assert res.final_scale["rule:cooling"] >= runs.scales[-1]["rule:cooling"] > runs.scales[1]["rule:cooling"]
    p = DetectionPipeline(GPUS, config=PipelineConfig(threshold_scale=res.final_scale))
    cooling = next(r for r in p.hw_rules if r.name == "cooling")
    default = next(r for r in DetectionPipeline(GPUS).hw_rules if r.name == "cooling")
    assert cooling.rise_c == pytest.approx(res.final_scale["rule:cooling"] * default.rise_c)  # type: ignore[attr-defined]


def test_labels_are_applied_only_after_their_delay() -> None:
    runs = FakeRuns("rule:hang")
    # Run k covers [900k, 900k + 900); its label arrives at 900k + 100 + 1850: after run k+2 has started.
    res = train_thresholds(range(6), runs, tuner=ThresholdTuner(min_labels=1), label_delay_s=1850.0)
    hang = [s.get("rule:hang", 1.0) for s in runs.scales]
    assert hang[:3] == [1.0, 1.0, 1.0]
    assert hang[3] > 1.0 and hang[4] > hang[3]
    assert [s.labels_before for s in res.steps] == [0, 0, 0, 1, 2, 3]
    assert res.labels_used == 4 and res.labels_pending == 2  # runs 4 and 5's labels are still in flight


def test_start_scale_is_the_base_the_multipliers_act_on() -> None:
    runs = FakeRuns(source="")
    res = train_thresholds(range(3), runs, start_scale={"rule:sdc": 0.5})
    assert all(s == {"rule:sdc": 0.5} for s in runs.scales)
    assert res.final_scale == {"rule:sdc": 0.5} and res.labels_used == 0


def test_misses_lower_the_thresholds_of_every_source_of_the_fault_class() -> None:
    runs = FakeRuns(source="", missed=1, miss_kind="straggler")
    res = train_thresholds(range(6), runs, tuner=ThresholdTuner(min_labels=1), label_delay_s=0.0)
    expected = set(sources_of_class()[C.STRAGGLER])
    # Every rule that names a straggler is charged the miss: the GPU, the job's per-rank step times, the replica.
    assert {"rule:straggler", "rule:rank_straggler", "rule:replica_straggler", "rule:job_slowdown"} <= expected
    assert {k for k, v in res.final_scale.items() if v < 1.0} == expected & set(RULE_THRESHOLDS)
    assert all(s.n_missed == 1 for s in res.steps)


def test_label_queue_releases_in_arrival_order_and_not_early() -> None:
    q = LabelQueue()
    q.push(5.0, "b")
    q.push(1.0, "a")
    q.push(5.0, "c")
    assert q.release(0.5) == []
    assert q.release(1.0) == ["a"]
    assert q.release(10.0) == ["b", "c"] and len(q) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e4), st.integers()), max_size=30), st.lists(st.floats(0, 2e4), max_size=8))
def test_label_queue_delivers_each_item_once_never_before_it_arrives(
    items: list[tuple[float, int]], times: list[float]
) -> None:
    q = LabelQueue()
    for k, (t, _) in enumerate(items):
        q.push(t, k)
    got: list[int] = []
    for now in sorted(times):
        out = q.release(now)
        assert all(items[k][0] <= now for k in out)
        assert [items[k][0] for k in out] == sorted(items[k][0] for k in out)
        got += out
    got += q.release(math.inf)
    assert sorted(got) == list(range(len(items)))


ops = st.lists(st.tuples(st.sampled_from(["true", "false", "miss"]), st.sampled_from(["a", "b"])), max_size=200)


@settings(max_examples=80, deadline=None)
@given(
    ops,
    st.floats(0.01, 0.9),
    st.floats(0.5, 1.0),
    st.integers(0, 10),
    st.tuples(st.floats(0.1, 1.0), st.floats(1.0, 10.0)),
)
def test_multipliers_stay_within_bounds_for_any_label_sequence(
    seq: list[tuple[str, str]], step: float, forget: float, min_labels: int, bounds: tuple[float, float]
) -> None:
    tuner = ThresholdTuner(step=step, forget=forget, min_labels=min_labels, bounds=bounds)
    for i, (what, source) in enumerate(seq):
        if what == "miss":
            m = tuner.missed(source)
        else:
            tuner.alarm(i, source)
            m = tuner.label(i, what == "true")
        assert bounds[0] <= m <= bounds[1]
    assert all(bounds[0] <= v <= bounds[1] for v in tuner.multipliers.values())
    assert tuner.n_pending == 0


def test_score_sums_alarms_and_faults() -> None:
    alarms = (
        Alarm(1, C.JOB_HANG, (), 0.0, False, "none"),
        Alarm(2, C.JOB_HANG, (), 0.0, True, "x"),
        Alarm(3, C.STRAGGLER, (), 0.0, None, "background:failure"),
    )
    a = RunOutcome(1, 900.0, alarms, {"job_hang": (2, 1)})
    b = RunOutcome(2, 900.0, (Alarm(1, C.STRAGGLER, (), 0.0, True, "straggler"),), {"job_hang": (1, 1)})
    q = score([a, b])
    assert q.n_runs == 2 and q.alarms == {"job_hang": (2, 1), "straggler": (1, 0)}
    assert q.precision == pytest.approx(2 / 3) and q.recall == pytest.approx(2 / 3)


# --- rule outcomes ----------------------------------------------------------------------------------------------------
class Settings(ActionAdapter):
    name: ClassVar[str] = "settings"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(self) -> None:
        self.values: dict[tuple[ActionKind, str], float] = {}

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        return (10.0, 40.0)

    def current(self, kind: ActionKind, target: str) -> float | None:
        return self.values.get((kind, target), 30.0)

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if request.value is not None:
            self.values[(request.kind, request.target)] = request.value
        return AdapterReply("applied")


def _policy() -> Policy:
    expect = ExpectTemplate(field="DCGM_FI_DEV_GPU_TEMP", direction="down", within_s=60, min_change=0.5)
    warm = Rule(
        name="warm",
        when=(C.COOLING_DEGRADATION, C.THERMAL_THROTTLE),
        actions=(ActionTemplate(kind=ActionKind.CDU_SETPOINT, target="cdu", change=2.0),),
        expect=expect,
    )
    hang = Rule(name="requeue", when=(C.JOB_HANG,), actions=(ActionTemplate(kind=ActionKind.REQUEUE, target="job"),))
    return Policy(name="t", mode="auto", rules=(warm, hang))  # fmt: skip


def test_rule_outcomes_read_a_real_responder_log() -> None:
    r = Responder(_policy(), Settings(), mode="auto")
    temp = {"v": 80.0}

    def read(field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        return temp["v"]

    for iid, cls, row in ((1, C.COOLING_DEGRADATION, "r1"), (2, C.THERMAL_THROTTLE, "r3")):  # two CDUs
        r.handle([Incident(iid, cls, f"dc/{row}/k1", (), 0.0, 0.0, Severity.MAJOR)], 0.0, read)
    temp["v"] = 79.0  # the effect appears
    verdicts = r.verify(60.0, read)
    assert {v.status for v in verdicts} == {"verified"}
    r.handle([Incident(3, C.COOLING_DEGRADATION, "dc/r2/k1", (), 60.0, 60.0, Severity.MAJOR)], 60.0, read)
    r.verify(120.0, read)  # no change since: rolled back
    got = [(rule, cls, res.status) for rule, cls, res in rule_outcomes(r.log)]
    assert ("warm", "cooling_degradation", "verified") in got
    assert ("warm", "thermal_throttle", "verified") in got
    assert ("warm", "cooling_degradation", "rolled_back") in got
    assert all(rule == "warm" for rule, _, _ in got)  # the requeue rule has no expectation: never judged
    learner = RuleOutcomeLearner()
    assert learner.observe_log(r.log) == len(got) == 3


def test_learned_policy_drops_what_the_learner_switched_off() -> None:
    pol = _policy()
    learner = RuleOutcomeLearner()
    assert learned_policy(pol, learner) == pol
    for _ in range(3):
        learner.observe_status("warm", "cooling_degradation", "rolled_back")
    first = learned_policy(pol, learner)
    assert [(r.name, r.when) for r in first.rules] == [("warm", (C.THERMAL_THROTTLE,)), ("requeue", (C.JOB_HANG,))]
    for cls, rule in (("thermal_throttle", "warm"), ("job_hang", "requeue")):
        for _ in range(3):
            learner.observe_status(rule, cls, "rolled_back")
    assert learned_policy(pol, learner).mode == "observe"


def test_train_rules_switches_a_failing_rule_off_for_later_runs() -> None:
    seen: list[Policy] = []

    def run(seed: int, policy: Policy) -> RunOutcome:
        seen.append(policy)
        judged = tuple(("warm", "cooling_degradation", "rolled_back") for r in policy.rules
                       if r.name == "warm" and C.COOLING_DEGRADATION in r.when)  # fmt: skip
        return RunOutcome(seed, 900.0, (), {}, judged)

    res = train_rules(range(5), run, _policy())
    assert [C.COOLING_DEGRADATION in seen[k].rules[0].when for k in range(5)] == [True, True, True, False, False]
    assert len(res.judged) == 3 and not res.learner.allowed("warm", "cooling_degradation")


# --- one real twin run ---------------------------------------------------------------------------------
def test_run_outcome_labels_a_twin_runs_alarms() -> None:
    out = run_outcome(random_scenario(100, 900.0))
    assert out.faults and sum(n for n, _ in out.faults.values()) >= 2
    assert out.alarms, "a random scenario raises at least one alarm"
    for a in out.alarms:
        assert a.event_class not in (C.BENIGN_PHASE_CHANGE, C.UNCLASSIFIED)
        assert a.sources and all(s.startswith("rule:") for s in a.sources)
        assert (a.true_alarm is True) == (a.matched != "none" and a.true_alarm is not None)
