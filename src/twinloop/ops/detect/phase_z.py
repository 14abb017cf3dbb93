"""Robust z against the same phase of earlier cycles, for strongly periodic series (daily / weekly traffic).

Request counts, tweet volume, taxi demand follow the clock: 3 a.m. is quiet, 6 p.m. is busy, Sunday is not
Monday. A failure there is a value far from what *this time of day (or week)* usually reads, not a level the
series has never shown: a holiday's evening at the level of a normal night, a storm's empty morning rush. A
baseline over the last day (the other profiles' robust z) sees the whole daily swing as its noise and misses
both; this detector compares each sample with the same phase in the previous ``cycles`` periods.

* **Period from the series' own history** — every ``refresh_s`` the rank (Spearman) autocorrelation of the
  history is measured at each candidate period ``P`` of ``periods_s`` (a day, a week); ranks, because a news
  burst or an outage should not decide whether the series follows the clock, and because a count's cycle is
  multiplicative. ``P`` is *strong* when ``acf(P) >= min_acf`` and ``acf(P) - acf(P/2) >= 2·min_acf``: a cycle
  that carries a share ``f`` of the variance gives about ``f`` at its period and ``-f`` half a period away, while a
  trend or a random walk has a high ``acf`` at both lags (a small or negative contrast) and white noise none.
  Among the strong periods the shortest wins unless a longer one's ``acf`` is higher by :data:`PERIOD_MARGIN`
  (a week beats a day when weekends differ from weekdays). Where no period is strong the detector is silent and
  leaves the series to the other detectors of its profile.
* **Baseline** — the median and ``1.4826·MAD`` of the samples at the same phase ``±phase_halfwidth_s`` in each of
  the previous ``cycles`` periods (at 5 min, ±15 min and 4 cycles: 28 samples); it needs at least two cycles of
  history before it may alarm. The median ignores a spike or a holiday in one earlier cycle.
* **Floors** (as :mod:`~twinloop.ops.detect.ewma_zscore`): ``min_std_rel·|median| + min_std_abs``, ``step_floor``
  times the series' own step (median non-zero change between successive samples), and ``poisson_floor`` times
  ``sqrt(|median|)``: a count of independent events (requests, tweets, trips) has at least Poisson noise, so
  a night-time bucket that read 4, 5, 4, 5 does not make 9 a 10-sigma event.

The history is a ring buffer in *time slots* of the sampling interval, shared by all entities: a missing sample
leaves its slot empty (NaN), so a hole in the data does not shift the phase; a gap does not clear the history
(a seasonal baseline is exactly what should survive an outage). History is at most :data:`MAX_HISTORY` slots, so
a period that does not fit ``cycles`` times (a day of 1 s telemetry) is never a candidate: on GPU telemetry the
detector is silent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.detect.base import F64, Z_MAX, BoolArr, Detector, DetectorParams, register, samples_for
from twinloop.ops.detect.ewma_zscore import typical_step

#: Most time slots of history kept (per entity): 4 weeks at 5 min is 8,064; 4 weeks at 30 min 1,344.
MAX_HISTORY = 12_000

#: Allowed ``direction`` values: the sign of ``z`` that counts as an exceedance.
DIRECTIONS = ("both", "down", "up")

#: A longer candidate period replaces a shorter strong one only when its rank autocorrelation is higher by more
#: than this: a week is seven days, so on a purely daily series both read the same up to noise (about
#: ``2/sqrt(n)``, 0.04 for a week of 5 min samples).
PERIOD_MARGIN = 0.05


@dataclass(frozen=True)
class PhaseZParams(DetectorParams):
    """Parameters of the same-phase robust z, on top of :class:`~.base.DetectorParams`.

    Attributes:
        threshold: |z| above this is an exceedance.
        periods_s: candidate periods, s (a day and a week).
        cycles: earlier periods the baseline looks back over.
        phase_halfwidth_s: samples within this of the same phase count towards the baseline, s.
        min_acf: a period is strong when its rank autocorrelation is at least this and at least twice this above
            the rank autocorrelation at half the period (a cycle that carries this share of the variance).
        refresh_s: how often the period is re-estimated, s.
        min_std_rel: scale floor relative to |median|.
        min_std_abs: absolute scale floor, in the series' unit.
        step_floor: scale floor as a multiple of the series' median non-zero step; 0 disables it.
        poisson_floor: scale floor as a multiple of ``sqrt(|median|)`` (counts); 0 disables it.
        direction: which departures are exceedances: ``"both"``, ``"down"`` (below the usual value for the phase:
            lost traffic, an outage, a holiday) or ``"up"``.
    """

    threshold: float = 6.0
    periods_s: tuple[float, ...] = (86400.0, 604800.0)
    cycles: int = 4
    phase_halfwidth_s: float = 900.0
    min_acf: float = 0.25
    refresh_s: float = 6 * 3600.0
    min_std_rel: float = 0.005
    min_std_abs: float = 1e-9
    step_floor: float = 0.0
    poisson_floor: float = 0.0
    direction: str = "both"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.periods_s or not all(p > 0 for p in self.periods_s):
            raise InputError("detector phase_z", "periods_s", f"{self.periods_s} (allowed: periods > 0)")
        if not 2 <= self.cycles <= 52:
            raise InputError("detector phase_z", "cycles", f"{self.cycles} (allowed 2..52)")
        if not 0 < self.min_acf < 1:
            raise InputError("detector phase_z", "min_acf", f"{self.min_acf} (allowed 0 < min_acf < 1)")
        if self.direction not in DIRECTIONS:
            raise InputError("detector phase_z", "direction", f"{self.direction!r} (allowed: {', '.join(DIRECTIONS)})")
        for name in ("threshold", "refresh_s"):
            if not getattr(self, name) > 0:
                raise InputError("detector phase_z", name, f"{getattr(self, name)} (allowed > 0)")
        for name in ("phase_halfwidth_s", "min_std_rel", "min_std_abs", "step_floor", "poisson_floor"):
            if getattr(self, name) < 0:
                raise InputError("detector phase_z", name, f"{getattr(self, name)} (allowed >= 0)")


def autocorr(history: F64, lag: int) -> F64:
    """Pearson autocorrelation at ``lag`` per column of ``history`` (slots × entities, oldest first), over the
    pairs where both samples are present; NaN where fewer than ``lag`` pairs or no variance.
    """
    n = history.shape[1]
    if lag <= 0 or lag >= history.shape[0]:
        return np.full(n, np.nan)
    a, b = history[lag:], history[:-lag]
    both = np.isfinite(a) & np.isfinite(b)
    cnt = both.sum(axis=0)
    a, b = np.where(both, a, 0.0), np.where(both, b, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ma, mb = a.sum(axis=0) / cnt, b.sum(axis=0) / cnt
        da, db = np.where(both, a - ma, 0.0), np.where(both, b - mb, 0.0)
        r = (da * db).sum(axis=0) / np.sqrt((da * da).sum(axis=0) * (db * db).sum(axis=0))
    return np.where(cnt >= lag, r, np.nan)


def ranks(history: F64) -> F64:
    """Mid-ranks of each column's present samples (ties share their average rank; NaN stays NaN)."""
    out = np.full(history.shape, np.nan)
    for j in range(history.shape[1]):  # entities: a handful per file, and this runs once per refresh
        col = history[:, j]
        ok = np.isfinite(col)
        srt = np.sort(col[ok])
        out[ok, j] = 0.5 * (np.searchsorted(srt, col[ok], "left") + np.searchsorted(srt, col[ok], "right") + 1)
    return out


def strong_period(history: F64, lags: tuple[int, ...], min_acf: float) -> F64:
    """Per column of ``history`` (oldest first), the strongest lag in ``lags`` whose rank autocorrelation is at least
    ``min_acf`` and at least ``2·min_acf`` above that at half the lag; 0 where none is. See the module docstring.
    """
    y = ranks(history)
    best = np.zeros(history.shape[1])
    best_acf = np.full(history.shape[1], -np.inf)
    for lag in sorted(lags):
        r, r_half = autocorr(y, lag), autocorr(y, lag // 2)
        with np.errstate(invalid="ignore"):
            ok = (r >= min_acf) & (r - r_half >= 2.0 * min_acf) & (r > best_acf + PERIOD_MARGIN)
        best = np.where(ok, lag, best)
        best_acf = np.where(ok, r, best_acf)
    return best


def column_median(rows: F64) -> tuple[F64, NDArray[np.int64]]:
    """Median of each column's present samples and their count (NaN, 0 where none): a sort that puts NaN last,
    then the middle of the present ones; several times faster than ``np.nanmedian`` on small columns.
    """
    srt = np.sort(rows, axis=0)
    cnt = np.isfinite(rows).sum(axis=0)
    lo = np.take_along_axis(srt, np.maximum((cnt - 1) // 2, 0)[None, :], axis=0)[0]
    hi = np.take_along_axis(srt, np.maximum(cnt // 2, 0)[None, :], axis=0)[0]
    return np.where(cnt > 0, 0.5 * (lo + hi), np.nan), cnt


def slotted(ts: F64, values: F64, dt_s: float) -> F64:
    """``values`` (samples × entities) on a regular grid of ``dt_s`` from ``ts[0]``: a missing sample is a NaN
    row, so lags in rows are lags in time (at most :data:`MAX_HISTORY` × 4 rows, the latest kept).
    """
    slot = np.round((ts - ts[0]) / dt_s).astype(np.int64)
    n = int(slot[-1]) + 1 if slot.size else 0
    out = np.full((n, values.shape[1]), np.nan)
    out[slot] = values
    return out[-4 * MAX_HISTORY :]


def has_strong_cycle(ts: F64, values: F64, dt_s: float, params: PhaseZParams) -> bool:
    """Whether every series of a block has a strong period among ``params.periods_s`` over its whole span (the
    offline choice of :func:`~twinloop.ops.detect.profiles.detect_with_profile` between a profile's ordinary and
    periodic detectors; the detector itself re-estimates the period as it streams).
    """
    if ts.size < 2 or not dt_s > 0:
        return False
    lags = tuple(samples_for(s, dt_s, 2) for s in params.periods_s)
    return bool((strong_period(slotted(ts, values, dt_s), lags, params.min_acf) > 0).all())


@register
class PhaseZ(Detector[PhaseZParams]):
    """Robust z against the same phase of earlier periods, silent without a strong period; ``kind = "anomaly"``."""

    name = "phase_z"
    kind = "anomaly"
    params_cls = PhaseZParams

    def _alloc(self, n: int) -> None:
        self._hist: F64 | None = None
        self._pos = 0
        self._slot_ts = np.nan
        self._period = np.zeros(n)
        self._step_scale = np.zeros(n)

    def _on_rates(self) -> None:
        p = self.params
        dt = self.dt_s
        self._half = round(p.phase_halfwidth_s / dt)
        lags = tuple(samples_for(s, dt, 2) for s in p.periods_s)
        self._lags = tuple(lag for lag in lags if lag * int(p.cycles) + self._half + 1 <= MAX_HISTORY)
        w = max((lag * int(p.cycles) + self._half + 1 for lag in self._lags), default=1)
        if self._hist is None or self._hist.shape[0] != w:
            self._hist = np.full((w, self.n_entities), np.nan)
            self._pos = 0
            self._period = np.zeros(self.n_entities)
            self._since_refresh = 10**9
        self._refresh_n = samples_for(p.refresh_s, dt, 1)

    def _reset_entities(self, mask: BoolArr) -> None:
        # The history is kept: it is time-aligned, so an outage or a flap is a stretch of empty slots and the
        # same phase of earlier cycles is still the right baseline afterwards.
        pass

    def _ordered(self) -> F64:
        hist = self._hist
        assert hist is not None
        return np.roll(hist, -self._pos, axis=0)

    def _refresh(self) -> None:
        hist = self._ordered()
        self._period = strong_period(hist, self._lags, self.params.min_acf)
        if self.params.step_floor > 0:
            self._step_scale = self.params.step_floor * typical_step(hist)
        self._since_refresh = 0

    def _advance(self, ts: float) -> None:
        """Move to the slot of ``ts``, emptying the slots of any samples skipped since the last one."""
        hist = self._hist
        assert hist is not None
        skip = 0 if np.isnan(self._slot_ts) else max(0, round((ts - self._slot_ts) / self.dt_s) - 1)
        skip = min(skip, hist.shape[0])
        if skip:
            hist[(self._pos + np.arange(skip)) % hist.shape[0]] = np.nan
            self._pos = (self._pos + skip) % hist.shape[0]
            self._since_refresh += skip
        self._slot_ts = ts

    def _baseline(self, lag: int) -> tuple[F64, F64, F64]:
        """Median, robust scale and sample count at the same phase of the previous ``cycles`` periods of ``lag``."""
        hist = self._hist
        assert hist is not None
        cycles = np.arange(1, int(self.params.cycles) + 1)[:, None]
        back = (cycles * lag + np.arange(-self._half, self._half + 1)).ravel()
        rows = hist[(self._pos - back) % hist.shape[0]]
        med, cnt = column_median(rows)
        mad, _ = column_median(np.abs(rows - med))
        return med, 1.4826 * mad, cnt.astype(np.float64)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        p = self.params
        hist = self._hist
        assert hist is not None
        self._advance(ts)
        if self._since_refresh >= self._refresh_n:
            self._refresh()
        z = np.zeros(self.n_entities)
        exceed = np.zeros(self.n_entities, dtype=bool)
        need = 2 * (2 * self._half + 1)  # two cycles' worth of same-phase samples
        for lag in {int(v) for v in self._period[self._period > 0]}:
            on = self._period == lag
            med, mad, cnt = self._baseline(lag)
            floor = p.min_std_rel * np.abs(med) + p.min_std_abs + p.poisson_floor * np.sqrt(np.abs(med))
            scale = np.maximum(np.maximum(mad, floor), self._step_scale)
            with np.errstate(invalid="ignore", divide="ignore"):
                zl = np.clip((x - med) / scale, -Z_MAX, Z_MAX)
            use = on & valid & (cnt >= need) & np.isfinite(zl)
            z = np.where(use, zl, z)
            signed = np.abs(zl) if p.direction == "both" else (-zl if p.direction == "down" else zl)
            exceed |= use & (signed > p.threshold)
        hist[self._pos] = np.where(valid, x, np.nan)
        self._pos = (self._pos + 1) % hist.shape[0]
        self._since_refresh += 1
        return z, exceed


__all__ = [
    "DIRECTIONS",
    "MAX_HISTORY",
    "PERIOD_MARGIN",
    "PhaseZ",
    "PhaseZParams",
    "autocorr",
    "column_median",
    "has_strong_cycle",
    "ranks",
    "slotted",
    "strong_period",
]
