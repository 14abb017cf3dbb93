"""Validate frames before they are stored: bad timestamps, unknown fields, NaN/inf, out-of-range, duplicates, disorder.

Timestamps are validated like values: finite, not before the epoch, and not further in the future than
``max_future_s`` past the wall clock (a Prometheus timestamp of 1e23 ms, a ``nan`` in a CSV); such rows are
``bad_timestamp`` and dropped. Readers of a store also skip times outside ``[0, MAX_SANE_TS_S]``, for stores
written before this check.

Each rejected row is counted in the :class:`~twinloop.telemetry.report.IngestReport` with an example that
names the source and line; the valid rows of the same frame still go through. Out-of-order rows are
counted but kept (the store sorts at query time); exact duplicates of ``(entity, field, ts)`` are dropped,
keeping the first. The validator remembers the last timestamp per ``(entity, field)`` across frames, so
disorder and duplicates are found across batch boundaries too. All checks are vectorized.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numpy.typing import NDArray

from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport

#: No stored timestamp is read beyond this (2100-01-01T00:00:00Z, epoch s).
MAX_SANE_TS_S = 4_102_444_800.0
#: Default tolerance for timestamps ahead of the wall clock (clock skew, a twin run whose clock starts ahead).
DEFAULT_MAX_FUTURE_S = 366 * 86_400.0
#: Series key = entity id x this + field id (field ids stay far below 2**31; entity ids below 2**32).
_FIELD_SPAN = np.int64(2**31)


class Validator:
    """Stateful row validator (one per ingest run).

    Args:
        max_future_s: how far past the wall clock a timestamp may lie, s.
        now_s: the wall clock to compare with (``None`` = ``time.time()`` at each check; tests pin it).
    """

    def __init__(self, max_future_s: float = DEFAULT_MAX_FUTURE_S, now_s: float | None = None) -> None:
        if not math.isfinite(max_future_s) or max_future_s < 0:
            raise ValueError(f"max_future_s must be finite and >= 0, got {max_future_s!r}")
        self.max_future_s = max_future_s
        self.now_s = now_s
        self._entity_ids: dict[str, int] = {}
        self._field_ids: dict[str, int] = {}
        # Last timestamp per (entity, field) series, sparse: sorted int64 keys and their values. A dense
        # entity x field matrix cost 12.7 GB on a 1.2 MB CSV of distinct entities and fields (issue 19).
        self._keys = np.empty(0, dtype=np.int64)
        self._last = np.empty(0, dtype=np.float64)

    def _gids(self, names: tuple[str, ...], table: dict[str, int]) -> NDArray[np.int64]:
        return np.array([table.setdefault(n, len(table)) for n in names], dtype=np.int64)

    def _lookup(self, key: NDArray[np.int64]) -> NDArray[np.float64]:
        """Last stored timestamp per series key (-inf for a series not seen yet)."""
        idx = np.searchsorted(self._keys, key)
        idx_c = np.minimum(idx, max(len(self._keys) - 1, 0))
        found = (idx < len(self._keys)) & (self._keys[idx_c] == key) if len(self._keys) else np.zeros(len(key), bool)
        return np.where(found, self._last[idx_c] if len(self._keys) else -np.inf, -np.inf)

    def _update(self, key: NDArray[np.int64], ts: NDArray[np.float64]) -> None:
        """Raise each series' last timestamp to the newest of ``ts`` (vectorized merge of sorted keys)."""
        if not len(key):
            return
        order = np.lexsort((ts, key))
        k_s, t_s = key[order], ts[order]
        last = np.ones(len(k_s), dtype=bool)
        last[:-1] = k_s[1:] != k_s[:-1]
        u_key, u_ts = k_s[last], t_s[last]
        u_ts = np.maximum(u_ts, self._lookup(u_key))
        keep_old = ~np.isin(self._keys, u_key, assume_unique=True)
        keys = np.concatenate([self._keys[keep_old], u_key])
        vals = np.concatenate([self._last[keep_old], u_ts])
        srt = np.argsort(keys, kind="stable")
        self._keys, self._last = keys[srt], vals[srt]

    def _report(self, report: IngestReport, frame: Frame, kind: str, bad: NDArray[np.bool_], what: str) -> None:
        n = int(bad.sum())
        if not n:
            return
        rows = np.flatnonzero(bad)[:5]
        for r in rows:
            name = frame.fields[frame.field_idx[r]]
            ent, val, ts = frame.entities[frame.entity_idx[r]], float(frame.value[r]), float(frame.ts_s[r])
            msg = f"{ent} {name}={val!r} at ts={ts!r}: {what}"
            report.add(kind, frame.source or "frame", frame.line_of(int(r)), msg, count=1)
        if n > len(rows):
            report.problems[kind] += n - len(rows)

    def check(self, frame: Frame, report: IngestReport) -> Frame:
        """The valid rows of ``frame`` (field aliases resolved); problems are added to ``report``."""
        report.rows_in += len(frame)
        if not len(frame):
            return frame
        ts = frame.ts_s
        now = time.time() if self.now_s is None else self.now_s
        upper = min(now + self.max_future_s, MAX_SANE_TS_S)
        with np.errstate(invalid="ignore"):
            bad_ts = ~(np.isfinite(ts) & (ts >= 0.0) & (ts <= upper))
        if bad_ts.any():
            self._report(report, frame, "bad_timestamp", bad_ts, f"timestamp not finite or outside [0, {upper:.0f}] "
                         f"(epoch s; at most {self.max_future_s:g} s ahead of the clock)")  # fmt: skip
            frame = frame.take(~bad_ts)
            if not len(frame):
                return frame
        # unknown fields / aliases
        canon = [canonical_field(f) for f in frame.fields]
        known = np.array([c is not None for c in canon], dtype=bool)
        frame = frame.with_fields(tuple(c if c is not None else f for c, f in zip(canon, frame.fields, strict=True)))
        keep = known[frame.field_idx]
        self._report(report, frame, "unknown_field", ~keep, "unknown field (see docs/telemetry-fields.md)")

        v = frame.value
        nan = np.isnan(v) & keep
        self._report(report, frame, "nan", nan, "value is NaN")
        inf = np.isinf(v) & keep
        self._report(report, frame, "inf", inf, "value is infinite")
        keep &= ~(nan | inf)

        lo = np.array([_bound(f, "min_value", -np.inf) for f in frame.fields])
        hi = np.array([_bound(f, "max_value", np.inf) for f in frame.fields])
        row_lo, row_hi = lo[frame.field_idx], hi[frame.field_idx]
        neg = keep & (v < row_lo) & (row_lo == 0.0)
        self._report(report, frame, "negative", neg, "negative value for a non-negative field")
        oor = keep & ~neg & ((v < row_lo) | (v > row_hi))
        self._report(report, frame, "out_of_range", oor, "outside the field's valid range")
        keep &= ~(neg | oor)
        frame = frame.take(keep)
        if not len(frame):
            return frame
        return self._order(frame, report)

    def _order(self, frame: Frame, report: IngestReport) -> Frame:
        e_g = self._gids(frame.entities, self._entity_ids)[frame.entity_idx]
        f_g = self._gids(frame.fields, self._field_ids)[frame.field_idx]
        key = e_g * _FIELD_SPAN + f_g
        ts = frame.ts_s
        prev = self._lookup(key)
        # Stable sort by key keeps arrival order within each (entity, field) series.
        order = np.argsort(key, kind="stable")
        k_s, t_s = key[order], ts[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = k_s[1:] != k_s[:-1]
        # Running max of earlier timestamps within each series (offset trick: series never mix).
        t0 = float(t_s.min())
        span = float(t_s.max()) - t0 + 1.0
        grp = np.cumsum(first) - 1
        shifted = (t_s - t0) + grp * span
        cummax = np.maximum.accumulate(shifted)
        prior_max = np.empty_like(t_s)
        prior_max[1:] = cummax[:-1] - grp[1:] * span + t0
        prior_max[first] = -np.inf
        prior_max = np.maximum(prior_max, prev[order])
        # Exact duplicates: same series and timestamp as an earlier row (in this frame or the last stored).
        dup = np.zeros(len(order), dtype=bool)
        if (t_s[~first] <= prior_max[~first]).any():
            # Only when a series does not strictly increase inside the frame can it hold repeats.
            srt = np.lexsort((np.arange(len(order)), t_s, k_s))
            dup_sorted = np.zeros(len(order), dtype=bool)
            dup_sorted[1:] = (k_s[srt][1:] == k_s[srt][:-1]) & (t_s[srt][1:] == t_s[srt][:-1])
            dup[srt] = dup_sorted
        dup |= t_s == prev[order]
        late = ~dup & (t_s < prior_max)
        dup_rows = np.zeros(len(frame), dtype=bool)
        dup_rows[order] = dup
        late_rows = np.zeros(len(frame), dtype=bool)
        late_rows[order] = late
        self._report(report, frame, "duplicate", dup_rows, "duplicate timestamp for this entity and field")
        self._report(report, frame, "out_of_order", late_rows, "timestamp earlier than a previous sample (kept)")
        self._update(key[~dup_rows], ts[~dup_rows])
        return frame.take(~dup_rows) if dup_rows.any() else frame


def _bound(field_name: str, attr: str, default: float) -> float:
    spec = FIELD_BY_NAME.get(field_name)
    val = getattr(spec, attr) if spec is not None else None
    return default if val is None else float(val)
