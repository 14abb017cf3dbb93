"""--ray gives exactly the local result: the planner search's ranking and the checkpoint-interval Monte-Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.plan.search import search
from twinloop.plan.train_request import make_request, resolve
from twinloop.sweep.chunked import chunk_bounds
from twinloop.twin.reliability import sweep_checkpoint_interval

pytestmark = pytest.mark.usefixtures("ray_local")


def test_chunk_bounds_cover_in_order() -> None:
    for n in (0, 1, 5, 97):
        for k in (1, 3, 8, 200):
            b = chunk_bounds(n, k)
            assert [i for a, z in b for i in range(a, z)] == list(range(n))


def _arrays_equal(a: object, b: object) -> None:
    if hasattr(a, "__dataclass_fields__"):
        for k in a.__dataclass_fields__:
            _arrays_equal(getattr(a, k), getattr(b, k))
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("objective", ["throughput", "cost"])
def test_search_on_ray_ranks_exactly_as_local(objective: str) -> None:
    ctx = resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=64))
    local = search(ctx, objective)  # type: ignore[arg-type]
    remote = search(ctx, objective, ray=True, chunks=5)  # type: ignore[arg-type]
    assert local.fitting > 50 and (local.evaluated, local.fitting) == (remote.evaluated, remote.fitting)
    assert local.rows(local.fitting) == remote.rows(remote.fitting)
    _arrays_equal(local.ranked, remote.ranked)


def test_checkpoint_sweep_on_ray_is_exactly_local() -> None:
    args = (2048, 5.0, 60.0, 180.0)
    local = sweep_checkpoint_interval(*args, seed=3, n_runs=50)
    remote = sweep_checkpoint_interval(*args, seed=3, n_runs=50, ray=True)
    np.testing.assert_array_equal(local.ettr_mean, remote.ettr_mean)
    np.testing.assert_array_equal(local.ettr_std, remote.ettr_std)
    assert local.best_interval_s == remote.best_interval_s
