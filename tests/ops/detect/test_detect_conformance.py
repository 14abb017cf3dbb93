"""Shared conformance test over every registered detector: defaults, determinism, pickling, entity order."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.detect import load_variants
from twinloop.ops.detect.base import REGISTRY, Detector, DetectorParams

load_variants()
NAMES = sorted(REGISTRY)


def series(seed: int, t: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = 50.0 + 2.0 * rng.standard_normal((t, n))
    x[t // 2 :, : n // 2] += 20.0  # something to detect
    x[rng.random((t, n)) < 0.02] = np.nan  # and missing samples
    return x


def feed(det: Detector[Any], x: np.ndarray, t0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    alarms, scores = [], []
    for i, row in enumerate(x):
        alarms.append(det.update(float(t0 + i), row))
        scores.append(det.score.copy())
    return np.array(alarms), np.array(scores)


def test_registry_has_the_documented_variants() -> None:
    assert {"ewma_zscore", "cusum", "page_hinkley", "seasonal", "adwin", "half_space_trees"} <= set(REGISTRY)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_construct_and_describe_themselves(name: str) -> None:
    cls = REGISTRY[name]
    det = cls()
    assert det.name == name
    assert det.kind in ("anomaly", "change_point")
    assert isinstance(det.params, DetectorParams)
    assert isinstance(det.params, cls.params_cls)
    alarm = det.update(0.0, np.zeros(3))
    assert alarm.dtype == bool and alarm.shape == (3,)
    assert det.score.shape == (3,)


@pytest.mark.parametrize("name", NAMES)
def test_seeded_runs_repeat_exactly_and_reset_restarts(name: str) -> None:
    x = series(1, 160, 4)
    det_a, det_b = REGISTRY[name](seed=3), REGISTRY[name](seed=3)
    a_alarms, a_scores = feed(det_a, x)
    b_alarms, b_scores = feed(det_b, x)
    np.testing.assert_array_equal(a_alarms, b_alarms)
    np.testing.assert_array_equal(a_scores, b_scores)
    det_a.reset()
    c_alarms, c_scores = feed(det_a, x)
    np.testing.assert_array_equal(a_alarms, c_alarms)
    np.testing.assert_array_equal(a_scores, c_scores)


@pytest.mark.parametrize("name", NAMES)
def test_pickled_mid_run_continues_identically(name: str) -> None:
    x = series(2, 160, 4)
    det = REGISTRY[name]()
    feed(det, x[:80])
    clone = pickle.loads(pickle.dumps(det))
    a = feed(det, x[80:], 80)
    b = feed(clone, x[80:], 80)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8, deadline=None)
@given(perm_seed=st.integers(0, 2**32 - 1), data_seed=st.integers(0, 1000))
def test_permuting_entities_permutes_outputs(name: str, perm_seed: int, data_seed: int) -> None:
    n = 5
    x = series(data_seed, 120, n)
    perm = np.random.default_rng(perm_seed).permutation(n)
    a_alarms, a_scores = feed(REGISTRY[name](), x)
    b_alarms, b_scores = feed(REGISTRY[name](), x[:, perm])
    np.testing.assert_array_equal(a_alarms[:, perm], b_alarms)
    np.testing.assert_array_equal(a_scores[:, perm], b_scores)
