"""Small scenarios for fast twin tests (imported by the test modules)."""

from __future__ import annotations

import copy
from typing import Any

from twinloop.twin.engine import Twin
from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict


def small(**changes: Any) -> dict[str, Any]:
    """A 32-GPU site (1 row x 2 racks x 2 nodes x 8 H100) with one 16-GPU training job; ``changes`` merge in."""
    base: dict[str, Any] = {
        "name": "small",
        "duration_s": 120,
        "rows": [
            {
                "racks": 2,
                "nodes_per_rack": 2,
                "cdu": {
                    "capacity_w": 60000,
                    "flow_kg_per_s": 2.0,
                    "loop_heat_capacity_j_per_c": 2.0e5,
                    "pump_power_w": 300,
                },
            }
        ],
        "power_chain": {"facility_power_budget_w": 1.0e5},
        "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
    }
    out = copy.deepcopy(base)
    out.update(changes)
    return out


def make(raw: dict[str, Any]) -> Twin:
    """A twin from a raw scenario mapping."""
    spec: ScenarioSpec = scenario_from_dict(raw, "test.yaml")
    return Twin(spec, source="test.yaml")
