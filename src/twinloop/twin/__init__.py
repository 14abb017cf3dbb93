"""Twin: a fast, vectorized simulation of a GPU cluster with power, cooling, jobs and faults.

Library entry points: :func:`load_scenario` → :class:`Twin` (``step``, ``run``, ``apply``, ``summary``), and
:func:`telemetry_frames` (the documented entry point the telemetry layer's twin source calls).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec, load_scenario

__all__ = ["ScenarioSpec", "StepResult", "Twin", "load_scenario", "telemetry_frames"]


def telemetry_frames(scenario: str | None = None, seed: int = 0, steps: int | None = None) -> Iterator[Any]:
    """Run a scenario (the packaged default when None) and yield its telemetry as Frames, step by step."""
    from twinloop.twin.telemetry_out import frames_of

    spec = load_scenario(scenario)
    twin = Twin(spec, source=scenario or "default scenario")
    twin.reset(seed)
    n = steps if steps is not None else round(spec.duration_s / spec.step_s)
    for _ in range(n):
        result = twin.step()
        yield from frames_of(twin, result)
