"""Two-sided CUSUM change-point detector on the standardized series.

``z = (x - mu) / sigma`` with ``mu`` and ``sigma`` a slow EWMA baseline (half-life ``half_life_s``, updated with
the sample winsorized at ``mu ± 3 sigma``, so a shift is accumulated long before it is absorbed);
``S+ = max(0, S+ + z - k)``, ``S- = max(0, S- - z - k)`` (``z`` prewhitened: lag-1 autocorrelation removed,
see :class:`Whitener`); an exceedance is ``max(S+, S-) > h``.
With ``k = 0.5`` and ``h = 15`` the in-control average run length on Gaussian noise is ~10^7 samples per side
(Siegmund's approximation) and a 3 sigma step is found in ~6 samples. After an alarm the entity re-warms, so the
new level becomes the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.base import F64, BoolArr, Detector, DetectorParams, alpha_for, register, running_alpha


@dataclass(frozen=True)
class CusumParams(DetectorParams):
    """Parameters of the CUSUM detector, on top of :class:`~.base.DetectorParams`.

    Attributes:
        k: allowance (slack) in standard deviations; half the shift to detect.
        h: decision threshold on the cumulative sum, in standard deviations.
        half_life_s: half-life of the baseline mean/variance EWMA, s.
        min_std_rel: scale floor relative to |mean|.
        min_std_abs: absolute scale floor, in the series' unit.
        prewhiten: remove lag-1 autocorrelation before accumulating (see :class:`Whitener`).
    """

    k: float = 0.5
    h: float = 15.0
    half_life_s: float = 600.0
    min_std_rel: float = 0.005
    min_std_abs: float = 1e-9
    prewhiten: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("h", "half_life_s"):
            if not getattr(self, name) > 0:
                raise InputError("detector cusum", name, f"{getattr(self, name)} (allowed > 0)")
        if self.k < 0 or self.min_std_rel < 0 or self.min_std_abs < 0:
            raise InputError("detector cusum", "k/min_std", "allowed >= 0")


class StandardizedBaseline:
    """Slow EWMA mean/variance per entity, winsorized, for detectors that work on ``z``."""

    def __init__(self, n: int, min_std_rel: float, min_std_abs: float) -> None:
        self.mean = np.full(n, np.nan)
        self.var = np.zeros(n)
        self.n = np.zeros(n, dtype=np.int64)
        self.min_std_rel = min_std_rel
        self.min_std_abs = min_std_abs

    def reset(self, mask: BoolArr) -> None:
        """Forget the mean and variance of the entities in ``mask``: their next valid sample starts the baseline."""
        self.mean[mask] = np.nan
        self.var[mask] = 0.0
        self.n[mask] = 0

    def z_and_update(self, x: F64, valid: BoolArr, alpha: float, clip: float = 3.0) -> F64:
        """Standardize ``x`` against the baseline before it, then fold the (winsorized) sample in."""
        mean, var = self.mean, self.var
        scale = np.maximum(np.sqrt(var), self.min_std_rel * np.abs(mean) + self.min_std_abs)
        with np.errstate(invalid="ignore"):
            z = (x - mean) / scale
        z = np.where(valid & (self.n > 1), z, 0.0)
        first = valid & (self.n == 0)
        upd = valid & ~first
        a = running_alpha(alpha, self.n)
        # Winsorize only once the scale means something (after a few samples).
        xw = np.where(self.n > 3, np.clip(x, mean - clip * scale, mean + clip * scale), x)
        d = np.where(upd, xw - mean, 0.0)
        self.mean = np.where(first, x, np.where(upd, mean + a * d, mean))
        self.var = np.where(upd, (1.0 - a) * (var + a * d * d), var)
        self.n += valid
        return np.asarray(z, dtype=np.float64)


class Whitener:
    """Removes lag-1 autocorrelation from a standardized series: ``(u_t - rho·u_{t-1}) / sqrt(1 - rho²)``.

    Telemetry is autocorrelated (a temperature is a low-pass of power); cumulative-sum detectors assume
    independent samples and fire constantly on an AR(1) series. ``rho`` is an EWMA estimate per entity,
    clipped to [0, ``max_rho``]. A step of ``d`` standard deviations then shows as ``d`` on its first sample and
    ``d·(1 - rho)/sqrt(1 - rho²)`` afterwards: smaller, but no longer buried in correlated noise.
    """

    def __init__(self, n: int, max_rho: float = 0.95) -> None:
        self.prev = np.full(n, np.nan)
        self.c0 = np.zeros(n)
        self.c1 = np.zeros(n)
        self.n = np.zeros(n, dtype=np.int64)
        self.max_rho = max_rho

    def reset(self, mask: BoolArr) -> None:
        """Forget the previous sample and the correlation estimate of the entities in ``mask``."""
        self.prev[mask] = np.nan
        self.c0[mask] = 0.0
        self.c1[mask] = 0.0
        self.n[mask] = 0

    def __call__(self, u: F64, valid: BoolArr, alpha: float) -> F64:
        """Whitened ``u`` per entity (``u`` itself without a previous sample); ``rho`` learns from calm pairs."""
        have_prev = valid & np.isfinite(self.prev)
        a = running_alpha(alpha, self.n)
        pc = np.where(have_prev, self.prev, 0.0)
        # Only in-control pairs teach the correlation: a level shift looks like correlation, an outlier too.
        calm = have_prev & (np.abs(u) < 3.0) & (np.abs(pc) < 3.0)
        self.c0 = np.where(calm, self.c0 + a * (pc * pc - self.c0), self.c0)
        self.c1 = np.where(calm, self.c1 + a * (u * pc - self.c1), self.c1)
        self.n += calm
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.clip(np.where(self.c0 > 0, self.c1 / self.c0, 0.0), 0.0, self.max_rho)
        white = np.where(have_prev, (u - rho * np.nan_to_num(self.prev)) / np.sqrt(1.0 - rho * rho), u)
        self.prev = np.where(valid, u, self.prev)
        return np.asarray(white, dtype=np.float64)


@register
class Cusum(Detector[CusumParams]):
    """Two-sided CUSUM per entity; ``kind = "change_point"``."""

    name = "cusum"
    kind = "change_point"
    params_cls = CusumParams

    def _alloc(self, n: int) -> None:
        self._base = StandardizedBaseline(n, self.params.min_std_rel, self.params.min_std_abs)
        self._sp = np.zeros(n)
        self._sn = np.zeros(n)
        self._white = Whitener(n)

    def _on_rates(self) -> None:
        self._alpha = alpha_for(self.params.half_life_s, self.dt_s, 30.0)

    def _reset_entities(self, mask: BoolArr) -> None:
        self._base.reset(mask)
        self._sp[mask] = 0.0
        self._sn[mask] = 0.0
        self._white.reset(mask)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        z = self._base.z_and_update(x, valid, self._alpha)
        if p.prewhiten:
            z = np.where(self._base.n > 2, self._white(z, valid & (self._base.n > 2), self._alpha), 0.0)
        # Sums start once the baseline is warm: early estimates would accumulate into a false alarm.
        acc = valid & (self._base.n > self._warmup_n)
        z = np.clip(z, -0.5 * p.h, 0.5 * p.h)  # one outlier alone cannot cross h
        self._sp = np.where(acc, np.maximum(0.0, self._sp + z - p.k), np.where(valid, 0.0, self._sp))
        self._sn = np.where(acc, np.maximum(0.0, self._sn - z - p.k), np.where(valid, 0.0, self._sn))
        score = np.where(self._sp >= self._sn, self._sp, -self._sn)
        return score, np.maximum(self._sp, self._sn) > p.h
