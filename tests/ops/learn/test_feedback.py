from twinloop.ops.learn.feedback import RuleOutcomeLearner, ThresholdTuner
from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult


def test_false_alarms_raise_the_threshold_within_bounds() -> None:
    tuner = ThresholdTuner()
    for i in range(200):
        tuner.alarm(i, "ewma:DCGM_FI_DEV_GPU_TEMP")
        tuner.label(i, true_alarm=i % 3 == 0)
    m = tuner.multiplier("ewma:DCGM_FI_DEV_GPU_TEMP")
    assert 1.0 < m <= tuner.bounds[1]
    assert tuner.multiplier("other") == 1.0


def test_misses_lower_the_threshold() -> None:
    tuner = ThresholdTuner()
    for i in range(30):
        tuner.alarm(i, "cusum:power")
        tuner.label(i, true_alarm=True)
        tuner.missed("cusum:power")
    assert tuner.bounds[0] <= tuner.multiplier("cusum:power") < 1.0


def test_good_detector_keeps_its_threshold() -> None:
    tuner = ThresholdTuner()
    for i in range(50):
        tuner.alarm(i, "rule:straggler")
        tuner.label(i, true_alarm=True)
    assert tuner.multiplier("rule:straggler") == 1.0


def _result(status: str) -> ActionResult:
    return ActionResult(0, ActionRequest(ActionKind.CDU_FLOW, "r1/cdu", 1.2), status, 0.0)  # type: ignore[arg-type]


def test_rule_that_keeps_failing_is_switched_off_for_that_class() -> None:
    learner = RuleOutcomeLearner()
    for _ in range(5):
        learner.observe("cooling", "thermal_throttle", _result("rolled_back"))
        learner.observe("cooling", "cooling_degradation", _result("verified"))
    assert not learner.allowed("cooling", "thermal_throttle")
    assert learner.allowed("cooling", "cooling_degradation")
    assert learner.allowed("never-seen", "thermal_throttle")
