"""Events the twin emits (what happened, where, when) and the ground-truth labels of injected faults."""

from __future__ import annotations

from dataclasses import dataclass


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
