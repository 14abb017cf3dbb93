from __future__ import annotations

from typing import ClassVar

import pytest

from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import ActionAdapter, AdapterReply


class MemoryAdapter(ActionAdapter):
    """In-memory settings; can be told to fail."""

    name: ClassVar[str] = "memory"
    supported: ClassVar[frozenset[ActionKind]] = frozenset(ActionKind)

    def __init__(self, fail: bool = False, supply_w: float | None = 450.0) -> None:
        self.settings: dict[tuple[ActionKind, str], float] = {}
        self.applied: list[ActionRequest] = []
        self.fail = fail
        self.supply_w = supply_w

    def supply_limit_w(self, target: str) -> float | None:
        return self.supply_w

    def limits(self, kind: ActionKind, target: str) -> tuple[float, float] | None:
        return {ActionKind.POWER_CAP: (200.0, 700.0), ActionKind.CDU_SETPOINT: (15.0, 40.0),
                ActionKind.CDU_FLOW: (0.3, 1.5), ActionKind.FACILITY_WATER: (10.0, 32.0)}.get(kind)  # fmt: skip

    def current(self, kind: ActionKind, target: str) -> float | None:
        default = {ActionKind.POWER_CAP: 700.0, ActionKind.CDU_SETPOINT: 30.0, ActionKind.CDU_FLOW: 1.0,
                   ActionKind.FACILITY_WATER: 25.0}.get(kind)  # fmt: skip
        return self.settings.get((kind, target), default)

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        return True  # its jobs report every checkpoint at once

    def job_of(self, entity: str) -> str | None:
        return "dc/jobs/train" if entity.startswith("dc/r1") else None

    def _apply(self, request: ActionRequest) -> AdapterReply:
        if self.fail:
            return AdapterReply("failed", "boom")
        self.applied.append(request)
        if request.value is not None:
            self.settings[(request.kind, request.target)] = request.value
        if request.kind in (ActionKind.DRAIN, ActionKind.UNDRAIN):
            self.settings[(ActionKind.DRAIN, request.target)] = float(request.kind == ActionKind.DRAIN)
        return AdapterReply("applied", "ok")


def make_incident(cls: EventClass, root: str = "dc/r1/k2", iid: int = 1) -> Incident:
    members = tuple(f"{root}/n1/g{i}" for i in range(8))
    return Incident(iid, cls, root, members, 0.0, 0.0, Severity.MAJOR)


@pytest.fixture
def adapter() -> MemoryAdapter:
    return MemoryAdapter()
