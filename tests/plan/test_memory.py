"""Memory per GPU: Korthikanti's activation formulas exactly, ZeRO sharding, and invariants."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.model.params import param_counts
from twinloop.model.precision import get_policy
from twinloop.plan import efficiency as eff
from twinloop.plan.memory import (
    activation_bytes_per_layer,
    activation_memory,
    in_flight_chunks,
    memory_per_gpu,
    stage_layers,
)
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.workload import TrainWorkload, build_workload


@cache
def gpt22b(seq: int = 2048) -> TrainWorkload:
    """Korthikanti's setting: FP16 activations, unfused attention core, dropout."""
    return build_workload(load_model("gpt-22b"), get_policy("fp16"), get_gpu("a100-sxm-80gb"), seq, "unfused", True)


@cache
def llama(name: str = "llama-3-8b", seq: int = 4096) -> TrainWorkload:
    return build_workload(load_model(name), get_policy("bf16"), get_gpu("h100-sxm"), seq)


def one(**kw: object) -> ConfigArrays:
    return ConfigArrays.from_configs([ParallelConfig(**kw)])  # type: ignore[arg-type]


def test_korthikanti_per_layer_no_parallelism() -> None:
    w = gpt22b()
    s, b, h, a = 2048, 1, 6144, 64
    expected = s * b * h * (34 + 5 * a * s / h)
    assert float(activation_bytes_per_layer(w, one(micro_batch=b))[0]) == pytest.approx(expected, rel=1e-12)


def test_korthikanti_per_layer_tensor_parallel() -> None:
    w = gpt22b()
    s, b, h, a, t = 2048, 4, 6144, 64, 8
    no_sp = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    with_sp = s * b * h / t * (34 + 5 * a * s / h)
    got = activation_bytes_per_layer(w, one(tp=t, micro_batch=b))[0]
    got_sp = activation_bytes_per_layer(w, one(tp=t, micro_batch=b, sequence_parallel=True))[0]
    assert float(got) == pytest.approx(no_sp, rel=1e-12)
    assert float(got_sp) == pytest.approx(with_sp, rel=1e-12)


def test_korthikanti_recompute_totals() -> None:
    w = gpt22b()
    s, b, h, t, L, V = 2048, 1, 6144, 8, 48, 51200
    output = 4 * s * b * h / t * (1 + V / h)
    emb_dropout = s * b * h
    full = activation_memory(w, one(tp=t, recompute="full"), global_batch=1)[0]
    assert float(full) == pytest.approx(L * 2 * s * b * h + output + emb_dropout, rel=1e-12)
    selective_sp = activation_memory(w, one(tp=t, recompute="selective", sequence_parallel=True), global_batch=1)[0]
    assert float(selective_sp) == pytest.approx(L * 34 * s * b * h / t + output + emb_dropout / t, rel=1e-12)


def test_pipeline_in_flight_and_interleaving() -> None:
    w = gpt22b()
    per_layer = float(activation_bytes_per_layer(w, one(tp=8, micro_batch=1))[0])
    # pp=4, 16 micro-batches: the first stage holds 12 layers x 4 micro-batches; v=2 adds (p-1)/(p v).
    plain = activation_memory(w, one(tp=8, pp=4), global_batch=16)[0]
    inter = activation_memory(w, one(tp=8, pp=4, interleave=2), global_batch=16)[0]
    emb = 2048 * 6144 * 4  # embedding dropout mask per micro-batch in flight
    assert float(plain) == pytest.approx(12 * 4 * per_layer + emb, rel=1e-12)
    assert float(inter) == pytest.approx((12 * 4 * per_layer + emb) * (1 + 3 / 8), rel=1e-12)


def test_stage_layers_uneven() -> None:
    assert list(stage_layers(126, np.array([1, 2, 16]))) == [126, 63, 8]
    assert float(stage_layers(126, np.array([16]), np.array([2]))[0]) == 8  # 2 chunks of ceil(126/32)=4


def test_weights_grads_optimizer_and_zero_stages() -> None:
    w = llama()
    n = param_counts(load_model("llama-3-8b")).total
    dp = 4
    m = [memory_per_gpu(w, one(tp=2, dp=dp, zero=z), global_batch=8) for z in range(4)]
    assert float(m[0].weights[0]) == pytest.approx(n / 2 * 2)
    assert float(m[0].gradients[0]) == pytest.approx(n / 2 * 2)
    assert float(m[0].optimizer[0]) == pytest.approx(n / 2 * 12)
    assert float(m[1].optimizer[0]) == pytest.approx(n / 2 * 12 / dp)
    assert float(m[1].gradients[0]) == pytest.approx(m[0].gradients[0])
    assert float(m[2].gradients[0]) == pytest.approx(n / 2 * 2 / dp)
    assert float(m[2].weights[0]) == pytest.approx(m[0].weights[0])
    assert float(m[3].weights[0]) == pytest.approx(n / 2 * 2 / dp)
    totals = [float(x.total[0]) for x in m]
    assert totals == sorted(totals, reverse=True)


def test_comm_buffers_include_reserve() -> None:
    m = memory_per_gpu(llama(), one(), global_batch=1)
    assert float(m.comm_buffers[0]) == pytest.approx(eff.RESERVED_BYTES)
    parts = m.weights + m.gradients + m.optimizer + m.activations + m.comm_buffers
    assert float(m.total[0]) == pytest.approx(float(parts[0]))


def test_moe_experts_sharded_by_ep() -> None:
    w = build_workload(load_model("mixtral-8x7b"), get_policy("bf16"), get_gpu("h100-sxm"), 4096)
    m1 = memory_per_gpu(w, one(dp=8, ep=1), global_batch=8)
    m8 = memory_per_gpu(w, one(dp=8, ep=8), global_batch=8)
    pc = param_counts(load_model("mixtral-8x7b"))
    saved = pc.moe_experts * (1 - 1 / 8) * 2
    assert float(m1.weights[0] - m8.weights[0]) == pytest.approx(saved, rel=1e-9)


configs = st.builds(
    dict,
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
    sp=st.booleans(),
    interleave=st.sampled_from([1, 2]),
)


def _cfg(d: dict[str, object], **kw: object) -> ConfigArrays:
    sp = bool(d["sp"]) and d["tp"] != 1
    v = d["interleave"] if d["pp"] != 1 else 1
    base = {k: v for k, v in d.items() if k not in ("sp", "interleave")}
    return one(**{**base, "sequence_parallel": sp, "interleave": v, **kw})


@settings(max_examples=60, deadline=None)
@given(configs, st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]))
def test_memory_grows_with_micro_batch(d: dict[str, object], dp: int, mb: int) -> None:
    w = llama()
    small = memory_per_gpu(w, _cfg(d, dp=dp, micro_batch=mb), global_batch=64).total[0]
    big = memory_per_gpu(w, _cfg(d, dp=dp, micro_batch=2 * mb), global_batch=64).total[0]
    assert big >= small


@settings(max_examples=40, deadline=None)
@given(configs, st.sampled_from([1024, 2048, 4096]))
def test_memory_grows_with_sequence(d: dict[str, object], seq: int) -> None:
    short = memory_per_gpu(llama(seq=seq), _cfg(d), global_batch=16).total[0]
    long = memory_per_gpu(llama(seq=2 * seq), _cfg(d), global_batch=16).total[0]
    assert long >= short


@settings(max_examples=60, deadline=None)
@given(configs, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2]))
def test_more_gpus_never_raise_memory_at_fixed_global_batch(d: dict[str, object], dp: int, mb: int) -> None:
    w = llama()
    fewer = memory_per_gpu(w, _cfg(d, dp=dp, micro_batch=mb), global_batch=64).total[0]
    more = memory_per_gpu(w, _cfg(d, dp=2 * dp, micro_batch=mb), global_batch=64).total[0]
    assert more <= fewer


def test_korthikanti_table2_remaining_rows() -> None:
    """Table 2: TP + selective recompute without SP ``sbh(10 + 24/t)``; full recompute with SP ``2sbh/t``."""
    w = gpt22b()
    s, b, h, t, L, V = 2048, 1, 6144, 8, 48, 51200
    output = 4 * s * b * h / t * (1 + V / h)
    selective = activation_memory(w, one(tp=t, recompute="selective"), global_batch=1)[0]
    assert float(selective) == pytest.approx(L * s * b * h * (10 + 24 / t) + output + s * b * h, rel=1e-12)
    full_sp = activation_memory(w, one(tp=t, recompute="full", sequence_parallel=True), global_batch=1)[0]
    assert float(full_sp) == pytest.approx(L * 2 * s * b * h / t + output + s * b * h / t, rel=1e-12)


def test_interleaved_in_flight_follows_megatrons_warmup() -> None:
    """Rank 0 of Megatron's interleaved schedule: 2(p-1) + (v-1)p warm-up chunks + 1, capped by m·v."""
    pp, v = np.array([4, 4, 16, 16, 8]), np.array([1, 2, 4, 4, 1])
    m = np.array([16, 16, 64, 8, 3])
    got = in_flight_chunks(pp, v, m)
    assert list(got) == [4, 2 * 3 + 1 * 4 + 1, 2 * 15 + 3 * 16 + 1, 8 * 4, 3]
    # with m >= p it is Korthikanti's L(1 + (p-1)/(pv)) layers (chunks of L/(pv) layers)
    assert got[2] / (16 * 4) == pytest.approx(1 + 15 / 64)


@settings(max_examples=80, deadline=None)
@given(configs, st.sampled_from(["gpt", "llama"]), st.sampled_from([1, 2, 4]))
def test_stronger_recompute_never_needs_more_activation_memory(d: dict[str, object], which: str, mb: int) -> None:
    w = gpt22b() if which == "gpt" else llama()
    acts = [
        float(activation_memory(w, _cfg({**d, "recompute": r}, micro_batch=mb), global_batch=64)[0])
        for r in ("none", "selective", "full")
    ]
    assert acts[0] >= acts[1] >= acts[2] > 0
    totals = [
        float(memory_per_gpu(w, _cfg({**d, "recompute": r}, micro_batch=mb), global_batch=64).total[0])
        for r in ("none", "selective", "full")
    ]
    assert totals[0] >= totals[1] >= totals[2]


@settings(max_examples=60, deadline=None)
@given(configs)
def test_sequence_parallel_never_adds_activations_and_interleaving_never_removes_them(d: dict[str, object]) -> None:
    w = llama()
    if d["tp"] != 1:
        plain = activation_memory(w, _cfg({**d, "sp": False}), global_batch=64)[0]
        sp = activation_memory(w, _cfg({**d, "sp": True}), global_batch=64)[0]
        assert sp <= plain
    if d["pp"] != 1:
        v1 = activation_memory(w, _cfg({**d, "interleave": 1}), global_batch=64)[0]
        v2 = activation_memory(w, _cfg({**d, "interleave": 2}), global_batch=64)[0]
        assert v2 >= v1 * (1 - 1e-12)
