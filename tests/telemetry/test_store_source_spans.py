"""The store's idempotent-append bookkeeping: one ``ingests`` row per source, updated in place, and a duplicate check
that stays exact (a re-run writes nothing twice; a late row never stored is written), also on a store written with
one ``ingests`` row per batch (the layout before).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

P = "DCGM_FI_DEV_POWER_USAGE"
GPUS = ("s/r/k/n/gpu0", "s/r/k/n/gpu1")
KEY = "live:nvml:"
T0 = 1_795_430_000.0


def _frame(seconds: list[int], value: float = 500.0) -> Frame:
    """Both GPUs' power at ``T0 + s`` for each ``s``."""
    ts = [T0 + s for s in seconds for _ in GPUS]
    return Frame.from_long(ts, [g for _ in seconds for g in GPUS], [P] * len(ts), [value + s for s in ts])


def _stored(store: DuckDBStore) -> list[tuple[float, str]]:
    tab = store.query(P)
    return sorted(zip(tab.column("ts").to_pylist(), tab.column("entity").to_pylist(), strict=True))


def _spans(store: DuckDBStore) -> list[tuple[str, float, float, int]]:
    return store.con.execute("SELECT source, ts_min, ts_max, n_rows FROM ingests ORDER BY source").fetchall()


def test_a_source_keeps_one_ingests_row_however_often_it_flushes() -> None:
    with DuckDBStore(":memory:") as store:
        for s in range(300):  # 300 one-second flushes
            assert store.append(_frame([s]), source_key=KEY) == 2
        store.append(_frame([0, 1]), source_key="other")
        assert _spans(store) == [(KEY, T0, T0 + 299, 600), ("other", T0, T0 + 1, 4)]


def test_a_rerun_writes_nothing_twice_and_a_late_row_never_stored_is_written() -> None:
    with DuckDBStore(":memory:") as store:
        store.append(_frame(list(range(10))), source_key=KEY)
        store.append(_frame(list(range(20, 30))), source_key=KEY)
        assert store.append(_frame(list(range(30))), source_key=KEY) == 2 * 10  # only the gap 10..19 is new
        assert store.append(_frame([5, 25]), source_key=KEY) == 0
        late = _frame([-3])  # older than all the source stored, never stored
        assert store.append(late, source_key=KEY) == 2
        assert _stored(store) == sorted((T0 + s, g) for s in [-3, *range(30)] for g in GPUS)
        assert _spans(store) == [(KEY, T0 - 3, T0 + 29, 62)]


def _old_layout_store(path: Path, batches: list[list[int]]) -> None:
    """A store as the code before wrote it: the batches' rows, and one ``ingests`` row per batch."""
    with DuckDBStore(path) as store:
        for seconds in batches:
            store.append(_frame(seconds))  # rows without bookkeeping ...
        store.con.executemany(  # ... and the bookkeeping as it was: one row per batch
            "INSERT INTO ingests VALUES (?, ?, ?, ?)",
            [[KEY, T0 + min(s), T0 + max(s), 2 * len(s)] for s in batches],
        )


def test_a_store_written_one_row_per_batch_still_dedupes_and_is_merged(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    _old_layout_store(db, [[s] for s in range(50)] + [[s] for s in range(60, 70)])
    with DuckDBStore(db, read_only=True) as store:  # a reader sees the old table as it was
        assert len(_spans(store)) == 60
    with DuckDBStore(db) as store:
        assert store.append(_frame(list(range(70))), source_key=KEY) == 2 * 10  # the gap 50..59 only
        assert store.append(_frame(list(range(70))), source_key=KEY) == 0
        assert _spans(store) == [(KEY, T0, T0 + 69, 2 * 70)]
        assert store.append(_frame([70]), source_key=KEY) == 2  # and a live flush after it
        assert _stored(store) == sorted((T0 + s, g) for s in range(71) for g in GPUS)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sets(st.integers(0, 40), min_size=1, max_size=12), min_size=1, max_size=8))
def test_every_row_is_stored_exactly_once_whatever_the_order_of_batches(batches: list[set[int]]) -> None:
    with DuckDBStore(":memory:") as store:
        written = sum(store.append(_frame(sorted(b)), source_key=KEY) for b in batches)
        seen = set().union(*batches)
        assert _stored(store) == sorted((T0 + s, g) for s in seen for g in GPUS)
        assert written == 2 * len(seen)
        assert len(_spans(store)) == 1
