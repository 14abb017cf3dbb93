"""The rule-based classifier: the class the detection pipeline's cross-signal rules gave the incident.

The rules (:mod:`twinloop.ops.detect.rules`, ``job_rules``, ``facility_rules`` and the grouping's
power-delivery → facility-excursion promotion) already name a class when they open an incident; this wrapper reads
it back from the one-hot ``rule_*`` block of the feature vector, so that it is scored exactly like a learned
model. ``unclassified`` counts as ``benign_phase_change`` (no fault claimed). Fitting does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from twinloop.ops.classify.base import F64, LABEL_INDEX, LABELS, IncidentClassifier, check_features, register, to_label
from twinloop.ops.classify.features import RULE_COLUMNS
from twinloop.ops.events import EventClass

_RULE_TO_LABEL = np.array([LABEL_INDEX[to_label(c)] for c in EventClass], dtype=np.int64)


@register
class RuleBased(IncidentClassifier):
    """The pipeline's own class, one-hot (probability 1 on it)."""

    name = "rule_based"

    def fit(self, x: F64, y: Sequence[EventClass]) -> RuleBased:
        """Nothing to learn; returns self."""
        check_features(x, self.name)
        return self

    def predict_proba(self, x: F64) -> F64:
        """One-hot rows on the rule's class (``benign_phase_change`` when no rule column is set)."""
        arr = check_features(x, self.name)
        block = arr[:, list(RULE_COLUMNS)]
        has = block.max(axis=1) > 0 if block.shape[0] else np.zeros(0, dtype=bool)
        col = np.where(has, _RULE_TO_LABEL[np.argmax(block, axis=1)], LABEL_INDEX[EventClass.BENIGN_PHASE_CHANGE])
        out = np.zeros((arr.shape[0], len(LABELS)))
        out[np.arange(arr.shape[0]), col] = 1.0
        return out
