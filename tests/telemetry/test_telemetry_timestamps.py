"""Timestamps are validated like values (issue 19): NaN, inf, before the epoch or absurdly far ahead is dropped
and counted; a store written before the check still reads its valid rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import ingest
from twinloop.telemetry.promtext import parse_text
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.validate import Validator

P = "DCGM_FI_DEV_POWER_USAGE"
NOW = 1_763_900_000.0  # 2025-11-23, pinned


def test_bad_timestamps_are_dropped_and_counted_with_their_line() -> None:
    ts = [NOW - 10, math.nan, math.inf, -math.inf, -1.0, NOW + 2 * 86_400, 1e20, NOW - 9]
    frame = Frame.from_long(ts, ["n/gpu0"] * len(ts), [P] * len(ts), [100.0] * len(ts), source="in.csv",
                            lines=list(range(2, 2 + len(ts))))  # fmt: skip
    report = IngestReport()
    good = Validator(max_future_s=86_400.0, now_s=NOW).check(frame, report)
    assert report.problems == {"bad_timestamp": 6}
    assert good.ts_s.tolist() == [NOW - 10, NOW - 9]
    assert report.examples["bad_timestamp"][0].startswith("in.csv:3: n/gpu0 DCGM_FI_DEV_POWER_USAGE=100.0 at ts=nan")
    # The tolerance is configurable: two days ahead is fine with a week's tolerance.
    ok = Validator(max_future_s=7 * 86_400.0, now_s=NOW).check(frame, IngestReport())
    assert NOW + 2 * 86_400 in ok.ts_s.tolist()


def test_a_scrape_timestamp_of_1e23_ms_is_dropped() -> None:
    report = IngestReport()
    samples = parse_text(f'{P}{{gpu="0"}} 300 100000000000000000000000\n{P}{{gpu="1"}} 301 {int(NOW * 1000)}\n',
                         "scrape", report)  # fmt: skip
    assert report.ok and len(samples) == 2
    ts = [s.ts_ms / 1000.0 for s in samples if s.ts_ms is not None]
    frame = Frame.from_long(ts, ["n/gpu0", "n/gpu1"], [P, P], [300.0, 301.0])
    good = Validator(now_s=NOW).check(frame, report)
    assert report.problems == {"bad_timestamp": 1} and good.value.tolist() == [301.0]


def test_csv_with_nan_and_absurd_timestamps_ingests_the_rest(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    rows = [f"{NOW + k},site0/row0/rack0/node0/gpu0,{P},{300 + k}" for k in range(100)]
    rows[10] = f"nan,site0/row0/rack0/node0/gpu0,{P},1"
    rows[20] = f"inf,site0/row0/rack0/node0/gpu0,{P},1"
    rows[30] = f"1e20,site0/row0/rack0/node0/gpu0,{P},1"
    csv.write_text("ts,entity,field,value\n" + "\n".join(rows) + "\n")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        report = ingest(FileSource(FileConfig(path=str(csv))), store)
        assert report.problems == {"bad_timestamp": 3} and report.rows_stored == 97
        lo, hi = store.time_range(P)
        assert lo == NOW and hi == NOW + 99
        assert store.query(P).num_rows == 97


def test_a_store_written_before_the_check_still_reads_its_valid_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    ents = [f"s/r/k/n0/gpu{i}" for i in range(4)]
    with DuckDBStore(path) as store:
        for k in range(3):
            store.append(Frame.from_dense(NOW + k, ents, {P: np.full(4, 200.0 + k)}))
        # What an older twinloop let through: rows with NaN, infinite and absurd timestamps.
        store.con.execute("INSERT INTO samples VALUES ('nan'::DOUBLE, 0, 0, 1.0), ('inf'::DOUBLE, 1, 0, 1.0), "
                          "(1e20, 2, 0, 1.0)")  # fmt: skip
        store.con.execute("INSERT INTO rollup_1m SELECT 1e20, 2, 0, 1, 1, 1, 1, 1e20, 1e20, 1")
    with DuckDBStore(path, read_only=True) as store:
        assert store.query(P).num_rows == 12
        assert store.time_range(P) == (NOW, NOW + 2)
        agg = store.aggregate(P).to_pylist()
        assert len(agg) == 4 and all(math.isfinite(r["max"]) and r["max"] == 202.0 for r in agg)
        assert store.latest().column("ts").to_pylist() == [NOW + 2] * 4


@settings(max_examples=100, deadline=None)
@given(ts=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=30))
def test_validator_never_passes_a_bad_timestamp(ts: list[float]) -> None:
    frame = Frame.from_long(ts, [f"n/gpu{i}" for i in range(len(ts))], [P] * len(ts), [1.0] * len(ts))
    good = Validator(now_s=NOW, max_future_s=60.0).check(frame, IngestReport())
    assert bool(np.all(np.isfinite(good.ts_s) & (good.ts_s >= 0) & (good.ts_s <= NOW + 60.0)))
    assert len(good) == sum(1 for t in ts if math.isfinite(t) and 0 <= t <= NOW + 60.0)


# ----- idempotent ingest per source and time range (issue 19) -----------------------------------------------
def _csv(path: Path, n: int) -> Path:
    rows = [f"{NOW + k // 4},site0/row0/rack0/node0/gpu{k % 4},{P},{300 + k}" for k in range(n)]
    path.write_text("ts,entity,field,value\n" + "\n".join(rows) + "\n")
    return path


def test_reingesting_a_file_stores_nothing_twice(tmp_path: Path) -> None:
    csv = _csv(tmp_path / "t.csv", 4000)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        first = ingest(FileSource(FileConfig(path=str(csv))), store, batch_rows=1000)
        assert first.rows_stored == 4000 and first.ok
        again = ingest(FileSource(FileConfig(path=str(csv))), store, batch_rows=1000)
        assert again.rows_stored == 0 and again.problems == {"already_stored": 4000}
        assert store.count() == 4000
        # A different file with the same rows is a different source: stored (that is the user's call).
        other = _csv(tmp_path / "copy.csv", 4000)
        assert ingest(FileSource(FileConfig(path=str(other))), store).rows_stored == 4000


def test_a_resumed_ingest_after_a_crash_adds_only_the_missing_rows(tmp_path: Path) -> None:
    csv = _csv(tmp_path / "t.csv", 4000)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        # The crash: only the first 2,000 rows of the file were committed (stored under the file's key).
        head = tmp_path / "head.csv"
        head.write_text("\n".join(csv.read_text().splitlines()[:2001]) + "\n")
        from twinloop.telemetry.ingest import default_source_key

        key = default_source_key(FileSource(FileConfig(path=str(csv))))
        assert ingest(FileSource(FileConfig(path=str(head))), store, source_key=key).rows_stored == 2000
        resumed = ingest(FileSource(FileConfig(path=str(csv))), store, batch_rows=1000)
        assert resumed.rows_stored == 2000 and resumed.problems == {"already_stored": 2000}
        assert store.count() == 4000
        values = sorted(store.query(P).column("value").to_pylist())
        assert values == [300.0 + k for k in range(4000)]  # each row exactly once


def test_reingest_through_the_cli_is_exit_0_and_says_so(tmp_path: Path, cli: object) -> None:
    import json
    from collections.abc import Callable
    from typing import Any, cast

    run = cast(Callable[..., Any], cli)
    csv = _csv(tmp_path / "t.csv", 40)
    db = str(tmp_path / "s.duckdb")
    assert run("ingest", "file", str(csv), "--db", db).exit_code == 0
    res = run("ingest", "file", str(csv), "--db", db, "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["rows_stored"] == 0 and doc["problems"]["already_stored"]["count"] == 40


def test_source_key_names_the_data_not_the_reading() -> None:
    from twinloop.telemetry.ingest import default_source_key
    from twinloop.telemetry.sources.twin import TwinConfig, TwinSource

    seed0, seed1 = (
        default_source_key(TwinSource(TwinConfig(seed=0))),
        default_source_key(TwinSource(TwinConfig(seed=1))),
    )
    assert seed0 != seed1  # two simulations with the same clock are different data
    assert default_source_key(TwinSource(TwinConfig(seed=0, speed=1.0))) == seed0  # pacing is not data
