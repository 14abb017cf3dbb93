"""A stand-in for the generic loop runner (:mod:`twinloop.ops.runner`, being written on another branch) with the
subset of its API the watcher uses: ``start()``, ``step(sample) -> StepOutput``, ``approve``/``reject``,
``pending``, ``pipeline``, ``responder``, ``optimizer`` and the ``on_incidents``/``on_actions`` hooks.

It is the thinnest loop over :class:`~twinloop.ops.detect.pipeline.DetectionPipeline` and
:class:`~twinloop.ops.respond.responder.Responder` (no cooling optimizer, no precooling); the watcher uses the
generic runner whenever it is importable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.events import Incident
from twinloop.ops.ports import Cluster, Sample
from twinloop.ops.respond.actions import ActionRequest, ActionResult
from twinloop.ops.respond.policy import Mode, Policy, default_policy
from twinloop.ops.respond.responder import Responder


@dataclass(frozen=True)
class StepOutput:
    """What one sample did: its incident updates and the action results recorded in the step."""

    ts: float
    incidents: tuple[Incident, ...]
    actions: tuple[ActionResult, ...]
    warnings: tuple[str, ...] = ()


class ThinRunner:
    """detect → classify → respond → verify over one cluster (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        mode: Mode | None = "auto",
        policy: Policy | None = None,
        pipeline_config: PipelineConfig | None = None,
        on_incidents: Callable[[Sample, Sequence[Incident]], None] | None = None,
        on_actions: Callable[[Sample, Sequence[ActionResult]], None] | None = None,
        **_ignored: Any,
    ) -> None:
        self.cluster = cluster
        self.mode = mode
        self.policy = policy
        self.pipeline_config = pipeline_config
        self.on_incidents = on_incidents
        self.on_actions = on_actions
        self.pipeline: DetectionPipeline = None  # type: ignore[assignment]
        self.responder: Responder | None = None
        self.optimizer: Any = None
        self._reported = 0

    def start(self) -> None:
        """Build the pipeline and the responder from the cluster's topology."""
        if self.pipeline is not None:
            return
        topo = self.cluster.topology()
        self.pipeline = DetectionPipeline(topo.gpu_ids, topo.limits, topo.cdu_of_rack, self.pipeline_config)
        if self.mode is not None:
            self.responder = Responder(self.policy or default_policy(), self.cluster.adapter, mode=self.mode)

    def step(self, sample: Sample) -> StepOutput:
        """One sample through detection and response."""
        self.start()
        updates = self.pipeline.step(sample.ts, sample.gpu, sample.job_index, sample.job_ids, sample.job_fields,
                                     site_fields=sample.site_fields)  # fmt: skip
        if self.on_incidents is not None and updates:
            self.on_incidents(sample, updates)
        if self.responder is not None:
            self.responder.handle(updates, sample.ts, self.cluster.read)
            self.responder.verify(sample.ts, self.cluster.read)
        actions: tuple[ActionResult, ...] = ()
        if self.responder is not None:
            actions = tuple(self.responder.log[self._reported :])
            self._reported = len(self.responder.log)
        if self.on_actions is not None and actions:
            self.on_actions(sample, actions)
        return StepOutput(sample.ts, tuple(updates), actions, sample.warnings)

    @property
    def pending(self) -> dict[int, ActionRequest]:
        """Actions awaiting a person."""
        return self.responder.pending if self.responder is not None else {}

    def approve(self, action_id: int) -> ActionResult:
        """Approve a pending action now."""
        assert self.responder is not None
        return self.responder.approve(action_id, self.cluster.now_s(), self.cluster.read)

    def reject(self, action_id: int) -> ActionResult:
        """Reject a pending action now."""
        assert self.responder is not None
        return self.responder.reject(action_id, self.cluster.now_s())
