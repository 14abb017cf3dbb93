"""The operational loop over live or simulated telemetry: collect → detect → classify → respond → learn.

It knows no twin: ``ports`` is its one view of a cluster (simulated in ``twinloop.closedloop``, or live), and
``runner`` drives every stage over that port. ``events`` holds the shared vocabulary (event classes, detections,
incidents, severity); ``detect`` holds the streaming detectors, the cross-signal rules, topology grouping, the
per-step pipeline and the offline runner; ``classify``, ``respond`` and ``learn`` the later stages.

The public API: the names in ``__all__`` (``from twinloop.ops import ...``), what other packages and users may
import; the modules behind them may move. They load on first use (PEP 562), so importing the package loads none
of its modules. Two names stay with their modules because each of two modules means something else by them:
``FAULT_CLASSES`` (:mod:`twinloop.ops.events`: the fault classes; :mod:`twinloop.ops.evaluate`: which of them
each injected fault may be reported as).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinloop.lazy import lazy_exports

if TYPE_CHECKING:
    from twinloop.ops.alerts import AlertmanagerClient
    from twinloop.ops.classify.advisory import Advisor, AdvisoryModel, load_advisory_model
    from twinloop.ops.classify.base import LABEL_INDEX, LABELS
    from twinloop.ops.classify.features import N_FEATURES, FeatureExtractor
    from twinloop.ops.detect import load_variants
    from twinloop.ops.detect.base import REGISTRY
    from twinloop.ops.detect.offline import (
        DEFAULT_DETECTORS,
        InputReport,
        SeriesBlock,
        detect_blocks,
        detect_steps,
        pipeline_incidents,
        read_series,
    )
    from twinloop.ops.detect.pipeline import RULE_THRESHOLDS, DetectionPipeline, PipelineConfig
    from twinloop.ops.detect.profiles import ProfileChoice, choose_profile, detect_with_profile, select_profile
    from twinloop.ops.detect.rules import GpuLimits
    from twinloop.ops.evaluate import DetectionReport, Label, evaluate_detection
    from twinloop.ops.events import Detection, EventClass, Incident, Severity
    from twinloop.ops.learn.feedback import RuleOutcomeLearner, ThresholdTuner, learned_policy, rule_outcomes
    from twinloop.ops.learn.forecast import KNOWN_COLUMNS, HeatLoadForecaster, LoadHistory
    from twinloop.ops.learn.precool import RowHeatForecast, load_models
    from twinloop.ops.live.actuators import make_actuator
    from twinloop.ops.live.cluster import JobSource, LiveOptions, SourceCluster
    from twinloop.ops.live.jobs import k8s_jobs, load_job_file, slurm_jobs
    from twinloop.ops.live.kinds import Built, build_source
    from twinloop.ops.live.site import SiteFile, load_site
    from twinloop.ops.live.watcher import WatchConfig, Watcher, WatchSummary
    from twinloop.ops.ports import END, PollResult, RackHeat, Sample, Topology
    from twinloop.ops.records import GroundTruthLabel, LiveRecords, write_run
    from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
    from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply, JobTiming, ancestor
    from twinloop.ops.respond.policy import Mode, Policy, load_policy
    from twinloop.ops.respond.responder import Reader, Responder
    from twinloop.ops.runner import LoopRunner

_WHERE = {
    "ActionAdapter": "respond.adapters.base",
    "ActionKind": "respond.actions",
    "ActionRequest": "respond.actions",
    "ActionResult": "respond.actions",
    "AdapterReply": "respond.adapters.base",
    "JobTiming": "respond.adapters.base",
    "Advisor": "classify.advisory",
    "AdvisoryModel": "classify.advisory",
    "AlertmanagerClient": "alerts",
    "Built": "live.kinds",
    "DEFAULT_DETECTORS": "detect.offline",
    "Detection": "events",
    "DetectionPipeline": "detect.pipeline",
    "DetectionReport": "evaluate",
    "END": "ports",
    "EventClass": "events",
    "FeatureExtractor": "classify.features",
    "GpuLimits": "detect.rules",
    "GroundTruthLabel": "records",
    "HeatLoadForecaster": "learn.forecast",
    "Incident": "events",
    "InputReport": "detect.offline",
    "JobSource": "live.cluster",
    "KNOWN_COLUMNS": "learn.forecast",
    "LABELS": "classify.base",
    "LABEL_INDEX": "classify.base",
    "Label": "evaluate",
    "LiveOptions": "live.cluster",
    "LiveRecords": "records",
    "LoadHistory": "learn.forecast",
    "LoopRunner": "runner",
    "Mode": "respond.policy",
    "N_FEATURES": "classify.features",
    "PipelineConfig": "detect.pipeline",
    "Policy": "respond.policy",
    "PollResult": "ports",
    "ProfileChoice": "detect.profiles",
    "REGISTRY": "detect.base",
    "RULE_THRESHOLDS": "detect.pipeline",
    "RackHeat": "ports",
    "Reader": "respond.responder",
    "Responder": "respond.responder",
    "RowHeatForecast": "learn.precool",
    "RuleOutcomeLearner": "learn.feedback",
    "Sample": "ports",
    "SeriesBlock": "detect.offline",
    "Severity": "events",
    "SiteFile": "live.site",
    "SourceCluster": "live.cluster",
    "ThresholdTuner": "learn.feedback",
    "Topology": "ports",
    "WatchConfig": "live.watcher",
    "WatchSummary": "live.watcher",
    "Watcher": "live.watcher",
    "ancestor": "respond.adapters.base",
    "build_source": "live.kinds",
    "choose_profile": "detect.profiles",
    "detect_blocks": "detect.offline",
    "detect_steps": "detect.offline",
    "detect_with_profile": "detect.profiles",
    "evaluate_detection": "evaluate",
    "k8s_jobs": "live.jobs",
    "learned_policy": "learn.feedback",
    "load_advisory_model": "classify.advisory",
    "load_job_file": "live.jobs",
    "load_models": "learn.precool",
    "load_policy": "respond.policy",
    "load_site": "live.site",
    "load_variants": "detect",
    "make_actuator": "live.actuators",
    "pipeline_incidents": "detect.offline",
    "read_series": "detect.offline",
    "rule_outcomes": "learn.feedback",
    "select_profile": "detect.profiles",
    "slurm_jobs": "live.jobs",
    "write_run": "records",
}
__all__ = [
    "DEFAULT_DETECTORS",
    "END",
    "KNOWN_COLUMNS",
    "LABELS",
    "LABEL_INDEX",
    "N_FEATURES",
    "REGISTRY",
    "RULE_THRESHOLDS",
    "ActionAdapter",
    "ActionKind",
    "ActionRequest",
    "ActionResult",
    "AdapterReply",
    "Advisor",
    "AdvisoryModel",
    "AlertmanagerClient",
    "Built",
    "Detection",
    "DetectionPipeline",
    "DetectionReport",
    "EventClass",
    "FeatureExtractor",
    "GpuLimits",
    "GroundTruthLabel",
    "HeatLoadForecaster",
    "Incident",
    "InputReport",
    "JobSource",
    "JobTiming",
    "Label",
    "LiveOptions",
    "LiveRecords",
    "LoadHistory",
    "LoopRunner",
    "Mode",
    "PipelineConfig",
    "Policy",
    "PollResult",
    "ProfileChoice",
    "RackHeat",
    "Reader",
    "Responder",
    "RowHeatForecast",
    "RuleOutcomeLearner",
    "Sample",
    "SeriesBlock",
    "Severity",
    "SiteFile",
    "SourceCluster",
    "ThresholdTuner",
    "Topology",
    "WatchConfig",
    "WatchSummary",
    "Watcher",
    "ancestor",
    "build_source",
    "choose_profile",
    "detect_blocks",
    "detect_steps",
    "detect_with_profile",
    "evaluate_detection",
    "k8s_jobs",
    "learned_policy",
    "load_advisory_model",
    "load_job_file",
    "load_models",
    "load_policy",
    "load_site",
    "load_variants",
    "make_actuator",
    "pipeline_incidents",
    "read_series",
    "rule_outcomes",
    "select_profile",
    "slurm_jobs",
    "write_run",
]

__getattr__ = lazy_exports(__name__, _WHERE)
