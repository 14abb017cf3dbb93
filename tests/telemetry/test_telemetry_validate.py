"""Validation: every bad value kind is counted with source and line, valid rows go through."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.validate import Validator

P, T = "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"


def test_each_problem_kind_is_counted_and_valid_rows_land() -> None:
    rows = [
        (1.0, "n/gpu0", P, 300.0),  # ok
        (1.0, "n/gpu1", P, math.nan),  # nan
        (1.0, "n/gpu2", P, math.inf),  # inf
        (1.0, "n/gpu3", P, -5.0),  # negative power
        (1.0, "n/gpu0", T, 400.0),  # out of range temperature
        (1.0, "n/gpu0", "DCGM_FI_DEV_BOGUS", 1.0),  # unknown field
        (1.0, "n/gpu0", P, 301.0),  # duplicate of row 0
        (0.5, "n/gpu0", P, 299.0),  # out of order (kept)
        (2.0, "n/gpu0", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 4.0),  # alias → ok
    ]
    ts, e, f, v = zip(*rows, strict=True)
    frame = Frame.from_long(ts, e, f, v, source="in.csv", lines=list(range(2, 11)))
    report = IngestReport()
    good = Validator().check(frame, report)
    assert report.problems == {"nan": 1, "inf": 1, "negative": 1, "out_of_range": 1, "unknown_field": 1,
                               "duplicate": 1, "out_of_order": 1}  # fmt: skip
    assert report.examples["nan"][0].startswith("in.csv:3: n/gpu1 DCGM_FI_DEV_POWER_USAGE=nan")
    assert report.examples["unknown_field"][0].startswith("in.csv:7:")
    kept = sorted(zip(good.field_names().tolist(), good.value.tolist(), strict=True))
    assert kept == [("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 4.0), (P, 299.0), (P, 300.0)]
    assert report.rows_in == 9 and report.dropped == 6


def test_disorder_and_duplicates_are_found_across_frames() -> None:
    v, report = Validator(), IngestReport()
    v.check(Frame.from_long([10.0, 11.0], ["a/0", "a/0"], [P, P], [1.0, 2.0]), report)
    out = v.check(Frame.from_long([11.0, 9.0, 12.0], ["a/0", "a/0", "a/0"], [P, P, P], [3.0, 4.0, 5.0]), report)
    assert report.problems == {"duplicate": 1, "out_of_order": 1}
    assert out.value.tolist() == [4.0, 5.0]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 5).map(float),
            st.sampled_from(["a/0", "a/1"]),
            st.sampled_from([P, T, "X"]),
            st.floats(allow_nan=True, allow_infinity=True, width=32),
        ),
        max_size=40,
    ),
)
def test_every_row_is_either_kept_or_counted(rows: list[tuple[float, str, str, float]]) -> None:
    report = IngestReport()
    if not rows:
        return
    ts, e, f, val = zip(*rows, strict=True)
    good = Validator().check(Frame.from_long(ts, e, f, val), report)
    assert len(good) + report.dropped == len(rows)
    assert np.isfinite(good.value).all()
    # No (entity, field, ts) appears twice among kept rows.
    keys = set(zip(good.entity_names().tolist(), good.field_names().tolist(), good.ts_s.tolist(), strict=True))
    assert len(keys) == len(good)


def test_entity_order_does_not_change_the_outcome() -> None:
    rng = np.random.default_rng(1)
    n = 200
    ts = rng.integers(0, 20, n).astype(float)
    ents = rng.choice(["a/0", "a/1", "a/2"], n)
    vals = rng.normal(300, 400, n)
    perm = rng.permutation(3)
    names = np.array(["a/0", "a/1", "a/2"])
    renamed = names[perm][np.searchsorted(names, ents)]
    r1, r2 = IngestReport(), IngestReport()
    Validator().check(Frame.from_long(ts, ents, [P] * n, vals), r1)
    Validator().check(Frame.from_long(ts, renamed, [P] * n, vals), r2)
    assert r1.problems == r2.problems
