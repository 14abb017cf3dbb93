"""The shared conformance test: every registered router, on small seeded streams and both placements."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.model.routing import REGISTRY, AffinityStream, DriftSpec, make_router, router_names, simulate
from twinloop.model.routing import placement as pl
from twinloop.model.routing.base import StepScores, expert_load
from twinloop.model.routing.simulator import make_context, warmup_choices

NAMES = router_names()
SPEC = DriftSpec(tokens_per_step=512, burst_start_step=2, burst_steps=3, drift_period_steps=8)


def _placements(e: int, ep: int, per_node: int, k: int) -> list[pl.Placement]:
    stream = AffinityStream.create(SPEC, e, seed=1)
    co, load = pl.coactivation(warmup_choices(stream, k), e)
    return [pl.contiguous(e, ep, per_node), pl.affinity(co, load, ep, per_node, 1)]


def test_registry_has_the_six_variants() -> None:
    assert set(NAMES) == {"topk", "capacity", "bias", "node-limited", "two-stage", "adaptive"}


@pytest.mark.parametrize("name", NAMES)
def test_defaults_construct_and_pickle(name: str) -> None:
    router = make_router(name)
    clone = pickle.loads(pickle.dumps(router))
    assert type(clone) is type(router) and clone.params() == router.params()
    assert REGISTRY[name].name == name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(16, 4, 8, 4, 2), (8, 2, 4, 2, 0)])  # experts, K, ep, ranks/node, node limit
def test_invariants_every_step(name: str, shape: tuple[int, int, int, int, int]) -> None:
    e, k, ep, per_node, node_limit = shape
    stream = AffinityStream.create(SPEC, e, seed=3)
    for placement in _placements(e, ep, per_node, k):
        router = make_router(name)
        ctx = make_context(e, k, node_limit, SPEC.tokens_per_step, placement)
        router.start(ctx)
        for step in range(6):
            scores = StepScores(stream.logits(step))
            a = router.route(scores, ctx)
            ex = a.experts
            assert ex.shape == (SPEC.tokens_per_step, router.width(ctx))
            assert router.width(ctx) <= k
            assert ((ex >= -1) & (ex < e)).all()
            valid = np.sort(np.where(ex >= 0, ex, -np.arange(1, ex.shape[1] + 1)[None, :]), axis=1)
            assert (np.diff(valid, axis=1) != 0).all(), "a token got the same expert twice"
            assert (ex >= 0).sum(axis=1).max() <= k
            assert a.dropped >= 0 and a.redirected >= 0
            if router.uses_capacity:
                assert a.capacity is not None
                assert (expert_load(ex, e) <= a.capacity).all(), "an expert exceeds its capacity"
            else:
                assert a.dropped == 0


@pytest.mark.parametrize("name", NAMES)
def test_seeded_runs_repeat_exactly(name: str) -> None:
    placement = pl.contiguous(16, 8, 4)
    stream = AffinityStream.create(SPEC, 16, seed=7)
    a = simulate(make_router(name), stream, placement, 4, 6, 2, 10.0)
    b = simulate(pickle.loads(pickle.dumps(make_router(name))), stream, placement, 4, 6, 2, 10.0)
    for field in ("imbalance", "load_factor", "dropped", "redirected", "a2a_intra_bytes", "a2a_inter_bytes", "quality"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_unknown_router_names_the_allowed() -> None:
    with pytest.raises(InputError, match="allowed: adaptive"):
        make_router("nope")
