"""Issue 14: a GPU cooling incident says what its GPU costs the job, as a straggler's does, so the respond stage can
price moving the job off it (round 5's `thermal-move`: a faulty GPU its own thermal control held under slowdown, never
the job's slowest rank, got its job requeued onto slower GPUs).
"""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import RANK_STEP_TIME
from twinloop.ops.events import EventClass

from .test_detect_stragglers import ENTITIES, N, healthy


def _pipeline(slow_factor: dict[int, float]) -> DetectionPipeline:
    """A pipeline fed 120 s of a 16-GPU job whose rank ``i`` takes ``slow_factor[i]`` times the others' step."""
    rng = np.random.default_rng(3)
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=False))
    for t in np.arange(0.0, 120.0, 1.0):
        f = healthy(float(t), rng)
        for i, factor in slow_factor.items():
            f[RANK_STEP_TIME][i] *= factor
        pipe.step(float(t), f, np.zeros(N, dtype=np.int64), ["train"])
    return pipe


@pytest.mark.parametrize("cls", [EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE])
def test_a_hot_gpus_incident_carries_what_it_costs_its_job(cls: EventClass) -> None:
    slowed = _pipeline({11: 1.25})._impact(cls, np.array([11]))
    assert slowed.job_slowdown == pytest.approx(0.2, abs=0.02)
    # Another rank is slower still: the hot GPU costs the job nothing (the job waits for that rank anyway).
    held = _pipeline({11: 1.02, 3: 1.10})._impact(cls, np.array([11]))
    assert held.job_slowdown == pytest.approx(0.0, abs=1e-9)
