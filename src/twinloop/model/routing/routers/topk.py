"""Plain top-k: each token to its K highest-affinity experts, no capacity, no balancing."""

from __future__ import annotations

from twinloop.model.routing.base import Assignment, F32, Router, RoutingContext, register, top_k


@register
class TopK(Router):
    """The K best experts per token; a hot expert takes every token that wants it."""

    name = "topk"

    def route(self, affinity: F32, ctx: RoutingContext) -> Assignment:
        return Assignment(top_k(affinity, ctx.top_k), 0, 0)
