"""In a hall of several GPU models the scheduler places a job on its fastest model first (twin/scheduler.py
``fastest_first``), as a Slurm job asking for a GPU type would land, and on a mix only when its model is short."""

from __future__ import annotations

from typing import Any

import numpy as np
from tests.twin.twin_helpers import make

from twinloop.closedloop.requeue_pace import requeue_nodes


def _hall(policy: str) -> dict[str, Any]:
    # The A100 rack has the larger PDU, so `power_aware` (most headroom first) ranks it first when both are idle.
    return {
        "name": "two-models",
        "duration_s": 30,
        "rows": [
            {"racks": 1, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "rack_pdu_rating_w": 40000},
            {"racks": 1, "nodes_per_rack": 2, "node": {"gpu": "a100-sxm-80gb"}, "rack_pdu_rating_w": 80000},
        ],
        "power_chain": {"facility_power_budget_w": 2.0e5},
        "scheduler": {"policy": policy},
        "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
    }


def _models(twin: Any, nodes: np.ndarray) -> list[str]:
    return [twin.topo.kinds[int(twin.topo.gpu_kind[twin.topo.node_start[n]])].name for n in nodes]


def test_a_job_planned_for_h100s_lands_on_the_h100s_though_the_a100_rack_has_more_headroom() -> None:
    # Before, `power_aware` knew no GPU model: the H100 job went to the idle A100 rack and ran at its pace
    # (mixed_hall: a restart after a host failure put `pretrain` on 64 H100 + 128 A100, at half its pace).
    twin = make(_hall("power_aware"))
    for _ in range(3):
        twin.step()
    job = twin.jobs[0]
    assert _models(twin, job.nodes) == ["h100-sxm", "h100-sxm"]


def test_with_its_model_short_a_job_takes_as_few_slower_gpus_as_it_can() -> None:
    twin = make(_hall("power_aware"))
    for _ in range(3):
        twin.step()
    twin.scheduler.node_down[0] = True  # one H100 node down: a requeue now needs one A100 node
    nodes = requeue_nodes(twin, twin.jobs[0])
    assert nodes is not None
    assert sorted(_models(twin, nodes)) == ["a100-sxm-80gb", "h100-sxm"]


def test_a_requeue_without_the_node_a_rule_drains_lands_elsewhere() -> None:
    # The responder asks the pace without the node its rule would drain (instead of draining it first and lifting
    # the drain when the requeue is kept back).
    twin = make(_hall("power_aware"))
    for _ in range(3):
        twin.step()
    job = twin.jobs[0]
    own = requeue_nodes(twin, job)
    assert own is not None and sorted(own.tolist()) == sorted(job.nodes.tolist())
    nodes = requeue_nodes(twin, job, np.array([int(job.nodes[0])]))
    assert nodes is not None and int(job.nodes[0]) not in nodes.tolist()
    assert sorted(_models(twin, nodes)) == ["a100-sxm-80gb", "h100-sxm"]
