"""Per-minute rollups: partial aggregates written with every batch so hour-long queries read 60× fewer rows.

For each ``(entity, field, minute)`` in a batch the store also writes one row of partial aggregates
``(bucket, entity_id, field_id, min, max, sum, count, first_ts, last_ts, last)`` in the same transaction
as the samples. A minute split across batches simply has several partial rows; queries merge them
(``min(min)``, ``max(max)``, ``sum(sum) / sum(count)``, ``arg_max(last, last_ts)``), so rollups are exact,
not approximations. Queries read rollups for the whole minutes inside a time range and raw samples
only for the partial minutes at its edges.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

BUCKET_S = 60.0

ROLLUP_DDL = (
    "CREATE TABLE IF NOT EXISTS rollup_1m(bucket DOUBLE, entity_id INTEGER, field_id SMALLINT, min DOUBLE, "
    "max DOUBLE, sum DOUBLE, count BIGINT, first_ts DOUBLE, last_ts DOUBLE, last DOUBLE);"
)

ROLLUP_SCHEMA = pa.schema(
    [
        ("bucket", pa.float64()),
        ("entity_id", pa.int32()),
        ("field_id", pa.int16()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("sum", pa.float64()),
        ("count", pa.int64()),
        ("first_ts", pa.float64()),
        ("last_ts", pa.float64()),
        ("last", pa.float64()),
    ]
)


def rollup(
    ts: NDArray[np.float64], entity_id: NDArray[np.int32], field_id: NDArray[np.int16], value: NDArray[np.float64]
) -> pa.Table:
    """Partial per-minute aggregates of a batch (vectorized; no loop over rows or groups)."""
    minute = np.floor(ts / BUCKET_S).astype(np.int64)
    m0 = int(minute.min())
    n_m = int(minute.max()) - m0 + 1
    n_f = int(field_id.max()) + 1
    key = (entity_id.astype(np.int64) * n_f + field_id) * n_m + (minute - m0)
    span = (int(entity_id.max()) + 1) * n_f * n_m
    if span <= 4 * len(key):
        # Dense key space (the usual case: a batch covers a minute or two): index directly, no sort.
        inverse, n_groups = key, span
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        n_groups = len(uniq)
    count = np.bincount(inverse, minlength=n_groups)
    total = np.bincount(inverse, weights=value, minlength=n_groups)
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    first = np.full(n_groups, np.inf)
    last_ts = np.full(n_groups, -np.inf)
    # Writers that bypass the Validator may store NaN values. DuckDB orders NaN above every number (min skips it
    # unless the group is all NaN, max is NaN once one is) and the retention compaction recomputes rows in SQL,
    # so the rollup follows DuckDB: fmin/fmax skip NaN, then the groups holding NaN are set as DuckDB has them.
    np.fmin.at(lo, inverse, value)
    np.fmax.at(hi, inverse, value)
    nans = np.bincount(inverse, weights=np.isnan(value), minlength=n_groups)
    hi[nans > 0] = np.nan
    lo[(nans == count) & (count > 0)] = np.nan
    np.minimum.at(first, inverse, ts)
    np.maximum.at(last_ts, inverse, ts)
    last = np.zeros(n_groups)
    at_last = ts == last_ts[inverse]
    last[inverse[at_last]] = value[at_last]
    present = np.flatnonzero(count)
    # Recover (entity, field, minute) of each group from one member row.
    member = np.empty(n_groups, dtype=np.int64)
    member[inverse] = np.arange(len(key))
    rows = member[present]
    return pa.Table.from_arrays(
        [
            pa.array(minute[rows].astype(np.float64) * BUCKET_S),
            pa.array(entity_id[rows], pa.int32()),
            pa.array(field_id[rows], pa.int16()),
            pa.array(lo[present]),
            pa.array(hi[present]),
            pa.array(total[present]),
            pa.array(count[present].astype(np.int64)),
            pa.array(first[present]),
            pa.array(last_ts[present]),
            pa.array(last[present]),
        ],
        schema=ROLLUP_SCHEMA,
    )


def full_minutes(since_s: float | None, until_s: float | None) -> tuple[float | None, float | None]:
    """The whole-minute span ``[lo, hi)`` inside ``[since_s, until_s)`` (``None`` = unbounded)."""
    lo = None if since_s is None else float(np.ceil(since_s / BUCKET_S) * BUCKET_S)
    hi = None if until_s is None else float(np.floor(until_s / BUCKET_S) * BUCKET_S)
    return lo, hi
