"""plan_train end to end: calibration targets, energy = power x time, cost, auto-choice, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.plan.cost import J_PER_KWH
from twinloop.plan.efficiency import GEMM_EFFICIENCY, H100_GEMM_EFFICIENCY
from twinloop.plan.search import search
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request, resolve

KORTHIKANTI = [
    # model, tp, pp, global batch, micro-batch, interleave, full recompute s, selective + SP s
    ("gpt-22b", 8, 1, 4, 4, 1, 1.42, 1.10),
    ("gpt-175b", 8, 8, 64, 1, 3, 18.13, 13.75),
    ("gpt-530b", 8, 35, 280, 1, 3, 49.05, 37.83),
    ("gpt-1t", 8, 64, 512, 1, 1, 94.42, 71.49),
]


@pytest.mark.parametrize("row", KORTHIKANTI, ids=[r[0] for r in KORTHIKANTI])
def test_korthikanti_table5_within_5_percent(row: tuple[str, int, int, int, int, int, float, float]) -> None:
    name, tp, pp, gb, mb, v, full_s, sel_s = row
    for recompute, sp, published in (("full", False, full_s), ("selective", True, sel_s)):
        plan = plan_train(
            make_request(
                model=name, gpu="a100-sxm-80gb", gpus=tp * pp, tp=tp, pp=pp, dp=1, cp=1, zero=0,
                recompute=recompute, sequence_parallel=sp, micro_batch=mb, interleave=v, global_batch=gb,
                seq_len=2048, precision="fp16", attention_kernel="unfused", dropout=True, framework="megatron-2022",
            )
        )  # fmt: skip
        assert plan.fits and plan.efficiency["gemm"] == GEMM_EFFICIENCY  # the megatron-2022 profile's fit
        # Fitted cells (GEMM_EFFICIENCY, ELEMENTWISE_HBM_PASSES): held in the 5 % band.
        assert plan.step_time_s == pytest.approx(published, rel=0.05), (name, recompute)


def test_llama3_405b_training_compute_within_3_percent() -> None:
    plan = plan_train(
        make_request(model="llama-3-405b", gpu="h100-sxm", gpus=16384, tp=8, pp=16, dp=128, cp=1,
                     micro_batch=1, tokens_per_batch=16_777_216, train_tokens=15.6e12)
    )  # fmt: skip
    assert plan.train_param_flops == pytest.approx(3.8e25, rel=0.03)
    assert plan.train_flops > plan.train_param_flops  # attention adds FLOPs on top of 6ND


def _small(**kw: object) -> dict[str, object]:
    return dict(model="llama-3-8b", gpu="h100-sxm", gpus=16, seq_len=4096, global_batch=64, **kw)


@pytest.mark.parametrize("gpus,dp", [(8192, 64), (16384, 128)])
def test_llama3_405b_published_layout_is_feasible(gpus: int, dp: int) -> None:
    """Llama 3 405B's published layout (Dubey et al. 2024: TP 8, PP 16, CP 1, 16M-token batch, sequence 8192)
    must be a configuration the planner finds feasible on 80 GB H100s (it chooses ZeRO/recompute/interleave)."""
    plan = plan_train(
        make_request(model="llama-3-405b", gpu="h100-sxm", gpus=gpus, tp=8, pp=16, dp=dp, cp=1, micro_batch=1,
                     tokens_per_batch=16_777_216)
    )  # fmt: skip
    assert plan.fits and plan.memory_per_gpu_bytes["total"] <= plan.hbm_bytes
    assert (plan.config.tp, plan.config.pp, plan.config.dp) == (8, 16, dp)


@pytest.mark.parametrize("gpus,dp,published_mfu", [(8192, 64, 0.43), (16384, 128, 0.41)])
def test_llama3_405b_published_layout_mfu(gpus: int, dp: int, published_mfu: float) -> None:
    """Predicted (not fitted; default profile, large-GEMM efficiency measured on the H100) MFU within 15 % of the
    published 43 % / 41 % (now −8.9 % / +12.4 %; −20.6 % / −1.7 % when the Korthikanti-fitted 0.76 was used for
    every stack). It also catches a power cap counted twice (32.9 % / 29.7 % before the GEMM clock normalisation)."""
    plan = plan_train(
        make_request(model="llama-3-405b", gpu="h100-sxm", gpus=gpus, tp=8, pp=16, dp=dp, cp=1, micro_batch=1,
                     tokens_per_batch=16_777_216)
    )  # fmt: skip
    assert plan.efficiency["gemm"] == pytest.approx(H100_GEMM_EFFICIENCY)
    assert plan.mfu == pytest.approx(published_mfu, rel=0.15)


def test_contract_and_consistency() -> None:
    plan = plan_train(make_request(**_small(tp=2, pp=2, dp=4, cp=1, zero=1, recompute="selective",
                                            sequence_parallel=True, micro_batch=2, interleave=2)))  # fmt: skip
    assert plan.chosen_by == "user"
    assert plan.config.tp == 2 and plan.config.interleave == 2
    parts = [plan.step_breakdown_s[k] for k in ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_p2p", "bubble")]
    parts += [plan.step_breakdown_s["dp_sync_exposed"], plan.step_breakdown_s["optimizer"]]
    assert sum(parts) == pytest.approx(plan.step_time_s)
    assert sum(p.duration_s for p in plan.phases.phases) == pytest.approx(plan.step_time_s)
    assert plan.tokens_per_s == pytest.approx(64 * 4096 / plan.step_time_s)
    assert 0 < plan.mfu <= plan.hfu < 1
    assert plan.peak_power_per_gpu_w <= plan.power_limit_w + 1e-6
    assert plan.headroom_bytes == pytest.approx(plan.hbm_bytes - plan.memory_per_gpu_bytes["total"])
    assert plan.params_total == plan.params_active  # dense


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from([(1, 1, 16), (2, 2, 4), (8, 1, 2), (4, 4, 1)]),
    st.sampled_from(["none", "selective", "full"]),
    st.floats(300, 700),
)
def test_energy_is_power_times_time(layout: tuple[int, int, int], recompute: str, limit: float) -> None:
    tp, pp, dp = layout
    plan = plan_train(make_request(**_small(tp=tp, pp=pp, dp=dp, cp=1, zero=1, recompute=recompute,
                                            micro_batch=1, power_limit_w=limit)))  # fmt: skip
    assert plan.energy_per_step_j == pytest.approx(plan.power_per_gpu_w * plan.step_time_s * plan.gpus)
    assert plan.energy_per_token_j == pytest.approx(plan.energy_per_step_j / plan.tokens_per_step)
    phase_energy = sum(p.power_w * p.duration_s for p in plan.phases.phases) * plan.gpus
    assert phase_energy == pytest.approx(plan.energy_per_step_j)


def test_cost_and_training_time() -> None:
    plan = plan_train(make_request(**_small(train_tokens=1e10, price_per_gpu_hour=3.0, price_per_kwh=0.2, pue=1.3)))
    steps = 1e10 / (64 * 4096)
    assert plan.train_time_s == pytest.approx(steps * plan.step_time_s)
    assert plan.gpu_hours == pytest.approx(plan.train_time_s * 16 / 3600)
    energy_kwh = plan.energy_per_step_j * steps * 1.3 / J_PER_KWH
    assert plan.cost_usd == pytest.approx(plan.gpu_hours * 3.0 + energy_kwh * 0.2)
    assert plan.train_energy_mwh == pytest.approx(energy_kwh / 1000)


def test_auto_choice_is_the_fastest_fitting_config() -> None:
    req = make_request(**_small())
    plan = plan_train(req)
    best = search(resolve(req), "throughput").rows(1)[0]
    assert plan.chosen_by == "search"
    assert plan.fits
    assert plan.tokens_per_s == pytest.approx(best["tokens_per_s"])


def test_partial_choice_is_respected() -> None:
    plan = plan_train(make_request(**_small(tp=4, recompute="full")))
    assert plan.config.tp == 4 and plan.config.recompute == "full"


def test_lower_power_limit_is_slower_and_cooler() -> None:
    fixed = dict(tp=2, pp=1, dp=8, cp=1, zero=1, recompute="none", sequence_parallel=True, micro_batch=1)
    hi = plan_train(make_request(**_small(**fixed)))
    lo = plan_train(make_request(**_small(**fixed, power_limit_w=350)))
    assert lo.step_time_s > hi.step_time_s
    assert lo.power_per_gpu_w < hi.power_per_gpu_w
    assert lo.compute_clock_mhz < hi.compute_clock_mhz


def test_moe_plan_reports_imbalance() -> None:
    plan = plan_train(make_request(model="mixtral-8x7b", gpu="h100-sxm", gpus=16, seq_len=4096, global_batch=32,
                                   tp=1, pp=2, dp=8, ep=8, cp=1, moe_zipf_s=1.0))  # fmt: skip
    assert plan.moe_imbalance > 1.0
    assert plan.step_breakdown_s["ep_comm"] > 0
    assert plan.params_active < plan.params_total


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(model="llama-3-8", gpu="h100-sxm", gpus=8), "did you mean llama-3-8b"),
        (dict(model="llama-3-8b", gpu="h100-sxn", gpus=8), "unknown GPU 'h100-sxn'"),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=16, tp=16), "tp=16 exceeds gpus_per_node 8"),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=6, tp=3), "heads 32 not divisible by tp 3"),
        (
            dict(
                model="llama-3-8b",
                gpu="h100-sxm",
                gpus=8,
                tp=2,
                pp=2,
                dp=4,
                cp=1,
                zero=0,
                recompute="none",
                sequence_parallel=True,
                micro_batch=1,
                interleave=1,
            ),
            "= 16 but the job has 8 GPUs",
        ),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=8, ep=2), "has no experts"),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=8, pp=64), "exceeds the 32 layers"),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=8, power_limit_w=900), "outside h100-sxm's range"),
        (
            dict(model="llama-3-8b", gpu="h100-sxm", gpus=8, seq_len=4096, global_batch=2, tokens_per_batch=4096),
            "disagrees with --global-batch",
        ),
        (dict(model="llama-3-405b", gpu="h100-sxm", gpus=8), "no configuration .* fits"),
        (dict(model="llama-3-8b", gpu="h100-sxm", gpus=8, precision="fp7"), "unknown precision policy"),
    ],
)
def test_bad_input_names_the_reason(fields: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        plan_train(make_request(**fields))


def test_pydantic_errors_become_input_errors() -> None:
    with pytest.raises(InputError, match="gpus"):
        make_request(model="llama-3-8b", gpu="h100-sxm", gpus=0)
    with pytest.raises(InputError, match="zero"):
        make_request(model="llama-3-8b", gpu="h100-sxm", gpus=8, zero=4)
