"""A serving fleet's ranks report their decode step (issue 14): the loop compares replicas by it."""

from __future__ import annotations

import numpy as np
from tests.twin.test_serving_replicas import NODE_1, _fleet
from tests.twin.twin_helpers import make

from twinloop.closedloop.cluster import rank_step_times
from twinloop.twin.actions import Drain


def test_a_serving_fleets_ranks_report_their_decode_step_the_straggler_slower() -> None:
    # Before: rank step times were for training jobs only (NaN on every serving GPU).
    twin = make(_fleet(2.0, [{"kind": "straggler", "target": f"{NODE_1}/g3", "start_s": 0, "magnitude": 0.7}]))
    twin.run(60)
    step = rank_step_times(twin).reshape(4, 8)
    assert np.isfinite(step).all()
    # 1/0.7 of its replica's other ranks (same load, same clocks within a few %)
    assert step[1, 3] / np.median(step[1]) > 1.3
    others = np.delete(step, 3, axis=1)
    assert others.max() / others.min() < 1.5  # load differences between replicas, not a straggler's 43 %
    # A replica out of service runs no steps.
    assert twin.apply(Drain(NODE_1)).ok
    twin.step()
    step = rank_step_times(twin).reshape(4, 8)
    assert np.isnan(step[1]).all() and np.isfinite(step[[0, 2, 3]]).all()
