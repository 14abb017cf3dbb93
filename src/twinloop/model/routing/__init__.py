"""MoE routing over time: a drifting token stream (:mod:`.workload`), expert placement on nodes
(:mod:`.placement`), router plug-ins (:mod:`.base`, :mod:`.routers`) and the step simulator
(:mod:`.simulator`). The planner-side study (step time per load) is :mod:`twinloop.plan.moe_study`.
"""

from twinloop.model.routing.base import REGISTRY, Assignment, Router, RoutingContext, make_router
from twinloop.model.routing.placement import PLACEMENTS, Placement
from twinloop.model.routing.simulator import StepMetrics, simulate
from twinloop.model.routing.workload import AffinityStream, DriftSpec


def router_names() -> list[str]:
    """Every registered router name (imports the variants)."""
    from twinloop.model.routing import routers  # noqa: F401 - fills REGISTRY

    return sorted(REGISTRY)


__all__ = [
    "PLACEMENTS",
    "REGISTRY",
    "AffinityStream",
    "Assignment",
    "DriftSpec",
    "Placement",
    "Router",
    "RoutingContext",
    "StepMetrics",
    "make_router",
    "router_names",
    "simulate",
]
