"""The learned and rule-based classifiers on synthetic data, and the scoring helpers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tests.ops.classify.synthetic import CLASSES, blobs

from twinloop.lab.classifier_metrics import lenient_accuracy, score
from twinloop.ops.classify import make_classifier
from twinloop.ops.classify.base import LABEL_INDEX, LABELS
from twinloop.ops.classify.features import N_FEATURES, RULE_COLUMNS, TELEMETRY_COLUMNS
from twinloop.ops.classify.learned import LogisticClassifier, coefficients
from twinloop.ops.events import EventClass

C = EventClass


def test_learned_beats_chance_on_held_out_separable_data() -> None:
    x, y = blobs(10)
    xt, yt = blobs(11)
    model = make_classifier("logistic").fit(x, y)
    acc = score(yt, model.predict(xt)).accuracy
    assert acc > 0.95  # chance is 1/3
    # the weight of each class is largest on the column that carries it
    coefs = coefficients(model)  # type: ignore[arg-type]
    assert set(coefs) == {c.value for c in CLASSES}


def test_telemetry_model_ignores_the_rule_columns() -> None:
    x, y = blobs(12)
    model = make_classifier("logistic").fit(x, y)
    shuffled = x.copy()
    shuffled[:, list(RULE_COLUMNS)] = np.roll(shuffled[:, list(RULE_COLUMNS)], 7, axis=0)
    assert np.array_equal(model.predict_proba(x), model.predict_proba(shuffled))
    assert isinstance(model, LogisticClassifier) and len(model.columns) == len(TELEMETRY_COLUMNS)


def test_rule_based_reads_the_rule_class_and_scores_unclassified_as_benign() -> None:
    x, y = blobs(13)
    pred = make_classifier("rule_based").predict(x)
    for i, (p, t) in enumerate(zip(pred, y, strict=True)):
        assert p == (t if i % 2 == 0 else C.BENIGN_PHASE_CHANGE)
    assert make_classifier("rule_based").predict(np.zeros((1, N_FEATURES))) == (C.BENIGN_PHASE_CHANGE,)


def test_same_seed_same_model_and_classes_unseen_in_training_get_zero() -> None:
    x, y = blobs(14)
    a = make_classifier("logistic", seed=5).fit(x, y)
    b = make_classifier("logistic", seed=5).fit(x, y)
    assert isinstance(a, LogisticClassifier) and isinstance(b, LogisticClassifier)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    p = a.predict_proba(x)
    assert np.all(p[:, LABEL_INDEX[C.JOB_HANG]] == 0.0)


@settings(max_examples=25, deadline=None)
@given(arrays(np.float64, (7, N_FEATURES), elements=st.floats(-1e9, 1e9, allow_nan=False)))
def test_predict_proba_rows_are_distributions_for_any_finite_input(x: np.ndarray) -> None:
    train, y = blobs(15, n_per_class=10)
    for name in ("logistic", "logistic_stacked", "rule_based"):
        p = make_classifier(name).fit(train, y).predict_proba(x)
        assert p.shape == (7, len(LABELS)) and np.all(p >= 0.0) and np.allclose(p.sum(axis=1), 1.0)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.floats(0.01, 100.0), min_size=1, max_size=1),
    st.floats(-1e3, 1e3),
    st.integers(0, 3),
)
def test_positive_affine_rescaling_of_a_feature_does_not_change_predictions(
    scale: list[float], shift: float, seed: int
) -> None:
    """Invariant: the model standardizes every feature, so x → a·x + b (a > 0) on a column, in training and in
    prediction alike, gives the same classifier."""
    x, y = blobs(20 + seed, n_per_class=15)
    xt, _ = blobs(40 + seed, n_per_class=5)
    col = list(TELEMETRY_COLUMNS)[seed * 7 % len(TELEMETRY_COLUMNS)]
    x2, xt2 = x.copy(), xt.copy()
    for arr in (x2, xt2):
        arr[:, col] = scale[0] * arr[:, col] + shift
    m1 = make_classifier("logistic", seed=seed).fit(x, y)
    m2 = make_classifier("logistic", seed=seed).fit(x2, y)
    assert m1.predict(xt) == m2.predict(xt2)
    assert np.allclose(m1.predict_proba(xt), m2.predict_proba(xt2), atol=1e-4)


def test_scores_match_a_hand_count() -> None:
    t = [C.STRAGGLER, C.STRAGGLER, C.JOB_HANG, C.BENIGN_PHASE_CHANGE]
    p = [C.STRAGGLER, C.JOB_HANG, C.JOB_HANG, C.STRAGGLER]
    s = score(t, p)
    by = {c.label: c for c in s.per_class}
    assert by[C.STRAGGLER].precision == 0.5 and by[C.STRAGGLER].recall == 0.5
    assert by[C.JOB_HANG].precision == 0.5 and by[C.JOB_HANG].recall == 1.0
    assert by[C.BENIGN_PHASE_CHANGE].f1 == 0.0
    assert s.accuracy == 0.5
    assert abs(s.macro_f1 - (0.5 + 2 / 3 + 0.0) / 3) < 1e-12
    assert s.confusion.sum() == 4 and s.confusion[LABEL_INDEX[C.STRAGGLER], LABEL_INDEX[C.JOB_HANG]] == 1
    # a PSU loss reported as a power throttle is lenient-right, strict-wrong
    assert lenient_accuracy([C.POWER_DELIVERY_FAULT], [C.POWER_THROTTLE], ["psu_loss"]) == 1.0
    assert lenient_accuracy([C.POWER_DELIVERY_FAULT], [C.STRAGGLER], ["psu_loss"]) == 0.0
