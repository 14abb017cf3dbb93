"""Telemetry queries behind the API: site power now, rack heat, rack and GPU detail, time series.

All aggregation is in the store's named queries (:mod:`twinloop.telemetry.store.queries`: latest value per
entity, bucket aggregates) or in NumPy over the topology's index arrays (racks from GPUs), never a Python loop
over GPUs. "Now" means the newest sample of each entity within ``now_window_s`` of the newest sample in the
store, so a GPU that stopped reporting drops out instead of showing a stale value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.power import (
    CLOCK_EVENT_APPLICATIONS_CLOCKS,
    CLOCK_EVENT_GPU_IDLE,
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_HW_THERMAL,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    CLOCK_EVENT_SYNC_BOOST,
)
from twinloop.report.levels import (
    POWER_FRACTION_LEVELS,
    TEMP_HEADROOM_LEVELS,
    default_slowdown_temp_c,
    level_index,
)
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_AMBIENT_TEMP,
    TWINLOOP_FI_CONVERSION_LOSS,
    TWINLOOP_FI_COOLING_POWER,
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_IT_POWER,
    TWINLOOP_FI_NODE_POWER,
    TWINLOOP_FI_PUE,
    TWINLOOP_FI_RACK_INLET_TEMP,
    TWINLOOP_FI_RACK_POWER,
)
from twinloop.telemetry.store import queries as store_queries
from twinloop.web.db import DEPTH, TelemetryDB, Topology, natural_key
from twinloop.web.models import RackHeat, SitePower, Throttling

F64 = NDArray[np.float64]

POWER = DCGM_FI_DEV_POWER_USAGE
TEMP = DCGM_FI_DEV_GPU_TEMP
CLOCK = DCGM_FI_DEV_SM_CLOCK
LIMIT = DCGM_FI_DEV_POWER_MGMT_LIMIT
REASONS = DCGM_FI_DEV_CLOCKS_EVENT_REASONS
RACK_POWER = TWINLOOP_FI_RACK_POWER
RACK_INLET = TWINLOOP_FI_RACK_INLET_TEMP
NODE_POWER = TWINLOOP_FI_NODE_POWER
SITE_FIELDS = (
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_IT_POWER,
    TWINLOOP_FI_COOLING_POWER,
    TWINLOOP_FI_CONVERSION_LOSS,
    TWINLOOP_FI_PUE,
    TWINLOOP_FI_AMBIENT_TEMP,
)

#: NVML clock-event reason bits and their names.
REASON_BITS: dict[int, str] = {
    CLOCK_EVENT_GPU_IDLE: "gpu_idle",
    CLOCK_EVENT_APPLICATIONS_CLOCKS: "applications_clocks",
    CLOCK_EVENT_SW_POWER_CAP: "sw_power_cap",
    CLOCK_EVENT_HW_SLOWDOWN: "hw_slowdown",
    CLOCK_EVENT_SYNC_BOOST: "sync_boost",
    CLOCK_EVENT_SW_THERMAL: "sw_thermal",
    CLOCK_EVENT_HW_THERMAL: "hw_thermal",
    CLOCK_EVENT_HW_POWER_BRAKE: "hw_power_brake",
}
#: Bits that mean the clock is held down (not idle, not a user's application clock).
THROTTLE_MASK = (
    CLOCK_EVENT_SW_POWER_CAP
    | CLOCK_EVENT_HW_SLOWDOWN
    | CLOCK_EVENT_SW_THERMAL
    | CLOCK_EVENT_HW_THERMAL
    | CLOCK_EVENT_HW_POWER_BRAKE
)


def reason_names(mask: int | None) -> list[str]:
    """Names of the bits set in a clock-event reason mask."""
    if mask is None:
        return []
    return [name for bit, name in REASON_BITS.items() if mask & bit]


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Latest:
    """Latest value per entity of one field: aligned ``entity_id`` and ``value`` arrays."""

    entity_id: NDArray[np.int64]
    value: F64

    def lookup(self, size: int) -> F64:
        """Values scattered into an array indexed by ``entity_id`` (NaN where not reported)."""
        out = np.full(size, np.nan)
        ok = self.entity_id < size
        out[self.entity_id[ok]] = self.value[ok]
        return out


EMPTY_LATEST = Latest(np.zeros(0, dtype=np.int64), np.zeros(0))


def latest(
    cur: duckdb.DuckDBPyConnection,
    fields: dict[str, int],
    names: Sequence[str],
    since_ts: float,
    entity_ids: Sequence[int] | None = None,
) -> dict[str, Latest]:
    """The newest value of each entity for each field in ``names`` among samples at or after ``since_ts``."""
    ids = {fields[n]: n for n in names if n in fields}
    out = dict.fromkeys(names, EMPTY_LATEST)
    if not ids:
        return out
    rows = store_queries.latest_values(cur, list(ids), since_ts, entity_ids)
    for f, name in ids.items():
        sel = rows.field_id == f
        out[name] = Latest(rows.entity_id[sel], rows.value[sel])
    return out


def site_power(cur: duckdb.DuckDBPyConnection, db: TelemetryDB, now_window_s: float) -> SitePower:
    """Site power now (facility, IT, cooling, conversion losses, PUE, ambient) from the site fields.

    Losses fall back to ``facility − IT − cooling`` when the store has no conversion-loss field, and PUE to
    ``facility / IT``.
    """
    _, newest = db.time_range(cur)
    fields = db.field_ids(cur)
    topo = db.topology(cur)
    if newest is None:
        return SitePower(
            ts=None,
            facility_power_w=None,
            it_power_w=None,
            cooling_power_w=None,
            losses_w=None,
            pue=None,
            ambient_temp_c=None,
        )
    sites = topo.ids_at(DEPTH["site"])
    vals = latest(cur, fields, SITE_FIELDS, newest - now_window_s, sites.tolist())
    size = len(topo.names)

    def total(name: str) -> float | None:
        arr = vals[name].lookup(size)[sites] if sites.size else np.zeros(0)
        return float(np.nansum(arr)) if np.isfinite(arr).any() else None

    facility, it, cooling = (total(n) for n in SITE_FIELDS[:3])
    losses = total(TWINLOOP_FI_CONVERSION_LOSS)
    if losses is None and None not in (facility, it, cooling):
        losses = max(0.0, facility - it - cooling)  # type: ignore[operator]
    pue = total(TWINLOOP_FI_PUE) if sites.size == 1 else None
    if pue is None and facility is not None and it:
        pue = facility / it
    amb = vals[TWINLOOP_FI_AMBIENT_TEMP].lookup(size)[sites] if sites.size else np.zeros(0)
    ambient = float(np.nanmean(amb)) if np.isfinite(amb).any() else None
    return SitePower(
        ts=float(newest),
        facility_power_w=facility,
        it_power_w=it,
        cooling_power_w=cooling,
        losses_w=losses,
        pue=pue,
        ambient_temp_c=ambient,
    )


@dataclass(frozen=True)
class RackStats:
    """Per-rack aggregates now, aligned with ``Topology.racks``, and the fleet's throttling."""

    heat: list[RackHeat]
    slowdown_assumed_gpus: int
    throttling: Throttling


def _group_max(groups: NDArray[np.int64], values: F64, n: int) -> F64:
    out = np.full(n, -np.inf)
    ok = np.isfinite(values)
    np.maximum.at(out, groups[ok], values[ok])
    out[~np.isfinite(out)] = np.nan
    return out


def _group_mean(groups: NDArray[np.int64], values: F64, n: int) -> tuple[F64, F64, NDArray[np.int64]]:
    ok = np.isfinite(values)
    sums = np.bincount(groups[ok], weights=values[ok], minlength=n)
    counts = np.bincount(groups[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return mean.astype(np.float64), sums.astype(np.float64), counts.astype(np.int64)


def rack_stats(cur: duckdb.DuckDBPyConnection, db: TelemetryDB, now_window_s: float) -> RackStats:
    """Every rack's max/mean GPU temperature, power and throttled GPUs now, and throttling by reason."""
    topo = db.topology(cur)
    fields = db.field_ids(cur)
    _, newest = db.time_range(cur)
    n_racks = len(topo.racks)
    empty = Throttling(gpus_reporting=0, gpus_throttled=0, by_reason={})
    if newest is None or not n_racks:
        return RackStats([], 0, empty)
    vals = latest(cur, fields, (TEMP, POWER, REASONS, RACK_POWER, LIMIT), newest - now_window_s)
    size = len(topo.names)
    gpus = topo.ids_at(DEPTH["gpu"])
    g_rack = topo.rack[gpus].astype(np.int64)
    temp = vals[TEMP].lookup(size)[gpus]
    power = vals[POWER].lookup(size)[gpus]
    reasons = vals[REASONS].lookup(size)[gpus]
    max_t = _group_max(g_rack, temp, n_racks)
    mean_t, _, _ = _group_mean(g_rack, temp, n_racks)
    _, gpu_power, power_n = _group_mean(g_rack, power, n_racks)
    rack_power = vals[RACK_POWER].lookup(size)
    racks_ids = np.array([topo.by_name.get(r, -1) for r in topo.racks], dtype=np.int64)
    measured = np.where(racks_ids >= 0, rack_power[np.maximum(racks_ids, 0)], np.nan)
    power_w = np.where(np.isfinite(measured), measured, np.where(power_n > 0, gpu_power, np.nan))
    slow = topo.slowdown_c[gpus]
    assumed = np.isnan(slow)
    slow = np.where(assumed, default_slowdown_temp_c(), slow)
    headroom = -_group_max(g_rack, temp - slow, n_racks)  # the GPU nearest its own slowdown
    limit = vals[LIMIT].lookup(size)[gpus]
    both = np.isfinite(power) & np.isfinite(limit) & (limit > 0)
    p_sum = np.bincount(g_rack[both], weights=power[both], minlength=n_racks)
    l_sum = np.bincount(g_rack[both], weights=limit[both], minlength=n_racks)
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(l_sum > 0, p_sum / np.maximum(l_sum, 1e-9), np.nan)
    t_level = level_index(headroom, TEMP_HEADROOM_LEVELS)
    p_level = level_index(fraction, POWER_FRACTION_LEVELS)
    reporting = np.isfinite(reasons)
    mask = np.where(reporting, reasons, 0).astype(np.int64)
    throttled = (mask & THROTTLE_MASK) != 0
    throttled_per_rack = np.bincount(g_rack[throttled], minlength=n_racks)
    gpus_per_rack = np.bincount(g_rack, minlength=n_racks)
    by_reason = {name: int(((mask & bit) != 0).sum()) for bit, name in REASON_BITS.items() if bit & THROTTLE_MASK}
    heat = [
        RackHeat(
            rack=topo.racks[i],
            row=topo.rows[int(topo.rack_row[i])],
            gpus=int(gpus_per_rack[i]),
            max_gpu_temp_c=_num(max_t[i]),
            mean_gpu_temp_c=_num(mean_t[i]),
            power_w=_num(power_w[i]),
            throttled_gpus=int(throttled_per_rack[i]),
            temp_headroom_c=_num(headroom[i]),
            power_fraction=_num(fraction[i]),
            temp_level=int(t_level[i]) if t_level[i] >= 0 else None,
            power_level=int(p_level[i]) if p_level[i] >= 0 else None,
        )
        for i in range(n_racks)
    ]
    return RackStats(
        heat,
        int((assumed & np.isfinite(temp)).sum()),
        Throttling(
            gpus_reporting=int(reporting.sum()),
            gpus_throttled=int(throttled.sum()),
            by_reason={k: v for k, v in by_reason.items() if v},
        ),
    )


@dataclass(frozen=True)
class Buckets:
    """Bucketed aggregates of several fields for several entities on one time grid.

    ``values[(entity_id, field)]`` is aligned with ``ts`` (NaN where the entity had no sample).
    """

    ts: F64
    bucket_s: float | None
    values: dict[tuple[int, str], F64]


def bucket_width(since_s: float, until_s: float, points: int) -> float:
    """Bucket width so that ``[since, until)`` makes at most ``points`` buckets (at least 1 ms)."""
    return max((until_s - since_s) / points, 1e-3)


def buckets(
    cur: duckdb.DuckDBPyConnection,
    fields: dict[str, int],
    entity_ids: Sequence[int],
    specs: Sequence[tuple[str, str]],
    since_s: float,
    until_s: float,
    points: int,
) -> Buckets:
    """Per entity and time bucket, one aggregate per ``(field, agg)`` in ``specs`` (agg: avg, min, max, bit_or).

    Buckets without any sample of any requested entity are dropped, so sparse fields (a GPU sampled every
    10 s, bucketed at 1 s) come back without gaps of empty buckets.
    """
    width = bucket_width(since_s, until_s, points)
    present = [(f, a) for f, a in specs if f in fields]
    if not present or not entity_ids:
        return Buckets(np.zeros(0), width, {})
    rows = store_queries.bucket_aggregates(
        cur, [(fields[f], agg) for f, agg in present], entity_ids, since_s, until_s, width
    )
    used, slot = np.unique(rows.bucket, return_inverse=True)
    ts = since_s + used.astype(np.float64) * width
    ents, e_slot = np.unique(rows.entity_id, return_inverse=True)
    values: dict[tuple[int, str], F64] = {}
    for k, (f, _) in enumerate(present):
        grid = np.full((ents.size, used.size), np.nan)
        grid[e_slot, slot] = rows.columns[k]
        values.update({(int(e), f): grid[j] for j, e in enumerate(ents.tolist())})
    return Buckets(ts, width, values)


def as_list(arr: F64 | None, n: int) -> list[float | None]:
    """A JSON list with None for NaN (an all-None list of length ``n`` when ``arr`` is None)."""
    if arr is None:
        return [None] * n
    return [None if not math.isfinite(x) else float(x) for x in arr.tolist()]


def gpus_of_rack(topo: Topology, rack: str) -> tuple[list[int], list[int]]:
    """(node ids, GPU ids) of a rack, each in name order."""
    if rack not in topo.racks:
        return [], []
    idx = topo.racks.index(rack)
    members = np.flatnonzero(topo.rack == idx)
    nodes = sorted(
        (int(i) for i in members if topo.level[i] == DEPTH["node"]), key=lambda i: natural_key(topo.names[i])
    )
    gpus = sorted((int(i) for i in members if topo.level[i] == DEPTH["gpu"]), key=lambda i: natural_key(topo.names[i]))
    return nodes, gpus
