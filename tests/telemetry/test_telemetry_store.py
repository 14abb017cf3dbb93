"""DuckDB store: append, query by prefix/field/time, downsample against NumPy, retention, Parquet, reopen."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_helpers import T0, gpu_entities, twin_like_frames

from twinloop.errors import InputError
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store import DuckDBStore, Store


def _filled(path: Path | str = ":memory:", steps: int = 20) -> tuple[DuckDBStore, list[Frame]]:
    store = DuckDBStore(path)
    frames = twin_like_frames(n_gpus=16, steps=steps, seed=3)
    for fr in frames:
        store.append(fr)
    return store, frames


def test_store_satisfies_protocol() -> None:
    assert isinstance(DuckDBStore(":memory:"), Store)


def test_query_returns_exactly_what_was_appended() -> None:
    store, frames = _filled()
    assert store.count() == sum(len(f) for f in frames)
    table = store.query("DCGM_FI_DEV_POWER_USAGE", "site0/row0/rack0/node1")
    ents = set(table.column("entity").to_pylist())
    assert ents == {f"site0/row0/rack0/node1/gpu{i}" for i in range(8)}
    got = {(r["ts"], r["entity"]): r["value"] for r in table.to_pylist()}
    for fr in frames:
        ts, names, grid = fr.to_dense("DCGM_FI_DEV_POWER_USAGE")
        for j, e in enumerate(names):
            if e.startswith("site0/row0/rack0/node1/"):
                assert got[(ts[0], e)] == grid[0, j]


def test_prefix_matches_whole_path_components() -> None:
    store = DuckDBStore(":memory:")
    ents = ["s/row1/k/n/gpu0", "s/row10/k/n/gpu0", "s/row1"]
    store.append(Frame.from_dense(T0, ents, {"DCGM_FI_DEV_GPU_TEMP": np.array([40.0, 50.0, 60.0])}))
    got = sorted(store.query("DCGM_FI_DEV_GPU_TEMP", "s/row1").column("entity").to_pylist())
    assert got == ["s/row1", "s/row1/k/n/gpu0"]
    assert store.query("DCGM_FI_DEV_GPU_TEMP", "nowhere").num_rows == 0


def test_time_range_filter_is_half_open() -> None:
    store, _ = _filled()
    t = store.query("DCGM_FI_DEV_SM_CLOCK", since_s=T0 + 5, until_s=T0 + 8)
    assert sorted(set(t.column("ts").to_pylist())) == [T0 + 5, T0 + 6, T0 + 7]


def test_downsample_matches_numpy() -> None:
    store, frames = _filled(steps=20)
    every = 6.0
    out = store.downsample("DCGM_FI_DEV_POWER_USAGE", every, "site0/row0/rack0/node0/gpu3")
    series = np.array([f.to_dense("DCGM_FI_DEV_POWER_USAGE")[2][0, 3] for f in frames])
    ts = T0 + np.arange(20)
    buckets = np.floor(ts / every) * every
    rows = out.to_pylist()
    assert [r["ts"] for r in rows] == sorted(set(buckets.tolist()))
    for r in rows:
        sel = series[buckets == r["ts"]]
        assert r["min"] == sel.min() and r["max"] == sel.max() and r["last"] == sel[-1]
        assert r["mean"] == pytest.approx(sel.mean()) and r["count"] == len(sel)


def test_aggregate_per_entity_and_latest() -> None:
    store, frames = _filled(steps=10)
    agg = store.aggregate("DCGM_FI_DEV_GPU_TEMP")
    assert agg.num_rows == 16
    grid = np.vstack([f.to_dense("DCGM_FI_DEV_GPU_TEMP")[2] for f in frames])
    assert np.allclose(agg.column("mean").to_numpy(), grid.mean(axis=0)[np.argsort(gpu_entities(16))])
    latest = store.latest("site0/row0/rack0/node0/gpu0")
    assert latest.num_rows == 3 and set(latest.column("ts").to_pylist()) == {T0 + 9}


def test_retention_deletes_only_older_rows() -> None:
    store, _ = _filled(steps=10)
    before = store.count()
    deleted = store.retain(max_age_s=3.0)  # keeps ts >= newest - 3 s: 4 steps
    assert deleted == before * 6 // 10 and store.count() == before * 4 // 10
    assert store.time_range() == (T0 + 6, T0 + 9)


def test_reopen_keeps_data_labels_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    store, frames = _filled(path, steps=3)
    store.close()
    again = DuckDBStore(path)
    assert again.count() == sum(len(f) for f in frames)
    assert again.labels("site0/row0/rack0/node0/gpu0") == {
        "site0/row0/rack0/node0/gpu0": {"gpu_kind": "h100-sxm", "job": "llama-70b"}
    }
    again.append(twin_like_frames(n_gpus=16, steps=1, seed=9)[0])  # same entities: no new ids
    assert again.con.execute("SELECT count(*) FROM entities").fetchone() == (16,)


def test_export_parquet_round_trips(tmp_path: Path) -> None:
    store, frames = _filled(steps=4)
    out = tmp_path / "x.parquet"
    n = store.export_parquet(out, field="DCGM_FI_DEV_SM_CLOCK")
    table = pq.read_table(out)
    assert n == table.num_rows == 4 * 16
    back = Frame.from_arrow(table)
    assert set(back.fields) == {"DCGM_FI_DEV_SM_CLOCK"}
    assert np.isclose(back.value.sum(), sum(f.to_dense("DCGM_FI_DEV_SM_CLOCK")[2].sum() for f in frames))


def test_unknown_field_and_alias() -> None:
    store, _ = _filled(steps=1)
    with pytest.raises(InputError, match=r"unknown field 'DCGM_FI_DEV_POWER'.*did you mean"):
        store.query("DCGM_FI_DEV_POWER")
    assert store.query("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS").num_rows == 0  # alias is known, nothing stored
    with pytest.raises(InputError, match="every"):
        store.downsample("DCGM_FI_DEV_GPU_TEMP", 0)


def test_read_only_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _ = DuckDBStore(tmp_path / "none.duckdb", read_only=True).con


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 300),
    cuts=st.lists(st.integers(0, 300), max_size=4),
    since=st.one_of(st.none(), st.floats(-50, 400)),
    span=st.one_of(st.none(), st.floats(0.5, 400)),
    every=st.sampled_from([7.0, 60.0, 120.0]),
    seed=st.integers(0, 1000),
)
def test_rollup_backed_aggregates_equal_numpy(
    n: int, cuts: list[int], since: float | None, span: float | None, every: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.choice(3600, n, replace=False)) / 10 + 1.7e9 // 60 * 60  # unique: no ties for "last"
    ent = rng.choice(["a/0", "a/1", "b/0"], n)
    val = rng.normal(300, 50, n)
    store = DuckDBStore(":memory:")
    bounds = [0, *sorted(min(c, n) for c in cuts), n]
    for lo, hi in itertools.pairwise(bounds):  # batches split minutes anywhere
        if hi > lo:
            store.append(Frame.from_long(ts[lo:hi], ent[lo:hi], ["DCGM_FI_DEV_POWER_USAGE"] * (hi - lo), val[lo:hi]))
    t0 = ts[0] // 60 * 60
    since_s = None if since is None else t0 + since
    until_s = None if span is None or since_s is None else since_s + span
    sel = np.ones(n, dtype=bool)
    if since_s is not None:
        sel &= ts >= since_s
    if until_s is not None:
        sel &= ts < until_s
    agg = {r["entity"]: r for r in store.aggregate("DCGM_FI_DEV_POWER_USAGE", "", since_s, until_s).to_pylist()}
    assert set(agg) == set(ent[sel].tolist())
    for e, r in agg.items():
        v, t = val[sel & (ent == e)], ts[sel & (ent == e)]
        assert r["count"] == len(v) and r["min"] == v.min() and r["max"] == v.max()
        assert r["mean"] == pytest.approx(v.mean()) and r["last"] == v[t == t.max()][-1]
    ds = store.downsample("DCGM_FI_DEV_POWER_USAGE", every, "a", since_s, until_s).to_pylist()
    b = np.floor(ts / every) * every
    want = {(e, bb): sel & (ent == e) & (b == bb) for e in ("a/0", "a/1") for bb in set(b[sel].tolist())}
    want = {k: m for k, m in want.items() if m.any()}
    assert {(r["entity"], r["ts"]) for r in ds} == set(want)
    for r in ds:
        m = want[(r["entity"], r["ts"])]
        assert r["count"] == m.sum() and r["max"] == val[m].max() and r["mean"] == pytest.approx(val[m].mean())


def test_retention_mid_minute_keeps_rollups_exact() -> None:
    store = DuckDBStore(":memory:")
    ts = T0 // 60 * 60 + np.arange(0.0, 180.0, 1.0)
    store.append(Frame.from_long(ts, ["a/0"] * 180, ["DCGM_FI_DEV_GPU_TEMP"] * 180, np.arange(180.0) / 4))
    assert store.delete_before(ts[90]) == 90
    (row,) = store.aggregate("DCGM_FI_DEV_GPU_TEMP").to_pylist()
    assert row["count"] == 90 and row["min"] == 90 / 4 and row["mean"] == pytest.approx(np.arange(90, 180).mean() / 4)
    assert store.time_range() == (ts[90], ts[-1])


def test_replay_from_parquet_export_filters_by_prefix(tmp_path: Path) -> None:
    from twinloop.telemetry.report import IngestReport
    from twinloop.telemetry.sources.replay import ReplayConfig, ReplaySource

    store, _ = _filled(steps=4)
    out = tmp_path / "all.parquet"
    store.export_parquet(out)
    cfg = ReplayConfig(path=str(out), entity_prefix="site0/row0/rack0/node1", frame_s=2.0)
    replayed = list(ReplaySource(cfg).frames(IngestReport()))
    assert len(replayed) == 2 and all(len(f) == 2 * 8 * 3 for f in replayed)
    assert all(e.startswith("site0/row0/rack0/node1/") for f in replayed for e in f.entity_names())
