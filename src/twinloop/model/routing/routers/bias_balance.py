"""Auxiliary-loss-free balancing (DeepSeek-V3, arXiv 2412.19437 §2.1.2): a per-expert bias is added to the
affinities for *selection only*; after each step the bias of an overloaded expert goes down by ``gamma`` and
that of an underloaded one up by ``gamma`` (``b -= gamma · sign(load - mean)``). No token is dropped.
"""

from __future__ import annotations

import numpy as np

from twinloop.errors import InputError
from twinloop.model.routing.base import Assignment, Router, RoutingContext, StepScores, expert_load, register, top_k


@register
class BiasBalance(Router):
    """Top-k on ``affinity + bias``; the bias follows the sign of each expert's load error.

    Args:
        gamma: bias update speed per step (affinity units; DeepSeek-V3 used 0.001 per training step over
            thousands of steps; a short simulation needs a faster one).
    """

    name = "bias"

    def __init__(self, gamma: float = 0.01) -> None:
        if gamma < 0:
            raise InputError("router bias", "gamma", f"must be >= 0, got {gamma}")
        self.gamma = gamma
        self._bias = np.zeros(0, dtype=np.float32)

    def start(self, ctx: RoutingContext) -> None:
        """Zero the per-expert bias."""
        self._bias = np.zeros(ctx.n_experts, dtype=np.float32)

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Top-k on the biased affinities, then nudge each expert's bias against its load error."""
        experts = top_k(scores.affinity + self._bias, ctx.top_k)
        load = expert_load(experts, ctx.n_experts) / ctx.placement.n_replicas  # per instance
        self._bias -= np.float32(self.gamma) * np.sign(load - load.mean()).astype(np.float32)
        return Assignment(experts, 0, 0)
