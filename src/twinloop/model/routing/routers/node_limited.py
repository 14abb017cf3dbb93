"""Node-limited routing (DeepSeek-V3): a token's experts live on at most M nodes. The M nodes whose best
``K / M`` affinities sum highest are kept, then the top-k among the experts those nodes hold. Bounds the
inter-node all-to-all (IB) fan-out of each token to M.
"""

from __future__ import annotations

import numpy as np

from twinloop.errors import InputError
from twinloop.model.routing.base import Assignment, Router, RoutingContext, StepScores, register, top_k


@register
class NodeLimited(Router):
    """Top-k restricted to each token's best ``max_nodes`` nodes (by primary instance).

    Args:
        max_nodes: nodes per token (0 = the model's node limit, or 4 when it has none, DeepSeek-V3's M).
    """

    name = "node-limited"

    def __init__(self, max_nodes: int = 0) -> None:
        if max_nodes < 0:
            raise InputError("router node-limited", "max_nodes", f"must be >= 0, got {max_nodes}")
        self.max_nodes = max_nodes

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        """Top-k among the experts on each token's best ``max_nodes`` nodes."""
        p = ctx.placement
        m = self.max_nodes or ctx.node_limit or 4
        n_nodes = p.n_nodes
        if m >= n_nodes:
            return Assignment(scores.ranked(ctx.top_k), 0, 0)
        node = p.primary_node
        counts = np.bincount(node, minlength=n_nodes)
        width = int(counts.max())
        # (n_nodes, width) expert index per node, padded with a column of -inf
        order = np.argsort(node, kind="stable")
        starts = np.cumsum(counts) - counts
        slot = np.arange(ctx.n_experts) - np.repeat(starts, counts)
        group = np.full((n_nodes, width), ctx.n_experts, dtype=np.int64)
        group[node[order], slot] = order
        if int(counts[np.argsort(-counts)[:m]].sum()) < ctx.top_k:
            raise InputError("router node-limited", "max_nodes", f"{m} nodes hold fewer than top_k={ctx.top_k}")
        affinity = scores.affinity
        padded = np.concatenate([affinity, np.full((affinity.shape[0], 1), -np.inf, np.float32)], axis=1)
        per_node = padded[:, group]  # (tokens, n_nodes, width)
        best = max(1, min(width, ctx.top_k // m))
        node_score = np.sort(per_node, axis=2)[:, :, -best:].sum(axis=2)
        keep = top_k(np.nan_to_num(node_score, neginf=-1e30).astype(np.float32), m)
        allowed = np.zeros((affinity.shape[0], n_nodes), dtype=bool)
        np.put_along_axis(allowed, keep, True, axis=1)
        masked = np.where(allowed[:, node], affinity, np.float32(-1.0))  # affinities are > 0
        return Assignment(top_k(masked.astype(np.float32), ctx.top_k), 0, 0)
