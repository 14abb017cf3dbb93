"""Adaptive K with backup-expert redirection: a safety loop around top-k with capacity.

Each step the gate's demand is known before dispatch. The controller measures the pressure (the hottest
expert's demand at the current ``K`` over its capacity) and moves ``K`` one notch: down when the pressure
is above ``high`` (fewer experts per token: less routed work), up when it is below ``low`` (quality back
when idle), always within ``[k_min, k_max]``. Capacity follows ``K`` (``cf · tokens · K_t / n_experts``), so
a lower ``K`` lowers the most any rank can be given, which is what bounds the slowest rank's step. A copy
that overflows its expert is redirected to the token's next-best expert with room left (up to ``backups``
candidates by affinity) and dropped only when none has room.
"""

from __future__ import annotations

import math

import numpy as np

from twinloop.errors import InputError
from twinloop.model.routing.base import (
    I64,
    Assignment,
    Router,
    RoutingContext,
    StepScores,
    enforce_capacity,
    expert_load,
    register,
)


@register
class AdaptiveK(Router):
    """Top-``K_t`` with capacity, ``K_t`` adapted each step from the gate's demand, overflow redirected.

    Args:
        k_min / k_max: bounds on experts per token (0 = ``ceil(K/2)`` / ``K``; 1 ≤ k_min ≤ k_max).
        capacity_factor: capacity per expert relative to an even load at ``K_t`` (> 0; 1.0 by default:
            redirection absorbs the overflow a tighter capacity causes, and the tighter cap bounds the slowest rank).
        backups: backup experts tried per overflowing copy (≥ 0).
        high / low: pressure thresholds (hottest demand / capacity) to shed / add one expert per token.
    """

    name = "adaptive"
    uses_capacity = True

    def __init__(
        self,
        k_min: int = 0,
        k_max: int = 0,
        capacity_factor: float = 1.0,
        backups: int = 2,
        high: float = 1.5,
        low: float = 1.2,
    ) -> None:
        if k_min < 0 or k_max < 0 or (k_min and k_max and k_max < k_min):
            raise InputError("router adaptive", "k_min", f"must be in 0..k_max, got {k_min} (k_max {k_max})")
        if capacity_factor <= 0:
            raise InputError("router adaptive", "capacity_factor", f"must be > 0, got {capacity_factor}")
        if backups < 0:
            raise InputError("router adaptive", "backups", f"must be >= 0, got {backups}")
        if not 0 < low < high:
            raise InputError("router adaptive", "low", f"must be in 0..high ({high}), got {low}")
        self.k_min = k_min
        self.k_max = k_max
        self.capacity_factor = capacity_factor
        self.backups = backups
        self.high = high
        self.low = low
        self._k = 0

    def bounds(self, ctx: RoutingContext) -> tuple[int, int]:
        """(k_min, k_max) resolved for the model."""
        hi = min(self.k_max or ctx.top_k, ctx.n_experts)
        lo = min(self.k_min or math.ceil(ctx.top_k / 2), hi)
        return lo, hi

    def width(self, ctx: RoutingContext) -> int:
        """The resolved ``k_max``: the most experts per token K can grow to."""
        return self.bounds(ctx)[1]

    def start(self, ctx: RoutingContext) -> None:
        """Start at the model's K (clipped to ``k_max``)."""
        self._k = min(ctx.top_k, self.bounds(ctx)[1])

    @property
    def current_k(self) -> int:
        """K used by the last step."""
        return self._k

    def _capacity(self, ctx: RoutingContext, k: int) -> I64:
        return ctx.capacity(self.capacity_factor * k / ctx.top_k)

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Move K one notch from this step's capacity pressure, then route with capacity and backup redirection."""
        lo, hi = self.bounds(ctx)
        k = self._k or min(ctx.top_k, hi)
        ranked = scores.ranked(min(ctx.n_experts, hi + self.backups))
        pressure = float((expert_load(ranked[:, :k], ctx.n_experts) / self._capacity(ctx, k)).max())
        if pressure > self.high:
            k = max(lo, k - 1)
        elif pressure < self.low:
            k = min(hi, k + 1)
        self._k = k
        cap = self._capacity(ctx, k)
        experts, _ = enforce_capacity(ranked[:, :k], cap)
        pending = (experts < 0) & (ranked[:, :k] >= 0)
        redirected = 0
        taken = expert_load(experts, ctx.n_experts)
        for j in range(k, min(ranked.shape[1], k + self.backups)):
            rows, cols = np.nonzero(pending)
            if rows.size == 0:
                break
            rows, first = np.unique(rows, return_index=True)  # one slot per token per backup rank
            cols = cols[first]
            backup = ranked[rows, j]
            dup = (experts[rows] == backup[:, None]).any(axis=1)
            kept, _ = enforce_capacity(np.where(dup, -1, backup)[:, None], cap, taken)
            ok = kept[:, 0] >= 0
            experts[rows[ok], cols[ok]] = backup[ok]
            pending[rows[ok], cols[ok]] = False
            taken += expert_load(kept, ctx.n_experts)
            redirected += int(ok.sum())
        out = np.full((ctx.tokens, hi), -1, dtype=np.int64)
        out[:, :k] = experts
        return Assignment(out, int(pending.sum()), redirected, cap)
