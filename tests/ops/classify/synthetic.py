"""Synthetic feature matrices for the classifier tests (blobs in a few telemetry columns, rule one-hot set)."""

from __future__ import annotations

import numpy as np

from twinloop.ops.classify.features import FEATURE_NAMES, N_FEATURES
from twinloop.ops.events import EventClass

CLASSES = (EventClass.COOLING_DEGRADATION, EventClass.STRAGGLER, EventClass.BENIGN_PHASE_CHANGE)
COLS = tuple(FEATURE_NAMES.index(n) for n in ("temp_delta_c", "log_step_time_ratio", "tensor_delta"))


def blobs(seed: int, n_per_class: int = 40, spread: float = 0.3) -> tuple[np.ndarray, list[EventClass]]:
    """Three well separated classes: class k has mean 2 in column COLS[k] and 0 elsewhere; the rule one-hot
    column names the true class for even rows and ``unclassified`` for odd rows."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k, cls in enumerate(CLASSES):
        x = spread * rng.standard_normal((n_per_class, N_FEATURES))
        x[:, COLS[k]] += 2.0
        rule = np.array([FEATURE_NAMES.index(f"rule_{cls.value}"), FEATURE_NAMES.index("rule_unclassified")])
        x[:, [i for i, n in enumerate(FEATURE_NAMES) if n.startswith("rule_")]] = 0.0
        x[np.arange(n_per_class), rule[np.arange(n_per_class) % 2]] = 1.0
        xs.append(x)
        ys += [cls] * n_per_class
    return np.vstack(xs), ys
