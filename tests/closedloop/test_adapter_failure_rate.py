"""The twin adapter reports a training job's expected failure rate (issue 14): the checkpoint-write pricing's ``q``
(:func:`twinloop.ops.respond.restart_cost.write_pays`) was 0 in the twin, which reported none."""

from __future__ import annotations

from typing import Any

import pytest

from twinloop.closedloop.adapter import TwinAdapter
from twinloop.hardware.failure_rates import LLAMA3_GPUS, LLAMA3_HOURS, LLAMA3_NODES, LLAMA3_TABLE, LLAMA3_UNEXPECTED
from twinloop.ops.respond.restart_cost import write_pays
from twinloop.twin.engine import Twin
from twinloop.twin.failures import FailureConfig, FailureModel
from twinloop.twin.scenario import scenario_from_dict


def _twin(gpus: int, failures: Any = "on") -> Twin:
    raw = {
        "name": "rate-test",
        "site": "dc1",
        "duration_s": 120,
        "rows": [{"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0}}],
        "power_chain": {"facility_power_budget_w": 1.0e5},
        "jobs": [{"name": "train", "kind": "training", "gpus": gpus, "profile": {"load_bytes_per_gpu": 4e9}}],
        "failures": failures,
    }
    twin = Twin(scenario_from_dict(raw, "t.yaml"), "t.yaml")
    twin.run(60.0)
    return twin


def test_the_rate_reproduces_the_llama3_table_on_its_fleet() -> None:
    # At the reference temperature, a job on Llama 3's 16,384 GPUs (2,048 servers) fails at the table's unexpected,
    # detectable interruptions per hour: 419 less the 6 silent data corruptions, over 54 days.
    sdc = next(row[2] for row in LLAMA3_TABLE if row[0] == "silent_data_corruption")
    rate = FailureModel().interruptions_per_s(LLAMA3_GPUS, LLAMA3_NODES)
    assert rate * 3600.0 == pytest.approx((LLAMA3_UNEXPECTED - sdc) / LLAMA3_HOURS, rel=1e-9)
    assert FailureModel(FailureConfig(rate_scale=3.0)).interruptions_per_s(8, 1) == pytest.approx(
        3.0 * FailureModel().interruptions_per_s(8, 1)
    )


def test_a_job_on_more_nodes_reports_a_proportionally_higher_rate() -> None:
    small, large = _twin(16), _twin(32)
    rates = []
    for twin in (small, large):
        t = TwinAdapter(twin).job_timing("dc1/jobs/train")
        assert t is not None and t.interruptions_per_s is not None and t.interruptions_per_s > 0.0
        assert t.checkpoint_interval_s == twin.jobs[0].spec.checkpoint_interval_s
        rates.append(t.interruptions_per_s)
    assert large.jobs[0].nodes.size == 2 * small.jobs[0].nodes.size
    assert rates[1] / rates[0] == pytest.approx(2.0, rel=0.05)  # twice the GPUs and nodes (their heat aside)
    model = FailureModel()
    assert model.interruptions_per_s(32, 4, 65.0) == pytest.approx(2.0 * model.interruptions_per_s(16, 2, 65.0))


def test_the_rate_reaches_the_write_pricing_and_is_zero_with_failures_off() -> None:
    on = TwinAdapter(_twin(16)).job_timing("dc1/jobs/train")
    off = TwinAdapter(_twin(16, failures="off")).job_timing("dc1/jobs/train")
    assert on is not None and off is not None
    assert off.interruptions_per_s == 0.0
    priced_on, priced_off = write_pays(on), write_pays(off)
    assert priced_on is not None and "chance" in priced_on[1]  # p and q now priced
    assert priced_off is not None and "chance" not in priced_off[1]
