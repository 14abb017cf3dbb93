"""Shared conformance test over every registered classifier kind: defaults, seeded repeats, pickling, empty input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from tests.ops.classify.synthetic import blobs

from twinloop.errors import InputError
from twinloop.ops.classify import REGISTRY, make_classifier
from twinloop.ops.classify.base import LABELS
from twinloop.ops.classify.features import N_FEATURES

NAMES = sorted(REGISTRY)


def test_registry_has_the_rule_based_and_learned_kinds() -> None:
    assert {"rule_based", "logistic", "logistic_stacked"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_seeded_runs_repeat_exactly(name: str) -> None:
    x, y = blobs(1)
    p1 = make_classifier(name, seed=3).fit(x, y).predict_proba(x)
    p2 = make_classifier(name, seed=3).fit(x, y).predict_proba(x)
    assert np.array_equal(p1, p2)
    assert p1.shape == (x.shape[0], len(LABELS))


@pytest.mark.parametrize("name", NAMES)
def test_pickles_with_its_fit(name: str) -> None:
    x, y = blobs(2)
    model = make_classifier(name).fit(x, y)
    clone = pickle.loads(pickle.dumps(model))
    assert np.array_equal(clone.predict_proba(x), model.predict_proba(x))
    assert clone.predict(x) == model.predict(x)


@pytest.mark.parametrize("name", NAMES)
def test_empty_input_gives_empty_output(name: str) -> None:
    x, y = blobs(3)
    empty = np.zeros((0, N_FEATURES))
    for model in (make_classifier(name), make_classifier(name).fit(x, y)):
        assert model.predict(empty) == ()
        assert model.predict_proba(empty).shape == (0, len(LABELS))
    # fitting on nothing is allowed too and leaves a usable model
    unfit = make_classifier(name).fit(empty, [])
    p = unfit.predict_proba(x[:3])
    assert p.shape == (3, len(LABELS)) and np.allclose(p.sum(axis=1), 1.0)


@pytest.mark.parametrize("name", NAMES)
def test_bad_shapes_and_values_are_input_errors(name: str) -> None:
    model = make_classifier(name)
    with pytest.raises(InputError, match="features"):
        model.predict_proba(np.zeros((2, N_FEATURES - 1)))
    bad = np.zeros((1, N_FEATURES))
    bad[0, 0] = np.nan
    with pytest.raises(InputError, match="non-finite"):
        model.predict_proba(bad)


def test_unknown_kind_and_parameter_are_input_errors() -> None:
    with pytest.raises(InputError, match="did you mean logistic"):
        make_classifier("logistik")
    with pytest.raises(InputError, match="logistic"):
        make_classifier("logistic", depth=3)
    with pytest.raises(InputError, match="l2"):
        make_classifier("logistic", l2=-1.0)
