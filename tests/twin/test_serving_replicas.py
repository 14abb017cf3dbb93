"""A serving fleet's replicas are its unit (issue 14): a slow GPU slows only its own replica, and a drained node
takes its replica out of service while the live replicas carry the fleet's requests."""

from __future__ import annotations

from typing import Any

import numpy as np
from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import Drain

NODE_1 = "dc1/r01/k01/n02"  # the second node: replica 1 of a 4-replica TP-8 fleet on the 4 nodes


def _fleet(rate_scale: float, faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The 32-GPU site running one serving fleet of 4 TP-8 replicas (one per node)."""
    job = {
        "name": "chat",
        "kind": "serving",
        "gpus": 32,
        "gpus_per_replica": 8,
        "trace": "package:azure_conv_sample.csv",
        "trace_rate_scale": rate_scale,
        "profile": {"load_bytes_per_gpu": 0},
    }
    return small(jobs=[job], faults=faults or [], duration_s=400)


def test_a_slow_gpu_slows_only_its_own_replica() -> None:
    # A fleet at capacity (demand well above what 4 replicas serve): a 0.7 straggler GPU in replica 1 costs the
    # fleet that replica's 30 %, a quarter of its capacity x 0.3, not 30 % of every replica's work. Before: the twin
    # slowed every replica to the slowest GPU's pace (served 0.70 of the healthy fleet's tokens).
    def served(faults: list[dict[str, Any]]) -> float:
        twin = make(_fleet(100.0, faults))
        twin.run(300)
        return twin.jobs[0].served_tokens

    healthy = served([])
    slow = served([{"kind": "straggler", "target": f"{NODE_1}/g3", "start_s": 0, "magnitude": 0.7}])
    assert 0.88 < slow / healthy < 0.97  # (3 + 0.7) / 4 = 0.925, with the power limits' own small effects


def _power_by_node(twin: Any) -> np.ndarray:
    return np.asarray(twin.physics.gpus.power_w, dtype=np.float64).reshape(4, 8).mean(axis=1)


def test_a_drained_nodes_replica_stops_serving_and_the_others_carry_its_load() -> None:
    # A demand-bound fleet: the drained node's GPUs go idle (their requests are routed to the live replicas), the
    # fleet still serves what is asked, and the other replicas work harder than without the drain. Undrain puts
    # the replica back. Before: a drain only kept new work off the node; its replica kept serving.
    def run(drain: bool) -> tuple[list[np.ndarray], float, float]:
        twin = make(_fleet(2.0))
        twin.run(100)
        job = twin.jobs[0]
        if drain:
            assert twin.apply(Drain(NODE_1)).ok
        served0, demanded0 = job.served_tokens, job.demanded_tokens
        powers = []
        for _ in range(100):
            twin.step()
            powers.append(_power_by_node(twin))
        during = np.mean(powers[20:], axis=0)
        ratio = (job.served_tokens - served0) / (job.demanded_tokens - demanded0)
        if drain:
            assert twin.apply(Drain(NODE_1, undrain=True)).ok
        twin.run(30)
        back = _power_by_node(twin)
        return [during, back], ratio, float(job.served_tokens)

    (during, back), ratio, _ = run(drain=True)
    (during_ref, back_ref), ratio_ref, _ = run(drain=False)
    assert during[1] < 0.6 * during_ref[1]  # the drained replica idles
    assert during[1] < during[[0, 2, 3]].min()
    live = [0, 2, 3]
    assert during[live].mean() > during_ref[live].mean()  # the others carry its requests
    assert ratio > 0.99 and ratio_ref > 0.99  # demand-bound: the fleet still serves what is asked
    assert back[1] > 0.6 * back_ref[1]  # undrained: the replica serves again
