"""The time-stepped MoE routing simulator: a drifting token stream, a router, a placement, metrics per step.

Per step: draw the step's affinity logits (:mod:`.workload`), let the router choose experts from
them (:class:`.base.StepScores`), send every kept copy to an instance of its expert (:meth:`Placement.dest_rank`) and
measure:

* ``imbalance``: hottest EP rank's copies / mean rank copies (≥ 1);
* ``load_factor``: hottest rank's copies / the nominal ``tokens · K / ep`` (what stretches the slowest rank's
  expert work and all-to-all in the planner's step time; below 1 when a router routes fewer copies);
* ``dropped`` / ``redirected`` copies;
* all-to-all bytes of one dispatch + combine, split intra-node (NVLink) and inter-node (network): a token
  crosses to each remote *node* once (DeepEP-style: one network copy per node, forwarded over NVLink
  there), and to each other rank on its own node once;
* ``quality``: mean share of a token's true top-K experts (by its unbiased affinities, at the model's K)
  that serve it, and ``served_true``: share of tokens served by at least one of their true top-K;
* per rank (:class:`RankTraffic`, what the serving planner times the slowest rank with): distinct expert
  instances the rank runs, and copies it sends and receives over NVLink and over the network (every copy
  counted, no per-node deduplication: the serving roofline's all-to-all sends each copy).

Tokens are sourced evenly over the EP ranks. Everything is vectorized over tokens; the Python loop is
over steps only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.model.routing.base import Router, RoutingContext, StepScores, top_k
from twinloop.model.routing.placement import Placement
from twinloop.model.routing.workload import AffinityStream

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class RankTraffic:
    """Per step and EP rank (arrays of shape (steps, ep)) what the rank does in one MoE layer.

    Attributes:
        touched: distinct expert instances on the rank that receive at least one copy (weights it reads).
        send_intra / send_inter: copies the rank sends to other ranks on its node / on other nodes.
        recv_intra / recv_inter: copies the rank receives from other ranks on its node / from other nodes.
    """

    touched: I64
    send_intra: I64
    send_inter: I64
    recv_intra: I64
    recv_inter: I64

    @classmethod
    def zeros(cls, steps: int, ep: int) -> RankTraffic:
        """All-zero arrays for ``steps`` steps on ``ep`` ranks (filled in place by the simulator)."""
        return cls(*(np.zeros((steps, ep), dtype=np.int64) for _ in range(5)))


def rank_traffic(experts: I64, dest: I64, valid: NDArray[np.bool_], ctx: RoutingContext) -> tuple[I64, ...]:
    """(touched, send_intra, send_inter, recv_intra, recv_inter) per rank for one step's copies."""
    p = ctx.placement
    ep = p.ep_ranks
    src = np.broadcast_to(ctx.source_rank[:, None], dest.shape)
    node_src, node_dst = src // p.ranks_per_node, dest // p.ranks_per_node
    intra = valid & (node_src == node_dst) & (src != dest)
    inter = valid & (node_src != node_dst)
    mark = np.zeros(p.n_experts * ep, dtype=bool)
    mark[(experts * ep + dest)[valid]] = True
    touched = mark.reshape(p.n_experts, ep).sum(axis=0)

    def count(ranks: I64, mask: NDArray[np.bool_]) -> I64:
        return np.bincount(ranks[mask], minlength=ep).astype(np.int64)

    return touched, count(src, intra), count(src, inter), count(dest, intra), count(dest, inter)


@dataclass(frozen=True)
class StepMetrics:
    """Per-step metrics, one entry per step (see the module docstring for definitions).

    Attributes:
        imbalance / load_factor / dropped / redirected / a2a_intra_bytes / a2a_inter_bytes / quality /
        served_true / mean_k: arrays of length ``steps``; burst: whether the step is in the burst window.
        rank_load: copies per (step, rank); ranks: per-rank traffic (:class:`RankTraffic`).
    """

    imbalance: F64
    load_factor: F64
    dropped: I64
    redirected: I64
    a2a_intra_bytes: F64
    a2a_inter_bytes: F64
    quality: F64
    served_true: F64
    mean_k: F64
    burst: NDArray[np.bool_]
    rank_load: NDArray[np.int64] = field(repr=False)
    ranks: RankTraffic = field(repr=False)


def source_ranks(tokens: int, ep_ranks: int) -> I64:
    """EP rank each token comes from (even split, contiguous blocks)."""
    return np.asarray((np.arange(tokens) * ep_ranks) // max(tokens, 1), dtype=np.int64)


def make_context(n_experts: int, top_k_: int, node_limit: int, tokens: int, placement: Placement) -> RoutingContext:
    """The :class:`RoutingContext` of a layer on a placement."""
    if not 1 <= top_k_ <= n_experts:
        raise InputError("top_k", "", f"must be in 1..{n_experts}, got {top_k_}")
    return RoutingContext(n_experts, top_k_, node_limit, tokens, placement, source_ranks(tokens, placement.ep_ranks))


def a2a_bytes(dest: I64, valid: NDArray[np.bool_], ctx: RoutingContext, bytes_per_copy: float) -> tuple[float, float]:
    """(intra-node, inter-node) bytes of one dispatch + combine for copies going to ranks ``dest``."""
    p = ctx.placement
    t = dest.shape[0]
    src = ctx.source_rank[:, None]
    src_node = src // p.ranks_per_node
    node = dest // p.ranks_per_node
    token = np.arange(t)[:, None]
    remote_node = valid & (node != src_node)
    same_node_other = valid & (node == src_node) & (dest != src)
    n_nodes, ep = p.n_nodes, p.ep_ranks
    inter = np.zeros(t * n_nodes, dtype=bool)
    inter[(token * n_nodes + node)[remote_node]] = True
    intra = np.zeros(t * ep, dtype=bool)
    intra[(token * ep + dest)[same_node_other]] = True
    return float(intra.sum()) * bytes_per_copy, float(inter.sum()) * bytes_per_copy


def simulate(
    router: Router,
    stream: AffinityStream,
    placement: Placement,
    top_k_: int,
    steps: int,
    node_limit: int = 0,
    bytes_per_copy: float = 0.0,
    on_step: Callable[[int], None] | None = None,
) -> StepMetrics:
    """Run ``router`` for ``steps`` steps of ``stream`` on ``placement``.

    Args:
        router: the policy (its state is reset by ``start``).
        stream: the drifting token stream (its spec gives tokens per step).
        placement: experts on ranks/nodes.
        top_k_: the model's experts per token (K).
        steps: steps to run (≥ 1).
        node_limit: the model's node limit (0 = none).
        bytes_per_copy: bytes one token copy moves in dispatch + combine (hidden × (dispatch + combine dtype)).
        on_step: called with each finished step's index (progress bars).
    """
    if steps < 1:
        raise InputError("--steps", "", f"must be >= 1, got {steps}")
    e = stream.n_experts
    if placement.n_experts != e:
        raise InputError("placement", "n_experts", f"{placement.n_experts} != the stream's {e}")
    tokens = stream.spec.tokens_per_step
    ctx = make_context(e, top_k_, node_limit, tokens, placement)
    router.start(ctx)
    ep = placement.ep_ranks
    nominal = tokens * top_k_ / ep
    out = {k: np.zeros(steps) for k in ("imb", "lf", "intra", "inter", "q", "served", "k")}
    dropped = np.zeros(steps, dtype=np.int64)
    redirected = np.zeros(steps, dtype=np.int64)
    rank_load = np.zeros((steps, ep), dtype=np.int64)
    traffic = RankTraffic.zeros(steps, ep)
    burst = np.array([stream.spec.in_burst(s) for s in range(steps)])
    for s in range(steps):
        logits = stream.logits(s)
        scores = StepScores(logits)
        a = router.route(scores, ctx)
        experts = a.experts
        valid = experts >= 0
        truth = scores.ranked(top_k_)
        hits = (experts[:, :, None] == truth[:, None, :]).any(axis=1)  # (tokens, K): true expert served
        dest = placement.dest_rank(experts, ctx.source_rank)
        loads = np.bincount(dest[valid], minlength=ep).astype(np.int64)
        rank_load[s] = loads
        mean = loads.mean()
        out["imb"][s] = loads.max() / mean if mean > 0 else 1.0
        out["lf"][s] = loads.max() / nominal if nominal > 0 else 0.0
        out["intra"][s], out["inter"][s] = a2a_bytes(dest, valid, ctx, bytes_per_copy)
        per_rank = rank_traffic(experts, dest, valid, ctx)
        for f, row in zip(dataclasses.fields(traffic), per_rank, strict=True):
            getattr(traffic, f.name)[s] = row
        out["q"][s] = hits.mean()
        out["served"][s] = hits.any(axis=1).mean()
        out["k"][s] = valid.sum() / tokens
        dropped[s], redirected[s] = a.dropped, a.redirected
        if on_step is not None:
            on_step(s)
    return StepMetrics(
        out["imb"], out["lf"], dropped, redirected, out["intra"], out["inter"], out["q"], out["served"],
        out["k"], burst, rank_load, traffic,
    )  # fmt: skip


def warmup_choices(stream: AffinityStream, top_k_: int, steps: int = 4, stride: int = 16) -> I64:
    """Plain top-k choices over a few early steps (every ``stride``-th): the sample an affinity placement is
    fitted on (a placement is decided before serving, from a profile; it does not see the future burst).
    """
    picks = [top_k(stream.logits(s * stride), top_k_) for s in range(steps) if not stream.spec.in_burst(s * stride)]
    return np.concatenate(picks) if picks else top_k(stream.logits(0), top_k_)
