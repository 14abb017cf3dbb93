"""A serving fleet's replicas are its unit (issue 14): a slow GPU slows only its own replica, and a drained node
takes its replica out of service while the live replicas carry the fleet's requests."""

from __future__ import annotations

from typing import Any

import numpy as np
from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import Drain, RestartReplica
from twinloop.twin.jobs import Phase

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


def _routing(twin: Any) -> list[str]:
    return [e.detail for e in twin.events if e.kind == "replica_routing"]


def _lost_fleet(free_nodes: int) -> Any:
    """The 4-replica fleet on a site with ``free_nodes`` spare nodes, demand-bound, whose replica 1 loses a GPU off the
    bus at 100 s (its node back at 600 s); the replica reloads in 20 s."""
    raw = _fleet(2.0, [{"kind": "gpu_fall_off_bus", "target": f"{NODE_1}/g3", "start_s": 100, "duration_s": 500}])
    raw["jobs"][0]["restart_overhead_s"] = 20
    raw["rows"][0]["nodes_per_rack"] = 2 + free_nodes // 2
    return make(raw)


def test_a_lost_node_takes_out_its_replica_not_the_fleet() -> None:
    # A GPU off the bus (XID 79) takes its node down. A serving fleet loses that node's replica (the router sends its
    # requests to the three live ones), not the fleet: before, the twin interrupted and requeued the whole fleet,
    # which served nothing while it restarted (its restart overhead and load).
    twin = _lost_fleet(free_nodes=0)
    twin.run(100)
    job = twin.jobs[0]
    served0, demanded0 = job.served_tokens, job.demanded_tokens
    twin.run(200)
    assert job.interruptions == 0 and job.restarts == 0
    assert (job.served_tokens - served0) / (job.demanded_tokens - demanded0) > 0.99  # the others carry its load
    assert np.all(np.asarray(twin.physics.gpus.power_w).reshape(4, 8)[1] == 0.0)  # the lost node reports nothing
    assert float(twin.physics.gpus.xid[8 + 3]) == 79
    assert list(job.out_of_service) == [False, True, False, False]
    assert any("replica 1" in d and "node down" in d for d in _routing(twin))
    twin.run(300)  # repaired at 600 s: the replica reloads its model (20 s) and serves again
    assert job.out_of_service[1]
    twin.run(40)
    assert not job.out_of_service.any() and _power_by_node(twin)[1] > 0.6 * _power_by_node(twin)[[0, 2, 3]].min()
    assert any("replica 1" in d and "back in service" in d for d in _routing(twin))
    assert job.interruptions == 0


def test_a_lost_nodes_replica_is_rescheduled_on_a_free_node() -> None:
    # With a free node, the replica is rescheduled there once the lost node's pods are evicted (Kubernetes' 300 s
    # toleration of an unreachable node), loads its model and serves from the new node; the lost node is freed.
    twin = _lost_fleet(free_nodes=2)
    job = twin.jobs[0]
    twin.run(100 + 300 + 1)
    assert job.out_of_service[1]  # moved, loading
    lost = twin.topo.resolve(NODE_1)[1]
    assert lost not in job.nodes.tolist() and int(twin.scheduler.node_owner[lost]) == -1
    moved_to = int(twin.topo.gpu_node[job.gpus[8]])
    assert moved_to not in (0, 2, 3) and int(twin.scheduler.node_owner[moved_to]) == 0
    twin.run(30)
    assert not job.out_of_service.any() and job.interruptions == 0
    assert float(np.asarray(twin.physics.gpus.power_w)[job.gpus[8:16]].mean()) > 100.0


def test_a_requeued_fleets_outage_counts_against_its_ettr() -> None:
    # A fleet requeued as a whole (a requeue command; before issue 14's fix, any lost node) serves nothing while it
    # restarts: what its trace asks meanwhile counts as demanded and not served. Before, the twin counted no demand
    # while the fleet was down, so its ETTR stayed at 1 through a 20 s outage of a 200 s run.
    from twinloop.twin.actions import RequeueJob

    raw = _fleet(2.0)
    raw["jobs"][0]["restart_overhead_s"] = 20
    twin = make(raw)
    twin.run(100)
    job = twin.jobs[0]
    assert job.ettr(twin.t_s) > 0.99
    assert twin.apply(RequeueJob("chat")).ok
    twin.run(200)
    assert job.interruptions == 1
    assert 0.8 < job.ettr(twin.t_s) < 0.95  # about 20 s of 200 s served nothing


def _hung_fleet(target: str) -> Any:
    """The demand-bound fleet with a ``job_hang`` at ``target`` at 100 s (hang timeout 200 s)."""
    raw = _fleet(2.0, [{"kind": "job_hang", "target": target, "start_s": 100}])
    raw["jobs"][0]["hang_timeout_s"] = 200
    return make(raw)


def test_a_hang_at_one_gpu_hangs_only_its_replica_and_the_others_serve() -> None:
    # Before: job_hang took only a job name, and hung every replica of the fleet (it served nothing).
    twin = _hung_fleet(f"{NODE_1}/g3")
    job = twin.jobs[0]
    twin.run(101)
    assert job.phase == Phase.SUSTAINED  # the fleet is not hung
    assert job.hung_replicas.tolist() == [False, True, False, False]
    served0, demanded0 = job.served_tokens, job.demanded_tokens
    powers, tensor = [], []
    for _ in range(60):
        twin.step()
        powers.append(_power_by_node(twin))
        tensor.append(twin.slot_activity[job.slot0 : job.slot0 + 4, 0].copy())
    ratio = (job.served_tokens - served0) / (job.demanded_tokens - demanded0)
    assert 0.6 < ratio < 0.85  # the router still sends the hung replica its quarter; it serves none of it
    t = np.asarray(tensor)
    assert (t[:, 1] == 0.0).all() and (t[:, [0, 2, 3]] > 0.0).mean() > 0.9  # no tensor work on the hung one only
    assert job.tokens_per_s > 0
    # Its collective watchdog (hang_timeout_s) restarts that replica alone: it reloads and serves again, and the
    # requests queued on the hung process are gone with it.
    twin.run(140)
    assert not job.hung_replicas.any() and job.interruptions == 0 and job.backlog[1] == 0.0
    assert job.out_of_service.tolist() == [False, True, False, False]  # loading its model
    twin.run(int(job.ready_s[1] - twin.t_s) + 2)
    assert not job.out_of_service.any() and twin.slot_activity[job.slot0 + 1, 0] > 0.0


def test_a_hang_named_by_the_fleet_still_hangs_the_whole_fleet() -> None:
    twin = _hung_fleet("chat")
    twin.run(110)
    job = twin.jobs[0]
    assert job.phase == Phase.HUNG and job.tokens_per_s == 0.0


def test_a_restart_command_restarts_only_that_replica() -> None:
    twin = _hung_fleet(f"{NODE_1}/g3")
    job = twin.jobs[0]
    twin.run(120)
    assert twin.apply(RestartReplica(f"{NODE_1}/g0")).ok
    assert not job.hung_replicas.any() and job.out_of_service.tolist() == [False, True, False, False]  # reloading
    assert job.phase == Phase.SUSTAINED and job.interruptions == 0
    assert not twin.apply(RestartReplica(NODE_1)).ok  # a node is not a replica's GPU
