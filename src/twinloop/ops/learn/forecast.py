"""Heat-load forecasting 5-15 minutes ahead, for precooling.

Heat follows IT power within a minute or two of thermal lag, so a rack's or the facility's heat load in 10
minutes is mostly today's load plus what the job queue already says will change: jobs that will start (with
the planner's predicted power per GPU) and jobs that will end. :class:`HeatLoadForecaster` is a ridge
regression per horizon on a small set of such features; :func:`persistence` is the baseline it must beat.

Features at time t for horizon h (all in W unless said):
  load now; mean load over the last 5 min; load slope over the last 5 min (W/s x h);
  scheduled change: planned power of jobs starting in (t, t+h] minus jobs ending in (t, t+h];
  scheduled change already begun: the same for the last 5 minutes (ramps still in progress);
  time of day as sin/cos (serving load is diurnal);
  and, when the history carries them (``LoadHistory.known_ahead_w``), K more columns of what the queue and the
  planner knew *at t* about (t, t+h] (see :mod:`twinloop.closedloop.twin_history`).

Without ``known_ahead_w`` the scheduled change ahead is the window sum of ``scheduled_delta_w`` over (t, t+h],
which assumes the schedule was fixed in advance (true of a reservation calendar, not of a queue whose start
times depend on when other jobs end). With ``known_ahead_w`` that column is the sum of the known-ahead columns
instead, so no future sample of any series is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

FloatArray = NDArray[np.float64]
#: The known-ahead columns, in order: training jobs that will start (or finish ramping up), serving jobs that will
#: start, running jobs that will end, checkpoint writes (see ``twinloop.closedloop.twin_history`` for the twin's).
KNOWN_COLUMNS = ("start_training_w", "start_serving_w", "end_w", "checkpoint_w")


@dataclass(frozen=True)
class LoadHistory:
    """One entity's load series and its known schedule (what the job queue and the planner say).

    Attributes:
        ts_s: sample times, seconds, strictly increasing, evenly spaced.
        load_w: measured heat load (≈ IT power) at those times, W.
        scheduled_delta_w: planned load change per sample: + planned power at a job's start sample,
            - at its end sample (0 elsewhere), W. Known in advance from the queue and the planner.
        known_ahead_w: optional, horizon (s) → array ``(n_samples, K)``: per sample, the load changes the queue
            and the planner knew about at that sample for the next ``horizon`` seconds (K kinds of change, W).
            Every horizon must have the same K.
    """

    ts_s: FloatArray
    load_w: FloatArray
    scheduled_delta_w: FloatArray
    known_ahead_w: Mapping[float, FloatArray] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        n = len(self.ts_s)
        if len(self.load_w) != n or len(self.scheduled_delta_w) != n:
            raise ValueError("ts_s, load_w and scheduled_delta_w must have equal length")
        if n < 2 or np.any(np.diff(self.ts_s) <= 0):
            raise ValueError("ts_s must be strictly increasing with at least two samples")
        if self.known_ahead_w is not None:
            widths = {a.shape[1] if a.ndim == 2 else -1 for a in self.known_ahead_w.values()}
            if not self.known_ahead_w or len(widths) != 1 or -1 in widths:
                raise ValueError("known_ahead_w needs one (n_samples, K) array per horizon, the same K for all")
            if any(a.shape[0] != n for a in self.known_ahead_w.values()):
                raise ValueError("known_ahead_w arrays must have one row per sample (equal length to ts_s)")

    def known_for(self, horizon_s: float) -> FloatArray | None:
        """The known-ahead columns for ``horizon_s`` (None when the history has none).

        Raises:
            ValueError: when the history has known-ahead columns but not for this horizon.
        """
        if self.known_ahead_w is None:
            return None
        for h, cols in self.known_ahead_w.items():
            if abs(h - horizon_s) < 1e-6:
                return cols
        have = ", ".join(f"{h:g}" for h in sorted(self.known_ahead_w))
        raise ValueError(f"no known-ahead columns for horizon {horizon_s:g} s (recorded: {have} s)")

    @property
    def dt_s(self) -> float:
        """Sampling interval (median), seconds."""
        return float(np.median(np.diff(self.ts_s)))


def _window_sum(x: FloatArray, start: NDArray[np.int64], stop: NDArray[np.int64]) -> FloatArray:
    """Sum of x[start:stop] for each pair, by prefix sums (indices clipped to the series)."""
    csum = np.concatenate(([0.0], np.cumsum(x)))
    n = len(x)
    return csum[np.clip(stop, 0, n)] - csum[np.clip(start, 0, n)]


def features(history: LoadHistory, horizon_s: float, lookback_s: float = 300.0) -> FloatArray:
    """Feature matrix (n_samples x (7 + K)) for forecasting ``horizon_s`` ahead from every sample.

    K is the width of ``history.known_ahead_w`` (0 without it); see the module docstring.
    """
    load = history.load_w
    n = len(load)
    dt = history.dt_s
    h = max(1, round(horizon_s / dt))
    back = max(1, round(lookback_s / dt))
    idx = np.arange(n)
    start = np.maximum(idx - back + 1, 0)
    mean_recent = _window_sum(load, start, idx + 1) / (idx + 1 - start)
    past = load[np.maximum(idx - back, 0)]
    slope = (load - past) / np.maximum((idx - np.maximum(idx - back, 0)) * dt, dt)
    known = history.known_for(horizon_s)
    future = _window_sum(history.scheduled_delta_w, idx + 1, idx + h + 1)
    ahead = future if known is None else known.sum(axis=1)
    begun = _window_sum(history.scheduled_delta_w, idx - back + 1, idx + 1)
    day = 2 * np.pi * (history.ts_s % 86400.0) / 86400.0
    cols = [load, mean_recent, slope * h * dt, ahead, begun, np.sin(day), np.cos(day)]
    return np.column_stack(cols if known is None else [*cols, known])


def persistence(history: LoadHistory, horizon_s: float) -> FloatArray:
    """The baseline: the load ``horizon_s`` from now equals the load now."""
    return history.load_w.copy()


def target(history: LoadHistory, horizon_s: float) -> tuple[FloatArray, NDArray[np.bool_]]:
    """The true load ``horizon_s`` ahead of each sample, and a mask of samples that have one."""
    h = max(1, round(horizon_s / history.dt_s))
    n = len(history.load_w)
    y = np.full(n, np.nan)
    y[: n - h] = history.load_w[h:]
    return y, ~np.isnan(y)


class HeatLoadForecaster:
    """Ridge regression of the load change over the horizon on :func:`features` (one model per horizon).

    Predicting the *change* (not the level) keeps the model honest at every load scale and makes
    persistence the zero-weight special case.
    """

    def __init__(self, horizon_s: float, ridge: float = 1e-3, lookback_s: float = 300.0) -> None:
        if horizon_s <= 0:
            raise ValueError("horizon_s must be > 0")
        self.horizon_s = horizon_s
        self.ridge = ridge
        self.lookback_s = lookback_s
        self.coef_: FloatArray | None = None
        self.scale_: FloatArray | None = None

    def fit(self, histories: list[LoadHistory]) -> HeatLoadForecaster:
        """Fit on training runs (held apart from the runs it is evaluated on)."""
        xs, ys = [], []
        for hist in histories:
            x = features(hist, self.horizon_s, self.lookback_s)
            y, ok = target(hist, self.horizon_s)
            xs.append(x[ok])
            ys.append(y[ok] - hist.load_w[ok])
        if not xs or len({x.shape[1] for x in xs}) != 1:
            raise ValueError("fit() needs at least one history, all with the same known-ahead columns")
        x_all = np.vstack(xs)
        if len(x_all) == 0:
            raise ValueError(f"no sample has a target {self.horizon_s:g} s ahead (histories shorter than the horizon)")
        y_all = np.concatenate(ys)
        scale = np.maximum(np.abs(x_all).max(axis=0), 1e-9)
        xn = np.column_stack([x_all / scale, np.ones(len(x_all))])
        reg = self.ridge * len(xn) * np.eye(xn.shape[1])
        reg[-1, -1] = 0.0
        self.coef_ = np.linalg.solve(xn.T @ xn + reg, xn.T @ y_all)
        self.scale_ = scale
        return self

    def to_dict(self) -> dict[str, Any]:
        """The fitted model as plain JSON-able data (:meth:`from_dict` reads it back)."""
        if self.coef_ is None or self.scale_ is None:
            raise RuntimeError("fit() first")
        return {
            "horizon_s": self.horizon_s,
            "ridge": self.ridge,
            "lookback_s": self.lookback_s,
            "coef": self.coef_.tolist(),
            "scale": self.scale_.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "forecaster") -> HeatLoadForecaster:
        """A fitted model from :meth:`to_dict` output.

        Raises:
            InputError: a missing field, a non-positive horizon, or coefficients that do not fit the scales.
        """
        try:
            model = cls(float(data["horizon_s"]), float(data["ridge"]), float(data["lookback_s"]))
            coef = np.asarray(data["coef"], dtype=np.float64)
            scale = np.asarray(data["scale"], dtype=np.float64)
        except KeyError as exc:
            raise InputError(source, str(exc.args[0]), "missing (allowed: a HeatLoadForecaster.to_dict())") from exc
        except (TypeError, ValueError) as exc:
            raise InputError(source, "horizon_s", f"{exc} (allowed: horizon_s > 0, numeric arrays)") from exc
        if coef.ndim != 1 or scale.ndim != 1 or coef.size != scale.size + 1 or not np.isfinite(coef).all():
            raise InputError(source, "coef", f"{coef.size} values for {scale.size} scales (allowed: scales + 1)")
        if (scale <= 0).any() or not np.isfinite(scale).all():
            raise InputError(source, "scale", "non-positive or non-finite value (allowed: > 0)")
        model.coef_, model.scale_ = coef, scale
        return model

    def predict(self, history: LoadHistory) -> FloatArray:
        """Forecast of the load ``horizon_s`` after every sample of ``history``, W."""
        if self.coef_ is None or self.scale_ is None:
            raise RuntimeError("fit() first")
        return self.predict_features(features(history, self.horizon_s, self.lookback_s))

    def contribution(self, x: FloatArray, columns: slice | list[int]) -> FloatArray:
        """The part of :meth:`predict_features` that ``columns`` of ``x`` account for (the model is linear), W."""
        if self.coef_ is None or self.scale_ is None:
            raise RuntimeError("fit() first")
        return np.asarray((x[:, columns] / self.scale_[columns]) @ self.coef_[:-1][columns])

    def predict_features(self, x: FloatArray) -> FloatArray:
        """Forecast from a feature matrix laid out as :func:`features` makes it (column 0 is the load now), W.

        Raises:
            RuntimeError: before :meth:`fit`.
            ValueError: when the number of columns differs from the one the model was fitted on.
        """
        if self.coef_ is None or self.scale_ is None:
            raise RuntimeError("fit() first")
        if x.ndim != 2 or x.shape[1] != self.scale_.size:
            raise ValueError(f"expected {self.scale_.size} feature columns, got shape {x.shape}")
        xn = x / self.scale_
        return np.asarray(x[:, 0] + np.column_stack([xn, np.ones(len(xn))]) @ self.coef_)


@dataclass(frozen=True)
class ForecastScore:
    """MAE of the model and of persistence on the same samples, and the relative improvement."""

    horizon_s: float
    mae_model_w: float
    mae_persistence_w: float

    @property
    def improvement(self) -> float:
        """1 - MAE_model / MAE_persistence (0.3 = 30 % lower error than persistence)."""
        return 1.0 - self.mae_model_w / self.mae_persistence_w if self.mae_persistence_w > 0 else 0.0


def evaluate(model: HeatLoadForecaster, histories: list[LoadHistory]) -> ForecastScore:
    """Score ``model`` against persistence on held-apart runs."""
    err_m, err_p = [], []
    for hist in histories:
        y, ok = target(hist, model.horizon_s)
        err_m.append(np.abs(model.predict(hist)[ok] - y[ok]))
        err_p.append(np.abs(persistence(hist, model.horizon_s)[ok] - y[ok]))
    return ForecastScore(model.horizon_s, float(np.concatenate(err_m).mean()), float(np.concatenate(err_p).mean()))
