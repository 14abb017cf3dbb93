"""EWMA z-score anomaly detector, with an optional robust (median/MAD over a window) baseline.

``z = (x - mean) / scale`` against the baseline *before* the sample. The EWMA baseline is updated with the
sample winsorized at ``mean ± threshold·scale``, so an outlier moves it little while a lasting level shift is
absorbed over a few half-lives (and the alarm then ends). The robust baseline is the median and
``1.4826·MAD`` of the last ``window_s`` of good samples per entity, recomputed every ``refresh_s`` (a full
median per sample would cost ~O(window) per entity; every few samples is plenty for a baseline).

``scale`` has a floor of ``min_std_rel·|baseline| + min_std_abs``: quantized or constant series (integer
temperatures, a clock pinned at its maximum) otherwise give infinite z for the first tiny change. In robust mode
it can also be floored at ``step_floor`` times the series' own *step*: the median of the non-zero changes between
successive samples in the window. On a quantised, mostly flat series (a near-idle CPU reading 0.134 %, 0.132 % or
0.066 %) the MAD is the jitter between two neighbouring levels while the series routinely moves by a whole
quantum; the step is that quantum, so one quantum is not read as tens of sigmas. On continuous noise the step is
about the noise's own scale (median ``|x_t - x_t-1|`` of white noise is 0.95 σ) and on a smooth, autocorrelated
signal it is far below it, so the floor then does not bind.
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
class EwmaZScoreParams(DetectorParams):
    """Parameters of the EWMA z-score detector, on top of :class:`~.base.DetectorParams`.

    Attributes:
        threshold: |z| above this is an exceedance.
        half_life_s: EWMA half-life of mean and variance, s.
        robust: use median/MAD over ``window_s`` instead of the EWMA.
        window_s: robust window, s.
        refresh_s: how often the robust baseline is recomputed, s.
        smooth_s: half-life of the EWMA of z (clipped at ±2·threshold) that is compared to the threshold, s
            (0: no smoothing, z itself is compared).
        min_std_rel: scale floor relative to |baseline|.
        min_std_abs: absolute scale floor, in the series' unit.
        step_floor: robust mode only: scale floor as a multiple of the median non-zero change between
            successive samples in the window (the series' resolution on quantised data); 0 disables it.
    """

    threshold: float = 5.0
    half_life_s: float = 300.0
    robust: bool = False
    window_s: float = 120.0
    refresh_s: float = 10.0
    smooth_s: float = 2.0
    min_std_rel: float = 0.005
    min_std_abs: float = 1e-9
    step_floor: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("threshold", "half_life_s", "window_s", "refresh_s"):
            if not getattr(self, name) > 0:
                raise InputError("detector ewma_zscore", name, f"{getattr(self, name)} (allowed > 0)")
        if self.min_std_rel < 0 or self.min_std_abs < 0 or self.step_floor < 0:
            raise InputError("detector ewma_zscore", "min_std", "allowed >= 0")


def typical_step(window: F64) -> F64:
    """Median non-zero ``|x_t - x_t-1|`` per column of ``window`` (samples × entities, NaN = no sample); 0 where
    a column never changes.

    The window is a ring buffer, so one of the differences joins its newest and oldest samples: one value among
    hundreds, which moves a median by at most one rank. Changes below ``1e-9·(1 + |x|)`` count as none (float
    noise on a constant reading).
    """
    d = np.abs(np.diff(window, axis=0))
    tiny = 1e-9 * (1.0 + np.abs(window[1:]))
    d = np.where(d > tiny, d, np.nan)
    out = np.zeros(window.shape[1])
    have = np.isfinite(d).any(axis=0)
    if have.any():
        out[have] = np.nanmedian(d[:, have], axis=0)
    return out


@register
class EwmaZScore(Detector[EwmaZScoreParams]):
    """EWMA (or robust median/MAD) z-score per entity; ``kind = "anomaly"``."""

    name = "ewma_zscore"
    kind = "anomaly"
    params_cls = EwmaZScoreParams

    def _alloc(self, n: int) -> None:
        self._mean = np.full(n, np.nan)
        self._var = np.zeros(n)
        self._n = np.zeros(n, dtype=np.int64)
        self._scale = np.full(n, np.nan)
        self._buf: F64 | None = None
        self._zs = ZSmoother(n)

    def _on_rates(self) -> None:
        p = self.params
        self._alpha = alpha_for(p.half_life_s, self.dt_s, 30.0)
        # smooth_s = 0: no smoothing, a lone sample can alarm (spiky latency profiles need it).
        self._smooth_alpha = 1.0 if p.smooth_s == 0 else alpha_for(p.smooth_s, self.dt_s)
        if p.robust:
            w = samples_for(p.window_s, self.dt_s, 5)
            if self._buf is None or self._buf.shape[0] != w:
                self._buf = np.full((w, self.n_entities), np.nan)
                self._pos = np.zeros(self.n_entities, dtype=np.int64)
                self._since_refresh = 10**9
            self._refresh_n = samples_for(p.refresh_s, self.dt_s, 1)

    def _reset_entities(self, mask: BoolArr) -> None:
        self._mean[mask] = np.nan
        self._var[mask] = 0.0
        self._n[mask] = 0
        self._scale[mask] = np.nan
        self._zs.reset(mask)
        if self._buf is not None:
            self._buf[:, mask] = np.nan
            self._pos[mask] = 0

    def _floor(self, center: F64) -> F64:
        p = self.params
        return np.asarray(p.min_std_rel * np.abs(center) + p.min_std_abs, dtype=np.float64)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        if p.robust:
            return self._step_robust(x, valid)
        mean, var = self._mean, self._var
        scale = np.maximum(np.sqrt(var), self._floor(mean))
        with np.errstate(invalid="ignore"):
            z = (x - mean) / scale
        z = np.where(valid & (self._n > 0), np.clip(z, -Z_MAX, Z_MAX), 0.0)
        first = valid & (self._n == 0)
        xw = np.clip(x, mean - p.threshold * scale, mean + p.threshold * scale)
        a = running_alpha(self._alpha, self._n)
        upd = valid & ~first
        # The variance learns only from in-control samples (|z| < 3), or a drift would widen its own yardstick.
        calm = upd & ((np.abs(z) < CALM_Z) | (self._n <= self._warmup_n))
        d = np.where(upd, xw - mean, 0.0)
        self._mean = np.where(first, x, np.where(upd, mean + a * d, mean))
        self._var = np.where(calm, (1.0 - a) * (var + a * d * d / CALM_VAR), var)
        self._n += valid
        zs = self._zs(z, valid, self._smooth_alpha, 2.0 * p.threshold)
        return z, np.abs(zs) > p.threshold

    def _step_robust(self, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        buf = self._buf
        assert buf is not None
        if self._since_refresh >= self._refresh_n:
            self._refresh()
        center = self._mean
        scale = np.maximum(self._scale, self._floor(center))
        with np.errstate(invalid="ignore"):
            z = (x - center) / scale
        z = np.where(valid & np.isfinite(z), np.clip(z, -Z_MAX, Z_MAX), 0.0)
        idx = np.flatnonzero(valid)
        buf[self._pos[idx], idx] = x[idx]
        self._pos[idx] = (self._pos[idx] + 1) % buf.shape[0]
        self._since_refresh += 1
        self._n += valid
        zs = self._zs(z, valid, self._smooth_alpha, 2.0 * p.threshold)
        return z, np.abs(zs) > p.threshold

    def _refresh(self) -> None:
        buf = self._buf
        assert buf is not None
        have = np.isfinite(buf).any(axis=0)
        med = np.full(self.n_entities, np.nan)
        mad = np.full(self.n_entities, np.nan)
        if have.any():
            sub = buf[:, have]
            m = np.nanmedian(sub, axis=0)
            med[have] = m
            mad[have] = 1.4826 * np.nanmedian(np.abs(sub - m), axis=0)
            if self.params.step_floor > 0:
                mad[have] = np.maximum(mad[have], self.params.step_floor * typical_step(sub))
        self._mean = med
        self._scale = mad
        self._since_refresh = 0
