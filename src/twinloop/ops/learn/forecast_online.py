"""Online heat-load forecasts: the fitted :class:`HeatLoadForecaster` models applied one sample at a time.

The loop calls :meth:`OnlineForecast.update` once per facility sample with every entity's load (racks, or the
site) and what the queue and planner know ahead (:class:`~twinloop.closedloop.twin_history.TwinRecorder`
produces both for a twin); :meth:`OnlineForecast.forecast` then gives the load ``horizon_s`` ahead for all
entities at once. A rolling window per entity (the models' look-back) is kept as one array, so a step costs a
few vectorized operations whatever the number of entities. The features are the same numbers
:func:`~twinloop.ops.learn.forecast.features` computes offline on the whole history (tested to match).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from twinloop.errors import InputError, unknown_name
from twinloop.ops.learn.forecast import FloatArray, HeatLoadForecaster

SOURCE = "OnlineForecast"


class OnlineForecast:
    """Per-entity rolling windows and one fitted model per horizon.

    Args:
        models: horizon (s) → fitted forecaster (all with the same ``lookback_s`` and feature width).
        entities: entity ids, in the order of the arrays given to :meth:`update`.
        dt_s: sampling interval of the updates, s (the one the models were fitted at).
    """

    def __init__(self, models: Mapping[float, HeatLoadForecaster], entities: Sequence[str], dt_s: float) -> None:
        if not models:
            raise InputError(SOURCE, "models", "need at least one fitted forecaster")
        lookbacks = {m.lookback_s for m in models.values()}
        if len(lookbacks) != 1:
            raise InputError(SOURCE, "models", f"all models need one lookback_s (got {sorted(lookbacks)})")
        if any(m.coef_ is None or m.scale_ is None for m in models.values()):
            raise InputError(SOURCE, "models", "every model must be fitted first (HeatLoadForecaster.fit)")
        if dt_s <= 0:
            raise InputError(SOURCE, "dt_s", f"{dt_s} (allowed: > 0 s)")
        if not entities or len(set(entities)) != len(entities):
            raise InputError(SOURCE, "entities", "need at least one entity id, no duplicates")
        self.models = {float(h): m for h, m in models.items()}
        self.entities = tuple(entities)
        self._index = {e: i for i, e in enumerate(self.entities)}
        self.dt_s = float(dt_s)
        self.back = max(1, round(lookbacks.pop() / self.dt_s))
        self.reset()

    def reset(self) -> None:
        """Forget the windows (e.g. after a telemetry gap)."""
        n = len(self.entities)
        self._load = np.zeros((self.back + 1, n))
        self._delta = np.zeros((self.back + 1, n))
        self._count = 0
        self._t_s = -np.inf
        self._known: Mapping[float, FloatArray] | None = None

    @property
    def samples(self) -> int:
        """Samples seen since the last reset."""
        return self._count

    def _vector(self, name: str, value: FloatArray) -> FloatArray:
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (len(self.entities),):
            raise InputError(SOURCE, name, f"shape {arr.shape} (allowed: ({len(self.entities)},), one per entity)")
        if not np.isfinite(arr).all():
            raise InputError(SOURCE, name, "non-finite value (allowed: finite W)")
        return arr

    def update(
        self,
        t_s: float,
        load_w: FloatArray,
        scheduled_delta_w: FloatArray,
        known_ahead_w: Mapping[float, FloatArray] | None = None,
    ) -> None:
        """Add one sample: time (s, time of day-aligned), load and realized planned change per entity (W), and
        the known-ahead columns per horizon (``(n_entities, K)``; required when the models were fitted with them).

        Raises:
            InputError: on wrong shapes, non-finite values, or a time that does not advance by about ``dt_s``.
        """
        if self._count and not 0.5 * self.dt_s <= t_s - self._t_s <= 1.5 * self.dt_s:
            raise InputError(
                SOURCE, "t_s", f"{t_s} s after {self._t_s} s (allowed: one sample every {self.dt_s} s; reset())"
            )
        load = self._vector("load_w", load_w)
        delta = self._vector("scheduled_delta_w", scheduled_delta_w)
        if known_ahead_w is not None:
            for h, cols in known_ahead_w.items():
                if np.ndim(cols) != 2 or np.shape(cols)[0] != len(self.entities):
                    raise InputError(SOURCE, f"known_ahead_w[{h:g}]", f"shape {np.shape(cols)} (allowed: (n, K))")
        slot = self._count % (self.back + 1)
        self._load[slot] = load
        self._delta[slot] = delta
        self._known = known_ahead_w
        self._count += 1
        self._t_s = float(t_s)

    def features(self, horizon_s: float) -> FloatArray:
        """The feature matrix ``(n_entities, 7 + K)`` for ``horizon_s`` from the samples so far."""
        if self._count == 0:
            raise InputError(SOURCE, "update", "no sample yet: call update() first")
        idx = self._count - 1
        size = self.back + 1
        load = self._load[idx % size]
        # Offline: the mean and the sum of the realized change run over the last `back` samples (fewer at first),
        # and the slope compares with the sample `back` before (or the first one).
        if idx >= self.back:
            oldest = self._load[(idx - self.back) % size]
            mean_recent = (self._load.sum(axis=0) - oldest) / self.back
            begun = self._delta.sum(axis=0) - self._delta[(idx - self.back) % size]
            span = self.back
        else:
            oldest = self._load[0]
            mean_recent = self._load[: idx + 1].sum(axis=0) / (idx + 1)
            begun = self._delta[: idx + 1].sum(axis=0)
            span = idx
        slope = (load - oldest) / max(span * self.dt_s, self.dt_s)
        h = max(1, round(horizon_s / self.dt_s))
        width = self._model(horizon_s).scale_
        assert width is not None
        if width.size == 7:
            # The schedule-only model reads future planned changes, which an online caller does not have.
            raise InputError(SOURCE, "models", "online use needs models fitted on histories with known_ahead_w")
        known = None
        for k, cols in (self._known or {}).items():
            if abs(k - horizon_s) < 1e-6:
                known = np.asarray(cols, dtype=np.float64)
        if known is None or known.shape[1] != width.size - 7:
            want = width.size - 7
            raise InputError(SOURCE, "known_ahead_w", f"the {horizon_s:g} s model needs {want} known-ahead columns")
        day = 2 * np.pi * (self._t_s % 86400.0) / 86400.0
        n = len(self.entities)
        ahead = known.sum(axis=1)
        stacked = [
            load,
            mean_recent,
            slope * h * self.dt_s,
            ahead,
            begun,
            np.full(n, np.sin(day)),
            np.full(n, np.cos(day)),
        ]
        return np.column_stack([*stacked, known])

    def _model(self, horizon_s: float) -> HeatLoadForecaster:
        for h, m in self.models.items():
            if abs(h - horizon_s) < 1e-6:
                return m
        have = ", ".join(f"{h:g}" for h in sorted(self.models))
        raise InputError(SOURCE, "horizon_s", f"{horizon_s:g} s has no model (allowed: {have})")

    def forecast(self, horizon_s: float) -> FloatArray:
        """Forecast load ``horizon_s`` after the last sample, per entity, W."""
        return self._model(horizon_s).predict_features(self.features(horizon_s))

    def forecast_entity(self, entity: str, horizon_s: float) -> float:
        """Forecast load of one entity, W (raises :class:`InputError` for an unknown entity)."""
        if entity not in self._index:
            raise unknown_name(SOURCE, "entity", "entity", entity, self.entities)
        return float(self.forecast(horizon_s)[self._index[entity]])
