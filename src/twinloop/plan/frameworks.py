"""Framework profiles: which communication a training stack overlaps, its attention kernel and FP8 handling.

A profile is a named, typed, frozen value that sets the framework-dependent factors of
:class:`~twinloop.plan.efficiency.TrainEfficiency` (the hardware factors stay those of ``efficiency.py``),
including the large-GEMM efficiency: the factor fitted on Korthikanti et al.'s A100 table
(``efficiency.GEMM_EFFICIENCY``, 0.76) describes the 2022 Megatron-LM stack, not the hardware, so only
``megatron-2022`` uses it; today's stacks use the large-GEMM share measured on a real H100
(``efficiency.H100_GEMM_EFFICIENCY``, 0.89). Element-wise passes are the Korthikanti fit for every profile.
``plan train --framework NAME`` picks one; :data:`DEFAULT_FRAMEWORK` is today's common stack.

Exposed fractions are the share of a communication left on the critical path (1 = synchronous). Values are
published where a source states them and GUESS otherwise (each says which).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from twinloop.errors import InputError
from twinloop.plan.efficiency import (
    DEFAULT_EFFICIENCY,
    ELEMENTWISE_HBM_PASSES,
    GEMM_EFFICIENCY,
    H100_GEMM_EFFICIENCY,
    NEMO_2024_FP8_STEP_STRETCH,
    TrainEfficiency,
)
from twinloop.plan.fp8_casts import Fp8Amax
from twinloop.plan.recompute import RecomputeScheme

AttentionKernel = Literal["flash", "unfused"]
Fp8Scaling = Literal["tensor", "block"]
PipelineSchedule = Literal["1f1b", "dualpipe"]


@dataclass(frozen=True)
class FrameworkProfile:
    """One training stack's behaviour as the time model sees it.

    Attributes:
        name / description: registry name and one line saying what it stands for.
        gemm_efficiency: clock-normalised share of the dense peak a large (8192³) BF16 GEMM reaches in this
            stack (``TrainEfficiency.gemm``; shape and dtype scale it, :mod:`twinloop.plan.gemm`).
        elementwise_hbm_passes: HBM passes per stored activation byte of the element-wise work.
        tp_comm_exposed / pp_p2p_exposed / ep_a2a_exposed: exposed share of TP/SP collectives, pipeline
            sends and the MoE all-to-all (0..1].
        dp_bucket_params: smallest gradient bucket (parameters); the last one is left exposed after backward.
        bubble_scale: pipeline bubble relative to 1F1B's ``(pp-1)/v`` micro-batch times (DualPipe < 1).
        attention_kernel: default attention kernel (a request may override it).
        fp8_scaling: ``tensor`` (per-tensor delayed scaling) or ``block`` (1×128 / 128×128 blocks).
        fp8_fused_casts: TE's LayerNorm and activation kernels emit FP8 (+ transposed FP8) directly, so only
            the attention output and the residual-stream / QKV output gradients need their own cast-transpose
            (:mod:`twinloop.plan.fp8_casts`).
        fp8_amax: where the FP8 scale comes from: ``delayed`` (amax history), ``current`` (the tensor's own
            amax: one more read per quantised tensor) or ``tile`` (per 1×128 tile inside the cast kernel).
        a2a_dedup: the MoE dispatch sends a token once per destination node and forwards it over NVLink
            (DeepEP-style), instead of once per routed expert (NCCL all-to-all).
        selective_recompute: what the ``selective`` recompute mode stores and recomputes: ``megatron``
            (Korthikanti et al.: the attention core is recomputed) or ``deepseek-v3`` (norms and MLA
            up-projections recomputed, FP8-cached Linear and SwiGLU inputs; :mod:`twinloop.plan.recompute`).
        pipeline_schedule: ``1f1b`` (Megatron's 1F1B / interleaved) or ``dualpipe`` (two parameter copies,
            ``pp + 1`` micro-batches in flight, even ``pp`` and micro-batches; :mod:`twinloop.plan.dualpipe`).
        fp8_step_stretch: an FP8 step's compute phase over its kernels' time (1: the kernels are the step;
            :data:`twinloop.plan.efficiency.NEMO_2024_FP8_STEP_STRETCH`).
    """

    name: str
    description: str
    gemm_efficiency: float
    elementwise_hbm_passes: float
    tp_comm_exposed: float
    pp_p2p_exposed: float
    ep_a2a_exposed: float
    dp_bucket_params: float
    bubble_scale: float
    attention_kernel: AttentionKernel
    fp8_scaling: Fp8Scaling
    fp8_fused_casts: bool
    fp8_amax: Fp8Amax
    a2a_dedup: bool
    selective_recompute: RecomputeScheme = "megatron"
    pipeline_schedule: PipelineSchedule = "1f1b"
    fp8_step_stretch: float = 1.0

    def efficiency(self, base: TrainEfficiency = DEFAULT_EFFICIENCY) -> TrainEfficiency:
        """``base`` with this profile's framework factors."""
        return dataclasses.replace(
            base,
            gemm=self.gemm_efficiency,
            elementwise_hbm_passes=self.elementwise_hbm_passes,
            tp_comm_exposed=self.tp_comm_exposed,
            pp_p2p_exposed=self.pp_p2p_exposed,
            ep_a2a_exposed=self.ep_a2a_exposed,
            dp_bucket_params=self.dp_bucket_params,
            bubble_scale=self.bubble_scale,
            fp8_scaling=self.fp8_scaling,
            fp8_fused_casts=self.fp8_fused_casts,
            fp8_amax=self.fp8_amax,
            a2a_dedup=self.a2a_dedup,
            recompute_scheme=self.selective_recompute,
            pipeline_schedule=self.pipeline_schedule,
            fp8_step_stretch=self.fp8_step_stretch,
        )


FRAMEWORKS: dict[str, FrameworkProfile] = {
    p.name: p
    for p in (
        FrameworkProfile(
            name="megatron-2022",
            description="Megatron-LM as in Korthikanti et al. 2022: synchronous TP/SP collectives and "
            "pipeline sends, unfused attention core, DDP gradient buckets overlapped with backward",
            gemm_efficiency=GEMM_EFFICIENCY,  # fitted on Korthikanti Table 5 (A100, 2022 stack)
            elementwise_hbm_passes=ELEMENTWISE_HBM_PASSES,  # fitted on Korthikanti Table 5
            tp_comm_exposed=1.0,  # published: the 2022 code ran TP collectives between GEMMs
            pp_p2p_exposed=1.0,  # published: blocking sends in the 2022 schedule
            ep_a2a_exposed=1.0,  # no MoE in that code base; no overlap
            dp_bucket_params=DEFAULT_EFFICIENCY.dp_bucket_params,
            bubble_scale=1.0,
            attention_kernel="unfused",
            fp8_scaling="tensor",
            fp8_fused_casts=False,  # no FP8 on the A100s of 2022; no Transformer Engine
            fp8_amax="delayed",
            a2a_dedup=False,
        ),
        FrameworkProfile(
            name="megatron-core-2024",
            description="Megatron-Core + Transformer Engine (2024): TP comm overlap (userbuffers), distributed "
            "optimizer with overlapped grad reduce-scatter / param all-gather, overlapped p2p, flash "
            "attention, FP8 per-tensor scaling with casts fused into LayerNorm-Linear; MoE all-to-all exposed",
            gemm_efficiency=H100_GEMM_EFFICIENCY,  # measured: large BF16 GEMMs on a real H100 SXM
            elementwise_hbm_passes=ELEMENTWISE_HBM_PASSES,  # Korthikanti fit carried over (an upper bound)
            tp_comm_exposed=0.3,  # GUESS: TE userbuffer overlap hides most AG/RS behind the GEMMs it splits
            pp_p2p_exposed=0.3,  # GUESS: overlap_p2p_comm in the interleaved schedule
            ep_a2a_exposed=1.0,  # GUESS: 2024 releases did not overlap the token dispatcher's all-to-all
            dp_bucket_params=DEFAULT_EFFICIENCY.dp_bucket_params,
            bubble_scale=1.0,
            attention_kernel="flash",
            fp8_scaling="tensor",
            fp8_fused_casts=True,  # published: TE LayerNormLinear / LayerNormMLP emit FP8 from norm and activation
            fp8_amax="delayed",  # published: TE's default recipe (DelayedScaling) in 2024 releases
            a2a_dedup=False,  # NCCL all-to-all token dispatcher
            fp8_step_stretch=NEMO_2024_FP8_STEP_STRETCH,  # fitted on NeMo 24.12 Llama-3-8B FP8 (efficiency.py)
        ),
        FrameworkProfile(
            name="megatron-bridge-2025",
            description="As megatron-core-2024 but FP8 with per-tensor *current* scaling (NeMo 25.x / "
            "Megatron-Bridge FP8-CS recipe): each quantised tensor's amax is read before its cast",
            gemm_efficiency=H100_GEMM_EFFICIENCY,  # measured, as megatron-core-2024
            elementwise_hbm_passes=ELEMENTWISE_HBM_PASSES,  # as megatron-core-2024
            tp_comm_exposed=0.3,  # GUESS, as megatron-core-2024
            pp_p2p_exposed=0.3,  # GUESS, as megatron-core-2024
            ep_a2a_exposed=1.0,  # GUESS, as megatron-core-2024
            dp_bucket_params=DEFAULT_EFFICIENCY.dp_bucket_params,
            bubble_scale=1.0,
            attention_kernel="flash",
            fp8_scaling="tensor",
            fp8_fused_casts=True,  # the fused kernels exist, but current scaling defeats them (fp8_casts)
            fp8_amax="current",  # published: "per-tensor FP8 quantization, scaling factors computed in the
            # current step" (NeMo performance summary, 25.04+)
            a2a_dedup=False,
        ),
        FrameworkProfile(
            name="deepseek-v3",
            description="DeepSeek-V3's HAI-LLM (DeepSeek-AI 2024, §3.2-3.3): DualPipe overlapping the expert "
            "all-to-all and pipeline sends with computation, no TP, block-wise FP8 (1×128, 128×128)",
            gemm_efficiency=H100_GEMM_EFFICIENCY,  # measured on the H100 (the H800 has the same GH100 die)
            elementwise_hbm_passes=ELEMENTWISE_HBM_PASSES,  # as megatron-core-2024
            tp_comm_exposed=1.0,  # DeepSeek-V3 trained without TP
            pp_p2p_exposed=0.1,  # GUESS: DualPipe overlaps forward/backward chunk communication
            ep_a2a_exposed=0.1,  # published: "nearly full computation-communication overlap" (DualPipe); 0.1 GUESS
            dp_bucket_params=DEFAULT_EFFICIENCY.dp_bucket_params,
            # Derived from DeepSeek-V3 Table 2: DualPipe bubble (PP/2-1)(F&B + B - 3W) vs 1F1B (PP-1)(F+B);
            # with B = 2F, W = B/2 and F&B = F + B that is ~1/3 of 1F1B's for large PP.
            bubble_scale=1.0 / 3.0,
            attention_kernel="flash",
            fp8_scaling="block",
            fp8_fused_casts=True,  # GUESS: DeepSeek fuses its FP8 casts into neighbouring kernels (§3.3.1)
            fp8_amax="tile",  # published: 1×128 activation tiles / 128×128 weight blocks, scale per tile (§3.3.1)
            a2a_dedup=True,  # published: node-limited routing, one IB send per node, NVLink forwarding (§3.2.2)
            selective_recompute="deepseek-v3",  # published: §3.2.3 and §3.3.2 (plan/recompute.py)
            pipeline_schedule="dualpipe",  # published: §3.2.2, Table 2 (plan/dualpipe.py)
        ),
    )
}

#: Today's common stack.
DEFAULT_FRAMEWORK = "megatron-core-2024"


def get_framework(name: str, source: str = "--framework") -> FrameworkProfile:
    """The profile called ``name``; :class:`InputError` naming the allowed ones otherwise."""
    if name not in FRAMEWORKS:
        raise InputError(source, "", f"unknown framework {name!r} (allowed: {', '.join(FRAMEWORKS)})")
    return FRAMEWORKS[name]
