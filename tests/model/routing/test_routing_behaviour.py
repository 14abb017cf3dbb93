"""Behaviour of the routers, the placement and the simulator metrics (each claim can fail)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.model.routing import AffinityStream, DriftSpec, make_router, simulate
from twinloop.model.routing import placement as pl
from twinloop.model.routing.base import StepScores, enforce_capacity, top_k
from twinloop.model.routing.simulator import make_context, warmup_choices

SPEC = DriftSpec(tokens_per_step=2048, burst_start_step=4, burst_steps=4, drift_period_steps=16, burst_share=0.3)


def _run(name: str, e: int = 16, k: int = 4, ep: int = 8, steps: int = 10, **params: float) -> object:
    stream = AffinityStream.create(SPEC, e, seed=0)
    return simulate(make_router(name, **params), stream, pl.contiguous(e, ep, 4), k, steps, 2, 1.0)


def test_topk_is_exact_and_burst_raises_imbalance() -> None:
    m = _run("topk")
    assert np.allclose(m.quality, 1.0) and m.dropped.sum() == 0  # type: ignore[attr-defined]
    assert m.imbalance[m.burst].mean() > m.imbalance[~m.burst].mean()  # type: ignore[attr-defined]


def test_capacity_bounds_the_hottest_rank_and_costs_quality() -> None:
    top, cap = _run("topk"), _run("capacity", capacity_factor=1.0)
    # one expert per rank pair: the hottest rank holds ≤ 2 experts at capacity ≈ the nominal load
    assert cap.load_factor.max() <= 1.0 + 1e-3 + 2 / 2048  # type: ignore[attr-defined]
    assert cap.load_factor.max() < top.load_factor.max()  # type: ignore[attr-defined]
    assert cap.quality.mean() < 1.0 and cap.dropped.sum() > 0  # type: ignore[attr-defined]


def test_bias_balancing_lowers_imbalance_over_time() -> None:
    top = _run("topk", steps=16)
    bias = _run("bias", steps=16, gamma=0.02)
    assert bias.imbalance[-4:].mean() < top.imbalance[-4:].mean()  # type: ignore[attr-defined]
    assert bias.dropped.sum() == 0  # type: ignore[attr-defined]


def test_node_limited_caps_inter_node_fanout() -> None:
    e, k, ep, per_node = 32, 8, 16, 2  # 8 nodes
    stream = AffinityStream.create(SPEC, e, seed=0)
    placement = pl.contiguous(e, ep, per_node)
    ctx = make_context(e, k, 2, SPEC.tokens_per_step, placement)
    router = make_router("node-limited", max_nodes=2)
    a = router.route(StepScores(stream.logits(0)), ctx)
    nodes = placement.primary_node[a.experts]
    distinct = np.array([np.unique(row).size for row in nodes])
    assert distinct.max() <= 2
    free = simulate(make_router("topk"), stream, placement, k, 3, 0, 1.0)
    limited = simulate(make_router("node-limited", max_nodes=2), stream, placement, k, 3, 0, 1.0)
    assert limited.a2a_inter_bytes.mean() < free.a2a_inter_bytes.mean()


def test_adaptive_sheds_k_under_a_burst_and_redirects() -> None:
    spec = DriftSpec(tokens_per_step=2048, burst_start_step=4, burst_steps=6, burst_share=0.6, burst_boost=6.0)
    stream = AffinityStream.create(spec, 16, seed=0)
    m = simulate(make_router("adaptive"), stream, pl.contiguous(16, 8, 4), 4, 10, 0, 1.0)
    assert m.mean_k[m.burst].min() < 4
    assert m.redirected.sum() > 0
    cap = simulate(make_router("capacity"), stream, pl.contiguous(16, 8, 4), 4, 10, 0, 1.0)
    assert m.load_factor.max() < cap.load_factor.max()


def test_affinity_placement_cuts_inter_node_bytes_and_respects_slots() -> None:
    e, k, ep, per_node = 32, 4, 8, 2
    stream = AffinityStream.create(SPEC, e, seed=2)
    co, load = pl.coactivation(warmup_choices(stream, k), e)
    aff = pl.affinity(co, load, ep, per_node, replica_slots_per_rank=1)
    assert np.bincount(aff.instance_rank, minlength=ep).max() <= e // ep + 1
    assert sorted(set(aff.instance_expert.tolist())) == list(range(e))
    assert (aff.n_replicas >= 1).all() and aff.n_replicas.sum() == aff.instance_expert.size
    contiguous = pl.contiguous(e, ep, per_node)
    a = simulate(make_router("topk"), stream, aff, k, 4, 0, 1.0)
    c = simulate(make_router("topk"), stream, contiguous, k, 4, 0, 1.0)
    assert a.a2a_inter_bytes.mean() < c.a2a_inter_bytes.mean()


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(InputError, match="burst_share"):
        DriftSpec(burst_share=2.0)
    with pytest.raises(InputError, match="--ep"):
        pl.contiguous(10, 4, 2)
    with pytest.raises(InputError, match="capacity_factor"):
        make_router("capacity", capacity_factor=0)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(1, 4), st.integers(1, 60), st.integers(0, 30), st.integers(0, 2**31 - 1))
def test_enforce_capacity_never_exceeds(e: int, k: int, tokens: int, cap: int, seed: int) -> None:
    k = min(k, e)
    rng = np.random.default_rng(seed)
    experts = top_k(rng.standard_normal((tokens, e)).astype(np.float32), k)
    kept, dropped = enforce_capacity(experts, np.full(e, cap, dtype=np.int64))
    counts = np.bincount(kept[kept >= 0], minlength=e)
    assert (counts <= cap).all()
    assert dropped == (kept < 0).sum() == tokens * k - counts.sum()
    assert (counts == np.minimum(np.bincount(experts.ravel(), minlength=e), cap)).all()


def test_stream_is_seeded_and_order_free() -> None:
    a = AffinityStream.create(SPEC, 16, seed=5)
    b = AffinityStream.create(SPEC, 16, seed=5)
    np.testing.assert_array_equal(a.logits(3), b.logits(3))
    b.logits(0)
    np.testing.assert_array_equal(a.logits(1), b.logits(1))
    assert not np.array_equal(a.logits(1), AffinityStream.create(SPEC, 16, seed=6).logits(1))


def test_training_planner_takes_a_measured_imbalance() -> None:
    from twinloop.plan.train import plan_train
    from twinloop.plan.train_request import make_request

    base = dict(model="mixtral-8x7b", gpu="h200-sxm", gpus=8, ep=8, tp=1, pp=1, dp=4, cp=2, zero=2)
    fixed = dict(recompute="none", sequence_parallel=False, micro_batch=1, interleave=1)
    low = plan_train(make_request(**base, **fixed, moe_imbalance=1.0))
    high = plan_train(make_request(**base, **fixed, moe_imbalance=2.0))
    assert low.moe_imbalance == 1.0 and high.moe_imbalance == 2.0
    assert high.step_time_s > low.step_time_s
