"""The per-step detection pipeline: per-field detectors + cross-signal rules + topology grouping.

``DetectionPipeline.step(ts, fields, ...)`` takes one sample of every GPU field (arrays of shape
``(n_gpus,)``, NaN = missing) and, optionally, the job of each GPU and per-job fields, and returns the
incident updates of this step (opened, grown, merged, closed). Everything is vectorized over GPUs; Python
loops run only over what fired (rising edges, incident roots) and over jobs.

How a firing becomes a class:

* hardware rules (cooling, thermal/power throttle, power delivery, XID) and the CDU rules (setpoint against
  the commanded one, see :meth:`DetectionPipeline.commanded_setpoint`; pump flow; exchanger capacity) give
  their own class;
* stragglers (by SM clock, and by the rank's own step time ``TWINLOOP_FI_RANK_STEP_TIME``) are judged against the
  GPU's job peers of the same GPU model at the same time; one that a throttle or cooling rule explains, that runs
  under a cap below its peers' or one the loop applied (:meth:`DetectionPipeline.loop_setting`), or that belongs to
  a serving fleet (:meth:`DetectionPipeline.replica_job`) is dropped; a serving fleet's ranks are judged against the
  fleet's instead, by their decode step over a longer window (:mod:`.replica_rules`: its replicas' loads differ);
  a fleet's GPU spinning in a stuck collective while the fleet serves is a hung replica (``job_hang`` at its node);
* firings of one class with a different mechanism (a GPU's own thermal path vs its row's coolant or air) group
  apart, so a fault inside an open incident's scope keeps its own incident; throttling spread over a row, or on
  a GPU no warmer for its power than its row's GPUs, is the row's;
* a straggler (either rule) on a GPU that runs more compute processes than its job's ranks there, and a job slowdown
  on a job with such a GPU, is a co-tenant's doing (:mod:`.co_tenant`): a straggler incident rooted at that GPU,
  its detections from ``rule:co_tenant`` naming the processes and the slowdown, instead of the straggler's;
* job rules (suspected SDC, hang, job slowdown = straggler) fire per job and open one incident per job (the
  root is the job entity); facility rules (PUE rise, power budget) fire for the site (root: the site);
  the SDC rule only fires when no hardware fault that can change a step's results or replay it (an XID, a
  power-delivery fault: ``_CHANGES_RESULTS``) *began* on the job's GPUs within ``hw_window_s`` (an alarm that stays
  on does not blind it, and a reading that merely moved, a throttle or a cooling alarm does not veto it at all);
* a per-field detector alarm that no rule explains is a benign workload phase change when an activity field
  (tensor/DRAM/SM activity, utilization) of the same GPU changed within ``phase_window_s``, and
  ``unclassified`` otherwise; both are ``info`` severity (``emit_info=False`` drops them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.detect.base import Detector, make_detector
from twinloop.ops.detect.cdu_rules import CduSetpointRule, cdu_rules
from twinloop.ops.detect.co_tenant import SIGNATURE as CO_TENANT
from twinloop.ops.detect.co_tenant import SOURCE as CO_TENANT_SOURCE
from twinloop.ops.detect.co_tenant import CoTenants
from twinloop.ops.detect.facility_rules import FacilityRules
from twinloop.ops.detect.grouping import IncidentGrouper
from twinloop.ops.detect.job_rules import (
    HangRule,
    JobSlowdownRule,
    RankStragglerRule,
    SdcRule,
    StragglerRule,
    group_median,
)
from twinloop.ops.detect.replica_rules import ReplicaHangRule, ReplicaStragglerRule
from twinloop.ops.detect.rules import (
    POWER,
    POWER_LIMIT,
    SM_CLOCK,
    TEMP,
    GpuLimits,
    Rule,
    RuleFrame,
    hardware_rules,
)
from twinloop.ops.events import FAULT_CLASSES, Detection, DetectionKind, EventClass, Impact, Incident
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    DCGM_FI_PROF_DRAM_ACTIVE,
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
    DCGM_FI_PROF_SM_ACTIVE,
    PROFILING_PREFIX,
    TWINLOOP_FI_GPU_COMPUTE_PROCESSES,
)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Fields watched by a per-field detector by default, and which detector.
DEFAULT_FIELD_DETECTORS: Mapping[str, str] = {
    DCGM_FI_DEV_GPU_TEMP: "ewma_zscore",
    DCGM_FI_DEV_MEMORY_TEMP: "ewma_zscore",
    DCGM_FI_DEV_POWER_USAGE: "cusum",
    DCGM_FI_DEV_SM_CLOCK: "cusum",
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: "cusum",
    DCGM_FI_PROF_DRAM_ACTIVE: "cusum",
    DCGM_FI_DEV_FB_USED: "cusum",
}

#: Reading resolution per field (NVML: whole °C, 15 MHz SM clock bins; power "accurate to within +/- 5 W" per the
#: nvidia-smi documentation of power.draw). A per-field detector's scale floor is at least the rounding noise of
#: that resolution (step / sqrt(12)), so a reading flickering between two bins, or an idle GPU's power moving by
#: a watt, is no change; set ``min_std_abs`` in ``detector_params`` to override.
FIELD_RESOLUTION: Mapping[str, float] = {
    DCGM_FI_DEV_GPU_TEMP: 1.0,
    DCGM_FI_DEV_MEMORY_TEMP: 1.0,
    DCGM_FI_DEV_SM_CLOCK: 15.0,
    DCGM_FI_DEV_POWER_USAGE: 5.0,
}

#: Fields whose change means the workload changed (explains a power/temperature change as benign).
ACTIVITY_FIELDS: frozenset[str] = frozenset(
    {
        DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
        DCGM_FI_PROF_DRAM_ACTIVE,
        DCGM_FI_PROF_SM_ACTIVE,
        DCGM_FI_DEV_GPU_UTIL,
        DCGM_FI_DEV_FB_USED,
    }
)

#: What ``PipelineConfig.threshold_scale`` multiplies, per alarm source (``Detection.source``): the threshold
#: attributes of each rule (larger = fewer alarms). Rules that fire on hardware bits (power delivery, XID) have none.
RULE_THRESHOLDS: Mapping[str, tuple[str, ...]] = {
    "rule:cooling": ("rise_c",),
    "rule:coolant": ("rate_c_per_s", "above_c"),
    "rule:cdu_setpoint": ("tolerance_c",),
    "rule:cdu_pump": ("flow_drop",),
    "rule:cdu_capacity": ("rise",),
    "rule:thermal_throttle": ("clock_drop",),
    "rule:power_throttle": ("clock_drop",),
    "rule:straggler": ("z_threshold", "min_deficit"),
    "rule:rank_straggler": ("z_threshold", "min_deficit"),
    "rule:replica_straggler": ("z_threshold", "min_deficit"),
    "rule:sdc": ("z_threshold",),
    "rule:hang": ("n_steps", "min_stall_s"),
    "rule:replica_hang": ("min_stall_s",),
    "rule:job_slowdown": ("log_rise",),
    "rule:facility": ("pue_rise", "budget_drop"),
}
#: ... and the decision-threshold parameter of each per-field detector kind (the source is the field name).
DETECTOR_THRESHOLDS: Mapping[str, str] = {
    "cusum": "h",
    "ewma_zscore": "threshold",
    "seasonal": "threshold",
    "page_hinkley": "lambda_",
}

#: Incident classes whose impact carries ``job_slowdown`` (what the respond stage prices a restart with): a straggler,
#: and a GPU running hot, whose failing thermal path may or may not slow its job (a GPU its own thermal control holds
#: under slowdown in a power-bound job costs it nothing: round 5's `thermal-move` requeued such a job onto slower GPUs).
_PRICED_SLOWDOWN = frozenset({EventClass.STRAGGLER, EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE})
_FOLLOWS_POWER = frozenset({DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_MEMORY_TEMP})
_COOLING_RULES = frozenset({"cooling", "coolant", "cdu_setpoint", "cdu_pump", "cdu_capacity"})
#: Rules on the CDU's own reports: no signal of the GPUs' own hardware changed, so they do not veto an SDC.
_CDU_SIDE = frozenset({"cdu_setpoint", "cdu_pump", "cdu_capacity"})
#: Hardware rules whose onset can explain a loss or gradient-norm jump: a GPU error (XID: ECC, illegal access, fell
#: off the bus) can corrupt a step's values or make the job replay steps, and a power-delivery fault can brown out or
#: power off a node. A throttle, a cooling alarm or a per-field reading that moved changes how fast a GPU computes,
#: not what it computes, and on a job of hundreds of GPUs some GPU shows one every few minutes: in the default hall's
#: loop-off passes, seeds 0-4, a thermal-throttle onset or a temperature alarm on one or a few of the 512 GPUs began
#: within ``hw_window_s`` before the injected SDC in 4 seeds of 5 and vetoed it (caught 26-102 s late, or never once
#: the loss level had absorbed the jump). They do not veto an SDC; they still explain a job slowdown
#: (``RuleFrame.hw_recent``).
_CHANGES_RESULTS = frozenset({"xid", "power_delivery"})
#: Grouping signature of the ``cooling`` rule's firings (a GPU's own thermal path), apart from the coolant's.
THERMAL_PATH = "thermal_path"
_EXPLAINS_STRAGGLER = frozenset({"thermal_throttle", "power_throttle", "power_delivery"}) | _COOLING_RULES


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of :class:`DetectionPipeline`: which detector watches each field, grouping and classification.

    Attributes:
        field_detectors: field name → detector name (``REGISTRY``) for the per-field detectors.
        detector_params: detector name → parameter overrides.
        window_s, quiet_s, settle_s, min_fraction: grouping (see :class:`IncidentGrouper`).
        hw_window_s: a hardware onset this recent explains a job slowdown on the GPU's job, and one of an XID or
            power-delivery fault vetoes a suspected SDC on it, s.
        local_excess_c: a throttling GPU this much (and 4 robust sigmas of the row's spread) warmer for its power
            than its row's same-model GPUs has a thermal fault of its own; less, and its throttling is the row's
            (grouped as one row incident), °C.
        phase_window_s: an activity change this recent makes a power/temperature change benign, s.
        thermal_window_s: a benign power change or a commanded coolant setpoint change this recent makes a
            temperature change benign, and a cooling rule this recent on a GPU explains its per-field alarms (the
            aftermath of its coolant changing), s.
        risk_horizon_h: hours of work at risk per affected GPU (time since a checkpoint; a guess).
        emit_info: also report benign / unclassified changes (``info`` severity).
        threshold_scale: alarm source (``rule:<name>`` or a watched field) → factor on its thresholds
            (:data:`RULE_THRESHOLDS`, :data:`DETECTOR_THRESHOLDS`; > 1 = fewer alarms), e.g. learned from labels.
        own_processes_per_gpu: compute processes a job runs on each of its GPUs (its ranks there); more is a
            co-tenant's (:mod:`.co_tenant`).
    """

    field_detectors: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_FIELD_DETECTORS))
    detector_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    window_s: float = 30.0
    quiet_s: float = 120.0
    settle_s: float = 5.0
    min_fraction: float = 0.5
    hw_window_s: float = 120.0
    local_excess_c: float = 5.0
    phase_window_s: float = 180.0
    thermal_window_s: float = 900.0
    risk_horizon_h: float = 1.0
    emit_info: bool = True
    threshold_scale: Mapping[str, float] = field(default_factory=dict)
    own_processes_per_gpu: int = 1


def _field_params(name: str, detector: str, overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Parameters of ``detector`` watching field ``name``: the overrides, plus the field's resolution floor."""
    params = dict(overrides.get(detector, {}))
    resolution = FIELD_RESOLUTION.get(name)
    if resolution is not None and "min_std_abs" not in params:
        from twinloop.ops.detect import load_variants
        from twinloop.ops.detect.base import REGISTRY

        load_variants()
        cls = REGISTRY.get(detector)
        if cls is not None and "min_std_abs" in {f.name for f in dataclasses.fields(cls.params_cls)}:
            params["min_std_abs"] = float(resolution / np.sqrt(12.0))
    return params


class DetectionPipeline:
    """Detectors + rules + grouping over a fixed set of GPUs.

    Args:
        entities: GPU entity ids (``site/row/rack/node/gpu``), in the order of every field array.
        limits: per-GPU physical limits (default: H100 SXM from the catalog).
        cdu_of_rack: optional rack id → CDU id map (cooling incidents group by CDU).
        config: settings.
    """

    def __init__(
        self,
        entities: Sequence[str],
        limits: GpuLimits | None = None,
        cdu_of_rack: Mapping[str, str] | None = None,
        config: PipelineConfig | None = None,
    ) -> None:
        self.entities = tuple(entities)
        n = len(self.entities)
        self.config = config or PipelineConfig()
        c = self.config
        self.limits = limits or GpuLimits.default(n)
        self.detectors: dict[str, Detector[Any]] = {
            f: make_detector(name, source=f"field_detectors.{f}", **_field_params(f, name, c.detector_params))
            for f, name in c.field_detectors.items()
        }
        self.hw_rules: list[Rule] = hardware_rules() + cdu_rules()
        self._cdu_of_rack = dict(cdu_of_rack or {})
        self.straggler = StragglerRule()
        self.rank_straggler = RankStragglerRule()
        self.replica_straggler = ReplicaStragglerRule()
        self.replica_hang = ReplicaHangRule()
        self.job_rules: list[Rule] = [SdcRule(), HangRule(), JobSlowdownRule()]
        self.facility_rules = FacilityRules()
        self.co_tenants = CoTenants(self.entities, c.own_processes_per_gpu)
        self._foreign = np.zeros(n, dtype=bool)
        self._scale_thresholds(c.threshold_scale)
        self._site_firing: set[EventClass] = set()
        #: Per site class, the signature of its current incident's cause (see :meth:`_facility_stage`).
        self._site_signature: dict[EventClass, str] = {}
        self.grouper = IncidentGrouper(
            self.entities,
            cdu_of_rack,
            window_s=c.window_s,
            quiet_s=c.quiet_s,
            settle_s=c.settle_s,
            min_fraction=c.min_fraction,
            impact_fn=self._impact,
        )
        self.site = self.entities[0].split("/")[0] if self.entities else "site"
        self.n_gpus = n
        self.out_of_order_count = 0
        self._checked_entities: Sequence[str] | None = None
        self._last_ts = -np.inf
        self._dts: list[float] = []
        self.dt_s = 1.0
        #: A GPU this far below its job's same-model median clock is slowed (by the cause firing on it).
        self.slow_clock = 0.03
        self._prev_fired: dict[str, NDArray[np.bool_]] = {}
        self._last_hw = np.full(n, -np.inf)
        self._hw_onset = np.full(n, -np.inf)
        self._fault_onset = np.full(n, -np.inf)  # last onset of a fault that can change results (_CHANGES_RESULTS)
        self._last_activity = np.full(n, -np.inf)
        self._last_explainer = np.full(n, -np.inf)
        self._last_cooling = np.full(n, -np.inf)
        self._last_thermal_path = np.full(n, -np.inf)
        self._last_power = np.full(n, -np.inf)
        self._commanded_c = np.full(n, np.nan)  # the coolant setpoint last commanded to each GPU's CDU
        self._last_commanded = np.full(n, -np.inf)  # when it last changed
        self._activity_ref: dict[str, F64] = {}
        self._slots: dict[str, int] = {}
        self._slot_names: list[str] = []
        self._job_slot = np.full(n, -1, dtype=np.int64)
        self._job_size = np.zeros(0)
        self._temp = np.full(n, np.nan)
        self._power = np.full(n, np.nan)
        # Power through each GPU's thermal RC (the power its die temperature reflects now) and when last updated.
        self._power_rc = np.full(n, np.nan)
        self._power_rc_ts = np.full(n, np.nan)
        self._limit = self.limits.tdp_w.copy()
        self._loop_limited = np.zeros(n, dtype=bool)
        self._replica_jobs: set[str] = set()

    def replica_job(self, job: str, replicas: bool = True) -> None:
        """Tell the straggler rules that ``job`` (its id as in ``job_ids``) is a fleet of independent replicas (a
        serving fleet behind a router), not one synchronous job: its GPUs run different loads at different clocks
        and nobody waits for the slowest, so none of them is a straggler of the others.
        """
        (self._replica_jobs.add if replicas else self._replica_jobs.discard)(job)

    def compute_processes(self, processes: Mapping[str, str]) -> None:
        """Tell the co-tenant explanation who runs on each GPU (GPU id -> the NVML source's ``compute_processes``
        label text): named in its incidents. The count itself comes with the fields.
        """
        self.co_tenants.tell(processes)

    def loop_setting(self, target: str, limited: bool) -> int:
        """Tell the straggler rules that the loop capped (``limited``) or released the GPUs under ``target``
        (a GPU, node, rack, row, site or job entity): a GPU slow because of a power cap or clock lock the loop
        applied is expected, not a straggler. Returns how many GPUs it covers.
        """
        job = target.rsplit("/jobs/", 1)[1] if "/jobs/" in target else None
        if job is not None:
            slot = self._slots.get(job, self._slots.get(target))
            idx = np.flatnonzero(self._job_slot == slot) if slot is not None else np.zeros(0, dtype=np.int64)
        else:
            idx = np.fromiter(
                (i for i, e in enumerate(self.entities) if e == target or e.startswith(target + "/")), dtype=np.int64
            )
        self._loop_limited[idx] = limited
        return int(idx.size)

    def commanded_setpoint(self, cdu: str, setpoint_c: float, at_s: float | None = None) -> int:
        """Tell the ``cdu_setpoint`` rule the supply setpoint commanded to ``cdu`` (in force from ``at_s``, s).

        Call it with each CDU's configured setpoint before the first step and whenever the control system (the
        loop, an operator) writes a new one; ``nan`` stops the rule judging that CDU (e.g. its own PID owns the
        setpoint). The CDU's GPUs are those of the racks ``cdu_of_rack`` maps to it, or else those under the
        entity ``cdu``. Returns how many GPUs it covers.
        """
        racks = {rack for rack, c in self._cdu_of_rack.items() if c == cdu}
        if racks:
            gpus = [i for i, e in enumerate(self.entities) if e.rsplit("/", 2)[0] in racks]
        else:
            gpus = [i for i, e in enumerate(self.entities) if e.startswith(cdu + "/")]
        idx = np.asarray(gpus, dtype=np.int64)
        for rule in self.hw_rules:
            if isinstance(rule, CduSetpointRule) and idx.size:
                rule.commanded(idx, setpoint_c, -np.inf if at_s is None else at_s)
        # A value told with its time is a command the loop saw given; one without is a write log's (the first is
        # the configured setpoint, no change).
        before = self._commanded_c[idx]
        moved = np.isfinite(before) & (before != setpoint_c) if at_s is None else np.ones(idx.size, dtype=bool)
        self._last_commanded[idx[moved]] = self._last_ts if at_s is None else at_s
        self._commanded_c[idx] = setpoint_c
        return int(idx.size)

    # --- helpers ----------------------------------------------------------------------------------------------
    def _scale_thresholds(self, scale: Mapping[str, float]) -> None:
        rules: dict[str, object] = {
            f"rule:{r.name}": r
            for r in (
                *self.hw_rules,
                self.straggler,
                self.rank_straggler,
                self.replica_straggler,
                self.replica_hang,
                *self.job_rules,
            )
        }
        rules["rule:facility"] = self.facility_rules
        for source, m in scale.items():
            where = f"threshold_scale.{source}"
            if not (np.isfinite(m) and m > 0):
                raise InputError("pipeline", where, f"{m} (allowed: a finite number > 0)")
            det = self.detectors.get(source)
            if det is not None and det.name in DETECTOR_THRESHOLDS:
                attr = DETECTOR_THRESHOLDS[det.name]
                params = {
                    **_field_params(source, det.name, self.config.detector_params),
                    attr: getattr(det.params, attr) * m,
                }
                self.detectors[source] = make_detector(det.name, source=where, **params)
            elif source in RULE_THRESHOLDS and source in rules:
                for attr in RULE_THRESHOLDS[source]:
                    setattr(rules[source], attr, getattr(rules[source], attr) * m)
            else:
                allowed = sorted({*RULE_THRESHOLDS, *self.detectors})
                raise InputError("pipeline", where, f"no tunable threshold (allowed: {', '.join(allowed)})")

    def _observe_dt(self, ts: float) -> None:
        if np.isfinite(self._last_ts):
            self._dts.append(ts - self._last_ts)
            if len(self._dts) > 31:
                del self._dts[0]
            self.dt_s = float(np.median(self._dts))
        self._last_ts = ts

    def _job_entity(self, job: str) -> str:
        return job if "/" in job else f"{self.site}/jobs/{job}"

    def _map_jobs(
        self, job_index: I64 | None, job_ids: Sequence[str] | None, job_fields: Mapping[str, F64] | None
    ) -> dict[str, F64]:
        if job_index is None or job_ids is None:
            self._job_slot = np.full(self.n_gpus, -1, dtype=np.int64)
            return {}
        for j in job_ids:
            if j not in self._slots:
                self._slots[j] = len(self._slot_names)
                self._slot_names.append(j)
        slot_of = np.fromiter((self._slots[j] for j in job_ids), dtype=np.int64, count=len(job_ids))
        ji = np.asarray(job_index, dtype=np.int64)
        if ji.shape != (self.n_gpus,) or (ji >= len(job_ids)).any():
            raise InputError("pipeline", "job_index", f"shape ({self.n_gpus},), values -1..{len(job_ids) - 1}")
        self._job_slot = np.where(ji >= 0, slot_of[np.maximum(ji, 0)] if len(job_ids) else -1, -1)
        n_slots = len(self._slot_names)
        in_job = self._job_slot >= 0
        self._job_size = np.bincount(self._job_slot[in_job], minlength=n_slots).astype(np.float64)
        out: dict[str, F64] = {}
        for name, values in (job_fields or {}).items():
            arr = np.full(n_slots, np.nan)
            arr[slot_of] = np.asarray(values, dtype=np.float64)
            out[name] = arr
        return out

    def _slowing(self, frame: RuleFrame, explained: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """GPUs a known cause (a throttle, power or cooling rule firing now) slows: clocked ``slow_clock`` below the
        median of their job's same-model GPUs (all of them when no clock is reported). An alarm on a GPU that runs
        at full speed (lost PSU redundancy the supplies carry) explains no job slowdown.
        """
        clock = frame.gpu.get(SM_CLOCK)
        if clock is None or not explained.any():
            return explained
        model, n_models = frame.limits.models()
        group = np.where(frame.job_slot >= 0, frame.job_slot * n_models + model, -1)
        med, _ = group_median(clock, group, max(frame.n_slots * n_models, 1))
        with np.errstate(invalid="ignore"):
            slow = ~(clock >= (1.0 - self.slow_clock) * med[np.maximum(group, 0)])
        return explained & slow

    def _filter_power(self, ts: float, power: F64) -> None:
        """Advance the RC-filtered power: an exact first-order lag of time constant ``thermal_tau_s`` over the
        time since each GPU's last reading (a GPU's first reading starts it).
        """
        ok = np.isfinite(power)
        with np.errstate(invalid="ignore"):
            a = -np.expm1(-(ts - self._power_rc_ts) / self.limits.thermal_tau_s)
        fresh = ok & ~np.isfinite(self._power_rc)
        lagged = np.where(ok, self._power_rc + a * (power - self._power_rc), self._power_rc)
        self._power_rc = np.where(fresh, power, lagged)
        self._power_rc_ts = np.where(ok, ts, self._power_rc_ts)

    def _thermal_excess(self, frame: RuleFrame) -> F64:
        """Per GPU: its die temperature at its power, less the median of its row's same-model GPUs, °C
        (``T - R·P``: the temperature its coolant or inlet air would explain), cut down to
        ``local_excess_c · z / 4`` where ``z``, its robust z-score among those GPUs *relative to its own* ``R·P``, is
        under 4: so ``>= local_excess_c`` means at least that many degrees *and* 4 robust sigmas; 0 where unknown.

        Two things make a healthy GPU look warm for its power, both seen on ``mixed_hall`` (A100s capped, drained
        and their jobs requeued, each at exactly the temperature its coolant and its own healthy R gave):

        * thermal lag: ``P`` is the power through the GPU's thermal RC (:meth:`_filter_power`), the power its die
          temperature reflects; with the instantaneous power, GPUs whose load had just risen (still warming) looked
          cool, and those already held at their slowdown temperature looked warm against them;
        * spread in R: manufacturing spread and a failing thermal interface both *multiply* a GPU's thermal
          resistance, so a healthy GPU's excess grows with its power. In °C, the spread of a row that mixes idle
          and busy GPUs is the idle ones' (small), and a busy GPU 10 % above the catalog R stood out; in units of
          its own ``R·P`` the spread is that of R itself.
        """
        t = frame.gpu.get(TEMP)
        if t is None or frame.gpu.get(POWER) is None:
            return np.zeros(self.n_gpus)
        p = np.where(np.isfinite(self._power_rc), self._power_rc, frame.gpu[POWER])
        rp = self.limits.thermal_resistance_c_per_w * p
        model, n_models = self.limits.models()
        group = self.grouper.row_index * n_models + model
        n_groups = int(group.max(initial=0)) + 1
        med, _ = group_median(t - rp, group, n_groups)
        excess = t - rp - med[group]
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(rp > 0, excess / rp, np.nan)  # its R above its peers', as a fraction of its own R
            rel_med, _ = group_median(rel, group, n_groups)
            rel_dev = rel - rel_med[group]
            mad, _ = group_median(np.abs(rel_dev), group, n_groups)
            # An idle GPU's few degrees of R·P round to a handful of values, which can make the whole group's
            # spread look narrow; the busier half alone measures R well. The wider of the two is the spread (a
            # GPU not judged local stays in its row's incident, and the cooling rule still finds a failing path).
            rp_med, _ = group_median(rp, group, n_groups)
            busier = np.where(rp >= rp_med[group], group, -1)
            busy_med, _ = group_median(rel, busier, n_groups)
            busy_mad, _ = group_median(np.abs(rel - busy_med[group]), busier, n_groups)
            mad = np.fmax(mad, busy_mad)
            z = rel_dev / np.maximum(1.4826 * mad[group], 1e-9)
            out = np.minimum(excess, self.config.local_excess_c * z / 4.0)
        return np.where(np.isfinite(out), out, 0.0)

    def _impact(self, cls: EventClass, members: I64) -> Impact:
        slots = self._job_slot[members]
        jobs = np.unique(slots[slots >= 0])
        # Whole jobs stop and an idle GPU risks no work; with no job information every member counts as busy.
        at_risk_gpus = float(self._job_size[jobs].sum()) if self._slot_names else float(members.size)
        if cls == EventClass.GPU_HARDWARE_ERROR:
            # A fatal XID takes the GPU out of service until a reset or repair, idle or not (and a GPU that fell
            # off the bus has already been dropped by its job, so its job no longer counts it).
            at_risk_gpus = max(at_risk_gpus, float(members.size))
        with np.errstate(invalid="ignore"):
            t_margin = self.limits.slowdown_temp_c[members] - self._temp[members]
            p_margin = self._limit[members] - self._power[members]
        power_margin = float(np.nanmin(p_margin)) if np.isfinite(p_margin).any() else float("inf")
        if cls == EventClass.FACILITY_POWER_EXCURSION:
            power_margin = self.facility_rules.margin_w  # the site's margin to its budget
        return Impact(
            gpu_hours_at_risk=at_risk_gpus * self.config.risk_horizon_h,
            temp_margin_c=float(np.nanmin(t_margin)) if np.isfinite(t_margin).any() else float("inf"),
            power_margin_w=power_margin,
            n_gpus=int(members.size),
            job_slowdown=self._job_slowdown(members) if cls in _PRICED_SLOWDOWN else None,
        )

    def _job_slowdown(self, members: I64) -> float | None:
        """The largest fraction of its job's throughput a member straggler (or a GPU with a failing thermal path)
        costs (the respond stage weighs it against a restart): by the ranks' step times where the job reports them
        (the job waits for its slowest rank, whatever its GPU model), else by clock against its same-model peers.
        """
        for rule in (self.replica_straggler, self.rank_straggler, self.straggler):
            known = rule.pace_known
            if known.shape[0] == self.n_gpus and members.size and known[members].any():
                return float(rule.job_slowdown[members].max())
        return None

    def _onsets(
        self, ts: float, key: str, fired: NDArray[np.bool_], score: F64, cls: EventClass, kind: str, source: str
    ) -> list[tuple[int, Detection]]:
        prev = self._prev_fired.get(key)
        rising = fired & ~prev if prev is not None and prev.shape == fired.shape else fired
        self._prev_fired[key] = fired
        k: DetectionKind = "change_point" if kind == "change_point" else "anomaly"
        return [
            (i, Detection(ts, self.entities[i], source, float(score[i]), k, cls, key))
            for i in np.flatnonzero(rising).tolist()
        ]

    # --- the step ---------------------------------------------------------------------------------------------
    def step(
        self,
        ts: float,
        fields: Mapping[str, NDArray[np.float64]],
        job_index: I64 | None = None,
        job_ids: Sequence[str] | None = None,
        job_fields: Mapping[str, NDArray[np.float64]] | None = None,
        *,
        site_fields: Mapping[str, Any] | None = None,
        entities: Sequence[str] | None = None,
    ) -> list[Incident]:
        """Process one sample of every GPU.

        Args:
            ts: sample time, s; a time not after the previous one is dropped and counted.
            fields: field name → values (n_gpus,), NaN = missing.
            job_index: per GPU, index into ``job_ids`` (-1 = no job).
            job_ids: job ids (bare, or entity ids ``<site>/jobs/<id>``) of this step.
            job_fields: job field name → values (len(job_ids),).
            site_fields: site field name → value (PUE, facility / IT power, power budget) for the facility rules.
            entities: the GPU ids of the arrays, if the caller wants them checked against the pipeline's
                (the entity set is fixed at construction; a different one needs a new pipeline).

        Returns:
            Incident updates of this step (status ``open`` for new or grown ones, ``merged``, ``closed``).
        """
        if entities is not None and entities is not self._checked_entities:
            if tuple(entities) != self.entities:
                raise InputError("pipeline", "entities", "differ from the pipeline's (allowed: the same GPU ids)")
            self._checked_entities = entities
        if not ts > self._last_ts:
            self.out_of_order_count += 1
            return []
        self._observe_dt(ts)
        frame = self._frame(ts, fields, job_index, job_ids, job_fields)
        self._hardware_stage(frame)  # 1. hardware rules
        self._field_stage(ts, frame.gpu)  # 2. per-field detectors
        self._straggler_stage(frame)  # 3. stragglers
        self._job_stage(frame)  # 4. job rules
        if site_fields:
            self._facility_stage(ts, site_fields)  # 5. facility rules
        updates = self.grouper.step(ts)
        if not self.config.emit_info:
            updates = [u for u in updates if u.event_class in FAULT_CLASSES]
        return updates

    # --- the stages of a step, in order -------------------------------------------------------------------------
    def _frame(
        self,
        ts: float,
        fields: Mapping[str, NDArray[np.float64]],
        job_index: I64 | None,
        job_ids: Sequence[str] | None,
        job_fields: Mapping[str, NDArray[np.float64]] | None,
    ) -> RuleFrame:
        """Check the sample's arrays, keep the latest temperature / power / limit, map the jobs: the rules' frame."""
        gpu = {k: np.asarray(v, dtype=np.float64) for k, v in fields.items()}
        for k, v in gpu.items():
            if v.shape != (self.n_gpus,):
                raise InputError("pipeline", k, f"shape {v.shape} (allowed ({self.n_gpus},))")
        if TEMP in gpu:
            np.copyto(self._temp, gpu[TEMP], where=np.isfinite(gpu[TEMP]))
        if POWER in gpu:
            np.copyto(self._power, gpu[POWER], where=np.isfinite(gpu[POWER]))
            self._filter_power(ts, gpu[POWER])
        if POWER_LIMIT in gpu:
            np.copyto(self._limit, gpu[POWER_LIMIT], where=np.isfinite(gpu[POWER_LIMIT]))
        job = self._map_jobs(job_index, job_ids, job_fields)
        frame = RuleFrame(ts, self.dt_s, gpu, self.limits, self._job_slot, job, len(self._slot_names))
        frame.expected_slow = self._loop_limited
        return frame

    def _hardware_stage(self, frame: RuleFrame) -> None:
        """Every hardware rule: onsets, the throttling split (cooling fault's / row's / the GPU's own), grouping."""
        ts = frame.ts
        for rule in self.hw_rules:
            fired, score = rule.update(frame)
            was = self._prev_fired.get(rule.name)
            if rule.name not in _CDU_SIDE:
                # A hardware signal *changing* now (its rising edge) is what can explain a loss spike; an alarm that
                # has been on for longer does not blind the SDC rule for the whole job.
                rising = fired & ~was if was is not None and was.shape == fired.shape else fired
                self._hw_onset[rising] = ts
                if rule.name in _CHANGES_RESULTS:
                    self._fault_onset[rising] = ts
            onsets = self._onsets(ts, rule.name, fired, score, rule.event_class, "anomaly", f"rule:{rule.name}")
            if rule.name == "thermal_throttle" and fired.any():
                fired, onsets = self._split_throttle(frame, fired, onsets)
            if fired.any():
                self._observe_hardware(frame, rule.name, rule.event_class, fired, onsets)

    def _split_throttle(
        self, frame: RuleFrame, fired: NDArray[np.bool_], onsets: list[tuple[int, Detection]]
    ) -> tuple[NDArray[np.bool_], list[tuple[int, Detection]]]:
        """Throttling explained by a cooling fault goes to that fault's incident (returned no longer fired); of the
        rest, mark which is its row's (``row_wide``) and which its own thermal path's (``local_fault``).
        """
        ts, c = frame.ts, self.config
        # Throttling on a GPU whose cooling is failing is that cooling fault's consequence: one incident.
        cooling = fired & (self._last_cooling >= ts - c.quiet_s)
        if cooling.any():
            own = cooling & (self._last_thermal_path >= ts - c.quiet_s)
            for mask, sig in ((own, THERMAL_PATH), (cooling & ~own, "")):
                if mask.any():
                    self.grouper.observe(ts, EventClass.COOLING_DEGRADATION, np.flatnonzero(mask), (), sig)
            self._last_hw[cooling] = ts
            self._last_explainer[cooling] = ts
            fired = fired & ~cooling
            onsets = [(i, d) for i, d in onsets if fired[i]]
        # A throttling GPU no warmer for its power than its row's same-model GPUs is the tail of a hot row
        # (its air, its coolant, the afternoon), not its own thermal path: the row's incident.
        local = fired & (self._thermal_excess(frame) >= c.local_excess_c)
        self.grouper.row_wide[fired] = ~local[fired]
        self.grouper.local_fault[fired] = local[fired]
        return fired, onsets

    def _own_thermal_path(self, frame: RuleFrame, fired: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Of the GPUs the ``cooling`` rule fires on, those whose own thermal path failed: warmer for their power
        than their row's same-model GPUs by ``local_excess_c`` and 4 robust sigmas (:meth:`_thermal_excess`), or
        so judged within the last ``window_s`` (one fault stays one incident while it fires).

        The rule compares the die with its CDU's *supply*, but the coolant a rack's GPUs see is the supply plus
        half the rack's rise (``Q_rack / (ṁ·c_p)``): when a row's pump loses flow, that rise grows on every rack at
        once and the row's warmest GPUs (a few % more R, more power) cross the rule's margin first. Their rise is
        the row's coolant, not their own path (large-hall: 15-20 GPU incidents 8 s after the row's own).
        """
        ts = frame.ts
        recent = self._last_thermal_path >= ts - self.config.window_s
        if not (fired & ~recent).any():
            return fired & recent
        local = self._thermal_excess(frame) >= self.config.local_excess_c
        return fired & (local | recent)

    def _observe_hardware(
        self,
        frame: RuleFrame,
        name: str,
        cls: EventClass,
        fired: NDArray[np.bool_],
        onsets: list[tuple[int, Detection]],
    ) -> None:
        """Group a hardware rule's firing GPUs (a GPU's own thermal path apart) and note what they explain."""
        ts = frame.ts
        idx = np.flatnonzero(fired)
        # A GPU's own thermal path (its die above its coolant *and* much warmer for its power than its row's
        # GPUs) is another cause than its row's coolant or air: inside an open row incident it still opens
        # its own incident.
        if name == "cooling":
            own_path = self._own_thermal_path(frame, fired)
        elif name == "thermal_throttle":
            own_path = self.grouper.local_fault & fired
        else:
            own_path = np.zeros_like(fired)
        for mask, sig in ((fired & ~own_path, ""), (own_path, THERMAL_PATH)):
            if mask.any():
                self.grouper.observe(ts, cls, np.flatnonzero(mask), [o for o in onsets if mask[o[0]]], sig)
        if name == "cooling":
            self._last_thermal_path[own_path] = ts
        if name in _COOLING_RULES:
            self._last_cooling[idx] = ts
        if name not in _CDU_SIDE:
            self._last_hw[idx] = ts
        if name in _EXPLAINS_STRAGGLER:
            self._last_explainer[idx] = ts

    def _field_stage(self, ts: float, gpu: Mapping[str, F64]) -> None:
        """Per-field detectors; a change right after a workload change is benign, one no rule explains is
        unclassified (and explains a job slowdown).
        """
        c = self.config
        # An activity field that moved away from its slow reference marks a workload change at once (its own
        # detector may confirm a sample later than the power detector fires).
        a_ref = 1.0 - 2.0 ** (-self.dt_s / 120.0)
        for f in ACTIVITY_FIELDS & gpu.keys():
            x = gpu[f]
            ref = self._activity_ref.setdefault(f, np.full(self.n_gpus, np.nan))
            tol = 0.05 if f.startswith(PROFILING_PREFIX) else 0.05 * np.abs(ref)
            with np.errstate(invalid="ignore"):
                moved = np.abs(x - ref) > tol
            self._last_activity[moved] = ts
            ok = np.isfinite(x)
            self._activity_ref[f] = np.where(ok, np.where(np.isnan(ref), x, ref + a_ref * (x - ref)), ref)
        alarms: dict[str, NDArray[np.bool_]] = {}
        for f, det in self.detectors.items():
            if f in gpu:
                alarms[f] = det.update(ts, gpu[f])
                if f in ACTIVITY_FIELDS and alarms[f].any():
                    self._last_activity[alarms[f]] = ts
        workload = self._last_activity >= ts - c.phase_window_s
        if POWER in alarms:
            self._last_power[alarms[POWER] & workload] = ts
        # Temperatures follow power through a thermal time constant: a benign power change explains them longer, and
        # so does a commanded change of their coolant's setpoint (the cooling optimizer's own steps: on
        # sweeps/new-user/h200-pump.yaml, 7-35 unclassified incidents a run on idle GPUs following their row's
        # coolant as it was relaxed, none loop off).
        recent = ts - c.thermal_window_s
        thermal_ok = workload | (self._last_power >= recent) | (self._last_commanded >= recent)
        # A cooling fault's aftermath lasts as long as a temperature change does: once the coolant recovers (or the
        # loop chills it), the dies cool through their RC and a power-bound GPU's clock rises as its leakage falls,
        # minutes after the cooling rules went quiet (large-hall: clocks 2-4 bins up on the repaired row's GPUs,
        # 190-350 s after, each an unclassified incident).
        recent_rule = (self._last_hw >= ts - c.phase_window_s) | (self._last_cooling >= ts - c.thermal_window_s)
        for f, fired in alarms.items():
            det = self.detectors[f]
            recent_activity = thermal_ok if f in _FOLLOWS_POWER else workload
            benign = fired & recent_activity & ~recent_rule
            other = fired & ~recent_activity & ~recent_rule
            if other.any() and f not in ACTIVITY_FIELDS:
                self._last_hw[other] = ts  # an unexplained hardware-side change explains a job slowdown
                self._hw_onset[other] = ts
            if not c.emit_info:
                continue
            for cls, mask in ((EventClass.BENIGN_PHASE_CHANGE, benign), (EventClass.UNCLASSIFIED, other)):
                key = f"{det.name}:{f}:{cls.value}"
                onsets = self._onsets(ts, key, mask, det.score, cls, det.kind, f)
                if mask.any():
                    self.grouper.observe(ts, cls, np.flatnonzero(mask), onsets)

    def _straggler_stage(self, frame: RuleFrame) -> None:
        """Stragglers, by clock and by the rank's own step time, each against the GPU's same-model job peers
        (unless a throttle or cooling fault explains the slow GPU, or the loop slowed it on purpose); a serving
        fleet's by its ranks' decode steps, and its hung replicas.
        """
        ts = frame.ts
        hw_explained = self._last_explainer >= ts - self.config.window_s
        fleet = np.zeros(self.n_gpus, dtype=bool)
        if self._replica_jobs:
            replica_slots = [self._slots[j] for j in self._replica_jobs if j in self._slots]
            fleet = np.isin(self._job_slot, np.asarray(replica_slots, dtype=np.int64))
        # A co-tenant that left still explains the straggler rules' lag, at least a window.
        linger_s = max(self.config.window_s, self.rank_straggler.lag_s(frame.dt_s))
        foreign = self._foreign = self.co_tenants.foreign(frame, linger_s)
        for rule in (self.straggler, self.rank_straggler):
            fired, score = rule.update(frame)
            fired = fired & ~(hw_explained | fleet)
            self._straggler_onsets(ts, rule.name, fired & ~foreign, score)
            self._co_tenant_onsets(frame, rule.name, fired & foreign, score, self._costs(rule, score))
        if fleet.any():
            self._replica_hang(frame, fleet)
        rep = self.replica_straggler
        if fleet.any():
            fired, score = rep.update_fleet(frame, fleet)
            # Its 30 s smoothing still carries a throttle's slow steps after the throttle ends (a PSU-short node's
            # braked replica read as a straggler 34 s after its PSUs came back): explained for 4 half-lives more.
            lag_s = 4.0 * rep.smooth_half_life_s
            self._straggler_onsets(
                ts, rep.name, fired & ~(self._last_explainer >= ts - self.config.window_s - lag_s), score
            )
        elif rep.pace_known.any():  # no fleet now: nothing of the rule's counts toward an incident's impact
            rep.pace_known = np.zeros(self.n_gpus, dtype=bool)

    @staticmethod
    def _costs(rule: StragglerRule, score: F64) -> Callable[[int], str]:
        def why(i: int) -> str:
            cost = (
                f"costs its job {100.0 * rule.job_slowdown[i]:.0f} % of its throughput, " if rule.pace_known[i] else ""
            )
            return f"{rule.name}: {cost}robust z {score[i]:.1f} against its job's peers"

        return why

    def _co_tenant_onsets(
        self, frame: RuleFrame, name: str, fired: NDArray[np.bool_], score: F64, why: Callable[[int], str]
    ) -> None:
        """Group the GPUs a co-tenant slows into straggler incidents of their own (rooted at the GPU), each onset
        naming the GPU's processes and the slowdown ``why`` gives.
        """
        onsets = self._onsets(frame.ts, f"co_tenant:{name}", fired, score, EventClass.STRAGGLER, "anomaly",
                              CO_TENANT_SOURCE)  # fmt: skip
        if not fired.any():
            return
        count = frame.gpu.get(TWINLOOP_FI_GPU_COMPUTE_PROCESSES, np.full(self.n_gpus, np.nan))
        onsets = [
            (i, dataclasses.replace(d, detail=self.co_tenants.explain(i, self.entities[i], float(count[i]), why(i))))
            for i, d in onsets
        ]
        self.grouper.observe(frame.ts, EventClass.STRAGGLER, np.flatnonzero(fired), onsets, CO_TENANT)

    def _replica_hang(self, frame: RuleFrame, fleet: NDArray[np.bool_]) -> None:
        """A serving fleet's replica spinning in a stuck collective while the fleet serves on: a job-hang incident
        over its GPUs (rooted at their node by the grouping), not the fleet's (:class:`.replica_rules.ReplicaHangRule`).
        """
        ts = frame.ts
        fired, score = self.replica_hang.update_fleet(frame, fleet)
        onsets = self._onsets(ts, "replica_hang", fired, score, EventClass.JOB_HANG, "anomaly", "rule:replica_hang")
        if fired.any():
            self.grouper.observe(ts, EventClass.JOB_HANG, np.flatnonzero(fired), onsets)

    def _straggler_onsets(self, ts: float, name: str, fired: NDArray[np.bool_], score: F64) -> None:
        """Group one straggler rule's firing GPUs into straggler incidents."""
        onsets = self._onsets(ts, name, fired, score, EventClass.STRAGGLER, "anomaly", f"rule:{name}")
        if fired.any():
            self.grouper.observe(ts, EventClass.STRAGGLER, np.flatnonzero(fired), onsets)

    def _job_stage(self, frame: RuleFrame) -> None:
        """Job rules, per job slot: a job-rooted incident over the job's GPUs."""
        ts, c = frame.ts, self.config
        frame.hw_recent = self._hw_onset >= ts - c.hw_window_s
        frame.hw_fault_onset_s = np.where(self._fault_onset >= ts - c.hw_window_s, self._fault_onset, -np.inf)
        frame.slowing = self._slowing(frame, self._last_explainer >= ts - c.window_s)
        replica_slots = [self._slots[j] for j in self._replica_jobs if j in self._slots]
        for rule in self.job_rules:
            fired, score = rule.update(frame)
            if rule.event_class is EventClass.STRAGGLER and replica_slots:
                # A serving fleet's iteration time follows its load: a slower iteration is no straggler.
                fired = fired.copy()
                fired[[s for s in replica_slots if s < fired.shape[0]]] = False
            if rule.event_class is EventClass.STRAGGLER:
                fired = self._co_tenant_slowdown(frame, rule.name, fired, score)
            key = f"job:{rule.name}"
            prev = self._prev_fired.get(key, np.zeros(0, dtype=bool))
            prev = np.concatenate([prev, np.zeros(max(0, fired.shape[0] - prev.shape[0]), dtype=bool)])
            self._prev_fired[key] = fired
            for s in np.flatnonzero(fired).tolist():
                entity = self._job_entity(self._slot_names[s])
                jdet = None
                if not prev[s]:
                    jdet = Detection(ts, entity, f"rule:{rule.name}", float(score[s]), "anomaly", rule.event_class, key)
                members = np.flatnonzero(self._job_slot == s)
                self.grouper.observe_named(ts, rule.event_class, entity, jdet, members)

    def _co_tenant_slowdown(
        self, frame: RuleFrame, name: str, fired: NDArray[np.bool_], score: F64
    ) -> NDArray[np.bool_]:
        """A job slowdown on a job with a co-tenant GPU is the co-tenant's: an incident at that GPU (or those GPUs)
        instead of the job's; returns the job slots left to the job rule.
        """
        n = fired.shape[0]
        co = fired & CoTenants.of_slots(self._foreign, frame.job_slot, n)
        in_job = frame.job_slot >= 0
        slot = np.where(in_job, frame.job_slot, 0)
        on, gpu_score = np.zeros(self.n_gpus, dtype=bool), np.zeros(self.n_gpus)
        if n:
            on, gpu_score = self._foreign & in_job & co[slot], np.where(in_job, score[slot], 0.0)

        def why(i: int) -> str:
            return f"{name}: the job's step time is up {100.0 * np.expm1(gpu_score[i]):.0f} % on its usual"

        self._co_tenant_onsets(frame, name, on, gpu_score, why)
        out: NDArray[np.bool_] = fired & ~co
        return out

    def _facility_stage(self, ts: float, site_fields: Mapping[str, Any]) -> None:
        """Facility rules (one site): a site-rooted incident over every GPU.

        A weather event is its own incident even where a site cooling incident is open already: one opened while
        the wet-bulb was still calm has another cause (the plant's PUE up since a GPU's fault made the reactive
        cooling chase it), and the heat wave must not vanish into it (round 5's ``mixed-shifted`` seed 1 loop on).
        The old incident then gets no more detections and closes after ``quiet_s``.
        """
        rules = self.facility_rules
        firing = rules.update(ts, self.dt_s, site_fields)
        for cls, site_score in firing.items():
            sig = self._site_signature.get(cls, "")
            new_cause = False
            if cls is EventClass.COOLING_DEGRADATION and rules.weather_firing:
                opened = self.grouper.named_start_ts(cls, self.site, sig)
                new_cause = opened is not None and opened < rules.weather_since_s
                if new_cause:
                    sig = self._site_signature[cls] = f"weather@{rules.weather_since_s:g}"
                    site_score = rules.weather_rise_c
            site_det = None
            if cls not in self._site_firing or new_cause:
                site_det = Detection(ts, self.site, "rule:facility", site_score, "anomaly", cls, "facility")
            members = np.arange(self.n_gpus, dtype=np.int64)
            self.grouper.observe_named(ts, cls, self.site, site_det, members, signature=sig)
        self._site_firing = set(firing)

    @property
    def open_incidents(self) -> list[Incident]:
        """Incidents open now."""
        return self.grouper.open_incidents
