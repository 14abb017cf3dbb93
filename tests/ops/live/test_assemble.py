"""Per-GPU samples from long rows: jitter alignment, duplicates, late rows, NaN, gaps; never crashes on garbage."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.live.assemble import SampleAssembler
from twinloop.telemetry.frame import Frame

GPUS = ("s/r/k/n/gpu0", "s/r/k/n/gpu1", "s/r/k/n/gpu2")
P = "DCGM_FI_DEV_POWER_USAGE"


def rows(ts: list[float], ents: list[str], values: list[float], field: str = P) -> Frame:
    return Frame.from_long(ts, ents, [field] * len(ts), values)


def test_rows_a_few_ms_apart_form_one_sample() -> None:
    a = SampleAssembler(GPUS, cadence_s=1.0)
    # nvidia-smi writes each GPU's row a few ms after the previous one
    a.add(rows([100.000, 100.004, 100.009, 101.001, 101.006, 101.012], [*GPUS, *GPUS], [1, 2, 3, 4, 5, 6]))
    out = a.ready()
    assert len(out) == 1
    ts, fields, warnings = out[0]
    assert ts == 100.0 and warnings == ()
    np.testing.assert_array_equal(fields[P], [1, 2, 3])
    last = a.ready(final=True)
    np.testing.assert_array_equal(last[0][1][P], [4, 5, 6])


def test_duplicates_late_rows_nan_and_gaps_are_warned_not_fed() -> None:
    a = SampleAssembler(GPUS, cadence_s=1.0)
    a.add(rows([0.0, 0.0, 0.0, 0.0], [GPUS[0], GPUS[0], GPUS[1], GPUS[2]], [1, 9, 2, np.nan]))
    a.add(rows([1.0] * 3, list(GPUS), [1, 2, 3]))
    ((_, f0, w0),) = a.ready()
    assert f0[P][0] == 9  # the newest of the duplicated rows
    assert np.isnan(f0[P][2])
    assert any("duplicated" in w for w in w0) and any("NaN" in w for w in w0)
    a.add(rows([0.0], [GPUS[1]], [7.0]))  # late: its tick is already out
    a.add(rows([10.0] * 3, list(GPUS), [1, 2, 3]))  # a 9 s gap
    ((t1, _, w1),) = a.ready()
    assert t1 == 1.0 and any("older than" in w for w in w1)
    ((t2, _, w2),) = a.ready(final=True)
    assert t2 == 10.0 and any("gap" in w for w in w2)
    assert a.counts.duplicates == 1 and a.counts.out_of_order == 1 and a.counts.nan_values == 1
    assert a.counts.gaps == 1


def test_rows_of_unknown_entities_are_ignored_and_counted() -> None:
    a = SampleAssembler(GPUS, cadence_s=1.0)
    a.add(rows([0.0, 0.0], ["s/r/k/n", GPUS[0]], [1.0, 2.0]))
    a.ready(final=True)
    assert a.counts.unknown_entity_rows == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.floats(-1e3, 1e3), st.just(float("nan")), st.just(float("inf"))),
            st.integers(0, 4),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=60,
    )
)
def test_garbage_never_crashes_and_shapes_hold(data: list[tuple[float, int, float]]) -> None:
    a = SampleAssembler(GPUS, cadence_s=0.5)
    names = [*GPUS, "other", "s/r/k/n/gpu9"]
    for chunk in (data[: len(data) // 2], data[len(data) // 2 :]):
        if chunk:
            a.add(rows([c[0] for c in chunk], [names[c[1]] for c in chunk], [c[2] for c in chunk]))
    out = a.ready(final=True)
    stamps = [ts for ts, _, _ in out]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    for _, fields, _ in out:
        assert all(v.shape == (len(GPUS),) for v in fields.values())
        assert all(np.isfinite(v[~np.isnan(v)]).all() for v in fields.values())


def test_entity_order_does_not_change_the_sample() -> None:
    fwd, rev = SampleAssembler(GPUS, 1.0), SampleAssembler(GPUS, 1.0)
    fwd.add(rows([0.0, 0.001, 0.002, 1.0], [*GPUS, GPUS[0]], [1, 2, 3, 0]))
    rev.add(rows([0.002, 0.001, 0.0, 1.0], [*reversed(GPUS), GPUS[0]], [3, 2, 1, 0]))
    np.testing.assert_array_equal(fwd.ready()[0][1][P], rev.ready()[0][1][P])


def test_field_major_batches_are_in_order_and_swaps_are_seen() -> None:
    a = SampleAssembler(GPUS, cadence_s=1.0)
    ts = [0.0, 1.0, 2.0]
    a.add(Frame.from_dense(ts, list(GPUS), {P: np.ones((3, 3)), "DCGM_FI_DEV_GPU_TEMP": np.ones((3, 3))}))
    a.ready(final=True)
    assert a.counts.reordered == 0
    a.add(rows([4.0, 3.0, 3.0], [GPUS[0], GPUS[0], GPUS[1]], [1, 2, 3]))
    a.ready(final=True)
    assert a.counts.reordered == 1
