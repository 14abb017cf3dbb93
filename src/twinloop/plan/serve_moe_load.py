"""The MoE load a serving iteration runs under: a static imbalance factor, or per-rank routed traffic.

The serving roofline (:mod:`twinloop.plan.serve_roofline`) times one replica's iteration; for an MoE model
with expert parallelism (``ep > 1``) that time is set by the slowest EP rank. :class:`MoeLoad` says what each
rank carries, relative to the perfectly balanced case the roofline assumes without it:

* ``load_factor``: the rank's routed-expert copies / the nominal ``tokens·K/ep`` — stretches its routed
  expert GEMMs (shared experts, attention and dense layers are the same on every rank);
* ``touched``: distinct experts (per MoE layer) whose weights the rank reads, as a replica-wide equivalent
  (``rank's instances · ep``); None keeps the roofline's uniform-routing expectation;
* ``send_*`` / ``recv_*``: copies per token of the step the rank sends / receives over NVLink (``intra``)
  and the network (``inter``); None scales the balanced all-to-all by ``load_factor`` (a static factor).

An all-to-all finishes when its slowest rank does, so the routed all-to-all time is the maximum over the
ranks (the last axis of the arrays); expert compute is the rank's own. The static factor reproduces
today's planner at 1.0 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.plan import collectives as coll

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class MoeLoad:
    """What each EP rank carries in one iteration (arrays broadcast against the iteration's tokens; per-rank
    arrays have the ranks on the last axis). See the module docstring.

    Attributes:
        load_factor: routed copies on the rank / nominal ``tokens·K/ep`` (1 = balanced).
        touched: replica-equivalent distinct experts per MoE layer whose weights the rank reads, or None.
        send_intra / send_inter / recv_intra / recv_inter: copies per step token, or None (static factor).
        ranks_per_node: EP ranks sharing a node (the NVLink tier of the all-to-all).
    """

    load_factor: F64 | float = 1.0
    touched: F64 | None = None
    send_intra: F64 | None = None
    send_inter: F64 | None = None
    recv_intra: F64 | None = None
    recv_inter: F64 | None = None
    ranks_per_node: int = 1

    @classmethod
    def static(cls, factor: float) -> MoeLoad:
        """A static imbalance factor: the hottest rank carries ``factor`` × the balanced load."""
        return cls(load_factor=float(factor))

    @property
    def routed(self) -> bool:
        """Whether the all-to-all comes from per-rank traffic (not a static factor)."""
        return self.send_intra is not None


def routed_all_to_all_s(tokens: F64, moe: MoeLoad, ep: int, bytes_per_copy: float, topo: coll.Topology) -> F64:
    """One dispatch + combine under per-rank traffic: per tier ``α·(peers) + max(sent, received)/B``, the
    slower tier paces the rank, the slowest rank paces everyone (max over the last axis, kept).

    Args:
        tokens: the iteration's tokens (micro-batch), broadcast against the per-rank arrays.
        moe: routed traffic (``moe.routed`` must be true).
        ep: EP ranks.
        bytes_per_copy: dispatch + combine bytes of one token copy.
        topo: the link tiers.
    """
    assert moe.send_intra is not None and moe.send_inter is not None
    assert moe.recv_intra is not None and moe.recv_inter is not None
    t = np.asarray(tokens, dtype=np.float64)
    k = float(min(max(moe.ranks_per_node, 1), ep))
    n = float(max(ep, 1))
    intra_b = np.maximum(moe.send_intra, moe.recv_intra) * t * bytes_per_copy
    inter_b = np.maximum(moe.send_inter, moe.recv_inter) * t * bytes_per_copy
    intra = (k - 1) * topo.intra.latency_s + intra_b / topo.intra.effective_bytes_per_s
    inter = (n - k) * topo.inter.latency_s + inter_b / topo.inter.effective_bytes_per_s
    per_rank = np.maximum(intra, inter)
    return np.asarray(np.broadcast_to(per_rank.max(axis=-1, keepdims=True), per_rank.shape), dtype=np.float64)
