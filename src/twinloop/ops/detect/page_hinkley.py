"""Two-sided Page-Hinkley change-point detector.

Against the running mean since the last (re)start (no forgetting, unlike CUSUM's EWMA reference):
``m+ += z - delta`` and ``PH+ = m+ - min(m+)`` for an upward change, mirrored for a downward one, where ``z`` is
the deviation from the running mean in units of the running standard deviation since the (re)start, prewhitened
(lag-1 autocorrelation removed, see :class:`~.cusum.Whitener`). An exceedance is ``max(PH+, PH-) > lambda``.
After an alarm the entity re-warms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.base import F64, BoolArr, Detector, DetectorParams, alpha_for, register
from twinloop.ops.detect.cusum import Whitener


@dataclass(frozen=True)
class PageHinkleyParams(DetectorParams):
    """Parameters of the Page-Hinkley detector, on top of :class:`~.base.DetectorParams`.

    Attributes:
        delta: tolerated drift per sample, in standard deviations.
        lambda_: decision threshold, in standard deviations.
        min_std_rel: scale floor relative to |mean|.
        min_std_abs: absolute scale floor, in the series' unit.
        prewhiten: remove lag-1 autocorrelation first (see :class:`~.cusum.Whitener`).
        rho_half_life_s: half-life of the autocorrelation estimate, s.
    """

    delta: float = 0.5
    lambda_: float = 20.0
    min_std_rel: float = 0.005
    min_std_abs: float = 1e-9
    prewhiten: bool = True
    rho_half_life_s: float = 600.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.lambda_ > 0:
            raise InputError("detector page_hinkley", "lambda_", f"{self.lambda_} (allowed > 0)")
        if self.delta < 0 or self.min_std_rel < 0 or self.min_std_abs < 0:
            raise InputError("detector page_hinkley", "delta/min_std", "allowed >= 0")


@register
class PageHinkley(Detector[PageHinkleyParams]):
    """Two-sided Page-Hinkley per entity; ``kind = "change_point"``."""

    name = "page_hinkley"
    kind = "change_point"
    params_cls = PageHinkleyParams

    def _alloc(self, n: int) -> None:
        self._n = np.zeros(n, dtype=np.int64)
        self._mean = np.zeros(n)
        self._m2 = np.zeros(n)
        self._scale = np.full(n, np.nan)
        self._mp = np.zeros(n)
        self._mp_min = np.zeros(n)
        self._mn = np.zeros(n)
        self._mn_min = np.zeros(n)
        self._white = Whitener(n)

    def _on_rates(self) -> None:
        self._rho_alpha = alpha_for(self.params.rho_half_life_s, self.dt_s, 30.0)

    def _reset_entities(self, mask: BoolArr) -> None:
        for arr in (self._mean, self._m2, self._mp, self._mp_min, self._mn, self._mn_min):
            arr[mask] = 0.0
        self._n[mask] = 0
        self._scale[mask] = np.nan
        self._white.reset(mask)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        n1 = self._n + valid
        d = np.where(valid, x - self._mean, 0.0)
        self._mean = self._mean + d / np.maximum(n1, 1)
        self._m2 = self._m2 + d * np.where(valid, x - self._mean, 0.0)
        self._n = n1
        # The yardstick is the running standard deviation since the (re)start, used once warm: a change moves
        # it only slowly (it is diluted by all the samples before), while autocorrelated noise, which a short
        # warm-up underestimates, gets its true spread over time.
        warm = valid & (n1 >= self._warmup_n)
        if warm.any():
            sd = np.sqrt(self._m2 / np.maximum(n1 - 1, 1))
            floor = p.min_std_rel * np.abs(self._mean) + p.min_std_abs
            self._scale = np.where(warm, np.maximum(sd, floor), self._scale)
        active = valid & np.isfinite(self._scale)
        with np.errstate(invalid="ignore"):
            z = np.where(active, (x - self._mean) / self._scale, 0.0)
        if p.prewhiten:
            z = np.where(active, self._white(z, active, self._rho_alpha), 0.0)
        self._mp = np.where(active, self._mp + z - p.delta, self._mp)
        self._mp_min = np.minimum(self._mp_min, self._mp)
        self._mn = np.where(active, self._mn - z - p.delta, self._mn)
        self._mn_min = np.minimum(self._mn_min, self._mn)
        up = self._mp - self._mp_min
        down = self._mn - self._mn_min
        score = np.where(up >= down, up, -down)
        return score, np.maximum(up, down) > p.lambda_
