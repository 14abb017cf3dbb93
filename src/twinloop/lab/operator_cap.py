"""The operator-cap decision scenario (issue 14): an operator caps one node of a training job for a while.

32 H100s (2 racks x 2 nodes), one 32-GPU training job, node :data:`NODE` capped to 50 % of TDP from 200 s to 400 s
of a 10 min run. Used by ``tests/closedloop/test_operator_cap_scenario.py`` and
``benchmarks/operator_cap_decisions.py``.
"""

from __future__ import annotations

from twinloop.twin.scenario import ScenarioSpec, scenario_from_dict

NODE = "dc9/r01/k02/n01"


def operator_cap_scenario(seed: int = 3) -> ScenarioSpec:
    """The scenario with ``seed``."""
    raw = {
        "name": "operator-cap",
        "site": "dc9",
        "duration_s": "10m",
        "step_s": "1s",
        "seed": seed,
        "rows": [{"racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}],
        "jobs": [{"name": "train", "kind": "training", "gpus": 32, "checkpoint_interval_s": "10m"}],
        "faults": [{"kind": "operator_power_cap", "target": NODE, "start_s": 200, "duration_s": 200, "magnitude": 0.5}],
        "failures": "off",
    }
    return scenario_from_dict(raw, "operator-cap", ".")
