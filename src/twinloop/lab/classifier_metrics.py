"""Classification scores: per-class precision / recall / F1, macro-F1, accuracy, confusion matrix.

Macro-F1 averages over the classes that occur in the true labels (a class nobody had cannot be recalled; one
that is only predicted still costs precision in the classes it was taken from). ``lenient_accuracy`` counts a
prediction right when it is any class the true event may show as (``twinloop.ops.evaluate.FAULT_CLASSES``), e.g. a
PSU loss reported as a power throttle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.ops import LABEL_INDEX, LABELS, EventClass
from twinloop.ops.evaluate import FAULT_CLASSES


@dataclass(frozen=True)
class ClassScore:
    """Scores of one class."""

    label: EventClass
    precision: float
    recall: float
    f1: float
    support: int
    predicted: int


@dataclass(frozen=True)
class Scores:
    """Scores of one classifier on one data set."""

    per_class: tuple[ClassScore, ...]
    macro_f1: float
    accuracy: float
    confusion: NDArray[np.int64]  # rows: true LABELS, columns: predicted LABELS
    n: int


def score(y_true: Sequence[EventClass], y_pred: Sequence[EventClass]) -> Scores:
    """Scores of ``y_pred`` against ``y_true`` (both in the label space)."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} true labels, {len(y_pred)} predictions")
    k = len(LABELS)
    t = np.array([LABEL_INDEX[c] for c in y_true], dtype=np.int64)
    p = np.array([LABEL_INDEX[c] for c in y_pred], dtype=np.int64)
    conf = np.zeros((k, k), dtype=np.int64)
    np.add.at(conf, (t, p), 1)
    tp = np.diag(conf).astype(np.float64)
    support, predicted = conf.sum(axis=1), conf.sum(axis=0)
    prec = np.divide(tp, predicted, out=np.zeros(k), where=predicted > 0)
    rec = np.divide(tp, support, out=np.zeros(k), where=support > 0)
    f1 = np.divide(2 * prec * rec, prec + rec, out=np.zeros(k), where=(prec + rec) > 0)
    per = tuple(
        ClassScore(c, float(prec[i]), float(rec[i]), float(f1[i]), int(support[i]), int(predicted[i]))
        for i, c in enumerate(LABELS)
    )
    present = support > 0
    macro = float(f1[present].mean()) if present.any() else 0.0
    acc = float(tp.sum() / t.size) if t.size else 0.0
    return Scores(per, macro, acc, conf, int(t.size))


def lenient_accuracy(
    y_true: Sequence[EventClass],
    y_pred: Sequence[EventClass],
    matched: Sequence[str],
    allowed: Mapping[str, frozenset[EventClass]] = FAULT_CLASSES,
) -> float:
    """Share of predictions that are the true class or another class its fault kind may show as."""
    if not y_true:
        return 0.0
    ok = sum(p == t or p in allowed.get(m, frozenset()) for t, p, m in zip(y_true, y_pred, matched, strict=True))
    return ok / len(y_true)
