"""The two-stage decoupled router: first a shortlist of each token's ``shortlist`` best experts by
affinity ("good at this?"), then each candidate is scored separately for availability ("free now?": the
share of its capacity this step's first-choice demand leaves, as a gate sees before dispatch) and the two
scores are mixed, ``(1 - w) · skill + w · availability``, before the top-k of the mix is kept. Capacity
still applies last; what overflows is dropped.
"""

from __future__ import annotations

import numpy as np

from twinloop.errors import InputError
from twinloop.model.routing.base import (
    Assignment,
    Router,
    RoutingContext,
    StepScores,
    enforce_capacity,
    expert_load,
    register,
    top_k,
)


@register
class TwoStage(Router):
    """Shortlist by affinity, then mix skill and availability.

    Args:
        shortlist_factor: shortlist = ``ceil(shortlist_factor · K)`` candidates (≥ 1).
        availability_weight: ``w`` in the mix (0 = plain top-k on the shortlist, 1 = availability only).
        capacity_factor: capacity per expert relative to an even load (> 0).
    """

    name = "two-stage"
    uses_capacity = True

    def __init__(self, shortlist_factor: float = 2.0, availability_weight: float = 0.5, capacity_factor: float = 1.25):
        if shortlist_factor < 1:
            raise InputError("router two-stage", "shortlist_factor", f"must be >= 1, got {shortlist_factor}")
        if not 0 <= availability_weight <= 1:
            raise InputError("router two-stage", "availability_weight", f"must be in 0..1, got {availability_weight}")
        if capacity_factor <= 0:
            raise InputError("router two-stage", "capacity_factor", f"must be > 0, got {capacity_factor}")
        self.shortlist_factor = shortlist_factor
        self.availability_weight = availability_weight
        self.capacity_factor = capacity_factor

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Shortlist by affinity, rank the shortlist by the skill/availability mix, keep its top-k under capacity."""
        k = ctx.top_k
        s = min(ctx.n_experts, int(np.ceil(self.shortlist_factor * k)))
        cap = ctx.capacity(self.capacity_factor)
        short = scores.ranked(s)
        skill = np.take_along_axis(scores.affinity, short, axis=1)
        skill = np.asarray(skill / np.maximum(skill[:, :1], np.float32(1e-12)), dtype=np.float32)  # best = 1
        demand = expert_load(short[:, :k], ctx.n_experts)
        avail = np.clip(1.0 - demand / cap, 0.0, 1.0).astype(np.float32)
        w = np.float32(self.availability_weight)
        mixed = (1 - w) * skill + w * avail[short]
        pick = top_k(mixed.astype(np.float32), k)
        experts, dropped = enforce_capacity(np.take_along_axis(short, pick, axis=1), cap)
        return Assignment(experts, dropped, 0, cap)
