"""Top-k with a capacity factor: copies past an expert's capacity are dropped (GShard/Switch style)."""

from __future__ import annotations

from twinloop.errors import InputError
from twinloop.model.routing.base import Assignment, Router, RoutingContext, StepScores, enforce_capacity, register


@register
class CapacityTopK(Router):
    """Top-k, then each expert keeps at most ``ceil(capacity_factor · tokens · K / n_experts)`` copies per
    instance, first choices first; the rest are dropped (the token skips that expert: residual only).

    Args:
        capacity_factor: capacity relative to a perfectly even load (> 0; 1.25 is a common setting).
    """

    name = "capacity"
    uses_capacity = True

    def __init__(self, capacity_factor: float = 1.25) -> None:
        if capacity_factor <= 0:
            raise InputError("router capacity", "capacity_factor", f"must be > 0, got {capacity_factor}")
        self.capacity_factor = capacity_factor

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Top-k, dropping the copies past each expert's capacity."""
        cap = ctx.capacity(self.capacity_factor)
        experts, dropped = enforce_capacity(scores.ranked(ctx.top_k), cap)
        return Assignment(experts, dropped, 0, cap)
