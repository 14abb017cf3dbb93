"""The incident classifier interface, its label space and the registry of classifier kinds.

A classifier maps feature vectors (:data:`~twinloop.ops.classify.features.FEATURE_NAMES`, one row per incident
at first report) to a class of :data:`LABELS`: every fault class plus ``benign_phase_change`` (no fault caused
it). ``unclassified`` is not a label: a change no rule explains is, for scoring, a claim that no fault is there.

Every kind is seeded, picklable, takes an empty input (0 rows → 0 predictions) and is registered in
:data:`REGISTRY` (``make_classifier(name, **params)``); ``tests/ops/classify/test_conformance.py`` runs them all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError, unknown_name
from twinloop.ops.classify.features import N_FEATURES
from twinloop.ops.events import EventClass

F64 = NDArray[np.float64]

#: The label space, in column order of ``predict_proba``.
LABELS: tuple[EventClass, ...] = tuple(c for c in EventClass if c != EventClass.UNCLASSIFIED)
LABEL_INDEX: dict[EventClass, int] = {c: i for i, c in enumerate(LABELS)}


def to_label(cls: EventClass) -> EventClass:
    """The label-space class of a taxonomy class (``unclassified`` → ``benign_phase_change``)."""
    return EventClass.BENIGN_PHASE_CHANGE if cls == EventClass.UNCLASSIFIED else cls


def check_features(x: NDArray[Any], source: str = "classifier") -> F64:
    """``x`` as a float64 (n, N_FEATURES) matrix; raises :class:`InputError` on another shape or non-finite values."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != N_FEATURES:
        raise InputError(source, "features", f"shape {arr.shape} (allowed: (n, {N_FEATURES}))")
    if not np.isfinite(arr).all():
        raise InputError(source, "features", "non-finite values (allowed: finite numbers)")
    return arr


class IncidentClassifier(ABC):
    """Base class of classifier kinds.

    Args:
        seed: seed of every random part (same seed and data → same model, bit for bit).
    """

    name: ClassVar[str] = ""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    @abstractmethod
    def fit(self, x: F64, y: Sequence[EventClass]) -> IncidentClassifier:
        """Fit on features ``x`` (n, N_FEATURES) and true classes ``y`` (label space); returns self."""

    @abstractmethod
    def predict_proba(self, x: F64) -> F64:
        """Class probabilities (n, len(LABELS)); rows sum to 1."""

    def predict(self, x: F64) -> tuple[EventClass, ...]:
        """The most probable class per row (ties: the first in ``LABELS``)."""
        p = self.predict_proba(x)
        return tuple(LABELS[int(i)] for i in np.argmax(p, axis=1)) if p.shape[0] else ()


REGISTRY: dict[str, Callable[..., IncidentClassifier]] = {}


def register(cls: type[IncidentClassifier]) -> type[IncidentClassifier]:
    """Class decorator: add a kind to :data:`REGISTRY` under its ``name``."""
    REGISTRY[cls.name] = cls
    return cls


def make_classifier(name: str, source: str = "classifier", **params: Any) -> IncidentClassifier:
    """A classifier of kind ``name`` with ``params``; unknown names and parameters raise :class:`InputError`."""
    if name not in REGISTRY:
        raise unknown_name(source, "kind", "classifier", name, REGISTRY)
    try:
        return REGISTRY[name](**params)
    except TypeError as exc:
        raise InputError(source, name, str(exc)) from None
