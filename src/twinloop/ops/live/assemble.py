"""Long-form telemetry frames in, one per-GPU sample per source tick out: alignment and data-quality checks.

A source hands out long rows ``(ts, entity, field, value)`` in whatever batches it reads. The loop wants one
array per field over every GPU at each tick. :class:`SampleAssembler` buckets rows by tick: a row belongs to the
tick ``round((ts - t0) / cadence_s)``, so the rows nvidia-smi writes a few milliseconds apart for each GPU of one
sweep land in the same sample (rows within ``cadence_s / 2`` of a tick are aligned to it). A tick is emitted once
a row of a later tick has arrived (one tick of lateness is allowed), at the tick's nominal time.

What the loop must not be fooled by, and what it says instead (``Sample.warnings``; rows are still handed to
the store unchanged by the caller, so nothing is lost):

* duplicated rows (same tick, GPU and field): the last one wins; counted;
* rows that arrive behind a later row but before their tick is emitted: put back in order; counted;
* rows older than a tick already emitted (out of order, or a very late GPU): kept out of the loop; counted;
* NaN/inf values: they stay NaN (the detectors hold their state over NaN); counted as a NaN burst;
* a gap of more than ``gap_factor`` ticks between samples: named with its length;
* rows from entities that are not GPUs of the topology (node or facility series): ignored here.

Everything here is vectorized over rows; the only Python loop is over the ticks present in a batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.validate import MAX_SANE_TS_S

F64 = NDArray[np.float64]


@dataclass
class QualityCounts:
    """Data-quality problems seen so far (rows), for the run's summary."""

    duplicates: int = 0
    out_of_order: int = 0
    reordered: int = 0
    nan_values: int = 0
    gaps: int = 0
    unknown_entity_rows: int = 0
    ticks: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict."""
        return dict(self.__dict__)


@dataclass
class _Tick:
    ts_max: float
    values: dict[str, F64] = field(default_factory=dict)
    dup: int = 0
    nan: int = 0


class SampleAssembler:
    """Buckets rows into per-GPU arrays, one per tick.

    Args:
        gpu_ids: the GPU entity ids, in the order of the arrays.
        cadence_s: the source's sampling period, s (ticks are this far apart).
        gap_factor: a step longer than this many ticks is reported as a gap.
        entity_map: source entity id → GPU id (when the topology renamed the source's ids).
    """

    def __init__(
        self,
        gpu_ids: Sequence[str],
        cadence_s: float,
        gap_factor: float = 3.0,
        entity_map: Mapping[str, str] | None = None,
    ) -> None:
        if not cadence_s > 0:
            raise ValueError(f"cadence_s must be > 0, got {cadence_s}")
        self.gpu_ids = tuple(gpu_ids)
        self.n = len(self.gpu_ids)
        self.cadence_s = float(cadence_s)
        self.gap_factor = gap_factor
        self._pos = {g: i for i, g in enumerate(self.gpu_ids)}
        for src, dst in (entity_map or {}).items():
            if dst in self._pos:
                self._pos[src] = self._pos[dst]
        self.t0: float | None = None
        self._ticks: dict[int, _Tick] = {}
        self._emitted_upto = -(2**62)  # highest tick emitted
        self._last_emitted_ts: float | None = None
        self.counts = QualityCounts()
        self._late: int = 0
        self._reordered = 0
        self._lut_key: tuple[str, ...] | None = None
        self._lut = np.zeros(0, dtype=np.int64)
        self._unknown: int = 0

    def _key(self, ts: F64) -> NDArray[np.int64]:
        assert self.t0 is not None
        return np.floor((ts - self.t0) / self.cadence_s + 0.5).astype(np.int64)

    def add(self, frame: Frame) -> None:
        """Take a batch of rows (any number of ticks, in any order)."""
        if not len(frame):
            return
        if frame.entities != self._lut_key:  # sources that poll the same series repeat their entity tuple
            self._lut_key = frame.entities
            self._lut = np.array([self._pos.get(e, -1) for e in frame.entities], dtype=np.int64)
        pos_of_entity = self._lut
        pos = pos_of_entity[frame.entity_idx] if pos_of_entity.size else np.zeros(0, dtype=np.int64)
        known = pos >= 0
        self._unknown += int((~known).sum())
        if not known.any():
            return
        ts = frame.ts_s[known]
        ok_ts = (ts >= 0.0) & (ts <= MAX_SANE_TS_S)  # NaN, inf and absurd times (they would overflow the tick key)
        pos, ts = pos[known][ok_ts], ts[ok_ts]
        fidx = frame.field_idx[known][ok_ts]
        value = frame.value[known][ok_ts]
        if not ts.size:
            return
        if self.t0 is None:
            self.t0 = float(ts.min())
        key = self._key(ts)
        late = key <= self._emitted_upto
        # Rows behind an earlier row of the same GPU and field, in arrival order: put back in order (and said so).
        # Sources may send a batch field by field (dense frames), so order is judged per series, not per batch.
        series = pos * max(len(frame.fields), 1) + fidx
        by_series = np.argsort(series, kind="stable")
        span = int(key.max() - key.min()) + 1
        ranked = series[by_series].astype(np.int64) * span + (key[by_series] - key.min())
        behind = np.zeros(key.size, dtype=bool)
        behind[by_series[1:]] = ranked[1:] < np.maximum.accumulate(ranked)[:-1]
        self._reordered += int((behind & ~late).sum())
        self._late += int(late.sum())
        # Within a batch, later rows override earlier ones: sort stably by time so "last" means newest.
        order = np.argsort(ts, kind="stable")
        order = order[~late[order]]
        key, pos, fidx, value, ts = key[order], pos[order], fidx[order], value[order], ts[order]
        for k in np.unique(key).tolist():
            sel = key == k
            tick = self._ticks.get(k)
            if tick is None:
                tick = self._ticks[k] = _Tick(float(ts[sel].max()))
            else:
                tick.ts_max = max(tick.ts_max, float(ts[sel].max()))
            f_sel, p_sel, v_sel = fidx[sel], pos[sel], value[sel]
            for fi in np.unique(f_sel).tolist():
                m = f_sel == fi
                name = frame.fields[fi]
                arr = tick.values.get(name)
                if arr is None:
                    arr = tick.values[name] = np.full(self.n, np.nan)
                    seen = np.zeros(self.n, dtype=bool)
                else:
                    seen = ~np.isnan(arr)
                p, v = p_sel[m], v_sel[m]
                # duplicates: a GPU already set in this tick, or twice in this batch (counted, O(n_gpus))
                hits = np.bincount(p, minlength=self.n)
                tick.dup += int(p.size - np.count_nonzero(hits)) + int((seen & (hits > 0)).sum())
                finite = np.isfinite(v)
                tick.nan += int((~finite).sum())
                arr[p] = np.where(finite, v, np.nan)  # fancy assignment: the last (newest) row per GPU wins

    def ready(self, final: bool = False) -> list[tuple[float, dict[str, F64], tuple[str, ...]]]:
        """Ticks complete now (all of them when ``final``): ``(ts, fields, warnings)`` in time order."""
        if not self._ticks:
            return self._drain_only_warnings()
        keys = sorted(self._ticks)
        upto = keys[-1] if final else keys[-1] - 1
        out = []
        for k in keys:
            if k > upto:
                break
            tick = self._ticks.pop(k)
            assert self.t0 is not None
            ts = self.t0 + k * self.cadence_s
            warnings = []
            if self._last_emitted_ts is not None and ts - self._last_emitted_ts > self.gap_factor * self.cadence_s:
                self.counts.gaps += 1
                warnings.append(f"gap: no data for {ts - self._last_emitted_ts:.3g} s before this sample")
            if tick.dup:
                self.counts.duplicates += tick.dup
                warnings.append(f"{tick.dup} duplicated row(s) (a GPU and field twice in one tick): the newest kept")
            if tick.nan:
                self.counts.nan_values += tick.nan
                warnings.append(f"{tick.nan} NaN/inf value(s): treated as missing")
            if self._reordered:
                self.counts.reordered += self._reordered
                warnings.append(f"{self._reordered} row(s) arrived out of time order: put back in order")
                self._reordered = 0
            if self._late:
                self.counts.out_of_order += self._late
                warnings.append(f"{self._late} row(s) older than an emitted sample: stored, not fed to the loop")
                self._late = 0
            if self._unknown:
                self.counts.unknown_entity_rows += self._unknown
                self._unknown = 0
            self.counts.ticks += 1
            self._emitted_upto = k
            self._last_emitted_ts = ts
            out.append((ts, tick.values, tuple(warnings)))
        return out

    def _drain_only_warnings(self) -> list[tuple[float, dict[str, F64], tuple[str, ...]]]:
        if self._unknown:
            self.counts.unknown_entity_rows += self._unknown
            self._unknown = 0
        return []

    def take_late_warning(self) -> str | None:
        """A warning for late rows that arrived with no tick to carry it (counted), or None."""
        if not self._late:
            return None
        n, self._late = self._late, 0
        self.counts.out_of_order += n
        return f"{n} row(s) older than an emitted sample: stored, not fed to the loop"
