"""The learned classifier as a second opinion: an advisory class beside the rules' class, never acted on.

:class:`Advisor` rides on the loop runner's hooks (``on_sample`` to keep its telemetry memory,
``on_incidents`` to judge each incident at its first report) and only reads: it never changes an incident, a
detection or an action, so the loop does exactly the same with it or without it
(``tests/ops/classify/test_advisory.py`` runs a scenario both ways and compares the action logs). For every incident
it records an :class:`Advice`: the rules' class (in the classifier's label space), the classifier's most probable
class and its probability, the probability it gives the rules' class, and whether the two agree.
:meth:`Advisor.summary` is what ``twinloop run --json`` and the docs report: how many incidents were judged, how
many the two disagree on, by (rule class, advisory class), with examples.

The model (:class:`AdvisoryModel`) is a multinomial logistic regression on the telemetry features only (the rule
class is *not* an input, so it is an independent opinion), stored as plain numbers in JSON
(``ops/classify/models/advisory.json``): scaler, clip, weights, the classes, and where its training data came from.
:meth:`AdvisoryModel.from_classifier` exports a fitted
:class:`~twinloop.ops.classify.learned.LogisticClassifier`; its probabilities are the same to rounding. The packaged
model is trained by ``benchmarks/train_advisory.py`` on the twin's *random* fault scenarios
(:func:`twinloop.lab.fault_scenarios.random_scenario`, seeds 1000 and up) with labels from their injected
ground truth; no packaged scenario (``default``, ``mixed_hall``, ...) and no run it is later judged on is in its
training data.

Features come from the :class:`~twinloop.ops.ports.Sample` the loop sees (a live cluster's too): node and row fields
that the sample broadcasts to GPUs are read back per node / row; fields a cluster does not report are missing
(0 with a flag), in training and in use alike.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.classify.base import LABEL_INDEX, LABELS, check_features, to_label
from twinloop.ops.classify.features import N_FEATURES, FeatureExtractor
from twinloop.ops.classify.learned import LogisticClassifier
from twinloop.ops.detect.rules import GpuLimits
from twinloop.ops.events import EventClass, Incident
from twinloop.ops.ports import Sample
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_CDU_FLOW,
    TWINLOOP_FI_CDU_SETPOINT,
    TWINLOOP_FI_CDU_SUPPLY_TEMP,
    TWINLOOP_FI_PSU_STATE,
)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

PACKAGED_MODEL = "advisory.json"

#: Sample fields broadcast per GPU that the feature extractor reads per node / per row.
_NODE_FIELDS = (TWINLOOP_FI_PSU_STATE,)
_ROW_FIELDS = (TWINLOOP_FI_CDU_SUPPLY_TEMP, TWINLOOP_FI_CDU_FLOW, TWINLOOP_FI_CDU_SETPOINT)


@dataclass(frozen=True)
class AdvisoryModel:
    """A fitted multinomial logistic model as plain arrays (see module docstring).

    Attributes:
        classes: the classes it was fitted on (the columns of ``coef``), label space.
        columns: feature columns it reads (indices into ``FEATURE_NAMES``).
        mean, scale: the standardizer per column.
        clip_z: standardized features are clipped to ±this.
        coef: (k, len(columns)) weights, or (1, len(columns)) for two classes (logistic on the second).
        intercept: (k,) or (1,).
        trained_on: where its training data came from (for people).
    """

    classes: tuple[EventClass, ...]
    columns: I64
    mean: F64
    scale: F64
    clip_z: float
    coef: F64
    intercept: F64
    trained_on: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_classifier(cls, model: LogisticClassifier, trained_on: Mapping[str, Any]) -> AdvisoryModel:
        """Export a fitted :class:`LogisticClassifier` (two classes or more)."""
        pipe = model.pipeline_
        if pipe is None:
            raise InputError(model.name, "fit", "the model saw fewer than two classes (allowed: a fitted model)")
        scaler, logistic = pipe.named_steps["scale"], pipe.named_steps["logistic"]
        classes = tuple(LABELS[int(i)] for i in logistic.classes_)
        return cls(
            classes,
            model.columns.copy(),
            np.asarray(scaler.mean_, np.float64),
            np.asarray(scaler.scale_, np.float64),
            model.clip_z,
            np.asarray(logistic.coef_, np.float64),
            np.asarray(logistic.intercept_, np.float64),
            dict(trained_on),
        )

    def predict_proba(self, x: F64) -> F64:
        """Probabilities over ``LABELS`` (n, len(LABELS)); classes it never saw get 0."""
        arr = check_features(x, "advisory model")
        z = np.clip((arr[:, self.columns] - self.mean) / self.scale, -self.clip_z, self.clip_z)
        logits = z @ self.coef.T + self.intercept
        if self.coef.shape[0] == 1:  # two classes: a logistic on the second
            p1 = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            p = np.stack([1.0 - p1, p1], axis=1)
        else:
            logits = logits - logits.max(axis=1, keepdims=True)
            e = np.exp(logits)
            p = e / e.sum(axis=1, keepdims=True)
        out = np.zeros((arr.shape[0], len(LABELS)))
        out[:, [LABEL_INDEX[c] for c in self.classes]] = p
        return out

    def to_json(self) -> str:
        """The model as JSON (numbers rounded only by ``repr``)."""
        return json.dumps(
            {
                "kind": "multinomial_logistic",
                "n_features": N_FEATURES,
                "classes": [c.value for c in self.classes],
                "columns": self.columns.tolist(),
                "mean": self.mean.tolist(),
                "scale": self.scale.tolist(),
                "clip_z": self.clip_z,
                "coef": self.coef.tolist(),
                "intercept": self.intercept.tolist(),
                "trained_on": dict(self.trained_on),
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, source: str = "advisory model") -> AdvisoryModel:
        """Parse :meth:`to_json`'s output; errors name ``source`` and the field."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(source, f"line {exc.lineno}", f"not JSON: {exc.msg}") from exc
        if not isinstance(d, dict) or d.get("kind") != "multinomial_logistic":
            raise InputError(
                source, "kind", f"{d.get('kind') if isinstance(d, dict) else d!r} (allowed: multinomial_logistic)"
            )
        if d.get("n_features") != N_FEATURES:
            raise InputError(source, "n_features", f"{d.get('n_features')} (allowed: {N_FEATURES}, this version's)")
        try:
            classes = tuple(EventClass(c) for c in d["classes"])
            columns = np.asarray(d["columns"], np.int64)
            mean, scale = np.asarray(d["mean"], np.float64), np.asarray(d["scale"], np.float64)
            coef, intercept = np.asarray(d["coef"], np.float64), np.asarray(d["intercept"], np.float64)
            clip_z = float(d["clip_z"])
        except (KeyError, ValueError, TypeError) as exc:
            raise InputError(source, "model", f"{exc} (allowed: the fields to_json writes)") from None
        k = 1 if len(classes) == 2 else len(classes)
        if len(classes) < 2 or coef.shape != (k, columns.size) or intercept.shape != (k,):
            raise InputError(
                source, "coef", f"shape {coef.shape} for {len(classes)} classes (allowed: ({k}, {columns.size}))"
            )
        if mean.shape != (columns.size,) or scale.shape != (columns.size,) or not (scale > 0).all():
            raise InputError(source, "scale", "one positive value per column (allowed: > 0)")
        if columns.size and not (columns.min() >= 0 and columns.max() < N_FEATURES):
            raise InputError(source, "columns", f"outside 0..{N_FEATURES - 1}")
        return cls(classes, columns, mean, scale, clip_z, coef, intercept, dict(d.get("trained_on", {})))


def load_advisory_model(path: Path | None = None) -> AdvisoryModel:
    """The model in ``path``, or the packaged one."""
    if path is not None:
        return AdvisoryModel.from_json(path.read_text(), str(path))
    text = resources.files("twinloop.ops.classify").joinpath("models", PACKAGED_MODEL).read_text()
    return AdvisoryModel.from_json(text, f"package:{PACKAGED_MODEL}")


@dataclass(frozen=True)
class Advice:
    """The classifier's second opinion on one incident, at its first report.

    Attributes:
        incident_id: the incident.
        ts: when it was judged (the incident's first report), s.
        rule_class: the rules' class, in the label space (``unclassified`` → ``benign_phase_change``).
        advisory_class: the classifier's most probable class.
        probability: the classifier's probability of ``advisory_class``.
        rule_class_probability: the classifier's probability of ``rule_class``.
    """

    incident_id: int
    ts: float
    root: str
    rule_class: EventClass
    advisory_class: EventClass
    probability: float
    rule_class_probability: float

    @property
    def agrees(self) -> bool:
        """The classifier's class is the rules' class."""
        return self.advisory_class == self.rule_class

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "incident_id": self.incident_id,
            "ts": self.ts,
            "root": self.root,
            "rule_class": self.rule_class.value,
            "advisory_class": self.advisory_class.value,
            "advisory_probability": round(self.probability, 4),
            "rule_class_probability": round(self.rule_class_probability, 4),
            "agrees": self.agrees,
        }


@dataclass(frozen=True)
class FirstReport:
    """An incident as first reported, its features then, and the jobs its GPUs ran (training data)."""

    incident: Incident
    features: F64
    jobs: tuple[str, ...]


class Advisor:
    """Advisory classification over the loop runner's hooks (see module docstring).

    Args:
        gpu_ids: the cluster's GPU ids (its topology's order).
        limits: the GPUs' limits (slowdown temperature, default power limit).
        model: the fitted model; None records first reports and their features only (to train one).
        dt_s: expected sampling interval, s.
    """

    def __init__(
        self,
        gpu_ids: Sequence[str],
        limits: GpuLimits,
        model: AdvisoryModel | None = None,
        dt_s: float = 1.0,
    ) -> None:
        self.gpu_ids = tuple(gpu_ids)
        n = len(self.gpu_ids)
        # The clock scale is each GPU's highest SM clock seen so far (a live cluster's topology does not say its
        # maximum; the twin's runs use the same estimate, so training and use see the same features).
        self._clock_max = np.full(n, np.nan)
        self.extractor = FeatureExtractor(
            self.gpu_ids, limits.slowdown_temp_c, limits.tdp_w, self._clock_max, dt_s=dt_s
        )
        self.model = model
        self.site = self.gpu_ids[0].split("/", 1)[0] if self.gpu_ids else "site"
        self.advice: dict[int, Advice] = {}
        self.first_reports: dict[int, FirstReport] = {}
        # Node / row entity of every GPU and the first GPU of each (broadcast fields are read back there).
        self._levels: dict[str, tuple[list[str], I64]] = {}
        for level, k in (("node", 4), ("row", 2)):
            prefixes = ["/".join(g.split("/")[:k]) for g in self.gpu_ids]
            ids, first = np.unique(prefixes, return_index=True)
            self._levels[level] = ([str(i) for i in ids], first.astype(np.int64))
        self._job_index: I64 = np.full(n, -1, np.int64)
        self._job_ids: list[str] = []

    # --- hooks ----------------------------------------------------------------------------------------------
    def observe(self, sample: Sample) -> None:
        """``on_sample``: keep the sample's telemetry."""
        job_ids = [j if "/" in j else f"{self.site}/jobs/{j}" for j in sample.job_ids]
        job_index = sample.job_index if sample.job_index is not None else np.full(len(self.gpu_ids), -1, np.int64)
        self._job_index, self._job_ids = np.asarray(job_index, np.int64), job_ids
        clock = sample.gpu.get(DCGM_FI_DEV_SM_CLOCK)
        if clock is not None:
            np.fmax(self._clock_max, np.asarray(clock, np.float64), out=self._clock_max)
            self.extractor.clock_max = self._clock_max
        facility: dict[str, Mapping[str, Any]] = {}
        level_ids: dict[str, Sequence[str]] = {}
        for level, names in (("node", _NODE_FIELDS), ("row", _ROW_FIELDS)):
            present = [f for f in names if f in sample.gpu]
            if present:
                ids, first = self._levels[level]
                facility[level] = {f: np.asarray(sample.gpu[f], np.float64)[first] for f in present}
                level_ids[level] = ids
        if level_ids.get("row") is not None:
            # The extractor reads every row field; one a cluster does not report is missing.
            nan = np.full(len(level_ids["row"]), np.nan)
            facility["row"] = {f: facility["row"].get(f, nan) for f in _ROW_FIELDS}
        if sample.site_fields:
            facility["site"] = {k: np.atleast_1d(np.asarray(v, np.float64)) for k, v in sample.site_fields.items()}
        if sample.job_fields is not None:
            facility["job"] = sample.job_fields
        self.extractor.observe(
            sample.ts, sample.gpu, facility or None, level_ids, self._job_index if job_ids else None, job_ids
        )

    def on_incidents(self, sample: Sample, updates: Sequence[Incident]) -> None:
        """``on_incidents``: judge every incident at its first report (later updates are not re-judged)."""
        new = [i for i in updates if i.incident_id not in self.first_reports and i.status == "open"]
        if not new:
            return
        x = np.vstack([self.extractor.features(i) for i in new])
        for inc, row in zip(new, x, strict=True):
            idx = self.extractor.member_index(inc)
            owners = np.unique(self._job_index[idx][self._job_index[idx] >= 0]) if idx.size else np.zeros(0, np.int64)
            jobs = tuple(self._job_ids[int(j)] for j in owners if int(j) < len(self._job_ids))
            self.first_reports[inc.incident_id] = FirstReport(inc, row, jobs)
        if self.model is None:
            return
        p = self.model.predict_proba(x)
        best = np.argmax(p, axis=1)
        for inc, pi, b in zip(new, p, best, strict=True):
            rule = to_label(inc.event_class)
            self.advice[inc.incident_id] = Advice(
                inc.incident_id,
                sample.ts,
                inc.root,
                rule,
                LABELS[int(b)],
                float(pi[b]),
                float(pi[LABEL_INDEX[rule]]),
            )

    # --- report ---------------------------------------------------------------------------------------------
    def summary(self, examples: int = 5) -> dict[str, Any]:
        """How many incidents were judged and where rules and classifier disagree (counts by pair, examples:
        the disagreements the classifier is surest of).
        """
        return advisory_summary(list(self.advice.values()), self.model, examples)


def advisory_summary(advice: Sequence[Advice], model: AdvisoryModel | None, examples: int = 5) -> dict[str, Any]:
    """Counts and examples of ``advice`` (see :meth:`Advisor.summary`)."""
    disagree = [a for a in advice if not a.agrees]
    pairs = Counter(f"{a.rule_class.value} -> {a.advisory_class.value}" for a in disagree)
    top = sorted(disagree, key=lambda a: (-a.probability, a.incident_id))[:examples]
    return {
        "model": dict(model.trained_on) if model is not None else None,
        "incidents_judged": len(advice),
        "disagreements": len(disagree),
        "disagreement_rate": len(disagree) / len(advice) if advice else 0.0,
        "by_pair": dict(sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))),
        "examples": [a.to_dict() for a in top],
    }
