"""DeepSeek-V3's selective recompute scheme and DualPipe: exact terms, invariants, and profile selection."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.model.precision import get_policy
from twinloop.plan import collectives as coll
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY
from twinloop.plan.frameworks import FRAMEWORKS, get_framework
from twinloop.plan.memory import activation_memory, memory_per_gpu
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.recompute import E5M6_TILE_BYTES, FP8_TILE_BYTES, deepseek_activations
from twinloop.plan.search import candidate_configs, search
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request, resolve
from twinloop.plan.train_time import step_time
from twinloop.plan.workload import TrainWorkload, build_workload

DS_EFF = get_framework("deepseek-v3").efficiency()
MEGATRON_SELECTIVE_DUALPIPE = dataclasses.replace(DS_EFF, recompute_scheme="megatron")


@cache
def dsv3() -> TrainWorkload:
    return build_workload(load_model("deepseek-v3"), get_policy("deepseek-v3-fp8"), get_gpu("h800-sxm"), 4096)


@cache
def llama() -> TrainWorkload:
    return build_workload(load_model("llama-3-8b"), get_policy("bf16"), get_gpu("h100-sxm"), 4096)


def one(**kw: object) -> ConfigArrays:
    return ConfigArrays.from_configs([ParallelConfig(**kw)])  # type: ignore[arg-type]


def test_deepseek_v3_terms_by_hand() -> None:
    """Every stored and recomputed term of DeepSeek-V3 (h 7168, 128 heads, q/kv LoRA 1536/512, rope 64,
    nope 128, v 128; 3 dense FFN 18432; 58 MoE layers, 8 of 256 experts of 2048, one shared 2048)."""
    a = deepseek_activations(load_model("deepseek-v3"), get_policy("deepseek-v3-fp8"), dropout=False)
    fp8 = FP8_TILE_BYTES
    assert a.stored_repl_bytes == pytest.approx(2 * 2 * 7168 + 2 * (1536 + 512 + 64))
    dense = 2 * 2 * 18432 + fp8 * 18432  # SwiGLU inputs BF16, down-projection input FP8
    moe = 8 * fp8 * (7168 + 2 * 2048) + fp8 * 2 * 2048  # dispatched input + SwiGLU inputs, routed + shared
    shard = 128 * 128 * E5M6_TILE_BYTES + 4 * 128 + (3 * dense + 58 * moe) / 61
    assert a.stored_shard_bytes == pytest.approx(shard)
    assert a.recompute_repl_bytes == pytest.approx(2 * 2 * 7168 + 2 * (1536 + 512))
    assert a.recompute_shard_bytes == pytest.approx(58 * 2 * (8 * 2048 + 2048) / 61)
    assert a.recompute_gemm_flops == pytest.approx(61 * 2 * (1536 * 128 * 192 + 512 * 128 * 256))
    # about a quarter of Megatron's no-recompute bytes (what made selective need 156 GB on the published layout)
    w = dsv3()
    ratio = (a.stored_repl_bytes + a.stored_shard_bytes) / (w.act_repl_bytes + w.act_shard_bytes)
    assert 0.2 < ratio < 0.35


def test_bf16_policy_caches_in_bf16() -> None:
    """FP8 caching follows the precision policy: with BF16 GEMMs the Linear inputs stay BF16."""
    arch = load_model("deepseek-v3")
    fp8 = deepseek_activations(arch, get_policy("deepseek-v3-fp8"), dropout=False)
    bf16 = deepseek_activations(arch, get_policy("bf16"), dropout=False)
    assert bf16.stored_shard_bytes > fp8.stored_shard_bytes
    assert bf16.stored_repl_bytes == fp8.stored_repl_bytes


def test_only_the_deepseek_profile_changes_scheme_and_schedule() -> None:
    for name, p in FRAMEWORKS.items():
        e = p.efficiency()
        expected = ("deepseek-v3", "dualpipe") if name == "deepseek-v3" else ("megatron", "1f1b")
        assert (e.recompute_scheme, e.pipeline_schedule) == expected
    assert (DEFAULT_EFFICIENCY.recompute_scheme, DEFAULT_EFFICIENCY.pipeline_schedule) == ("megatron", "1f1b")


_DS_CFG = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4, 8]),
        "sp": st.booleans(),
        "pp": st.sampled_from([1, 2, 4, 8]),
        "mb": st.sampled_from([1, 2, 4]),
        "model": st.sampled_from(["ds", "llama"]),
    }
)


@settings(max_examples=40, deadline=None)
@given(_DS_CFG)
def test_deepseek_scheme_between_full_and_none(d: dict[str, object]) -> None:
    """Under DeepSeek's scheme selective stores no more than no recompute and no less than full recompute."""
    w = dsv3() if d["model"] == "ds" else llama()
    tp = int(d["tp"])  # type: ignore[call-overload]
    sp = bool(d["sp"]) and tp > 1

    def mem(rc: str) -> float:
        c = one(tp=tp, pp=d["pp"], micro_batch=d["mb"], recompute=rc, sequence_parallel=sp)
        return float(activation_memory(w, c, global_batch=64, efficiency=DS_EFF)[0])

    assert mem("full") <= mem("selective") <= mem("none")


def test_dualpipe_copies_and_in_flight() -> None:
    """Table 2 of the DeepSeek-V3 report: parameters 2×, activations (pp + 1) instead of pp micro-batches."""
    w = dsv3()
    c0 = one(pp=16, dp=128, ep=64, zero=0, recompute="selective")
    c1 = one(pp=16, dp=128, ep=64, zero=1, recompute="selective")
    plain = dataclasses.replace(DS_EFF, pipeline_schedule="1f1b")
    for c in (c0, c1):
        dual, f1b = memory_per_gpu(w, c, 15360, efficiency=DS_EFF), memory_per_gpu(w, c, 15360, efficiency=plain)
        assert float(dual.weights[0]) == pytest.approx(2 * float(f1b.weights[0]))
        assert float(dual.gradients[0]) == pytest.approx(2 * float(f1b.gradients[0]))
        assert float(dual.activations[0]) == pytest.approx(17 / 16 * float(f1b.activations[0]))
    # ZeRO-1 shards the optimizer over both copies' holders: the same per GPU as without the copy
    z1_dual, z1_plain = memory_per_gpu(w, c1, 15360, efficiency=DS_EFF), memory_per_gpu(w, c1, 15360, efficiency=plain)
    assert float(z1_dual.optimizer[0]) == pytest.approx(float(z1_plain.optimizer[0]))
    # no pipeline, no copies
    cp1 = one(pp=1, dp=2048, ep=64, zero=1, recompute="full")
    assert float(memory_per_gpu(w, cp1, 16384, efficiency=DS_EFF).weights[0]) == pytest.approx(
        float(memory_per_gpu(w, cp1, 16384, efficiency=plain).weights[0])
    )


def test_deepseek_selective_costs_the_up_projections() -> None:
    """Step time and hardware FLOPs follow the scheme: none < DeepSeek selective < full; the extra hardware
    FLOPs of the scheme are exactly the recomputed up-projections."""
    w = dsv3()
    topo = coll.default_topology(get_gpu("h800-sxm"))
    t = {
        rc: step_time(w, one(pp=16, dp=128, ep=64, zero=1, recompute=rc), topo, 15360, eff=DS_EFF)
        for rc in ("none", "selective", "full")
    }
    assert t["none"].compute_s[0] < t["selective"].compute_s[0] < t["full"].compute_s[0]
    extra = float(t["selective"].hardware_flops[0] - t["none"].hardware_flops[0])
    assert extra == pytest.approx(15360 * 4096 * w.ds.recompute_gemm_flops / 2048, rel=1e-9)
    # a minor overhead (report §3.2.3): under 5 % of the compute
    assert float(t["selective"].compute_s[0] / t["none"].compute_s[0]) < 1.05
    # Megatron's selective (attention core) under the same schedule costs differently
    mega = step_time(w, one(pp=16, dp=128, ep=64, zero=1, recompute="selective"), topo, 15360,
                     eff=MEGATRON_SELECTIVE_DUALPIPE)  # fmt: skip
    assert float(mega.hardware_flops[0]) != pytest.approx(float(t["selective"].hardware_flops[0]))


def test_dualpipe_search_runs_only_what_it_can() -> None:
    ctx = resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=64, framework="deepseek-v3"))
    c = candidate_configs(ctx)
    assert len(c) > 0
    m = ctx.global_batch // (c.dp * c.micro_batch)
    ok = (c.pp == 1) | ((c.pp % 2 == 0) & (m % 2 == 0) & (c.interleave == 1))
    assert bool(np.all(ok))
    default = candidate_configs(resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=64)))
    assert len(default) > len(c) and bool(np.any(default.interleave > 1))


def test_dualpipe_user_config_with_interleave_is_refused() -> None:
    req = make_request(model="llama-3-8b", gpu="h100-sxm", gpus=64, framework="deepseek-v3", tp=1, pp=4, dp=16,
                       cp=1, zero=1, recompute="none", micro_batch=1, interleave=2)  # fmt: skip
    with pytest.raises(InputError, match="interleave"):
        plan_train(req)


def test_deepseek_v3_search_ranks_the_published_layout_near_the_top() -> None:
    """Issue 20: for DeepSeek-V3 on 2,048 H800 the search (deepseek-v3 profile) ranks expert-parallel layouts like
    the published one (tp1 pp16 ep64) near the top. Predicted, nothing fitted: #45 of 57,805 when written."""
    ctx = resolve(make_request(model="deepseek-v3", gpu="h800-sxm", gpus=2048, precision="deepseek-v3-fp8",
                               seq_len=4096, global_batch=15360, framework="deepseek-v3"))  # fmt: skip
    res = search(ctx, "throughput")
    c = res.ranked.configs
    assert bool(np.all(c.ep[:10] >= 32))
    published = np.flatnonzero((c.tp == 1) & (c.pp == 16) & (c.ep == 64) & (c.cp == 1))
    assert published.size and published[0] < 0.005 * res.fitting
