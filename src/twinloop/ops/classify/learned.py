"""The learned classifier: multinomial logistic regression on standardized incident features (NumPy + SciPy).

Why this model: a few hundred labeled incidents per training set is too little for anything deep, the features
are already physical deltas and ratios, and a linear softmax model can be read (``coef_`` per class and
feature, on standardized features). It is fitted by L-BFGS on the class-weighted cross-entropy with an L2
penalty on the weights (not the biases). ``features="telemetry"`` uses only the telemetry columns, so it is a
classifier independent of the rules; ``features="all"`` also sees the rule class at first report (a stacked model
that can learn where the rules are wrong). Standardization makes it invariant to a positive affine rescaling of
any feature. Defaults (``l2``, class weighting, clip) are guesses; the benchmark picks ``l2`` by cross-validation
on the training runs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from twinloop.errors import InputError
from twinloop.ops.classify.base import F64, LABEL_INDEX, LABELS, IncidentClassifier, check_features, register
from twinloop.ops.classify.features import N_FEATURES, TELEMETRY_COLUMNS
from twinloop.ops.events import EventClass

FeatureSet = Literal["telemetry", "all"]


def _softmax(z: F64) -> F64:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float64)


@register
class LogisticClassifier(IncidentClassifier):
    """Multinomial logistic regression (see module docstring).

    Args:
        seed: seeds the (tiny) random initial weights.
        l2: L2 penalty on standardized weights (per unit of mean sample weight).
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
        self.mean_ = np.zeros(self.columns.size)
        self.scale_ = np.ones(self.columns.size)
        self.coef_ = np.zeros((0, self.columns.size))
        self.intercept_ = np.zeros(0)

    def _z(self, x: F64) -> F64:
        return np.clip((x[:, self.columns] - self.mean_) / self.scale_, -self.clip_z, self.clip_z)

    def fit(self, x: F64, y: Sequence[EventClass]) -> LogisticClassifier:
        """Fit on ``x`` (n, N_FEATURES) and classes ``y`` (label space); returns self."""
        arr = check_features(x, self.name)
        if len(y) != arr.shape[0]:
            raise InputError(self.name, "labels", f"{len(y)} labels for {arr.shape[0]} rows (allowed: one per row)")
        unknown = {c for c in y if c not in LABEL_INDEX}
        if unknown:
            raise InputError(self.name, "labels", f"{sorted(unknown)} (allowed: {[c.value for c in LABELS]})")
        self.classes_ = tuple(c for c in LABELS if c in set(y))
        k, d = len(self.classes_), self.columns.size
        if arr.shape[0] == 0:
            self.coef_, self.intercept_ = np.zeros((0, d)), np.zeros(0)
            return self
        cols = arr[:, self.columns]
        self.mean_ = cols.mean(axis=0)
        std = cols.std(axis=0)
        self.scale_ = np.where(std > 1e-12 * np.maximum(1.0, np.abs(self.mean_)), std, 1.0)
        z = self._z(arr)
        pos = {c: i for i, c in enumerate(self.classes_)}
        yi = np.array([pos[c] for c in y], dtype=np.int64)
        onehot = np.zeros((yi.size, k))
        onehot[np.arange(yi.size), yi] = 1.0
        counts = np.bincount(yi, minlength=k).astype(np.float64)
        w = (yi.size / (k * counts))[yi] if self.class_weight == "balanced" else np.ones(yi.size)
        w = w / w.sum()
        l2 = self.l2

        def loss_grad(theta: F64) -> tuple[float, F64]:
            wt = theta[: k * d].reshape(k, d)
            b = theta[k * d :]
            logits = z @ wt.T + b
            logits -= logits.max(axis=1, keepdims=True)
            log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            loss = -float(np.sum(w * np.sum(onehot * log_p, axis=1))) + 0.5 * l2 * float(np.sum(wt * wt))
            r = (np.exp(log_p) - onehot) * w[:, None]
            grad_w = r.T @ z + l2 * wt
            return loss, np.concatenate([grad_w.ravel(), r.sum(axis=0)])

        rng = np.random.default_rng(self.seed)
        theta0 = np.concatenate([rng.normal(0.0, 1e-3, k * d), np.log(counts / counts.sum())])
        res = minimize(loss_grad, theta0, jac=True, method="L-BFGS-B", options={"maxiter": self.max_iter})
        theta = np.asarray(res.x, dtype=np.float64)
        self.coef_ = theta[: k * d].reshape(k, d)
        self.intercept_ = theta[k * d :]
        return self

    def predict_proba(self, x: F64) -> F64:
        """Probabilities over ``LABELS`` (classes unseen in training get 0; an unfitted model is uniform)."""
        arr = check_features(x, self.name)
        out = np.zeros((arr.shape[0], len(LABELS)))
        if not self.classes_ or arr.shape[0] == 0:
            out[:] = 1.0 / len(LABELS)
            return out
        p = _softmax(self._z(arr) @ self.coef_.T + self.intercept_)
        out[:, [LABEL_INDEX[c] for c in self.classes_]] = p
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
