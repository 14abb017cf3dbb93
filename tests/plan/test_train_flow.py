"""`plan_train_flow`: the one call behind `plan train` and `POST /api/plan/train`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.plan.train import plan_train
from twinloop.plan.train_flow import RoutingSource, plan_train_flow
from twinloop.plan.train_request import make_request

FIELDS: dict[str, Any] = {"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 16, "seq_len": 4096, "global_batch": 64}


def test_plain_flow_is_plan_train() -> None:
    out = plan_train_flow(FIELDS)
    assert out.search is None and out.sweep is None and out.routing is None
    assert out.plan == plan_train(make_request(**FIELDS))


def test_search_plans_the_best_config_and_sweeps_it() -> None:
    out = plan_train_flow(FIELDS, search="cost", sweep=True, top=3, sweep_points=5)
    assert out.search is not None and out.sweep is not None
    best = out.search.ranked.configs.config(0)
    assert out.plan.config == best
    assert len(out.sweep.rows()) == 5
    doc = out.to_doc()
    assert len(doc["search"]["results"]) == 3 and len(doc["power_sweep"]["points"]) == 5


def test_the_cli_prints_the_flow_document(cli_json: Callable[..., Any]) -> None:
    d = cli_json("plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--seq-len", "4096",
                 "--global-batch", "64", "--search", "energy", "--top", "2")  # fmt: skip
    doc = plan_train_flow(FIELDS, search="energy", top=2).to_doc()
    assert d["config"] == doc["config"] and d["step_time_s"] == doc["step_time_s"]
    assert [r["rank"] for r in d["search"]["results"]] == [r["rank"] for r in doc["search"]["results"]] == [1, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search": "speed"}, "unknown objective"),
        ({"top": 0}, "must be >= 1"),
        ({"routing": RoutingSource("x.json")}, "not both"),
    ],
)
def test_bad_input(kwargs: dict[str, Any], message: str) -> None:
    fields = {**FIELDS, "moe_imbalance": 1.2} if "routing" in kwargs else FIELDS
    with pytest.raises(InputError, match=message):
        plan_train_flow(fields, **kwargs)
