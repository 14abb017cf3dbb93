"""Detectors from the ``river`` package (ADWIN, Half-Space Trees), one river model per entity.

river models learn one sample at a time in Python, so these adapters loop over entities: ~0.3 µs per sample
for ADWIN and ~30 µs for Half-Space Trees (measured on the 2-core dev machine). That is fine for the offline
CLI and for a few hundred series, not for 16,384 GPUs × 10 fields at 1 Hz — the pipeline uses the vectorized
detectors for that (``vectorized = False`` marks these). river is imported on first use.

* ``adwin`` — ADWIN (adaptive windowing; Bifet & Gavaldà 2007) flags a change in the mean with confidence
  ``1 - delta``; its flag is one sample long and already statistically confirmed, so persistence is 1.
* ``half_space_trees`` — Half-Space Trees (Tan et al. 2011) score how isolated a value is within a sliding
  window; the feature range is fixed from the warm-up data (± ``limit_margin`` × its span) and the score is
  smoothed (EWMA, ``smooth_half_life_s``) because single-sample HST scores on a 1-D series are noisy. A guess
  at a usable setting, tuned on Gaussian noise with a 4 sigma step (quiet at threshold 0.97, found in ~6 samples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.base import F64, BoolArr, Detector, DetectorParams, alpha_for, register


@dataclass(frozen=True)
class AdwinParams(DetectorParams):
    """Parameters of the river ADWIN adapter, on top of :class:`~.base.DetectorParams`.

    Attributes:
        delta: ADWIN's confidence parameter (smaller = fewer false alarms, slower detection).
    """

    delta: float = 1e-4

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.delta < 1:
            raise InputError("detector adwin", "delta", f"{self.delta} (allowed 0 < delta < 1)")


@register
class Adwin(Detector[AdwinParams]):
    """river ADWIN per entity; ``kind = "change_point"``; not vectorized."""

    name = "adwin"
    kind = "change_point"
    params_cls = AdwinParams
    vectorized = False

    def _alloc(self, n: int) -> None:
        self._models: list[Any] = [None] * n

    def _on_rates(self) -> None:
        self._k = 1  # ADWIN's flag is a confirmed change already.

    def _reset_entities(self, mask: BoolArr) -> None:
        for i in np.flatnonzero(mask):
            self._models[i] = None

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        from river import drift

        score = np.zeros(self.n_entities)
        exceed = np.zeros(self.n_entities, dtype=bool)
        for i in np.flatnonzero(valid):
            model = self._models[i]
            if model is None:
                # river declares py.typed but leaves ADWIN.__init__ unannotated: an untyped call to mypy.
                model = self._models[i] = drift.ADWIN(delta=self.params.delta)  # type: ignore[no-untyped-call]
            model.update(float(x[i]))
            if model.drift_detected:
                exceed[i] = True
                score[i] = float(model.width)
        return score, exceed


@dataclass(frozen=True)
class HalfSpaceTreesParams(DetectorParams):
    """Parameters of the river Half-Space Trees adapter, on top of :class:`~.base.DetectorParams`.

    Attributes:
        threshold: smoothed HST score (0..1) above this is an exceedance.
        n_trees: trees per entity.
        height: tree height.
        window_s: HST reference window, s.
        limit_margin: feature range = warm-up range ± this × its span.
        smooth_half_life_s: EWMA half-life of the score, s.
    """

    threshold: float = 0.97
    n_trees: int = 10
    height: int = 8
    window_s: float = 250.0
    limit_margin: float = 1.0
    smooth_half_life_s: float = 3.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.threshold < 1:
            raise InputError("detector half_space_trees", "threshold", f"{self.threshold} (allowed 0..1)")
        if self.n_trees < 1 or self.height < 1 or self.window_s <= 0 or self.smooth_half_life_s <= 0:
            raise InputError("detector half_space_trees", "n_trees/height/window_s", "allowed > 0")


@register
class HalfSpaceTrees(Detector[HalfSpaceTreesParams]):
    """river Half-Space Trees per entity; ``kind = "anomaly"``; not vectorized."""

    name = "half_space_trees"
    kind = "anomaly"
    params_cls = HalfSpaceTreesParams
    vectorized = False

    def _alloc(self, n: int) -> None:
        self._models: list[Any] = [None] * n
        self._warm: list[list[float]] = [[] for _ in range(n)]
        self._smooth = np.zeros(n)

    def _on_rates(self) -> None:
        self._alpha = alpha_for(self.params.smooth_half_life_s, self.dt_s)
        self._window_n = max(10, round(self.params.window_s / self.dt_s))

    def _reset_entities(self, mask: BoolArr) -> None:
        for i in np.flatnonzero(mask):
            self._models[i] = None
            self._warm[i] = []
        self._smooth[mask] = 0.0

    def _build(self, i: int) -> Any:
        from river import anomaly

        p = self.params
        lo, hi = min(self._warm[i]), max(self._warm[i])
        span = max(hi - lo, 1e-6 * max(abs(lo), abs(hi), 1.0))
        model = anomaly.HalfSpaceTrees(
            n_trees=p.n_trees,
            height=p.height,
            window_size=self._window_n,
            seed=p.seed,
            limits={"x": (lo - p.limit_margin * span, hi + p.limit_margin * span)},
        )
        for v in self._warm[i]:
            model.learn_one({"x": v})  # type: ignore[no-untyped-call]  # unannotated in river
        self._warm[i] = []
        return model

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        raw = np.zeros(self.n_entities)
        scored = np.zeros(self.n_entities, dtype=bool)
        for i in np.flatnonzero(valid):
            v = float(x[i])
            model = self._models[i]
            if model is None:
                self._warm[i].append(v)
                if len(self._warm[i]) >= self._warmup_n:
                    self._models[i] = self._build(int(i))
                continue
            raw[i] = model.score_one({"x": v})
            model.learn_one({"x": v})
            scored[i] = True
        self._smooth = np.where(scored, self._smooth + self._alpha * (raw - self._smooth), self._smooth)
        return self._smooth.copy(), scored & (self._smooth > self.params.threshold)
