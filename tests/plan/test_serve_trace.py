"""Azure-format trace parsing, statistics, rate scaling and tiling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.plan.trace import load_azure_trace, parse_azure_trace

DATA_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
CONV = DATA_DIR / "azure_llm_inference_conv_2023.csv"

SMALL = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:48.0000000,100,10
2023-11-16 18:15:56.6805900,1000,1
"""


def test_parses_and_sorts_by_arrival() -> None:
    tr = parse_azure_trace(SMALL, "small.csv")
    assert tr.n_requests == 4
    np.testing.assert_allclose(tr.arrival_s, [0.0, 1.31941, 4.314579, 10.0], atol=1e-5)
    assert list(tr.prompt_tokens) == [374, 100, 396, 1000]
    assert list(tr.output_tokens) == [44, 10, 109, 1]
    # 4 requests over 10 s span: the duration adds one mean gap so tiled copies do not overlap
    assert tr.duration_s == pytest.approx(10.0 * 4 / 3)
    assert tr.rate_req_per_s == pytest.approx(4 / tr.duration_s)


def test_numeric_timestamps_and_extra_columns() -> None:
    text = "id,TIMESTAMP,GeneratedTokens,ContextTokens\na,0.5,3,7\nb,2.5,4,8\n"
    tr = parse_azure_trace(text, "x.csv")
    assert list(tr.prompt_tokens) == [7, 8] and list(tr.output_tokens) == [3, 4]
    assert tr.arrival_s[-1] == pytest.approx(2.0)


def test_bad_row_names_file_and_line() -> None:
    text = SMALL + "2023-11-16 18:16:00.0,abc,5\n"
    with pytest.raises(InputError) as err:
        parse_azure_trace(text, "t.csv")
    assert "t.csv" in str(err.value) and "line 6" in str(err.value) and "ContextTokens" in str(err.value)


def test_non_strict_counts_bad_rows() -> None:
    text = SMALL + "garbage\n2023-11-16 18:16:00.0,5,0\nnot-a-date,5,5\n"
    tr = parse_azure_trace(text, "t.csv", strict=False)
    assert tr.n_requests == 4 and tr.bad_rows == 3
    assert tr.stats().bad_rows == 3


def test_missing_header_columns() -> None:
    with pytest.raises(InputError, match="header lacks GeneratedTokens"):
        parse_azure_trace("TIMESTAMP,ContextTokens\n1,2\n", "h.csv")


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_azure_trace(tmp_path / "nope.csv")


def test_scale_and_tile() -> None:
    tr = parse_azure_trace(SMALL, "small.csv")
    fast = tr.scale_rate(2.0)
    assert fast.rate_req_per_s == pytest.approx(2 * tr.rate_req_per_s)
    assert tr.with_rate(3.0).rate_req_per_s == pytest.approx(3.0)
    tiled = tr.tile(3)
    assert tiled.n_requests == 12
    assert np.all(np.diff(tiled.arrival_s) >= 0)
    assert tiled.rate_req_per_s == pytest.approx(tr.rate_req_per_s)
    with pytest.raises(InputError):
        tr.scale_rate(0.0)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_parser_never_crashes_on_garbage(body: str) -> None:
    for text in (body, "TIMESTAMP,ContextTokens,GeneratedTokens\n" + body):
        for strict in (True, False):
            try:
                tr = parse_azure_trace(text, "g.csv", strict=strict)
            except InputError as exc:
                assert str(exc).startswith("g.csv")
            else:
                assert tr.n_requests >= 1
                assert np.all(tr.prompt_tokens >= 1) and np.all(tr.output_tokens >= 1)
                assert np.all(np.diff(tr.arrival_s) >= 0) and tr.arrival_s[0] == 0.0


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e6, allow_nan=False), st.integers(1, 100_000), st.integers(1, 10_000)),
        min_size=1,
        max_size=40,
    )
)
def test_valid_rows_round_trip(rows: list[tuple[float, int, int]]) -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t!r},{p},{o}\n" for t, p, o in rows)
    tr = parse_azure_trace(text, "r.csv")
    assert tr.n_requests == len(rows)
    assert sorted(tr.prompt_tokens.tolist()) == sorted(p for _, p, _ in rows)
    assert int(tr.output_tokens.sum()) == sum(o for _, _, o in rows)


@pytest.mark.skipif(not CONV.exists(), reason="shared Azure trace data not present")
def test_real_azure_conv_trace() -> None:
    tr = load_azure_trace(CONV)
    s = tr.stats()
    assert s.n_requests == 19_366 and s.bad_rows == 0
    # one hour of traffic: ~5.5 requests per second
    assert 3500 < s.duration_s < 3700 and 5.0 < s.rate_req_per_s < 6.0
    assert 500 < s.prompt_mean < 2000 and 50 < s.output_mean < 500
