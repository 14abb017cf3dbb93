"""Step-time formulas: bubble, TP communication, recompute ordering, breakdown sums, DVFS stretch."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest

from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.model.precision import get_policy
from twinloop.plan import collectives as coll
from twinloop.plan import nccl
from twinloop.plan.collectives import default_topology
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.train_time import step_time
from twinloop.plan.workload import TrainWorkload, build_workload

GPU = get_gpu("h100-sxm")
TOPO = default_topology(GPU)


@cache
def wl(name: str = "llama-3-8b") -> TrainWorkload:
    return build_workload(load_model(name), get_policy("bf16"), GPU, 4096)


def arr(*cfgs: ParallelConfig) -> ConfigArrays:
    return ConfigArrays.from_configs(list(cfgs))


def test_single_gpu_is_compute_plus_optimizer() -> None:
    t = step_time(wl(), arr(ParallelConfig()), TOPO, global_batch=4)
    comm = t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_p2p_s + t.dp_exposed_s + t.bubble_s
    assert float(comm[0]) == 0.0
    assert float(t.step_s[0]) == pytest.approx(float(t.compute_s[0] + t.optimizer_s[0]))


def test_compute_scales_with_tokens_and_flops() -> None:
    w = wl()
    t1 = step_time(w, arr(ParallelConfig()), TOPO, global_batch=1)
    t2 = step_time(w, arr(ParallelConfig()), TOPO, global_batch=2)
    assert float(t2.compute_s[0]) == pytest.approx(2 * float(t1.compute_s[0]))
    # The GEMM part alone (single-constant model): 3 x forward FLOPs at peak x efficiency.
    flat = dataclasses.replace(DEFAULT_EFFICIENCY, gemm_shape=False)
    t1 = step_time(w, arr(ParallelConfig()), TOPO, global_batch=1, eff=flat)
    gemm = 4096 * 3 * (w.fwd_layers_s + w.fwd_head_s) / DEFAULT_EFFICIENCY.gemm
    gemm += 4096 * 3 * w.fwd_attn_s / DEFAULT_EFFICIENCY.flash_attention
    assert float(t1.compute_s[0] * t1.gemm_share[0]) == pytest.approx(gemm, rel=1e-9)
    # With shape efficiencies, GEMMs smaller than the 8192^3 reference run at a lower share of peak.
    shaped = step_time(w, arr(ParallelConfig()), TOPO, global_batch=1)
    assert float(shaped.compute_s[0] * shaped.gemm_share[0]) > gemm


def test_bubble_formula() -> None:
    for pp, v, gb in ((4, 1, 16), (4, 2, 16), (8, 4, 64)):
        t = step_time(wl(), arr(ParallelConfig(pp=pp, interleave=v)), TOPO, global_batch=gb)
        assert float(t.bubble_s[0]) == pytest.approx((pp - 1) / v * float(t.micro_batch_s[0]))


def test_tp_comm_is_four_all_reduces_per_layer() -> None:
    w = wl()
    tp = 4
    t = step_time(w, arr(ParallelConfig(tp=tp)), TOPO, global_batch=1)
    intra = dataclasses.replace(TOPO.intra, efficiency=DEFAULT_EFFICIENCY.nvlink)
    inter = dataclasses.replace(TOPO.inter, efficiency=DEFAULT_EFFICIENCY.network)
    nccl_topo = coll.Topology(intra, inter, GPU.gpus_per_node, "nccl")
    one = float(nccl.all_reduce_s(4096 * w.hidden * 2.0, tp, tp, nccl_topo))
    assert float(t.tp_comm_s[0]) == pytest.approx(w.n_layers * 4 * one)
    full = step_time(w, arr(ParallelConfig(tp=tp, recompute="full")), TOPO, global_batch=1)
    assert float(full.tp_comm_s[0]) == pytest.approx(w.n_layers * 6 * one)


def test_alpha_beta_mode_keeps_the_textbook_tp_cost() -> None:
    w = wl()
    ab = dataclasses.replace(DEFAULT_EFFICIENCY, collectives="alpha-beta", nvlink=0.78, network=0.9)
    t = step_time(w, arr(ParallelConfig(tp=4)), TOPO, global_batch=1, eff=ab)
    one = coll.all_reduce_s(4096 * w.hidden * 2.0, 4, dataclasses.replace(TOPO.intra, efficiency=0.78))
    assert float(t.tp_comm_s[0]) == pytest.approx(w.n_layers * 4 * one)
    # NVLS (H100's NVSwitch) makes the large TP all-reduce cheaper than the α-β ring at 78 % of NVLink
    assert float(step_time(w, arr(ParallelConfig(tp=4)), TOPO, global_batch=1).tp_comm_s[0]) < float(t.tp_comm_s[0])


def test_recompute_costs_time() -> None:
    cfgs = [ParallelConfig(tp=2, recompute=r) for r in ("none", "selective", "full")]
    t = step_time(wl(), arr(*cfgs), TOPO, global_batch=4)
    assert t.step_s[0] <= t.step_s[1] < t.step_s[2]


def test_breakdown_sums_to_step() -> None:
    cfgs = [
        ParallelConfig(tp=2, pp=2, dp=2, cp=2, zero=1, sequence_parallel=True, micro_batch=1, interleave=2),
        ParallelConfig(tp=8, pp=4, dp=4, zero=3, recompute="full"),
    ]
    t = step_time(wl(), arr(*cfgs), TOPO, global_batch=64)
    parts = t.compute_s + t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_p2p_s + t.bubble_s
    parts += t.dp_exposed_s + t.optimizer_s
    np.testing.assert_allclose(parts, t.step_s, rtol=1e-12)
    assert np.all(t.dp_exposed_s <= t.dp_sync_s + 1e-15)


def test_slowdown_stretches_compute_only() -> None:
    c = arr(ParallelConfig(tp=8, pp=2, dp=2))
    fast = step_time(wl(), c, TOPO, global_batch=16)
    slow = step_time(wl(), c, TOPO, global_batch=16, slowdown=1.5)
    assert float(slow.compute_s[0]) == pytest.approx(1.5 * float(fast.compute_s[0]))
    assert float(slow.tp_comm_s[0]) == pytest.approx(float(fast.tp_comm_s[0]))


def test_moe_imbalance_slows_experts_and_all_to_all() -> None:
    w = build_workload(load_model("mixtral-8x7b"), get_policy("bf16"), GPU, 4096)
    c = arr(ParallelConfig(dp=8, ep=8))
    even = step_time(w, c, TOPO, global_batch=8, imbalance=1.0)
    skew = step_time(w, c, TOPO, global_batch=8, imbalance=1.5)
    assert float(even.ep_comm_s[0]) > 0
    # Bandwidth terms scale by 1.5; the per-message latency does not.
    assert 1.4 * float(even.ep_comm_s[0]) < float(skew.ep_comm_s[0]) < 1.5 * float(even.ep_comm_s[0])
    assert skew.compute_s[0] > even.compute_s[0]
