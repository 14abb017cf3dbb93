"""Issue 19: `twinloop detect` on one long series runs its time chunks side by side, with the same detections."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from twinloop.ops.detect.base import make_detector
from twinloop.ops.detect.offline import CHUNKABLE, SeriesBlock, chunk_layout, detect_blocks

DT_S = 60.0  # minute data: burn-in 10 half-lives of 30 samples = 300 steps, chunks of 1200 own steps
N = 6000


def _block(seed: int, n: int, events: list[tuple[int, int, float]], series: int = 2) -> SeriesBlock:
    rng = np.random.default_rng(seed)
    ts = 1.7e9 + DT_S * np.arange(n)
    values = 50.0 + rng.normal(0.0, 1.0, (n, series))
    for start, length, size in events:
        values[start : start + length, 0] += size
    values[rng.integers(0, n, 5), -1] = np.nan
    return SeriesBlock("", ts, tuple(f"s{i}" for i in range(series)), values)


def _keys(block: SeriesBlock, chunked: bool) -> list[tuple[float, str, str, str]]:
    found = detect_blocks([block], sorted(CHUNKABLE), chunked=chunked)
    return [(d.ts, d.entity, d.detector, d.kind) for d in found]


def test_a_long_regular_series_is_chunked_and_a_short_or_irregular_one_is_not() -> None:
    det = make_detector("cusum")
    layout = chunk_layout(_block(0, N, []), det)
    assert layout is not None and layout.burn_in == 300 and layout.own == 1200 and layout.n_chunks == 5
    assert chunk_layout(_block(0, 1500, []), det) is None
    irregular = _block(0, N, [])
    ts = irregular.ts.copy()
    ts[1000:] += 7.0
    assert chunk_layout(SeriesBlock("", ts, irregular.names, irregular.values), det) is None


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    events=st.lists(
        st.tuples(st.integers(100, N - 100), st.integers(1, 30), st.sampled_from([-12.0, -6.0, 6.0, 12.0])),
        max_size=4,
    ),
)
def test_chunked_detections_equal_the_sequential_ones(seed: int, events: list[tuple[int, int, float]]) -> None:
    # The documented exception: an anomaly inside a chunk's burn-in (rows [c·1200, c·1200 + 300), c >= 1) enters
    # that chunk's fresh baseline, as after a restart, so its alarms may differ there; everywhere else they agree.
    burn_ins = [(c * 1200, c * 1200 + 300) for c in range(1, 5)]
    assume(all(s + n <= lo or s >= hi for s, n, _ in events for lo, hi in burn_ins))
    block = _block(seed, N, events)
    assert _keys(block, chunked=True) == _keys(block, chunked=False)


@pytest.mark.parametrize("start", [1500, 1505, 2700, 2710])  # at a chunk's first own rows (1500, 2700, ...)
def test_an_anomaly_at_a_chunk_boundary_is_found_once(start: int) -> None:
    block = _block(1, N, [(start, 10, 15.0)])
    chunked, sequential = _keys(block, chunked=True), _keys(block, chunked=False)
    assert chunked == sequential
    assert any(abs(ts - block.ts[start]) <= 5 * DT_S for ts, *_ in chunked)
