"""Frame: dense/long construction, Arrow round trip, concat, dense view."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.frame import LONG_SCHEMA, Frame


def test_from_dense_is_field_major_and_complete() -> None:
    ents = ["a/0", "a/1", "a/2"]
    ts = np.array([10.0, 11.0])
    power = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    temp = power + 100
    f = Frame.from_dense(ts, ents, {"DCGM_FI_DEV_POWER_USAGE": power, "DCGM_FI_DEV_GPU_TEMP": temp})
    assert len(f) == 12
    assert f.field_names()[:6].tolist() == ["DCGM_FI_DEV_POWER_USAGE"] * 6
    t_back, e_back, grid = f.to_dense("DCGM_FI_DEV_GPU_TEMP")
    assert t_back.tolist() == [10.0, 11.0] and e_back == tuple(ents)
    assert np.array_equal(grid, temp)


def test_arrow_round_trip_keeps_labels_and_schema() -> None:
    f = Frame.from_long([1.0, 2.0], ["x/gpu0", "x/gpu1"], ["DCGM_FI_DEV_GPU_TEMP"] * 2, [40.0, 41.0],
                        labels={"x/gpu0": {"job": "j1"}})  # fmt: skip
    table = f.to_arrow()
    assert table.schema.equals(LONG_SCHEMA)
    back = Frame.from_arrow(table)
    assert back.labels == {"x/gpu0": {"job": "j1"}}
    assert back.entity_names().tolist() == ["x/gpu0", "x/gpu1"] and back.value.tolist() == [40.0, 41.0]


def test_from_arrow_accepts_plain_strings_and_timestamps() -> None:
    table = pa.table({
        "ts": pa.array([0, 1_500], pa.timestamp("ms", tz="UTC")),
        "entity": ["n/gpu0", "n/gpu0"], "field": ["DCGM_FI_DEV_SM_CLOCK"] * 2, "value": [1.0, 2.0],
    })  # fmt: skip
    f = Frame.from_arrow(table)
    assert f.ts_s.tolist() == [0.0, 1.5]


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.floats(0, 1e10),
            st.sampled_from(["a/1", "a/2", "b/1"]),
            st.sampled_from(["F1", "F2"]),
            st.floats(allow_nan=False),
        ),
        max_size=30,
    ),
    split=st.integers(0, 30),
)
def test_concat_and_arrow_preserve_rows(rows: list[tuple[float, str, str, float]], split: int) -> None:
    def frame(part: list[tuple[float, str, str, float]]) -> Frame:
        if not part:
            return Frame.empty()
        ts, e, f, v = zip(*part, strict=True)
        return Frame.from_long(ts, e, f, v)

    joined = Frame.concat([frame(rows[:split]), frame(rows[split:])])
    back = Frame.from_arrow(joined.to_arrow()) if len(joined) else joined
    got = list(zip(back.ts_s.tolist(), back.entity_names().tolist(), back.field_names().tolist(),
                   back.value.tolist(), strict=True))  # fmt: skip
    assert got == rows
