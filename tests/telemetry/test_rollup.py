"""The per-minute rollup of a batch equals DuckDB's own aggregates over the same rows, NaN and infinities included.

Writers that bypass the Validator (the live watcher, replays) may store NaN values. DuckDB orders NaN above
every number (``min`` skips it unless all are NaN, ``max`` is NaN once one is), and the retention compaction
recomputes rollup rows in SQL, so the NumPy rollup must follow the same rules, without a RuntimeWarning.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.store.rollup import rollup

VALUES = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf]))


def _duckdb_rollup(batch: pa.Table) -> list[tuple[object, ...]]:
    con = duckdb.connect()
    con.register("batch", batch)
    rows: list[tuple[object, ...]] = con.execute(
        "SELECT floor(ts / 60) * 60 AS bucket, entity_id, field_id, min(value), max(value), sum(value), count(*), "
        "min(ts), max(ts), arg_max(value, ts) FROM batch GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    return rows


@pytest.mark.filterwarnings("error::RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), VALUES), min_size=1, max_size=40),
    minutes=st.integers(1, 3),
)
def test_rollup_equals_duckdb_aggregates(rows: list[tuple[int, int, float]], minutes: int) -> None:
    n = len(rows)
    ts = 1.7e9 // 60 * 60 + np.linspace(0.0, 60.0 * minutes - 1.0, n)  # distinct: no ties for "last"
    entity_id = np.array([r[0] for r in rows], dtype=np.int32)
    field_id = np.array([r[1] for r in rows], dtype=np.int16)
    value = np.array([r[2] for r in rows], dtype=np.float64)
    got = rollup(ts, entity_id, field_id, value).sort_by([("bucket", "ascending"), ("entity_id", "ascending"),
                                                          ("field_id", "ascending")])  # fmt: skip
    batch = pa.table({"ts": ts, "entity_id": entity_id, "field_id": field_id, "value": value})
    want = _duckdb_rollup(batch)
    assert got.num_rows == len(want)
    for i, name in enumerate(got.column_names):
        column = np.array(got.column(name).to_pylist(), dtype=np.float64)
        expected = np.array([w[i] for w in want], dtype=np.float64)
        if name == "sum":  # summation order differs; inf - inf is NaN in both
            np.testing.assert_allclose(column, expected, rtol=1e-9, atol=1e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(column, expected, err_msg=name)
