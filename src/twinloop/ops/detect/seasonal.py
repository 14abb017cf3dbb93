"""Seasonal-baseline anomaly detector: an EWMA mean/variance per period bucket (e.g. hour of day).

The period (``period_s``, a day by default) is cut into ``n_buckets`` buckets by ``ts mod period``; each entity
keeps an EWMA mean and variance per bucket, with a half-life counted in *periods* (``half_life_periods``), so
the baseline for 14:00 learns from previous days' 14:00 only. ``z = (x - mean[b]) / scale[b]``; a bucket alarms
only after it has seen ``min_bucket_s`` of data (warm-up is per bucket, on top of the global one). A daily
load cycle (inlet temperature, facility power) is then no anomaly, while the same value at the wrong hour is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.base import (
    CALM_VAR,
    CALM_Z,
    F64,
    Z_MAX,
    BoolArr,
    Detector,
    DetectorParams,
    ZSmoother,
    alpha_for,
    register,
    running_alpha,
    samples_for,
)


@dataclass(frozen=True)
class SeasonalParams(DetectorParams):
    """Parameters of the seasonal detector, on top of :class:`~.base.DetectorParams`.

    Attributes:
        threshold: |z| above this is an exceedance.
        period_s: season length, s (86400 = daily).
        n_buckets: buckets per period.
        half_life_periods: EWMA half-life per bucket, in periods.
        min_bucket_s: data a bucket needs before it may alarm, s.
        smooth_s: half-life of the EWMA of z (clipped at ±2·threshold) that is compared to the threshold, s.
        min_std_rel: scale floor relative to |mean|.
        min_std_abs: absolute scale floor, in the series' unit.
    """

    threshold: float = 5.0
    period_s: float = 86400.0
    n_buckets: int = 24
    half_life_periods: float = 3.0
    min_bucket_s: float = 60.0
    smooth_s: float = 2.0
    min_std_rel: float = 0.005
    min_std_abs: float = 1e-9

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("threshold", "period_s", "half_life_periods"):
            if not getattr(self, name) > 0:
                raise InputError("detector seasonal", name, f"{getattr(self, name)} (allowed > 0)")
        if not 1 <= self.n_buckets <= 10_000:
            raise InputError("detector seasonal", "n_buckets", f"{self.n_buckets} (allowed 1..10000)")


@register
class Seasonal(Detector[SeasonalParams]):
    """Per-bucket EWMA z-score per entity; ``kind = "anomaly"``."""

    name = "seasonal"
    kind = "anomaly"
    params_cls = SeasonalParams

    def _alloc(self, n: int) -> None:
        b = self.params.n_buckets
        self._mean = np.full((b, n), np.nan)
        self._var = np.zeros((b, n))
        self._n = np.zeros((b, n), dtype=np.int64)
        self._bucket = 0
        self._zs = ZSmoother(n)

    def _on_rates(self) -> None:
        p = self.params
        samples_per_visit = max(1.0, p.period_s / p.n_buckets / self.dt_s)
        # Half-life in samples of this bucket: half_life_periods visits of samples_per_visit samples each.
        self._alpha = 1.0 - 2.0 ** (-1.0 / (p.half_life_periods * samples_per_visit))
        self._min_bucket_n = samples_for(p.min_bucket_s, self.dt_s, 2)
        self._smooth_alpha = alpha_for(p.smooth_s, self.dt_s)

    def _reset_entities(self, mask: BoolArr) -> None:
        self._mean[:, mask] = np.nan
        self._var[:, mask] = 0.0
        self._n[:, mask] = 0
        self._zs.reset(mask)

    def _ready(self) -> BoolArr:
        return np.asarray(self._n[self._bucket] >= self._min_bucket_n)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        b = int((ts % p.period_s) / p.period_s * p.n_buckets) % p.n_buckets
        self._bucket = b
        mean, var, cnt = self._mean[b], self._var[b], self._n[b]
        scale = np.maximum(np.sqrt(var), p.min_std_rel * np.abs(mean) + p.min_std_abs)
        with np.errstate(invalid="ignore"):
            z = (x - mean) / scale
        z = np.where(valid & (cnt > 1), np.clip(z, -Z_MAX, Z_MAX), 0.0)
        first = valid & (cnt == 0)
        upd = valid & ~first
        # The variance learns only from in-control samples (|z| < 3), or a drift would widen its own yardstick.
        calm = upd & ((np.abs(z) < CALM_Z) | (cnt <= self._min_bucket_n))
        a = running_alpha(self._alpha, cnt)
        xw = np.where(cnt > 3, np.clip(x, mean - p.threshold * scale, mean + p.threshold * scale), x)
        d = np.where(upd, xw - mean, 0.0)
        self._mean[b] = np.where(first, x, np.where(upd, mean + a * d, mean))
        self._var[b] = np.where(calm, (1.0 - a) * (var + a * d * d / CALM_VAR), var)
        self._n[b] = cnt + valid
        zs = self._zs(z, valid, self._smooth_alpha, 2.0 * p.threshold)
        return np.asarray(z, dtype=np.float64), np.abs(zs) > p.threshold
