"""MoE routing model."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.arch import load_model
from twinloop.model.moe import MoeShape, expert_popularity, route_tokens


def test_deterministic_per_seed() -> None:
    v3 = load_model("deepseek-v3")
    a, b = route_tokens(v3, 2048, 32, zipf_s=0.8, seed=3), route_tokens(v3, 2048, 32, zipf_s=0.8, seed=3)
    c = route_tokens(v3, 2048, 32, zipf_s=0.8, seed=4)
    assert np.array_equal(a.tokens_per_expert, b.tokens_per_expert) and a.imbalance == b.imbalance
    assert not np.array_equal(a.tokens_per_expert, c.tokens_per_expert)
    assert pickle.loads(pickle.dumps(a)).imbalance == a.imbalance


def test_uniform_is_balanced_and_skew_is_not() -> None:
    v3 = load_model("deepseek-v3")
    uniform = route_tokens(v3, 32768, 64, node_limit=0)
    assert uniform.imbalance < 1.1
    skewed = route_tokens(v3, 32768, 64, zipf_s=1.0, node_limit=0)
    assert skewed.imbalance > 2 * uniform.imbalance
    assert skewed.tokens_per_rank.sum() == 32768 * 8


def test_capacity_factor_drops_overflow() -> None:
    mix = load_model("mixtral-8x7b")
    skewed = route_tokens(mix, 8192, 8, zipf_s=1.2, capacity_factor=1.0)
    cap = int(np.ceil(1.0 * 8192 * 2 / 8))
    assert skewed.dropped > 0
    assert skewed.tokens_per_expert.max() <= cap
    assert np.array_equal(skewed.tokens_per_expert, np.minimum(skewed.routed_per_expert, cap))
    assert route_tokens(mix, 8192, 8, capacity_factor=100.0).dropped == 0


def test_node_limit_caps_nodes_per_token() -> None:
    v3 = load_model("deepseek-v3")  # node_limit 4 from n_group 8 / topk_group 4
    limited = route_tokens(v3, 4096, 256, ranks_per_node=8)  # 32 nodes
    free = route_tokens(v3, 4096, 256, node_limit=0, ranks_per_node=8)
    assert limited.remote_nodes_per_token <= 4
    assert free.remote_nodes_per_token > limited.remote_nodes_per_token
    assert limited.remote_ranks_per_token <= 8


def test_single_rank_has_no_traffic_and_shared_experts_are_local() -> None:
    r = route_tokens(MoeShape(16, 2, n_shared=2), 1000, 1)
    assert r.remote_ranks_per_token == 0 and r.a2a_bytes_per_rank_factor == 0
    assert r.imbalance == 1.0
    assert route_tokens(MoeShape(16, 2, n_shared=2), 1000, 4).shared_tokens_per_rank == 500


def test_bad_inputs() -> None:
    v3 = load_model("deepseek-v3")
    with pytest.raises(InputError, match="ep_ranks"):
        route_tokens(v3, 10, 3)
    with pytest.raises(InputError, match="zipf_s"):
        route_tokens(v3, 10, 8, zipf_s=-1)
    with pytest.raises(InputError, match="capacity_factor"):
        route_tokens(v3, 10, 8, capacity_factor=0)
    with pytest.raises(InputError, match="no MoE"):
        route_tokens(load_model("llama-3-8b"), 10, 1)
    with pytest.raises(InputError, match="node_limit"):
        route_tokens(MoeShape(64, 8, node_limit=1), 10, 64, ranks_per_node=4)


def test_popularity_is_a_distribution() -> None:
    p = expert_popularity(64, 1.0, np.random.default_rng(0))
    assert p.sum() == pytest.approx(1.0) and p.max() / p.min() == pytest.approx(64.0)


@settings(max_examples=30, deadline=None)
@given(
    tokens=st.integers(0, 3000),
    log_ranks=st.integers(0, 4),
    zipf_s=st.floats(0, 2),
    cf=st.one_of(st.none(), st.floats(0.5, 3)),
    node_limit=st.integers(0, 2),
    seed=st.integers(0, 2**16),
)
def test_routing_invariants(
    tokens: int, log_ranks: int, zipf_s: float, cf: float | None, node_limit: int, seed: int
) -> None:
    shape = MoeShape(n_experts=32, top_k=4, n_shared=1)
    ranks = 2**log_ranks
    r = route_tokens(shape, tokens, ranks, zipf_s, cf, node_limit, ranks_per_node=2, seed=seed)
    assert r.routed + r.dropped == tokens * 4
    assert r.tokens_per_expert.sum() == r.tokens_per_rank.sum() == r.routed
    assert r.routed_per_expert.sum() == tokens * 4
    assert r.imbalance >= 1.0 - 1e-12
    assert 0 <= r.remote_ranks_per_token <= min(4, ranks - 1)
