"""Per-rank traffic of the routing simulator (what the serving planner times the slowest rank with)."""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.model.routing import AffinityStream, DriftSpec, make_router, simulate
from twinloop.model.routing import placement as pl
from twinloop.model.routing.simulator import warmup_choices

SPEC = DriftSpec(tokens_per_step=512, burst_start_step=1, burst_steps=2, drift_period_steps=4)


@pytest.mark.parametrize("router", ["topk", "capacity", "adaptive"])
@pytest.mark.parametrize("kind", ["contiguous", "affinity"])
def test_sent_equals_received_and_copies_add_up(router: str, kind: str) -> None:
    e, k, ep, per_node = 32, 4, 8, 4
    stream = AffinityStream.create(SPEC, e, seed=3)
    if kind == "contiguous":
        where = pl.contiguous(e, ep, per_node)
    else:
        co, load = pl.coactivation(warmup_choices(stream, k), e)
        where = pl.affinity(co, load, ep, per_node, 1)
    m = simulate(make_router(router), stream, where, k, 4)
    r = m.ranks
    assert r.touched.shape == r.send_intra.shape == m.rank_load.shape == (4, ep)
    np.testing.assert_array_equal(r.send_intra.sum(axis=1), r.recv_intra.sum(axis=1))
    np.testing.assert_array_equal(r.send_inter.sum(axis=1), r.recv_inter.sum(axis=1))
    # a rank's copies come from itself, its node or other nodes
    assert np.all(r.recv_intra + r.recv_inter <= m.rank_load)
    instances = np.bincount(where.instance_rank, minlength=ep)
    assert np.all(r.touched <= instances) and np.all((r.touched > 0) == (m.rank_load > 0))
    # one node per 4 ranks: ranks on one node never send over the network to each other
    one_node = pl.contiguous(e, 4, 4)
    s = simulate(make_router(router), stream, one_node, k, 2)
    assert s.ranks.send_inter.sum() == 0 and s.ranks.recv_inter.sum() == 0
