"""The store's named read queries (``telemetry.store.queries``) on a small hand-made store."""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store import DuckDBStore
from twinloop.telemetry.store import queries as q

GPUS = ["s/r1/k1/n1/g0", "s/r1/k1/n1/g1", "s/r1/k2/n1/g0"]


@pytest.fixture
def store() -> DuckDBStore:
    s = DuckDBStore(":memory:")
    ts = np.repeat([0.0, 10.0, 20.0], 3)
    ents = GPUS * 3
    temp = np.array([40.0, 50.0, 60.0, 41.0, 52.0, 60.0, 42.0, 52.0, 70.0])
    s.append(Frame.from_long(ts, ents, [DCGM_FI_DEV_GPU_TEMP] * 9, temp))
    s.append(Frame.from_long(np.array([5.0]), [GPUS[0]], [DCGM_FI_DEV_POWER_USAGE], np.array([300.0])))
    return s


def test_registries_and_counts(store: DuckDBStore) -> None:
    con = store.con
    assert q.has_telemetry(con) and q.sample_count(con) == 10
    assert q.registry_sizes(con) == (3, 2)
    assert {e for _, e, _ in q.entity_rows(con)} == set(GPUS)
    assert set(q.field_ids(con)) == {DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE}
    assert q.sample_time_range(con) == (0.0, 20.0)
    assert sorted(e for _, e in q.gpu_entities(con)) == sorted(GPUS)


def test_latest_changes_and_windows(store: DuckDBStore) -> None:
    con = store.con
    fid = q.field_ids(con)[DCGM_FI_DEV_GPU_TEMP]
    ids = {e: i for i, e, _ in q.entity_rows(con)}
    rows = q.latest_values(con, [fid], since_ts=15.0)
    got = dict(zip(rows.entity_id.tolist(), rows.value.tolist(), strict=True))
    assert got == {ids[GPUS[0]]: 42.0, ids[GPUS[1]]: 52.0, ids[GPUS[2]]: 70.0}
    changes = q.value_changes(con, fid, [ids[GPUS[1]]])
    assert [(t, v, p) for _, t, v, p in changes] == [(0.0, 50.0, None), (10.0, 52.0, 50.0)]
    assert q.last_sample_ts(con, [ids[GPUS[0]]]) == {ids[GPUS[0]]: 20.0}
    assert q.mean_in_windows(con, fid, {ids[GPUS[2]]: (0.0, 20.0)}) == {ids[GPUS[2]]: 65.0}  # (0, 20]


def test_buckets_and_rack_grids(store: DuckDBStore) -> None:
    con = store.con
    fid = q.field_ids(con)[DCGM_FI_DEV_GPU_TEMP]
    ids = [i for i, _, _ in q.entity_rows(con)]
    b = q.bucket_aggregates(con, [(fid, "max")], ids, 0.0, 30.0, 15.0)
    assert sorted(set(b.bucket.tolist())) == [0, 1] and float(np.nanmax(b.columns[0])) == 70.0
    with pytest.raises(ValueError, match="unknown aggregate"):
        q.bucket_aggregates(con, [(fid, "median")], ids, 0.0, 30.0, 15.0)
    hot = q.rack_max_buckets(con, fid, 0.0, 30.0)
    assert dict(zip(hot.rack.tolist(), hot.value.tolist(), strict=True)) == {"s/r1/k1": 52.0, "s/r1/k2": 70.0}
    gpus = q.gpu_entities(con)
    head = q.rack_min_offset_buckets(con, fid, 0.0, 30.0, [i for i, _ in gpus], [80.0] * len(gpus))
    assert dict(zip(head.rack.tolist(), head.value.tolist(), strict=True)) == {"s/r1/k1": 28.0, "s/r1/k2": 10.0}
