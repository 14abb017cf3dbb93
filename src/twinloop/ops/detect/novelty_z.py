"""Robust z-score that stays quiet on excursions the series has already shown: novelty against its own record.

A median/MAD z over a day flags every departure from the day's typical level, so a bursty instance (an idle VM
that runs a 15-20 min job to 40-90 % several times a day, NAB's ``ec2_cpu_utilization_fe7f93``) pages on every
burst. What makes such a burst routine is that the series has *held that level for that long* before, recently.
This detector is :mod:`~twinloop.ops.detect.ewma_zscore`'s robust z (all its parameters, same meaning), with one
more condition for an exceedance: the excursion must be *novel*.

For each hold duration ``d`` (1, 2, 4, ... samples up to ``max_hold_s``), the level held over the last ``d``
samples is the minimum of those samples (upwards; the maximum downwards). The *record* for ``d`` is the highest
such level anywhere in the last ``record_window_s`` of data (the lowest, downwards), recomputed every
``refresh_s`` from a buffer of good samples. The sample is novel when, for some ``d``, its held level beats the
record for ``d`` by more than ``novelty_margin`` robust scales (the z's own scale, floors included). So

* a burst as high and as long as one in the record window is quiet, however large its z;
* a burst that is higher than any before, or *lasts* longer at its level than any before, alarms (a 95 min
  plateau at 55 % on an instance whose jobs take 20 min: its 8-sample held level has no precedent);
* a level shift beyond the window's range alarms as with the plain robust z, and so does a drop below the
  lowest level the series held (an instance gone idle that never idles).

The score is the robust z (as reported by ``ewma_zscore``) where the sample is novel and 0 where it is not; the
gate only removes exceedances. With ``record_window_s`` of about a week, the routine of a weekday batch job
survives a quiet weekend. The record remembers a failure too: the same excursion again within the window does
not page twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.base import F64, BoolArr, register, samples_for
from twinloop.ops.detect.ewma_zscore import EwmaZScore, EwmaZScoreParams


@dataclass(frozen=True)
class NoveltyZParams(EwmaZScoreParams):
    """Parameters of the novelty-gated robust z, on top of :class:`~.ewma_zscore.EwmaZScoreParams`.

    Attributes:
        record_window_s: how far back the record of held levels reaches, s (at most :data:`MAX_RECORD_SAMPLES`
            samples). The stock values (a 10 min median window, a 1 h record, holds up to 10 min) suit ~1 s
            telemetry like the other stock parameters; the utilisation profile uses a day and a week.
        max_hold_s: longest hold duration compared, s (durations are 1, 2, 4, ... samples up to this).
        novelty_margin: a held level must beat its record by more than this many robust scales.
    """

    robust: bool = True
    window_s: float = 600.0
    record_window_s: float = 3600.0
    max_hold_s: float = 600.0
    novelty_margin: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.robust:
            raise InputError("detector novelty_z", "robust", "False (allowed: True, the z is median/MAD)")
        for name in ("record_window_s", "max_hold_s"):
            if not getattr(self, name) > 0:
                raise InputError("detector novelty_z", name, f"{getattr(self, name)} (allowed > 0)")
        if self.novelty_margin < 0:
            raise InputError("detector novelty_z", "novelty_margin", f"{self.novelty_margin} (allowed >= 0)")


#: Most samples the record buffer keeps per entity (a week at 5 min is 2,016; a week of 1 s telemetry would be
#: 604,800, so the record then reaches back as many samples as this allows).
MAX_RECORD_SAMPLES = 10_000


def hold_levels(newest_first: F64, holds: tuple[int, ...]) -> tuple[F64, F64]:
    """Levels held over the last ``d`` samples, for each ``d`` in ``holds``.

    Args:
        newest_first: (samples, entities), newest sample first; NaN = no sample (ignored).
        holds: durations in samples, each at most ``len(newest_first)``.

    Returns:
        (up, down), each (len(holds), entities): the minimum (up) and maximum (down) of the last ``d`` samples;
        NaN where those samples hold no value.
    """
    idx = np.asarray(holds) - 1
    return np.fmin.accumulate(newest_first, axis=0)[idx], np.fmax.accumulate(newest_first, axis=0)[idx]


def _nan_to(x: F64, fill: float) -> F64:
    return np.where(np.isnan(x), fill, x)


def records(history: F64, holds: tuple[int, ...]) -> tuple[F64, F64]:
    """The record held level per duration in ``history`` (samples × entities, oldest first, NaN = none).

    Args:
        history: the samples, oldest first.
        holds: increasing durations in samples.

    Returns:
        (up, down), each (len(holds), entities): the highest minimum (up) and the lowest maximum (down) over any
        ``d`` consecutive samples (a stretch with a NaN counts by its other samples); ``-inf`` / ``+inf`` where
        the history holds no such stretch, so every level is novel.
    """
    up = np.full((len(holds), history.shape[1]), -np.inf)
    down = np.full((len(holds), history.shape[1]), np.inf)
    lo, hi, span = history, history, 1
    for i, d in enumerate(holds):
        # Doubling: the rolling min over s + k samples (k <= s) is the min of two rolling mins over s, k apart.
        while span < d and lo.shape[0] > 0:
            k = min(span, d - span)
            lo, hi = np.fmin(lo[k:], lo[:-k]), np.fmax(hi[k:], hi[:-k])
            span += k
        if span == d and lo.shape[0] > 0:
            up[i] = _nan_to(np.fmax.reduce(lo, axis=0), -np.inf)
            down[i] = _nan_to(np.fmin.reduce(hi, axis=0), np.inf)
    return up, down


@register
class NoveltyZ(EwmaZScore):
    """Robust z per entity; an exceedance only where a held level beats the record; ``kind = "anomaly"``."""

    name = "novelty_z"
    kind = "anomaly"
    params_cls = NoveltyZParams

    def _alloc(self, n: int) -> None:
        super()._alloc(n)
        self._rec: F64 | None = None
        self._rec_pos = np.zeros(n, dtype=np.int64)
        self._holds: tuple[int, ...] = ()
        self._latched = np.zeros(n, dtype=bool)

    def _on_rates(self) -> None:
        super()._on_rates()
        p = self.params
        assert isinstance(p, NoveltyZParams)
        self._rec_n = min(samples_for(p.record_window_s, self.dt_s, 2), MAX_RECORD_SAMPLES)
        longest = min(samples_for(p.max_hold_s, self.dt_s, 1), self._rec_n)
        holds = tuple(1 << i for i in range(longest.bit_length()))
        w = self._rec_n + longest  # the record, then the latest holds (which it must not see)
        if self._rec is None or self._rec.shape[0] != w:
            self._rec = np.full((w, self.n_entities), np.nan)
            self._rec_pos = np.zeros(self.n_entities, dtype=np.int64)
        if self._holds != holds:
            # No record for these durations yet: every level is novel until the next refresh computes one.
            self._up = np.full((len(holds), self.n_entities), -np.inf)
            self._down = np.full((len(holds), self.n_entities), np.inf)
            self._since_refresh = 10**9
        self._holds = holds

    def _reset_entities(self, mask: BoolArr) -> None:
        super()._reset_entities(mask)
        if self._rec is not None:
            self._rec[:, mask] = np.nan
            self._rec_pos[mask] = 0
            self._up[:, mask] = -np.inf
            self._down[:, mask] = np.inf
        self._latched[mask] = False

    def _ordered(self, count: int, newest_first: bool) -> F64:
        """The last ``count`` samples of the record buffer per entity, in time order (or newest first)."""
        rec = self._rec
        assert rec is not None
        w = rec.shape[0]
        back = np.arange(1, count + 1)[:, None] if newest_first else np.arange(count, 0, -1)[:, None]
        rows = (self._rec_pos[None, :] - back) % w
        return np.take_along_axis(rec, rows, axis=0)

    def _refresh(self) -> None:
        super()._refresh()
        if self._rec is not None:
            # The record stops where the longest hold begins: a drift or a long excursion must not become its
            # own precedent while it is still under way.
            past = self._ordered(self._rec.shape[0], newest_first=False)[: self._rec_n]
            self._up, self._down = records(past, self._holds)

    def _step(self, ts: float, x: F64, valid: BoolArr) -> tuple[F64, BoolArr]:
        z, exceed = super()._step(ts, x, valid)  # refreshes the records (before this sample) when due
        rec = self._rec
        assert rec is not None
        idx = np.flatnonzero(valid)
        rec[self._rec_pos[idx], idx] = x[idx]
        self._rec_pos[idx] = (self._rec_pos[idx] + 1) % rec.shape[0]
        up, down = hold_levels(self._ordered(self._holds[-1], newest_first=True), self._holds)
        p = self.params
        assert isinstance(p, NoveltyZParams)
        margin = p.novelty_margin * np.maximum(self._scale, self._floor(self._mean))
        with np.errstate(invalid="ignore"):
            novel = ((up - self._up > margin) | (self._down - down > margin)).any(axis=0)
        # Latched: an excursion that alarmed stays novel while its z exceedance lasts, so it is reported once even
        # where its held levels dip under the record for a while. Only after the alarm: before it, persistence
        # asks for novel samples in a row (one record-breaking sample in a routine burst is not enough).
        novel = valid & (novel | (self._latched & exceed))
        alarmed = exceed & novel & (self._run + 1 >= self._k)
        self._latched = np.where(valid, alarmed, self._latched)
        return np.where(novel, z, 0.0), exceed & novel
