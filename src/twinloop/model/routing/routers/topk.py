"""Plain top-k: each token to its K highest-affinity experts, no capacity, no balancing."""

from __future__ import annotations

from twinloop.model.routing.base import Assignment, Router, RoutingContext, StepScores, register


@register
class TopK(Router):
    """The K best experts per token; a hot expert takes every token that wants it."""

    name = "topk"

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Each token to its K highest-affinity experts."""
        return Assignment(scores.ranked(ctx.top_k), 0, 0)
