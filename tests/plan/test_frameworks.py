"""Framework profiles: registry conformance, CLI option, and what each profile changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.errors import InputError
from twinloop.lab import gemm_fit
from twinloop.plan import collectives as coll
from twinloop.plan import efficiency as effc
from twinloop.plan.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS, get_framework
from twinloop.plan.search import search
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request, resolve

H100_SHAPES = Path(__file__).resolve().parents[1] / "fixtures" / "h100_shapes"
DEEPSEEK = dict(model="deepseek-v3", gpu="h800-sxm", gpus=2048, precision="deepseek-v3-fp8", seq_len=4096,
                global_batch=15360, framework="deepseek-v3")  # fmt: skip


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_profile_conformance(name: str) -> None:
    p = get_framework(name)
    assert p.name == name and p.description
    for f in (p.tp_comm_exposed, p.pp_p2p_exposed, p.ep_a2a_exposed, p.bubble_scale):
        assert 0.0 < f <= 1.0
    assert p.dp_bucket_params > 0.0
    assert p.attention_kernel in ("flash", "unfused") and p.fp8_scaling in ("tensor", "block")
    assert p.fp8_amax in ("delayed", "current", "tile")
    eff = p.efficiency()
    assert eff.tp_comm_exposed == p.tp_comm_exposed and eff.a2a_dedup == p.a2a_dedup


def test_unknown_framework() -> None:
    with pytest.raises(InputError, match="allowed"):
        get_framework("nope")
    r = CliRunner().invoke(app, ["plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8",
                                 "--framework", "nope", "--json"])  # fmt: skip
    assert r.exit_code == 2


def test_tp_overlap_makes_the_default_faster_than_2022() -> None:
    kw = dict(model="llama-3-70b", gpu="h100-sxm", gpus=64, tp=8, pp=2, dp=4, cp=1, zero=1, recompute="selective",
              sequence_parallel=True, micro_batch=1, interleave=1, global_batch=256, seq_len=4096,
              attention_kernel="flash")  # fmt: skip
    old = plan_train(make_request(**kw, framework="megatron-2022"))
    new = plan_train(make_request(**kw, framework=DEFAULT_FRAMEWORK))
    assert new.step_breakdown_s["tp_comm"] < old.step_breakdown_s["tp_comm"]
    assert new.step_time_s < old.step_time_s
    assert new.efficiency["framework"] == DEFAULT_FRAMEWORK


def test_cli_json_reports_framework_and_reliability() -> None:
    r = CliRunner().invoke(app, ["plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "1024",
                                 "--framework", "megatron-2022", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["efficiency"]["framework"] == "megatron-2022"
    rel = d["reliability"]
    assert {"job_mttf_h", "interruptions_per_day", "checkpoint_interval_h", "expected_ettr"} <= set(rel)
    assert 5.9 < rel["job_mttf_h"] < 9.9  # Meta's 1,024-GPU figure 7.9 h within 25 %


def test_dedup_all_to_all_sends_less_across_nodes() -> None:
    from twinloop.hardware.gpu import get_gpu

    topo = coll.default_topology(get_gpu("h800-sxm"))
    token_bytes = 4096 * 7168.0
    plain = coll.hierarchical_all_to_all_s(8 * token_bytes, 64.0, 8.0, topo)
    dedup = coll.dedup_all_to_all_s(token_bytes, 8.0, 64.0, 8.0, topo, node_limit=4)
    assert dedup < plain
    # Node-limited: never more than node_limit distinct nodes.
    assert coll.expected_distinct_nodes(8.0, 8.0, 4) <= 4.0
    assert coll.expected_distinct_nodes(8.0, 8.0) == pytest.approx(8 * (1 - (7 / 8) ** 8))


def test_deepseek_v3_published_layout_within_15_percent() -> None:
    """Predicted (not fitted): DeepSeek-V3's 180K H800 GPU-hours per trillion tokens (tech report, Table 1)."""
    plan = plan_train(make_request(**DEEPSEEK, tp=1, pp=16, ep=64, cp=1, dp=128))
    gpu_h_per_t = 2048 * plan.step_time_s / 3600 / plan.tokens_per_step * 1e12
    assert gpu_h_per_t == pytest.approx(180_000, rel=0.15)
    assert gpu_h_per_t == pytest.approx(162_393, rel=0.03)  # measured error −9.8 % (docs/calibration.md)
    # the layout fits with DeepSeek's own selective scheme (plan/recompute.py), not by full recompute
    assert plan.fits and plan.config.recompute == "selective"
    assert plan.efficiency["recompute_scheme"] == "deepseek-v3" and plan.efficiency["pipeline_schedule"] == "dualpipe"


def test_gemm_efficiency_belongs_to_the_stack() -> None:
    """The Korthikanti-fitted factor is the 2022 stack's (megatron-2022 only); today's stacks use the large-GEMM
    share measured on the H100, which is what the H100 fixture gives (median of the large BF16 cells)."""
    assert get_framework("megatron-2022").efficiency().gemm == effc.GEMM_EFFICIENCY
    for name in set(FRAMEWORKS) - {"megatron-2022"}:
        assert get_framework(name).efficiency().gemm == effc.H100_GEMM_EFFICIENCY, name
    for p in FRAMEWORKS.values():
        assert p.efficiency().elementwise_hbm_passes == effc.ELEMENTWISE_HBM_PASSES
    measured = gemm_fit.measured_large_share(gemm_fit.eager_cells(H100_SHAPES, "h100-sxm"))
    assert measured == pytest.approx(effc.H100_GEMM_EFFICIENCY, abs=0.005)
    assert effc.GEMM_EFFICIENCY < effc.H100_GEMM_EFFICIENCY


def test_deepseek_v3_search_ranks_the_published_layout_near_the_top() -> None:
    """Predicted: the search ranks DeepSeek-V3's published layout (tp1 pp16 ep64) #42 at 86 % of the best's
    throughput (#31 before the phase activities followed the power model's rules, #51 when the Korthikanti-fitted
    GEMM factor applied to every stack); bound with a margin."""
    res = search(resolve(make_request(**DEEPSEEK)), "throughput")
    c = res.ranked.configs
    published = [i for i in range(len(c.ep)) if (c.tp[i], c.pp[i], c.ep[i], c.cp[i]) == (1, 16, 64, 1)]
    assert published and published[0] + 1 <= 50
    assert float(res.ranked.time.step_s[0] / res.ranked.time.step_s[published[0]]) >= 0.83
