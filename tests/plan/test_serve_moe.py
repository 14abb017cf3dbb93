"""The serving planner under MoE routing: the routed slowest-rank step beside the static imbalance factor."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.errors import InputError
from twinloop.model.routing import REGISTRY, Assignment, Router, RoutingContext
from twinloop.model.routing.base import StepScores
from twinloop.plan.serve import build_request, plan_serve

DSV3 = dict(model="deepseek-v3", gpu="h100-sxm", gpus=16, tp=16, ep=16, weight_dtype="fp8", kv_dtype="fp8")
MIXTRAL = dict(model="mixtral-8x7b", gpu="h100-sxm", gpus=8, tp=8, ep=8)


class Balanced(Router):
    """Test oracle: copy ``c = token·K + slot`` goes to rank ``c mod ep`` (its ``c // ep``-th expert there), so every
    rank gets the same copies from every source rank and every expert the same load: the balance the static
    factor 1.0 assumes."""

    name = "balanced-test"

    def route(self, scores: StepScores, ctx: RoutingContext) -> Assignment:
        ep, per_rank = ctx.placement.ep_ranks, ctx.n_experts // ctx.placement.ep_ranks
        c = np.arange(ctx.tokens * ctx.top_k).reshape(ctx.tokens, ctx.top_k)
        return Assignment(np.asarray((c % ep) * per_rank + (c // ep) % per_rank, dtype=np.int64), 0, 0)


@pytest.fixture
def balanced(monkeypatch: pytest.MonkeyPatch) -> str:
    from twinloop.model.routing import routers  # noqa: F401 - fill the registry before adding to it

    monkeypatch.setitem(REGISTRY, Balanced.name, Balanced)
    return Balanced.name


def _routing(**kw: Any) -> dict[str, Any]:
    plan = plan_serve(build_request(**kw))
    assert plan.moe_routing is not None
    return plan.moe_routing


def test_perfectly_balanced_routing_equals_the_static_factor_one(balanced: str) -> None:
    # 256 decode tokens: the uniform-routing expectation touches 255.9 of 256 experts where the oracle touches
    # all of them (the only difference, below 1e-3 of a step); every load factor is exactly 1.
    plan = plan_serve(build_request(**DSV3, max_seqs=256, router=balanced, routing_steps=4))
    r = plan.moe_routing
    assert r is not None
    assert r["decode"]["load_factor_max"]["max"] == pytest.approx(1.0, abs=1e-12)
    assert r["prefill"]["load_factor_max"]["max"] == pytest.approx(1.0, abs=1e-12)
    assert r["decode"]["a2a_inter_bytes_slowest_rank"]["max"] > 0  # 16 ranks on two nodes: the network is used
    for key in ("decode_step_s", "tpot_s", "prefill_step_s", "ttft_s"):
        for q in ("p50", "p99"):
            assert r["routed"][key][q] == pytest.approx(r["static"][key], rel=1e-3), (key, q)
    assert r["static"]["tpot_s"] == plan.tpot_s and r["static"]["ttft_s"] == plan.ttft_s


def test_static_factor_one_is_todays_plan_and_a_larger_factor_slows_the_steps() -> None:
    base = plan_serve(build_request(**MIXTRAL))
    one = plan_serve(build_request(**MIXTRAL, moe_imbalance=1.0))
    hot = plan_serve(build_request(**MIXTRAL, moe_imbalance=2.0))
    assert one.tpot_s == base.tpot_s and one.ttft_s == base.ttft_s
    assert hot.decode.iteration_s > base.decode.iteration_s and hot.prefill.iteration_s > base.prefill.iteration_s


def test_a_hot_expert_burst_raises_p99_tpot() -> None:
    kw = dict(**MIXTRAL, max_seqs=1024, router="topk", routing_steps=16)
    calm = _routing(**kw, routing_burst_share=0.0)
    burst = _routing(**kw, routing_burst_share=0.5)
    assert burst["decode"]["load_factor_max"]["p99"] > calm["decode"]["load_factor_max"]["p99"] + 0.3
    assert burst["routed"]["tpot_s"]["p99"] > 1.05 * calm["routed"]["tpot_s"]["p99"]
    assert burst["routed"]["ttft_s"]["p99"] > calm["routed"]["ttft_s"]["p99"]
    # the steps outside the burst window are the same stream: the median barely moves
    assert burst["routed"]["tpot_s"]["p50"] == pytest.approx(calm["routed"]["tpot_s"]["p50"], rel=0.01)


@pytest.mark.parametrize("cfg", [MIXTRAL, DSV3])
def test_adaptive_router_cuts_p99_tpot_against_capacity_at_a_quality_cost(cfg: dict[str, Any]) -> None:
    kw = dict(**cfg, max_seqs=1024 if cfg is MIXTRAL else 256, routing_steps=16)
    cap = _routing(**kw, router="capacity")
    ada = _routing(**kw, router="adaptive")
    assert ada["routed"]["tpot_s"]["p99"] < cap["routed"]["tpot_s"]["p99"]
    assert ada["routed"]["prefill_step_s"]["p99"] < cap["routed"]["prefill_step_s"]["p99"]
    assert ada["decode"]["quality"] < cap["decode"]["quality"]


def test_same_seed_same_result_and_seed_changes_it() -> None:
    kw = dict(**MIXTRAL, router="topk", routing_steps=4)
    a, b = _routing(**kw), _routing(**kw)
    c = _routing(**kw, routing_seed=1)
    assert a["per_step"] == b["per_step"]
    assert a["per_step"] != c["per_step"]


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        (dict(model="llama-3-8b", tp=1, gpus=1, router="topk"), "is dense"),
        (dict(model="mixtral-8x7b", gpus=16, tp=16, ep=16, router="topk"), "exceeds the 8 routed experts"),
        (dict(model="mixtral-8x7b", tp=8, ep=1, router="topk"), "needs expert parallelism"),
        (dict(**MIXTRAL, router="nope"), "unknown router 'nope'"),
        (dict(**MIXTRAL, router="topk", placement="zig"), "unknown placement 'zig'"),
        (dict(**MIXTRAL, router="topk", draft_model="llama-3-8b"), "speculative decoding"),
        (dict(model="llama-3-8b", tp=1, gpus=1, moe_imbalance=1.5), "has no experts"),
        (dict(model="mixtral-8x7b", tp=8, ep=1, moe_imbalance=1.5), "ep=1 leaves no rank hotter"),
    ],
)
def test_routing_that_cannot_apply_is_one_input_error(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        plan_serve(build_request(**kw))


def test_cli_routing_file_from_plan_moe_out(tmp_path: Path) -> None:
    moe = ["plan", "moe", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--gpu", "h200-sxm", "--steps", "4",
           "--tokens", "256", "--router", "topk", "--router", "adaptive", "--placement", "contiguous",
           "--out", str(tmp_path), "--json"]  # fmt: skip
    res = CliRunner().invoke(app, moe)
    assert res.exit_code == 0, res.output
    saved = tmp_path / "moe_routing.json"
    serve = ["plan", "serve", "--model", "mixtral-8x7b", "--tp", "8", "--ep", "8", "--routing", str(saved)]
    res = CliRunner().invoke(app, [*serve, "--router", "adaptive", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["moe_routing"]
    assert (r["source"], r["router"], r["steps"], r["decode_tokens_per_step"]) == (str(saved), "adaptive", 4, 256)
    assert r["routed"]["tpot_s"]["p99"] > 0
    both = CliRunner().invoke(app, serve)  # two rows match contiguous: name the one
    assert both.exit_code == 2 and "2 rows match" in both.output
    other = CliRunner().invoke(app, [*serve[:6], "--ep", "4", "--routing", str(saved), "--router", "topk"])
    assert other.exit_code == 2 and "routed on ep=8" in other.output
    human = CliRunner().invoke(app, [*serve, "--router", "topk"])
    assert human.exit_code == 0 and "routed p99" in human.output and "static" in human.output


def test_cli_router_json_shows_static_beside_routed() -> None:
    args = ["plan", "serve", "--model", "mixtral-8x7b", "--tp", "8", "--ep", "8", "--router", "capacity",
            "--routing-steps", "4", "--json"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["moe_routing"]
    assert set(r["static"]) >= {"tpot_s", "decode_step_s", "moe_imbalance"}
    assert set(r["routed"]["tpot_s"]) == {"p50", "p99", "max", "mean"}
    bad = CliRunner().invoke(
        app, ["plan", "serve", "--model", "llama-3-8b", "--tp", "1", "--gpus", "1", "--router", "topk"]
    )
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "is dense" in bad.output


_STEP_KEYS = ("imbalance", "load_factor", "dropped", "redirected", "a2a_intra_bytes", "a2a_inter_bytes", "quality",
              "served_true", "mean_k", "burst")  # fmt: skip
_RANK_KEYS = ("rank_load", "touched", "send_intra", "send_inter", "recv_intra", "recv_inter")
_LEAF = st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats() | st.text(max_size=4)
_ARRAYS = st.lists(_LEAF, max_size=3) | st.lists(st.lists(st.integers(0, 50), min_size=8, max_size=8), max_size=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=st.recursive(
        _LEAF,
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
        max_leaves=12,
    ),
    per_step=st.dictionaries(st.sampled_from(_STEP_KEYS), _ARRAYS, max_size=len(_STEP_KEYS)),
    ranks=st.dictionaries(st.sampled_from(_RANK_KEYS), _ARRAYS, max_size=len(_RANK_KEYS)),
    shaped=st.booleans(),
)
def test_routing_file_parser_never_crashes(
    tmp_path: Path, doc: Any, per_step: dict[str, Any], ranks: dict[str, Any], shaped: bool
) -> None:
    from twinloop.model.arch import load_model
    from twinloop.plan.serve_moe_file import load_routing_file

    if shaped:  # past the header checks, into one row's arrays
        row = {"router": "topk", "placement": "contiguous", "per_step": per_step, "ranks": ranks}
        doc = {"model": "mixtral-8x7b", "ep": 8, "tokens_per_step": 4, "ranks_per_node": 8, "rows": [row]}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    req = build_request(**MIXTRAL, routing_file=str(f))
    with contextlib.suppress(InputError):
        load_routing_file(req, load_model("mixtral-8x7b"), 8, [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200) | st.just(b"[" * 100_000) | st.just(b"\xff\xfe{"))
def test_routing_file_of_any_bytes_is_an_input_error(tmp_path: Path, data: bytes) -> None:
    from twinloop.model.arch import load_model
    from twinloop.plan.serve_moe_file import load_routing_file

    f = tmp_path / "r.json"
    f.write_bytes(data)
    with pytest.raises(InputError):
        load_routing_file(build_request(**MIXTRAL, routing_file=str(f)), load_model("mixtral-8x7b"), 8, [])
