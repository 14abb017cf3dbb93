"""A fixed feature vector per incident, from what the loop has seen when the incident is first reported.

:class:`FeatureExtractor` watches the telemetry blocks the loop sees (``observe`` once per step, before or after
the detection pipeline of that step) and keeps a short ring buffer of per-GPU, per-rack/row, site and per-job
fields. ``features(incident)`` then describes the incident *as first reported*: its shape (members, root level,
how much of a job it covers), how its GPUs' temperature, power, clock, limit and activity moved against a
baseline a minute or five earlier (and against the GPUs that are not members), clock-event reasons and XIDs,
coolant, CDU and facility changes, and the loss / step-time / phase of the job it sits in. Nothing after the
report time and nothing of the ground truth is used.

The last block is the rule-based class at first report (one-hot over :class:`EventClass`): a classifier may
use it (a *stacked* model) or ignore it (``TELEMETRY_COLUMNS``). Every feature is finite: missing data gives 0
(with a flag where 0 is a meaningful value). The window lengths and clipping bounds are guesses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.power import (
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_HW_SLOWDOWN,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
)
from twinloop.ops.events import EventClass, Incident
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_MGMT_LIMIT,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_DEV_XID_ERRORS,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    TWINLOOP_FI_AMBIENT_TEMP,
    TWINLOOP_FI_CDU_FLOW,
    TWINLOOP_FI_CDU_SETPOINT,
    TWINLOOP_FI_CDU_SUPPLY_TEMP,
    TWINLOOP_FI_FACILITY_POWER,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
    TWINLOOP_FI_POWER_BUDGET,
    TWINLOOP_FI_PSU_STATE,
    TWINLOOP_FI_PUE,
    TWINLOOP_FI_RACK_COOLANT_TEMP,
)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

ROOT_LEVELS = ("gpu", "node", "rack", "row", "site", "job")
_SUSTAINED, _CHECKPOINT = 3.0, 4.0  # twinloop.twin.jobs.Phase codes as the job telemetry carries them

#: Feature names, in vector order (the rule one-hot block is last).
FEATURE_NAMES: tuple[str, ...] = (
    "log_n_members",
    *(f"root_{lvl}" for lvl in ROOT_LEVELS),
    "frac_members_busy",
    "job_coverage",
    "log_n_detections",
    "temp_delta_c",
    "temp_delta_contrast_c",
    "temp_slope_c_per_min",
    "temp_margin_c",
    "hbm_temp_delta_c",
    "power_delta_frac",
    "power_delta_contrast_frac",
    "power_to_limit_frac",
    "limit_delta_frac",
    "clock_delta_frac",
    "clock_delta_contrast_frac",
    "tensor_delta",
    "fb_delta_frac",
    "log_s_since_activity_change",
    "reason_sw_power_cap",
    "reason_sw_thermal",
    "reason_hw_slowdown",
    "reason_hw_power_brake",
    "xid_frac",
    "offline_frac",
    "coolant_delta_c",
    "cdu_supply_delta_c",
    "cdu_flow_delta_frac",
    "cdu_setpoint_delta_c",
    "facility_margin_frac",
    "budget_delta_frac",
    "pue_delta",
    "ambient_delta_c",
    "psu_degraded_frac",
    "has_job",
    "loss_z",
    "log_step_time_ratio",
    "log_tokens_ratio",
    "log_s_since_job_phase_change",
    "job_sustained",
    "job_checkpoint",
    *(f"rule_{c.value}" for c in EventClass),
)
N_FEATURES = len(FEATURE_NAMES)
RULE_COLUMNS: tuple[int, ...] = tuple(i for i, n in enumerate(FEATURE_NAMES) if n.startswith("rule_"))
TELEMETRY_COLUMNS: tuple[int, ...] = tuple(i for i in range(N_FEATURES) if i not in RULE_COLUMNS)

_GPU = {
    "temp": DCGM_FI_DEV_GPU_TEMP,
    "hbm": DCGM_FI_DEV_MEMORY_TEMP,
    "power": DCGM_FI_DEV_POWER_USAGE,
    "limit": DCGM_FI_DEV_POWER_MGMT_LIMIT,
    "clock": DCGM_FI_DEV_SM_CLOCK,
    "tensor": DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    "fb": DCGM_FI_DEV_FB_USED,
}
_JOB = {
    "loss": TWINLOOP_FI_JOB_LOSS,
    "step": TWINLOOP_FI_JOB_STEP_TIME,
    "tokens": TWINLOOP_FI_JOB_TOKENS_PER_S,
    "phase": TWINLOOP_FI_JOB_PHASE,
}
_SITE = {
    "facility": TWINLOOP_FI_FACILITY_POWER,
    "budget": TWINLOOP_FI_POWER_BUDGET,
    "pue": TWINLOOP_FI_PUE,
    "ambient": TWINLOOP_FI_AMBIENT_TEMP,
}
_ROW = {"supply": TWINLOOP_FI_CDU_SUPPLY_TEMP, "flow": TWINLOOP_FI_CDU_FLOW, "setpoint": TWINLOOP_FI_CDU_SETPOINT}


class _Ring:
    """The last ``size`` samples of a fixed-width vector, with their times."""

    def __init__(self, size: int, width: int) -> None:
        self.ts = np.full(size, -np.inf)
        self.data = np.full((size, width), np.nan)
        self.pos = 0

    def push(self, ts: float, values: F64) -> None:
        self.ts[self.pos] = ts
        self.data[self.pos] = values
        self.pos = (self.pos + 1) % self.ts.size

    def window(self, now: float, lo_s: float, hi_s: float, cols: I64 | None = None) -> F64:
        """Mean over samples with ``now - lo_s <= ts <= now - hi_s`` (NaN where none), per column."""
        rows = np.flatnonzero((self.ts >= now - lo_s) & (self.ts <= now - hi_s))
        block = self.data[rows] if cols is None else self.data[np.ix_(rows, cols)]
        ok = np.isfinite(block)
        count = ok.sum(axis=0)
        total = np.where(ok, block, 0.0).sum(axis=0)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def series(self, now: float, span_s: float, cols: I64) -> tuple[F64, F64]:
        """(times, mean over ``cols``) over the last ``span_s``, oldest first (NaN where all are missing)."""
        rows = np.flatnonzero(self.ts >= now - span_s)
        order = rows[np.argsort(self.ts[rows])]
        block = self.data[np.ix_(order, cols)]
        ok = np.isfinite(block)
        count = ok.sum(axis=1)
        mean = np.where(count > 0, np.where(ok, block, 0.0).sum(axis=1) / np.maximum(count, 1), np.nan)
        return self.ts[order], mean


#: ``facility_margin_frac`` when the site reports no power budget (or no facility power): as unconstrained as the
#: halls a model is trained on get (the twin's random training halls: 0.75 at most, median 0.57; a larger value
#: would extrapolate, and 2.0 swung the advisory's logits by 14). The training scenarios always report both.
NO_BUDGET_MARGIN = 0.75


def _f(x: float, lo: float = -1e3, hi: float = 1e3) -> float:
    """Finite and clipped (NaN → 0)."""
    return float(np.clip(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo), lo, hi))


def _mean(x: F64) -> float:
    ok = np.isfinite(x)
    return float(x[ok].mean()) if ok.any() else float("nan")


class FeatureExtractor:
    """Streaming telemetry memory + per-incident feature vectors (see module docstring).

    Args:
        gpu_ids: GPU entity ids (``site/row/rack/node/gpu``), in the order of the GPU field arrays.
        slowdown_temp_c: per-GPU slowdown temperature, °C.
        tdp_w: per-GPU default power limit, W.
        clock_max_mhz: per-GPU maximum SM clock, MHz.
        history_s: how much history to keep, s (the longest window is 330 s).
        dt_s: expected sampling interval, s (sizes the ring buffers).
    """

    def __init__(
        self,
        gpu_ids: Sequence[str],
        slowdown_temp_c: F64,
        tdp_w: F64,
        clock_max_mhz: F64,
        history_s: float = 360.0,
        dt_s: float = 1.0,
    ) -> None:
        self.gpu_ids = tuple(gpu_ids)
        n = len(self.gpu_ids)
        self.n_gpus = n
        self.slowdown_c = np.asarray(slowdown_temp_c, dtype=np.float64)
        self.tdp_w = np.asarray(tdp_w, dtype=np.float64)
        self.clock_max = np.asarray(clock_max_mhz, dtype=np.float64)
        size = max(8, int(np.ceil(history_s / max(dt_s, 1e-3))) + 2)
        self._gpu = {k: _Ring(size, n) for k in _GPU}
        self._site = _Ring(size, len(_SITE))
        parts = [g.split("/") for g in self.gpu_ids]
        self._prefix = {lvl: ["/".join(p[:k]) for p in parts] for lvl, k in (("row", 2), ("rack", 3), ("node", 4))}
        self._row: _Ring | None = None
        self._rack: _Ring | None = None
        self._level_ids: dict[str, list[str]] = {}
        self._gpu_level_index: dict[str, I64] = {}
        self._psu_state = np.zeros(n)
        self._reasons = np.zeros(n, dtype=np.int64)
        self._last_xid_ts = np.full(n, -np.inf)
        self._activity_ref = np.full((2, n), np.nan)
        self._last_activity_ts = np.full(n, -np.inf)
        self._job_index = np.full(n, -1, dtype=np.int64)
        self._job_ids: list[str] = []
        self._job_slot: dict[str, int] = {}
        self._job: dict[str, _Ring] = {}
        self._job_phase = np.zeros(0)
        self._job_phase_ts = np.zeros(0)
        self._size = size
        self._gpu_pos = {g: i for i, g in enumerate(self.gpu_ids)}
        self.now = -np.inf

    # --- streaming ------------------------------------------------------------------------------------------
    def _level_index(self, level: str, ids: Sequence[str]) -> I64:
        if self._level_ids.get(level) != list(ids):
            where = {e: i for i, e in enumerate(ids)}
            self._level_ids[level] = list(ids)
            self._gpu_level_index[level] = np.array([where.get(p, -1) for p in self._prefix[level]], dtype=np.int64)
        return self._gpu_level_index[level]

    def observe(
        self,
        ts: float,
        gpu: Mapping[str, NDArray[Any]] | None,
        facility: Mapping[str, Mapping[str, NDArray[Any]]] | None = None,
        level_ids: Mapping[str, Sequence[str]] | None = None,
        job_index: I64 | None = None,
        job_ids: Sequence[str] | None = None,
    ) -> None:
        """Take one step of telemetry.

        Args:
            ts: sample time, s.
            gpu: DCGM field → array over ``gpu_ids`` (None on steps without a GPU sample).
            facility: level → field → array (``rack``, ``row``, ``site``, ``job``, ``node``), or None.
            level_ids: entity ids of the ``rack``/``row``/``node`` arrays in ``facility``.
            job_index: per GPU, index into ``job_ids`` (-1: no job).
            job_ids: job entity ids, in the order of the ``job`` arrays.
        """
        self.now = ts
        if gpu is not None:
            self._observe_gpu(ts, gpu)
        if job_index is not None and job_ids is not None:
            self._observe_job_map(ts, job_index, job_ids)
        if facility is not None:
            self._observe_facility(ts, facility, level_ids or {}, job_ids)

    def _observe_gpu(self, ts: float, gpu: Mapping[str, NDArray[Any]]) -> None:
        nan = np.full(self.n_gpus, np.nan)
        for k, name in _GPU.items():
            self._gpu[k].push(ts, np.asarray(gpu.get(name, nan), dtype=np.float64))
        reasons = gpu.get(DCGM_FI_DEV_CLOCKS_EVENT_REASONS)
        self._reasons = np.zeros(self.n_gpus, np.int64) if reasons is None else np.asarray(reasons, np.int64)
        xid = gpu.get(DCGM_FI_DEV_XID_ERRORS)
        if xid is not None:
            self._last_xid_ts[np.asarray(xid) != 0] = ts
        # An activity field away from its slow reference marks a workload change (as the pipeline does).
        act = np.stack([np.asarray(gpu.get(_GPU[k], nan), dtype=np.float64) for k in ("tensor", "fb")])
        ref = self._activity_ref
        tol = np.stack([np.full(self.n_gpus, 0.05), 0.05 * np.abs(np.nan_to_num(ref[1]))])
        with np.errstate(invalid="ignore"):
            moved = (np.abs(act - ref) > tol).any(axis=0)
        self._last_activity_ts[moved] = ts
        self._activity_ref = np.where(np.isfinite(act), np.where(np.isnan(ref), act, ref + 0.01 * (act - ref)), ref)

    def _observe_job_map(self, ts: float, job_index: I64, job_ids: Sequence[str]) -> None:
        for j in job_ids:
            if j not in self._job_slot:
                self._job_slot[j] = len(self._job_ids)
                self._job_ids.append(j)
                self._job[j] = _Ring(self._size, len(_JOB))
                self._job_phase = np.append(self._job_phase, np.nan)
                self._job_phase_ts = np.append(self._job_phase_ts, ts)
        slot = np.array([self._job_slot[j] for j in job_ids] + [-1], dtype=np.int64)
        ji = np.asarray(job_index, dtype=np.int64)
        self._job_index = slot[np.where(ji >= 0, ji, len(job_ids))]

    def _observe_facility(self, ts: float, facility: Mapping[str, Mapping[str, NDArray[Any]]],
                          ids: Mapping[str, Sequence[str]], job_ids: Sequence[str] | None) -> None:  # fmt: skip
        site = facility.get("site", {})
        self._site.push(ts, np.array([float(np.asarray(site.get(f, [np.nan]))[0]) for f in _SITE.values()]))
        for level, names in (("row", _ROW), ("rack", {"coolant": TWINLOOP_FI_RACK_COOLANT_TEMP})):
            block = facility.get(level)
            if block is None or level not in ids:
                continue
            idx = self._level_index(level, ids[level])
            vals = np.stack([np.asarray(block[f], dtype=np.float64) for f in names.values()])  # (fields, entities)
            per_gpu = np.where(idx >= 0, vals[:, np.maximum(idx, 0)], np.nan).ravel()
            ring = self._row if level == "row" else self._rack
            if ring is None or ring.data.shape[1] != per_gpu.size:
                ring = _Ring(self._size, per_gpu.size)
                if level == "row":
                    self._row = ring
                else:
                    self._rack = ring
            ring.push(ts, per_gpu)
        node = facility.get("node")
        if node is not None and "node" in ids and TWINLOOP_FI_PSU_STATE in node:
            idx = self._level_index("node", ids["node"])
            state = np.asarray(node[TWINLOOP_FI_PSU_STATE], dtype=np.float64)
            self._psu_state = np.where(idx >= 0, state[np.maximum(idx, 0)], 0.0)
        jobs = facility.get("job")
        if jobs is not None and job_ids is not None:
            for jk, j in enumerate(job_ids):
                slot_k = self._job_slot[j]
                vals = np.array([float(np.asarray(jobs.get(f, [np.nan] * len(job_ids)))[jk]) for f in _JOB.values()])
                self._job[j].push(ts, vals)
                if vals[3] != self._job_phase[slot_k]:
                    self._job_phase[slot_k], self._job_phase_ts[slot_k] = vals[3], ts

    # --- features -------------------------------------------------------------------------------------------
    def member_index(self, incident: Incident) -> I64:
        """GPU indices an incident covers (its GPU members; a job's GPUs; the GPUs under its root)."""
        idx = [self._gpu_pos[m] for m in incident.members if m in self._gpu_pos]
        if idx:
            return np.unique(np.asarray(idx, dtype=np.int64))
        root = incident.root
        if root in self._job_slot:
            return np.flatnonzero(self._job_index == self._job_slot[root])
        prefix = root + "/"
        return np.asarray([i for i, g in enumerate(self.gpu_ids) if g.startswith(prefix) or g == root], np.int64)

    @staticmethod
    def root_level(root: str) -> str:
        """``gpu``, ``node``, ``rack``, ``row`` (or CDU), ``site`` or ``job`` from an entity id."""
        parts = root.split("/")
        if len(parts) >= 2 and parts[1] == "jobs":
            return "job"
        return ("site", "row", "rack", "node", "gpu")[min(len(parts), 5) - 1]

    def _delta(self, ring: _Ring, members: I64, others: I64, scale: F64 | float = 1.0) -> tuple[float, float]:
        """Member-mean change (now vs a minute earlier) and its contrast with the non-members, in ``scale``."""
        t = self.now
        d = (ring.window(t, 4.0, 0.0) - ring.window(t, 120.0, 60.0)) / scale
        dm = _mean(d[members])
        do = _mean(d[others]) if others.size else float("nan")
        return dm, (dm - do) if np.isfinite(do) else 0.0

    def _long_delta(self, ring: _Ring | None, members: I64, n_fields: int) -> F64:
        """Per field of a per-GPU-expanded facility ring: member-mean change over five minutes, then the
        member-mean baseline (NaN when not seen).
        """
        if ring is None:
            return np.full(2 * n_fields, np.nan)
        t = self.now
        base = ring.window(t, 330.0, 270.0).reshape(n_fields, self.n_gpus)[:, members]
        d = ring.window(t, 4.0, 0.0).reshape(n_fields, self.n_gpus)[:, members] - base
        return np.array([_mean(d[k]) for k in range(n_fields)] + [_mean(base[k]) for k in range(n_fields)])

    def _job_features(self, slot: int) -> list[float]:
        if slot < 0:
            return [0.0] * 7
        j = self._job_ids[slot]
        ring, t = self._job[j], self.now
        now = ring.window(t, 0.0, 0.0)
        times, loss = ring.series(t, 300.0, np.array([0]))
        past = loss[times <= t - 30.0]
        past = past[np.isfinite(past)]
        z = 0.0
        if past.size >= 5 and np.isfinite(now[0]):
            z = (now[0] - past.mean()) / max(float(past.std()), 1e-6 * abs(float(past.mean())) + 1e-9)
        _, step = ring.series(t, 300.0, np.array([1]))
        step_past = step[(times <= t - 30.0) & (step > 0)]
        step_ratio = np.log(now[1] / np.median(step_past)) if step_past.size and now[1] > 0 else 0.0
        _, tok = ring.series(t, 300.0, np.array([2]))
        tok_past = tok[(times <= t - 30.0) & np.isfinite(tok)]
        tok_ratio = np.log((now[2] + 1.0) / (np.median(tok_past) + 1.0)) if tok_past.size else 0.0
        phase = now[3]
        return [
            1.0,
            _f(z, -50.0, 50.0),
            _f(step_ratio, -5.0, 5.0),
            _f(tok_ratio, -10.0, 10.0),
            _f(np.log1p(max(0.0, t - self._job_phase_ts[slot])), 0.0, 20.0),
            float(phase == _SUSTAINED),
            float(phase == _CHECKPOINT),
        ]

    def _jobs_of(self, incident: Incident, level: str, members: I64) -> tuple[I64, float, int]:
        """The job slots of the members that run one, the largest share of one job they cover, and the job slot
        the incident is about (its root job, else the members' most common one; -1: none).
        """
        jobs = self._job_index[members]
        busy = jobs[jobs >= 0]
        coverage, slot = 0.0, -1
        if level == "job" and incident.root in self._job_slot:
            slot = self._job_slot[incident.root]
        elif busy.size:
            slot = int(np.bincount(busy).argmax())
        if busy.size:
            sizes = np.bincount(self._job_index[self._job_index >= 0], minlength=len(self._job_ids))
            counts = np.bincount(busy, minlength=len(self._job_ids))
            coverage = float(np.max(counts / np.maximum(sizes, 1)))
        return busy, coverage, slot

    def features(self, incident: Incident) -> F64:
        """The feature vector (``FEATURE_NAMES`` order) of ``incident`` as seen now (its first report)."""
        t = self.now
        members = self.member_index(incident)
        if members.size == 0:
            members = np.arange(self.n_gpus, dtype=np.int64)
        mask = np.zeros(self.n_gpus, dtype=bool)
        mask[members] = True
        others = np.flatnonzero(~mask)
        level = self.root_level(incident.root)
        busy, coverage, slot = self._jobs_of(incident, level, members)
        g = self._gpu
        temp_d, temp_c = self._delta(g["temp"], members, others)
        hbm_d, _ = self._delta(g["hbm"], members, others)
        pow_d, pow_c = self._delta(g["power"], members, others, self.tdp_w)
        lim_d, _ = self._delta(g["limit"], members, others, self.tdp_w)
        clk_d, clk_c = self._delta(g["clock"], members, others, self.clock_max)
        ten_d, _ = self._delta(g["tensor"], members, others)
        fb_now = g["fb"].window(t, 4.0, 0.0, members)
        fb_base = g["fb"].window(t, 120.0, 60.0, members)
        fb_d = _mean((fb_now - fb_base) / np.maximum(np.maximum(fb_now, fb_base), 1.0))
        times, temps = g["temp"].series(t, 30.0, members)
        ok = np.isfinite(temps)
        slope = float(np.polyfit(times[ok] - t, temps[ok], 1)[0]) * 60.0 if ok.sum() >= 3 else 0.0
        temp_now = g["temp"].window(t, 4.0, 0.0, members)
        power_now = g["power"].window(t, 4.0, 0.0, members)
        limit_now = g["limit"].window(t, 4.0, 0.0, members)
        clock_now = g["clock"].window(t, 4.0, 0.0, members)
        fb_last = g["fb"].window(t, 0.0, 0.0, members)
        reasons = self._reasons[members]
        row = self._long_delta(self._row, members, len(_ROW))
        rack = self._long_delta(self._rack, members, 1)
        site_now = self._site.window(t, 4.0, 0.0)
        site_base = self._site.window(t, 330.0, 270.0)
        fac, budget, pue, ambient = site_now
        feats = [
            np.log1p(members.size),
            *(float(level == lvl) for lvl in ROOT_LEVELS),
            busy.size / members.size,
            coverage,
            np.log1p(incident.n_detections),
            _f(temp_d, -50, 50),
            _f(temp_c, -50, 50),
            _f(slope, -100, 100),
            _f(np.nanmin(self.slowdown_c[members] - temp_now) if np.isfinite(temp_now).any() else np.nan, -20, 80),
            _f(hbm_d, -50, 50),
            _f(pow_d, -2, 2),
            _f(pow_c, -2, 2),
            _f(_mean(power_now / np.maximum(limit_now, 1.0)), 0, 3),
            _f(lim_d, -2, 2),
            _f(clk_d, -2, 2),
            _f(clk_c, -2, 2),
            _f(ten_d, -1, 1),
            _f(fb_d, -1, 1),
            _f(np.log1p(max(0.0, t - float(self._last_activity_ts[members].max()))), 0.0, 20.0),
            float(np.mean(reasons & CLOCK_EVENT_SW_POWER_CAP > 0)),
            float(np.mean(reasons & CLOCK_EVENT_SW_THERMAL > 0)),
            float(np.mean(reasons & CLOCK_EVENT_HW_SLOWDOWN > 0)),
            float(np.mean(reasons & CLOCK_EVENT_HW_POWER_BRAKE > 0)),
            float(np.mean(self._last_xid_ts[members] >= t - 60.0)),
            float(np.mean((np.nan_to_num(clock_now, nan=1.0) <= 0.0) & (np.nan_to_num(fb_last, nan=1.0) <= 0.0))),
            _f(rack[0], -50, 50),
            _f(row[0], -50, 50),
            _f(row[1] / row[4] if row[4] > 0 else 0.0, -2, 2),
            _f(row[2], -50, 50),
            # No budget reported (most live clusters) is no facility constraint, not a facility at its budget
            # (NaN → 0 read as "no margin" and made every incident on a real GPU a facility power excursion).
            _f((budget - fac) / budget if budget > 0 else NO_BUDGET_MARGIN, -2, 2),
            _f((site_now[1] - site_base[1]) / site_base[1] if site_base[1] > 0 else 0.0, -2, 2),
            _f(pue - site_base[2], -5, 5),
            _f(ambient - site_base[3], -50, 50),
            float(np.mean(self._psu_state[members] > 0)),
            *self._job_features(slot),
            *(float(incident.event_class == c) for c in EventClass),
        ]
        return np.asarray(feats, dtype=np.float64)
