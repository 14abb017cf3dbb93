"""The learned classifier: multinomial logistic regression on standardized incident features (scikit-learn).

Why this model: a few hundred labeled incidents per training set is too little for anything deep, the features
are already physical deltas and ratios, and a linear softmax model can be read (``coef_`` per class and
feature, on standardized features). It is scikit-learn's ``LogisticRegression`` (L-BFGS, multinomial loss,
class weights, L2 penalty on the weights, not the intercepts) after a ``StandardScaler`` and a clip, in one
``Pipeline``. ``features="telemetry"`` uses only the telemetry columns, so it is a classifier independent of the
rules; ``features="all"`` also sees the rule class at first report (a stacked model that can learn where the
rules are wrong). Standardization makes it invariant to a positive affine rescaling of any feature. Defaults
(``l2``, class weighting, clip) are guesses; the benchmark picks ``l2`` by cross-validation on the training runs
only.

``l2`` keeps its meaning from the earlier hand-written fit: the objective is the class-weighted *mean*
cross-entropy plus ``l2/2·‖W‖²``. scikit-learn minimizes ``C·Σ wᵢ·lossᵢ + ½‖W‖²`` with balanced weights
summing to n, so ``C = 1/(l2·n)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from twinloop.errors import InputError
from twinloop.ops.classify.base import F64, LABEL_INDEX, LABELS, IncidentClassifier, check_features, register
from twinloop.ops.classify.features import N_FEATURES, TELEMETRY_COLUMNS
from twinloop.ops.events import EventClass

FeatureSet = Literal["telemetry", "all"]


@register
class LogisticClassifier(IncidentClassifier):
    """Multinomial logistic regression (see module docstring).

    Args:
        seed: ``random_state`` of the estimator (L-BFGS itself is deterministic).
        l2: L2 penalty on standardized weights (per unit of mean sample weight); 0 = no penalty.
        features: ``telemetry`` (rule columns ignored) or ``all``.
        class_weight: ``balanced`` (each class weighs as much in total) or ``none``.
        clip_z: standardized features are clipped to ±this (keeps one outlier from dominating).
        max_iter: L-BFGS iterations.
    """

    name = "logistic"

    def __init__(
        self,
        seed: int = 0,
        l2: float = 0.01,
        features: FeatureSet = "telemetry",
        class_weight: Literal["balanced", "none"] = "balanced",
        clip_z: float = 8.0,
        max_iter: int = 500,
    ) -> None:
        super().__init__(seed)
        if not l2 >= 0:
            raise InputError(self.name, "l2", f"{l2} (allowed: >= 0)")
        if features not in ("telemetry", "all"):
            raise InputError(self.name, "features", f"{features!r} (allowed: telemetry, all)")
        if class_weight not in ("balanced", "none"):
            raise InputError(self.name, "class_weight", f"{class_weight!r} (allowed: balanced, none)")
        self.l2, self.features, self.class_weight = float(l2), features, class_weight
        self.clip_z, self.max_iter = float(clip_z), int(max_iter)
        self.columns = np.asarray(TELEMETRY_COLUMNS if features == "telemetry" else range(N_FEATURES), np.int64)
        self.classes_: tuple[EventClass, ...] = ()
        self.pipeline_: Pipeline | None = None

    def _pipeline(self, n: int) -> Pipeline:
        clf = LogisticRegression(
            C=1.0 / (self.l2 * n) if self.l2 > 0 else np.inf,
            class_weight="balanced" if self.class_weight == "balanced" else None,
            solver="lbfgs",
            max_iter=self.max_iter,
            tol=1e-6,
            random_state=self.seed,
        )
        clip = FunctionTransformer(np.clip, kw_args={"a_min": -self.clip_z, "a_max": self.clip_z})
        return Pipeline([("scale", StandardScaler()), ("clip", clip), ("logistic", clf)])

    def fit(self, x: F64, y: Sequence[EventClass]) -> LogisticClassifier:
        """Fit on ``x`` (n, N_FEATURES) and classes ``y`` (label space); returns self."""
        arr = check_features(x, self.name)
        if len(y) != arr.shape[0]:
            raise InputError(self.name, "labels", f"{len(y)} labels for {arr.shape[0]} rows (allowed: one per row)")
        unknown = {c for c in y if c not in LABEL_INDEX}
        if unknown:
            raise InputError(self.name, "labels", f"{sorted(unknown)} (allowed: {[c.value for c in LABELS]})")
        self.classes_ = tuple(c for c in LABELS if c in set(y))
        self.pipeline_ = None
        if len(self.classes_) < 2:
            return self  # nothing to separate: predict_proba answers from the class set alone
        yi = np.array([LABEL_INDEX[c] for c in y], dtype=np.int64)
        self.pipeline_ = self._pipeline(arr.shape[0]).fit(arr[:, self.columns], yi)
        return self

    @property
    def coef_(self) -> F64:
        """Weights (classes × columns) on standardized features; empty when unfitted or single-class."""
        if self.pipeline_ is None:
            return np.zeros((0, self.columns.size))
        return np.asarray(self.pipeline_.named_steps["logistic"].coef_, dtype=np.float64)

    @property
    def intercept_(self) -> F64:
        """Per-class intercepts; empty when unfitted or single-class."""
        if self.pipeline_ is None:
            return np.zeros(0)
        return np.asarray(self.pipeline_.named_steps["logistic"].intercept_, dtype=np.float64)

    def predict_proba(self, x: F64) -> F64:
        """Probabilities over ``LABELS`` (classes unseen in training get 0; an unfitted model is uniform)."""
        arr = check_features(x, self.name)
        out = np.zeros((arr.shape[0], len(LABELS)))
        if not self.classes_ or arr.shape[0] == 0:
            out[:] = 1.0 / len(LABELS)
            return out
        if self.pipeline_ is None:  # one class seen in training: it is the answer
            out[:, LABEL_INDEX[self.classes_[0]]] = 1.0
            return out
        with np.errstate(over="ignore", invalid="ignore"):
            p = self.pipeline_.predict_proba(arr[:, self.columns])
        out[:, self.pipeline_.classes_] = p
        return out


@register
class StackedLogistic(LogisticClassifier):
    """:class:`LogisticClassifier` on every feature, the rule-based class included."""

    name = "logistic_stacked"

    def __init__(self, seed: int = 0, l2: float = 0.01, class_weight: Literal["balanced", "none"] = "balanced") -> None:
        super().__init__(seed, l2=l2, features="all", class_weight=class_weight)


def coefficients(model: LogisticClassifier) -> dict[str, NDArray[np.float64]]:
    """Per class, the weights on standardized features (in ``model.columns`` order) of a fitted model."""
    return {c.value: model.coef_[i] for i, c in enumerate(model.classes_)}
