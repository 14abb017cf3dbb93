"""FP8 beyond the GEMM (plan/fp8_casts.py) and the published FP8 H100 training figures (catalog/fp8_training.yaml)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu
from twinloop.lab import fp8_anchors
from twinloop.model.arch import load_model
from twinloop.model.precision import get_policy
from twinloop.plan import fp8_casts
from twinloop.plan.collectives import default_topology
from twinloop.plan.efficiency import NEMO_2024_FP8_STEP_STRETCH
from twinloop.plan.fp8_casts import Fp8CastElems
from twinloop.plan.frameworks import get_framework
from twinloop.plan.memory import memory_per_gpu
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.train_time import step_time
from twinloop.plan.workload import build_workload

H100 = get_gpu("h100-sxm")


def _workload(precision: str, model: str = "llama-3-8b"):  # type: ignore[no-untyped-def]
    return build_workload(load_model(model), get_policy(precision), H100, 8192)


def _configs(**kw: object) -> ConfigArrays:
    base = dict(tp=1, pp=1, dp=8, ep=1, cp=1, zero=1, recompute="none", sequence_parallel=False, micro_batch=1,
                interleave=1)  # fmt: skip
    base.update(kw)
    return ConfigArrays.from_configs([ParallelConfig(**base)])  # type: ignore[arg-type]


def test_llama3_8b_quantised_tensors_by_hand() -> None:
    """Per token and layer: LayerNorm outputs (QKV, FFN-up inputs) and SwiGLU output / dSwiGLU output are
    fused; attention output, QKV dY (q + k + v) and the two residual-stream dY need their own cast."""
    fx = _workload("fp8-mixed").fp8
    h, f, kv = 4096, 14336, 8 * (128 + 128)
    assert fx.fused_repl == 2 * h
    assert fx.fused_shard == 3 * f  # down-projection input f + up/gate dY 2f
    assert fx.unfused_repl == 2 * h  # output-projection dY + down-projection dY
    assert fx.unfused_shard == h + h + kv  # attention output + QKV dY (q + kv)
    assert fx.layer_param_share == pytest.approx(1.0)
    assert not _workload("bf16").fp8.any


def test_bytes_per_element_by_recipe() -> None:
    assert fp8_casts.cast_bytes_per_element("delayed", True) == (0.0, 4.0)
    assert fp8_casts.cast_bytes_per_element("delayed", False) == (4.0, 4.0)
    assert fp8_casts.cast_bytes_per_element("current", True) == (6.0, 6.0)
    assert fp8_casts.cast_bytes_per_element("tile", True) == (0.0, 4.0)
    assert fp8_casts.weight_cast_bytes_per_element("current") > fp8_casts.weight_cast_bytes_per_element("delayed")
    # SP over 4 ranks: local row-wise cast (fused 0, unfused 4 - 1) + transpose of the 4x gathered tensor (2 B)
    fused, unfused = fp8_casts.sp_gathered_bytes_per_element("delayed", True, np.array([4.0]))
    assert (float(fused[0]), float(unfused[0])) == (8.0, 11.0)


def test_sequence_parallel_gathered_transpose_costs_time() -> None:
    """Under SP the FP8ᵀ copies of gathered tensors are made after the gather: more HBM traffic than the
    same TP group without the gather (each rank then casts the full tensor itself, 4 B per element)."""
    w = _workload("fp8-mixed", "llama-3-70b")
    sp, no_sp = _configs(tp=4, dp=2, sequence_parallel=True), _configs(tp=4, dp=2, sequence_parallel=False)
    bare = dataclasses.replace(w, fp8=Fp8CastElems())
    assert _step(w, sp) - _step(bare, sp) > _step(w, no_sp) - _step(bare, no_sp)


def _step(w, c, framework: str = "megatron-core-2024", **eff_kw: object) -> float:  # type: ignore[no-untyped-def]
    eff = dataclasses.replace(get_framework(framework).efficiency(), **eff_kw)  # type: ignore[arg-type]
    topo = default_topology(H100, None)
    return float(step_time(w, c, topo, 128, eff=eff).step_s[0])


@pytest.mark.parametrize("zero", [1, 3])
def test_fp8_step_slower_than_gemm_only_fp8(zero: int) -> None:
    """The mechanism only adds time: FP8 with its casts >= the same FP8 GEMMs with no quantisation work,
    current scaling >= delayed, and TE's fusions never make it slower."""
    w = _workload("fp8-mixed")
    c = _configs(zero=zero)
    gemm_only = _step(dataclasses.replace(w, fp8=Fp8CastElems()), c)
    delayed = _step(w, c)
    assert delayed > gemm_only
    assert _step(w, c, fp8_amax="current") > delayed
    assert _step(w, c, fp8_fused_casts=False) > delayed
    # and FP8 kernels (no stack stretch) still beat BF16 for Llama-3-8B at 8K tokens per micro-batch
    assert _step(w, c, fp8_step_stretch=1.0) < _step(_workload("bf16"), c)


def test_fp8_step_stretch_stretches_fp8_steps_only() -> None:
    """The 2024 stack's fitted stretch lengthens an FP8 step (casts or none) and leaves BF16 alone."""
    c = _configs(zero=1)
    for w in (_workload("fp8-mixed"), dataclasses.replace(_workload("fp8-mixed"), fp8=Fp8CastElems())):
        assert _step(w, c) > _step(w, c, fp8_step_stretch=1.0)
    bf16 = _workload("bf16")
    assert _step(bf16, c) == _step(bf16, c, fp8_step_stretch=1.0)


def test_fp8_step_stretch_is_what_the_fit_gives() -> None:
    """``NEMO_2024_FP8_STEP_STRETCH`` is the bisection's value on the fitted cell (no hand-set number)."""
    (p,) = [p for p in fp8_anchors.points() if p.role == "fitted"]
    assert fp8_anchors.fit_step_stretch(p) == pytest.approx(NEMO_2024_FP8_STEP_STRETCH, abs=0.002)


def test_bf16_unchanged_by_fp8_settings() -> None:
    """A BF16 policy quantises nothing: no FP8 setting moves its step time or memory."""
    w, c = _workload("bf16"), _configs(zero=3)
    ref = _step(w, c)
    for kw in ({"fp8_amax": "current"}, {"fp8_fused_casts": False}, {"fp8_amax": "tile"}):
        assert _step(w, c, **kw) == ref
    weights = float(np.asarray(memory_per_gpu(w, _configs(), 128).weights)[0])
    assert weights == pytest.approx(2.0 * w.params_total)  # BF16 weights only, no FP8 copies


def test_fp8_weight_copies_in_memory() -> None:
    """TE keeps FP8 + FP8ᵀ weights: 2 bytes per layer parameter beside the BF16 weights (ZeRO-1, no TP/PP)."""
    w8, w16, c = _workload("fp8-mixed"), _workload("bf16"), _configs()
    extra = float(memory_per_gpu(w8, c, 128).weights[0] - memory_per_gpu(w16, c, 128).weights[0])
    assert extra == pytest.approx(2.0 * w8.params_layers, rel=1e-9)


def test_catalog_split() -> None:
    """Every figure names its source; exactly one cell is in the fitted role (written before the errors)."""
    pts, rts = fp8_anchors.points(), fp8_anchors.ratios()
    assert len(pts) >= 8 and len(rts) >= 2
    assert all(p.source for p in (*pts, *rts))
    assert [p.id for p in pts if p.role == "fitted"] == ["nemo-24.12-llama3-8b-fp8"]


def test_fitted_fp8_cell_in_band() -> None:
    """The fitted-role cell (NeMo 24.12, Llama-3-8B on 8 H100) within 10 % in tokens/s per GPU (0.0 %: the
    ``megatron-core-2024`` FP8 step stretch is fitted on it; +21.6 % without)."""
    (p,) = [p for p in fp8_anchors.points() if p.role == "fitted"]
    assert abs(fp8_anchors.compare_point(p).error) <= 0.10


#: Measured error (tokens/s per GPU) of each published FP8 cell since the ``megatron-core-2024`` profile's FP8 step
#: stretch was fitted on the NeMo 24.12 8B cell (plan/efficiency.py, NEMO_2024_FP8_STEP_STRETCH; docs/calibration.md,
#: FP8 part). Before it the NeMo 2024 cells were +13 .. +24 % (too fast). The test holds each within 3 points.
MEASURED_ERROR = {
    "nemo-24.12-llama3-8b-fp8": 0.000,
    "nemo-24.12-llama3-70b-fp8": -0.041,
    "nemo-24.07-llama3-8b-fp8": 0.020,
    "nemo-24.07-llama3-70b-fp8": -0.047,
    "mbridge-25.09-llama3-8b-fp8cs": -0.016,
    "mbridge-25.09-llama3-70b-fp8cs": -0.033,
    "mbridge-25.11-llama3-8b-fp8cs": -0.041,
    "mbridge-25.11-llama3-70b-fp8cs": -0.023,
    "torchtitan-llama3.1-8b-8gpu": -0.007,  # FP8/BF16 ratios
    "torchtitan-llama3.1-8b-128gpu": -0.012,
}


def test_fp8_cells_at_their_measured_error() -> None:
    for p in fp8_anchors.points():
        assert fp8_anchors.compare_point(p).error == pytest.approx(MEASURED_ERROR[p.id], abs=0.03), p.id
    for r in fp8_anchors.ratios():
        assert fp8_anchors.compare_ratio(r).error == pytest.approx(MEASURED_ERROR[r.id], abs=0.03), r.id


def test_predicted_fp8_cells_in_band() -> None:
    """Predicted (never fitted): the published layouts within 15 % in tokens/s per GPU (now −4.7 .. +2.0 %), the
    torchtitan FP8/BF16 ratios within 10 % (now −0.7 / −1.2 %)."""
    for p in fp8_anchors.points():
        if p.role == "predicted":
            assert abs(fp8_anchors.compare_point(p).error) <= 0.15, p.id
    for r in fp8_anchors.ratios():
        assert abs(fp8_anchors.compare_ratio(r).error) <= 0.10, r.id


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    zero=st.integers(0, 3),
    sp=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
    micro_batch=st.integers(1, 2),
    amax=st.sampled_from(["delayed", "current", "tile"]),
    fused=st.booleans(),
)
def test_quantisation_never_speeds_a_step_up(
    tp: int, zero: int, sp: bool, recompute: str, micro_batch: int, amax: str, fused: bool
) -> None:
    """Invariant over layouts and recipes: the FP8 step with its quantisation work takes at least as long as the
    same FP8 GEMMs with none, and current scaling at least as long as delayed."""
    w = _workload("fp8-mixed")
    c = _configs(tp=tp, dp=8 // tp, zero=zero, sequence_parallel=sp and tp > 1, recompute=recompute,
                 micro_batch=micro_batch)  # fmt: skip
    bare = dataclasses.replace(w, fp8=Fp8CastElems())
    with_casts = _step(w, c, fp8_amax=amax, fp8_fused_casts=fused)
    assert with_casts > _step(bare, c, fp8_amax=amax, fp8_fused_casts=fused)
    current = _step(w, c, fp8_amax="current", fp8_fused_casts=fused)
    assert current >= _step(w, c, fp8_amax="delayed", fp8_fused_casts=fused)
