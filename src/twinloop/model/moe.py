"""MoE token routing over expert-parallel (EP) ranks: load per expert and rank, drops, all-to-all volume.

A statistical model of a router, not a trained one: each token draws its top-k experts without
replacement from an expert popularity distribution (uniform, or Zipf with exponent ``zipf_s`` over a
seeded random order of experts, since real hot experts are scattered, not adjacent) using the Gumbel-top-k
trick (as an exponential race). Node-limited routing (DeepSeek-V3) first keeps the ``node_limit`` nodes
whose best ``k / M`` expert scores sum highest, then picks the top-k experts inside them. Experts are
placed on EP ranks in contiguous blocks; a capacity factor drops the copies that overflow an expert,
first come first served. Shared experts run on every rank for that rank's own tokens, so they add no
imbalance or traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch

_CHUNK_TOKENS = 32_768  # bounds the (tokens × experts) score matrix to ~64 MiB per chunk


@dataclass(frozen=True)
class MoeShape:
    """The routing-relevant numbers of an MoE layer.

    Attributes:
        n_experts: routed experts; top_k: experts per token; n_shared: shared experts;
        node_limit: a token's experts live on at most this many nodes (0 = unlimited).
    """

    n_experts: int
    top_k: int
    n_shared: int = 0
    node_limit: int = 0

    @classmethod
    def from_arch(cls, arch: ModelArch) -> MoeShape:
        """Read the shape from a model (InputError if it has no MoE layers)."""
        if not arch.is_moe:
            raise InputError(arch.name, "n_routed_experts", "model has no MoE layers to route")
        return cls(arch.n_routed_experts, arch.experts_per_token, arch.n_shared_experts, arch.node_limit)


@dataclass(frozen=True)
class RoutingLoad:
    """Routing outcome for one MoE layer and one batch of tokens.

    Attributes:
        tokens / top_k / ep_ranks / ranks_per_node: the inputs.
        routed_per_expert: copies sent to each expert before capacity drops, shape (n_experts,).
        tokens_per_expert: copies each expert processes (after drops), shape (n_experts,).
        tokens_per_rank: routed copies each EP rank processes, shape (ep_ranks,).
        routed / dropped: copies kept / dropped; ``routed + dropped == tokens · top_k``.
        shared_tokens_per_rank: shared-expert token passes per rank (its own tokens × n_shared).
        imbalance: hottest rank's routed load / mean rank load (≥ 1; 1.0 when nothing is routed).
        expert_imbalance: hottest expert / mean expert load.
        remote_ranks_per_token: mean distinct other ranks a token is dispatched to (one copy per rank).
        remote_nodes_per_token: mean distinct other nodes a token is dispatched to.
        recv_tokens_per_rank: distinct remote tokens each rank receives, shape (ep_ranks,).
        a2a_bytes_per_rank_factor: hottest rank's received tokens / tokens per rank; all-to-all bytes of
            that rank per dispatch = factor · (tokens / ep_ranks) · hidden · bytes(moe_dispatch).
    """

    tokens: int
    top_k: int
    ep_ranks: int
    ranks_per_node: int
    routed_per_expert: NDArray[np.int64]
    tokens_per_expert: NDArray[np.int64]
    tokens_per_rank: NDArray[np.int64]
    routed: int
    dropped: int
    shared_tokens_per_rank: float
    imbalance: float
    expert_imbalance: float
    remote_ranks_per_token: float
    remote_nodes_per_token: float
    recv_tokens_per_rank: NDArray[np.int64]
    a2a_bytes_per_rank_factor: float


def expert_popularity(n_experts: int, zipf_s: float, rng: np.random.Generator) -> NDArray[np.float64]:
    """Probability of each expert: ∝ 1 / rank^zipf_s over a random order of experts (uniform at s=0)."""
    weights = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** zipf_s
    return np.asarray(rng.permutation(weights / weights.sum()), dtype=np.float64)


def _choose_experts(
    p: NDArray[np.float32], n: int, shape: MoeShape, experts_per_node: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Top-k experts for ``n`` tokens, shape (n, top_k): an exponential race, ``affinity = p / Exp(1)``,
    whose top-k is a sample without replacement ∝ p (the Gumbel-top-k trick without the logarithms).
    """
    affinity = rng.standard_exponential((n, p.size), dtype=np.float32)
    np.maximum(affinity, np.float32(1e-30), out=affinity)  # an exact 0 would make inf, then 0·inf = nan
    np.divide(p[None, :], affinity, out=affinity)
    n_nodes = p.size // experts_per_node
    if shape.node_limit and shape.node_limit < n_nodes:
        per_node = affinity.reshape(n, n_nodes, experts_per_node)
        best = max(1, min(experts_per_node, shape.top_k // shape.node_limit))
        if best == 1:
            node_score = per_node.max(axis=2)
        else:
            node_score = np.partition(per_node, experts_per_node - best, axis=2)[:, :, -best:].sum(axis=2)
        drop_nodes = np.argpartition(node_score, n_nodes - shape.node_limit - 1, axis=1)[
            :, : n_nodes - shape.node_limit
        ]
        allowed = np.ones((n, n_nodes), dtype=np.float32)
        np.put_along_axis(allowed, drop_nodes, 0.0, axis=1)
        per_node *= allowed[:, :, None]  # affinities are > 0, so a zeroed expert is never in the top-k
    return np.argpartition(affinity, p.size - shape.top_k, axis=1)[:, -shape.top_k :].astype(np.int64)


def _validate(shape: MoeShape, tokens: int, ep_ranks: int, ranks_per_node: int, zipf_s: float) -> None:
    if tokens < 0:
        raise InputError("tokens", "", f"must be >= 0, got {tokens}")
    if ep_ranks < 1 or shape.n_experts % ep_ranks:
        raise InputError("ep_ranks", "", f"must divide the {shape.n_experts} routed experts, got {ep_ranks}")
    if not 1 <= shape.top_k <= shape.n_experts:
        raise InputError("top_k", "", f"must be in 1..{shape.n_experts}, got {shape.top_k}")
    if ranks_per_node < 1:
        raise InputError("ranks_per_node", "", f"must be >= 1, got {ranks_per_node}")
    if zipf_s < 0:
        raise InputError("zipf_s", "", f"must be >= 0, got {zipf_s}")


def route_tokens(
    model: ModelArch | MoeShape,
    tokens: int,
    ep_ranks: int,
    zipf_s: float = 0.0,
    capacity_factor: float | None = None,
    node_limit: int | None = None,
    ranks_per_node: int = 8,
    seed: int = 0,
) -> RoutingLoad:
    """Route ``tokens`` tokens of one MoE layer over ``ep_ranks`` ranks (see the module docstring).

    Args:
        model: a model with MoE layers, or an explicit :class:`MoeShape`.
        tokens: tokens in the batch (spread evenly over the EP ranks as sources).
        ep_ranks: expert-parallel ranks; must divide the routed experts (contiguous blocks).
        zipf_s: skew of expert popularity (0 = uniform).
        capacity_factor: capacity per expert = ceil(cf · tokens · k / n_experts); None = no drops.
        node_limit: max nodes per token; None = the model's (DeepSeek-V3: 4), 0 = unlimited.
        ranks_per_node: EP ranks per node (GPUs per node).
        seed: RNG seed; same seed, same result.
    """
    shape = model if isinstance(model, MoeShape) else MoeShape.from_arch(model)
    if node_limit is not None:
        shape = MoeShape(shape.n_experts, shape.top_k, shape.n_shared, node_limit)
    _validate(shape, tokens, ep_ranks, ranks_per_node, zipf_s)
    if capacity_factor is not None and capacity_factor <= 0:
        raise InputError("capacity_factor", "", f"must be > 0, got {capacity_factor}")
    e, k = shape.n_experts, shape.top_k
    experts_per_rank = e // ep_ranks
    ranks_per_node = min(ranks_per_node, ep_ranks)
    _check_nodes(shape, ep_ranks, ranks_per_node, experts_per_rank)
    experts_per_node = experts_per_rank * ranks_per_node

    rng = np.random.default_rng(seed)
    popularity = expert_popularity(e, zipf_s, rng).astype(np.float32)
    chosen = np.empty((tokens, k), dtype=np.int64)
    for start in range(0, tokens, _CHUNK_TOKENS):
        stop = min(tokens, start + _CHUNK_TOKENS)
        chosen[start:stop] = _choose_experts(popularity, stop - start, shape, experts_per_node, rng)

    flat = chosen.ravel()
    routed_per_expert = np.bincount(flat, minlength=e).astype(np.int64)
    keep = np.ones(flat.size, dtype=bool)
    if capacity_factor is not None:
        keep = _within_capacity(flat, routed_per_expert, int(np.ceil(capacity_factor * tokens * k / e)))
    tokens_per_expert = np.bincount(flat[keep], minlength=e).astype(np.int64)
    tokens_per_rank = tokens_per_expert.reshape(ep_ranks, experts_per_rank).sum(axis=1)
    recv, sent_nodes = _dispatch(flat, keep, tokens, k, ep_ranks, experts_per_rank, ranks_per_node)

    mean_rank = tokens_per_rank.mean()
    tokens_per_source = tokens / ep_ranks
    return RoutingLoad(
        tokens=tokens,
        top_k=k,
        ep_ranks=ep_ranks,
        ranks_per_node=ranks_per_node,
        routed_per_expert=routed_per_expert,
        tokens_per_expert=tokens_per_expert,
        tokens_per_rank=tokens_per_rank,
        routed=int(keep.sum()),
        dropped=int(flat.size - keep.sum()),
        shared_tokens_per_rank=tokens_per_source * shape.n_shared,
        imbalance=float(tokens_per_rank.max() / mean_rank) if mean_rank > 0 else 1.0,
        expert_imbalance=float(tokens_per_expert.max() / tokens_per_expert.mean()) if mean_rank > 0 else 1.0,
        remote_ranks_per_token=float(recv.sum() / tokens) if tokens else 0.0,
        remote_nodes_per_token=float(sent_nodes.sum() / tokens) if tokens else 0.0,
        recv_tokens_per_rank=recv,
        a2a_bytes_per_rank_factor=float(recv.max() / tokens_per_source) if tokens else 0.0,
    )


def _check_nodes(shape: MoeShape, ep_ranks: int, ranks_per_node: int, experts_per_rank: int) -> None:
    """``ranks_per_node`` must divide the EP ranks, and the node limit must leave room for top-k experts."""
    if ep_ranks % ranks_per_node:
        raise InputError("ranks_per_node", "", f"must divide ep_ranks {ep_ranks}, got {ranks_per_node}")
    n_nodes = ep_ranks // ranks_per_node
    k = shape.top_k
    if shape.node_limit and shape.node_limit < n_nodes and shape.node_limit * experts_per_rank * ranks_per_node < k:
        raise InputError("node_limit", "", f"{shape.node_limit} nodes hold fewer than top_k={k} experts")


def _within_capacity(flat: NDArray[np.int64], routed_per_expert: NDArray[np.int64], capacity: int) -> NDArray[np.bool_]:
    """Which (token, expert) choices an expert of ``capacity`` keeps: the first ones, in token order."""
    order = np.argsort(flat, kind="stable")  # token order within each expert: first come, first kept
    starts = np.cumsum(routed_per_expert) - routed_per_expert
    position = np.empty(flat.size, dtype=np.int64)
    position[order] = np.arange(flat.size) - np.repeat(starts, routed_per_expert)
    return position < capacity


def _dispatch(
    flat: NDArray[np.int64],
    keep: NDArray[np.bool_],
    tokens: int,
    k: int,
    ep_ranks: int,
    experts_per_rank: int,
    ranks_per_node: int,
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Tokens each rank receives from other ranks, and the (token, node) pairs a token is sent to (off its node).

    One copy per (token, destination rank), kept copies only; tokens are sourced evenly over the ranks.
    """
    token_idx = np.repeat(np.arange(tokens), k)[keep]
    dest_rank = flat[keep] // experts_per_rank
    source_rank = (np.arange(tokens) * ep_ranks) // max(tokens, 1)
    sent = np.zeros((tokens, ep_ranks), dtype=bool)
    sent[token_idx, dest_rank] = True
    sent[np.arange(tokens), source_rank] = False
    recv = sent.sum(axis=0).astype(np.int64)
    n_nodes = ep_ranks // ranks_per_node
    sent_nodes: NDArray[np.bool_] = np.asarray(sent.reshape(tokens, n_nodes, ranks_per_node).any(axis=2))
    sent_nodes[np.arange(tokens), source_rank // ranks_per_node] = False
    return recv, sent_nodes
