"""Events the twin emits (what happened, where, when), the ground-truth labels of injected faults, and what one
step produced (:class:`StepResult`: its events and telemetry blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray


@dataclass(frozen=True)
class Event:
    """Something that happened during a step.

    Attributes:
        t_s: simulation time (s since the start).
        kind: e.g. ``psu_overload``, ``power_brake``, ``gpu_fell_off_bus``, ``failure``, ``job_interrupted``,
            ``job_phase``, ``fault_start``, ``fault_end``, ``thermal_shutdown``, ``action``.
        entity: hierarchical entity id or ``<site>/jobs/<name>``.
        detail: one human-readable line.
    """

    t_s: float
    kind: str
    entity: str
    detail: str = ""


@dataclass(frozen=True)
class FaultLabel:
    """Ground truth of one injected fault: what, where, when (``end_s`` None = until the end of the run)."""

    kind: str
    entity: str
    start_s: float
    end_s: float | None
    magnitude: float | None


@dataclass(frozen=True)
class StepResult:
    """What one step produced.

    Attributes:
        t_s: simulation time at the end of the step (s).
        gpu: GPU telemetry block (DCGM field → array over kept GPUs) on GPU sample steps, else None.
        facility: level ('node', 'rack', 'row', 'site', 'job') → field → array over that level's kept entities,
            on facility sample steps, else None.
        events: events of this step.
    """

    t_s: float
    gpu: dict[str, NDArray[Any]] | None
    facility: dict[str, dict[str, NDArray[Any]]] | None
    events: tuple[Event, ...]
