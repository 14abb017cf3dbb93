"""What the live watcher changes in the detection pipeline, and why.

:class:`CappedPowerThrottleRule`: the pipeline's rule judges a lowered limit against the limit it has seen the GPU
hold and a clock drop against the clock it has seen at the limit, so a cap already in place when the watcher
starts (or restarts) is the GPU's "usual" state and is never seen. This rule also fires when the GPU draws its
enforced limit (``DCGM_FI_DEV_POWER_MGMT_LIMIT``) and that limit sits below the GPU's default limit (its TDP): the
textbook "power-throttled below TDP" (the twin's ``power_throttled_below_tdp_gpu_s`` counts the same thing). A GPU
at its default limit (dense GEMMs at 700 W on an H100 SXM) is normal operation and does not fire. (It was first
written because the pipeline's clock reference learned from idle clocks, 345 MHz on an H100; it now learns only
at the limit.)

Only :func:`live_pipeline` swaps it in; the twin's closed loop keeps the pipeline's own rule.
"""

from __future__ import annotations

import numpy as np

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import F64, POWER, POWER_LIMIT, BoolArr, PowerThrottleRule, RuleFrame, steps
from twinloop.ops.ports import Topology


class CappedPowerThrottleRule(PowerThrottleRule):
    """The pipeline's power-throttle rule, plus: at an enforced limit below ``below_tdp`` × the default limit."""

    def __init__(self, below_tdp: float = 0.97, **kwargs: float) -> None:
        super().__init__(**kwargs)
        self.below_tdp = below_tdp
        self._capped_persist = type(self._persist)()

    def update(self, frame: RuleFrame) -> tuple[BoolArr, F64]:
        """The pipeline rule's verdicts, plus the GPUs drawing an enforced limit set below their TDP."""
        fired, score = super().update(frame)
        p, lim_w = frame.gpu.get(POWER), frame.gpu.get(POWER_LIMIT)
        if p is None or lim_w is None:
            return fired, score
        valid = np.isfinite(p) & np.isfinite(lim_w)
        with np.errstate(invalid="ignore"):
            capped = valid & (lim_w < self.below_tdp * frame.limits.tdp_w) & (p >= self.at_limit * lim_w)
        capped_fired = self._capped_persist(capped, valid, steps(self.persistence_s, frame.dt_s))
        below = np.where(valid, 1.0 - lim_w / frame.limits.tdp_w, 0.0)
        return fired | capped_fired, np.where(capped_fired & ~fired, below, score)


def capped(rule: PowerThrottleRule) -> CappedPowerThrottleRule:
    """The live rule with the thresholds of ``rule`` (scaled ones included)."""
    return CappedPowerThrottleRule(
        at_limit=rule.at_limit,
        clock_drop=rule.clock_drop,
        activity_rise=rule.activity_rise,
        persistence_s=rule.persistence_s,
    )


def use_live_rules(pipeline: DetectionPipeline) -> DetectionPipeline:
    """Swap :class:`CappedPowerThrottleRule` into a pipeline before its first step (thresholds kept)."""
    pipeline.hw_rules = [capped(r) if type(r) is PowerThrottleRule else r for r in pipeline.hw_rules]
    return pipeline


def live_pipeline(topology: Topology, config: PipelineConfig | None = None) -> DetectionPipeline:
    """The detection pipeline over a live cluster's GPUs, with :class:`CappedPowerThrottleRule`."""
    return use_live_rules(DetectionPipeline(topology.gpu_ids, topology.limits, topology.cdu_of_rack, config))
