"""Every efficiency factor and modelling constant of the training planner, named, in one place.

Each constant says what it is and where its value comes from: MEASURED (on the real H100 SXM readings in
``/work/shared/data/h100``, derived by ``benchmarks/calibrate_h100_constants.py``), FITTED (chosen by a
calibration, which says on what: ``GEMM_EFFICIENCY`` and ``ELEMENTWISE_HBM_PASSES`` by
``benchmarks/calibrate_korthikanti.py --fit`` minimizing the worst relative error over the eight cells of
Korthikanti et al. 2022, Table 5; docs/sections/calibration-plan-train.md reports the fit), PUBLISHED (cited),
DERIVED (from cited or measured figures by a stated rule) or a CONVENTION the power model's fit fixed; none is a
GUESS any more (tests/plan/test_efficiency_kinds.py pins that). The per-phase activities follow the rules the power
model was fitted with (``hardware/readings.py``), computed in :mod:`twinloop.plan.activity`.
The GEMM shape/dtype curves are fitted on measured H100
GEMMs in :mod:`twinloop.plan.gemm`; the framework-dependent factors (overlaps, bubble, FP8 handling, and the
large-GEMM efficiency: ``GEMM_EFFICIENCY`` for the 2022 stack, ``H100_GEMM_EFFICIENCY`` for today's) come from
:mod:`twinloop.plan.frameworks`; :class:`TrainEfficiency`'s defaults are the ``megatron-2022`` values.
"""

from __future__ import annotations

from dataclasses import dataclass

#: FITTED (on Korthikanti et al. 2022, Table 5; the ``megatron-2022`` framework profile's value and the
#: :class:`TrainEfficiency` default). Clock-normalised achieved fraction of the dense tensor-core peak of a large
#: (8192³) BF16/FP16 training GEMM *in the 2022 Megatron-LM stack on A100*: the GEMM runs at
#: ``GpuSpec.tflops(dtype) · f / GpuSpec.peak_clock_mhz · gemm`` with ``f`` the clock DVFS allows under the power
#: limit (applied once, in plan/train_power.py). Each GEMM's shape and dtype scale it by
#: :func:`twinloop.plan.gemm.relative_efficiency` (the unfused QK^T and softmax·V use it unscaled). Fitted
#: together with ELEMENTWISE_HBM_PASSES by ``benchmarks/calibrate_korthikanti.py --fit`` (grid search, smallest
#: worst relative error over the eight cells; A100 FP16, 312 TFLOP/s stated at its 1,410 MHz f_max). History:
#: 0.92 → 0.93 when HBM_EFFICIENCY became the measured 0.90; 0.93 → 0.76 when the GEMM curves gained the memory
#: term (fitted on the H200 shapes), which no longer charges Korthikanti's 2,048-token GEMMs the ~20 % the former
#: curve did, so the 2022 stack's slowness sits here. It belongs to that stack, not to the hardware: the modern
#: profiles use :data:`H100_GEMM_EFFICIENCY` (measured) instead (:mod:`twinloop.plan.frameworks`).
GEMM_EFFICIENCY = 0.76

#: MEASURED. The same factor for today's stacks (cuBLAS GEMMs through PyTorch / Transformer Engine on Hopper):
#: the clock-normalised share of the dense BF16 peak that large GEMMs reach on a real H100 SXM, the median over
#: the 15 BF16 cells with M, N, K ≥ 4096 of ``tests/fixtures/h100_shapes/shapes.json`` at their estimated clocks
#: (:func:`twinloop.lab.gemm_fit.measured_large_share`; 0.81-0.97 per cell, 0.88-0.92 with every clock window
#: moved by up to ±0.2 s). The H100 squares of ``shared/data/h100/precision_bf16_fp8.json`` (another run) give 0.90
#: at 8192³. Used by the ``megatron-core-2024``, ``megatron-bridge-2025`` and ``deepseek-v3`` profiles (the H800 is
#: the same GH100 die).
H100_GEMM_EFFICIENCY = 0.89

#: FITTED (on one published cell: NeMo 24.12, Llama-3-8B FP8 on 8 H100, the cell ``catalog/fp8_training.yaml``
#: put in the fitted role before any error was seen, with the rule that a constant may move only if it misses by
#: more than 10 %; it missed by +21.6 %). The ``megatron-core-2024`` profile's compute phase of an FP8 step takes
#: this many times what the GEMM, attention, cast and element-wise kernels take at their measured speeds. It
#: lumps whatever made the 2024 NeMo / Transformer Engine FP8 path slower than its kernels (not identified: the
#: planner's FP8 GEMMs are already slower than the H100's, and the same cells' Megatron-Bridge 2025 successors
#: run within 5 % of the kernels with no such factor). Added to the compute phase as time the GPU is not in a
#: tensor or memory kernel, so it neither draws tensor power nor scales with the clock. BF16 steps are not
#: stretched (no published BF16 figure of that stack at these layouts). Chosen by
#: ``benchmarks/plan_fp8_h100.py --fit-stack`` (bisection to 0 error on the fitted cell); the NeMo 24.x 70B
#: cells and NeMo 24.07 8B are predicted.
NEMO_2024_FP8_STEP_STRETCH = 1.336

#: FITTED (on Korthikanti et al. 2022, Table 5, with GEMM_EFFICIENCY; used by every profile). HBM passes per
#: stored activation byte over one training step (forward + backward) for the memory-bound element-wise work
#: (norms, bias+GELU/SwiGLU, dropout, softmax, residual adds, optimizer-free parts): element-wise time per layer
#: = passes × activation bytes the layer stores / usable HBM bandwidth. Korthikanti's activation accounting is
#: exactly the per-layer stored bytes. At HBM_EFFICIENCY 0.90 (was 8.5 at the former guess 0.85; 9.5 → 7.0 with
#: the refit of GEMM_EFFICIENCY on the H200-fitted GEMM curves). The modern profiles keep this value: no H100
#: measurement separates their element-wise time, and their extra fusions (Transformer Engine's LayerNorm-Linear,
#: fused SwiGLU and RoPE) can only lower it, so for them it is an upper bound.
ELEMENTWISE_HBM_PASSES = 7.0

#: PUBLISHED. Achieved fraction of the FLOP peak for fused (flash) attention. FlashAttention-2 reports 50-73 % of
#: A100 peak forward and lower backward (Dao 2023, Fig. 5-6); 0.55 is a round figure across fwd+bwd.
FLASH_ATTENTION_EFFICIENCY = 0.55

#: MEASURED. Usable fraction of the datasheet HBM bandwidth for the training planner's streaming
#: (read + write) element-wise and optimizer kernels. A device-to-device copy of 4 GiB on a real H100 SXM
#: (``/work/shared/data/h100/results_run{1,2}.json``, ``memcopy.GBps_rw``: 3,019 and 3,007 GB/s read + write,
#: ``tools/workload.py``) against the catalog's 3.35 TB/s: 3,013 / 3,350 = 0.90. One GPU; applied to every GPU.
HBM_EFFICIENCY = 0.90

#: MEASURED. Usable fraction of the datasheet HBM bandwidth when decode streams the weights (read-only,
#: skinny GEMMs), the serving roofline's ``ServeEfficiency.hbm``. Llama-3-8B's linear layers (15.0 GB BF16)
#: replayed as one CUDA graph on a real H100 SXM (``results_run{1,2}.json``, ``decode_like.rows``) at batch
#: 1, 8 and 32 (memory-bound: intensity ≤ 32 FLOP/B): 2,708/2,710, 2,623/2,627, 2,613/2,615 GB/s, mean 2,649
#: of 3,350 = 0.79. Batch 128 (2,340 GB/s) is already partly compute-bound and left out.
DECODE_HBM_EFFICIENCY = 0.79

#: PUBLISHED (the α–β collectives). NCCL bus bandwidth / NVLink wire rate for large all-reduce inside one
#: node. nccl-tests on DGX A100 report ~230 GB/s bus bandwidth on 300 GB/s per-direction NVLink3 (0.77);
#: DGX H100 ~360-370 of 450 (0.8).
NVLINK_EFFICIENCY = 0.78

#: PUBLISHED (the α–β collectives). NCCL bus bandwidth / NIC wire rate across nodes (nccl-tests over
#: InfiniBand HDR/NDR reach ~90 %).
NETWORK_EFFICIENCY = 0.9

#: FITTED (one cited point). NCCL Simple-protocol bus bandwidth / NVLink wire rate, used by the training
#: planner's NCCL-like collectives (:mod:`twinloop.plan.nccl`): "450GB/s is the line rate. With the protocol
#: overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s" (S. Jeaugey, NCCL maintainer, on
#: 8x H100; github.com/NVIDIA/nccl-tests/issues/212): 370/450. (NVLINK_EFFICIENCY above stays the serving
#: planner's α–β value.)
NCCL_NVLINK_BUS_EFFICIENCY = 0.822

#: FITTED (one cited point). NCCL Simple bus bandwidth / NIC wire rate: "For NDR @ 400Gbps you should see
#: 46-48GB/s per NIC" (NCCL maintainer, github.com/NVIDIA/nccl-tests/issues/290): 47/50.
NCCL_NETWORK_BUS_EFFICIENCY = 0.94

#: FITTED (one cited point). NVLink SHARP (NVLS) all-reduce algorithm bandwidth / NVLink wire rate: "On 8
#: GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" (S. Jeaugey on H100,
#: github.com/NVIDIA/nccl-tests/issues/212; GTC S62129 quotes 480 GB/s): 274.3/450 (busbw = algbw·2·7/8).
NVLS_ALGBW_FRACTION = 0.6095

#: PUBLISHED (megatron-2022). Fraction of tensor/sequence-parallel communication left on the critical path. Megatron-LM
#: 2022 (the calibration runs) ran it synchronously between GEMMs: 1.0. The planner takes the value of the chosen
#: framework profile (:mod:`twinloop.plan.frameworks`); these three constants are the ``megatron-2022`` ones.
TP_COMM_EXPOSED_FRACTION = 1.0

#: PUBLISHED (megatron-2022). Fraction of pipeline point-to-point sends left on the critical path (Megatron-LM
#: 2022: blocking sends).
PP_P2P_EXPOSED_FRACTION = 1.0

#: SETTING. Fraction of the MoE all-to-all left on the critical path with no compute/communication overlap.
EP_A2A_EXPOSED_FRACTION = 1.0

#: PUBLISHED. The data-parallel gradient sync overlaps the backward pass except its last bucket, which is
#: only ready when backward ends. Megatron-Core's default bucket: "If unspecified, MCore uses a default value
#: of max(40000000, 1000000 * dp_size) parameters" (``DistributedDataParallelConfig.bucket_size``,
#: megatron/core/distributed/distributed_data_parallel_config.py). The exposed share of the sync is
#: ``min(1, bucket / parameters on the GPU)`` (:func:`twinloop.plan.train_time.dp_last_bucket_fraction`);
#: it replaces the former GUESS of a fixed 0.05.
DP_BUCKET_PARAMS = 40e6
#: PUBLISHED. Megatron-Core's bucket grows by this many parameters per data-parallel rank (same source).
DP_BUCKET_PARAMS_PER_RANK = 1e6

#: MEASURED (one GPU, no NCCL). Bytes used on each GPU beyond the tensors PyTorch allocates: CUDA context,
#: cuBLAS workspaces and the caching allocator's reserved-but-free blocks at the peak. A 1.1B Llama trained
#: with PyTorch on a real H100 SXM (``/work/shared/data/h100``): NVML fb used at the peak 59,026 MiB − the
#: driver's 480 MiB (read with no context) − ``torch.cuda.max_memory_allocated`` 55,447 MiB = 3.25 GB
#: (``benchmarks/calibrate_h100_constants.py``). NCCL's buffers (multi-GPU jobs) are not in it: a lower bound.
RESERVED_BYTES = 3.25e9

#: MEASURED. Die temperature assumed for power (leakage) during sustained training: a real H100 SXM held
#: 67 C over the last 10 s of 60 s of BF16 GEMMs at its 700 W limit (``/work/shared/data/h100``,
#: ``samples_20hz.csv`` phase ``gemm_peak``: 66.9 C at 698 W); a 1.1B Llama training phase at 690 W read
#: 62 C after 60 s, still rising. One GPU with unknown cooling; ``benchmarks/calibrate_h100_constants.py``.
TRAIN_DIE_TEMP_C = 67.0

#: CONVENTION (the power model's rule). SM activity of the compute phase: 1, as ``hardware/readings.py`` sets it for
#: every kernel that fills the GPU (GEMM, copy, decode, training) when the power model is fitted, so the planner
#: feeds the model what it was fitted on. The fit drops the SM term (``PowerCoefficients.c_sm`` = 0: SM power is
#: carried by the context and tensor terms), so this value does not move power at all. (Was the GUESS 0.95.)
#: The compute phase's tensor activity needs no constant: it is derived from the plan itself
#: (:mod:`twinloop.plan.activity`: the tensor-core FLOPs at the dtype's peak over the phase's time at its clock,
#: the quantity the readings measure), replacing the GUESS 0.85 × GEMM time share.
COMPUTE_SM_ACTIVE = 1.0

#: MEASURED. HBM bytes a large tiled GEMM moves per BF16 FLOP (operand and output traffic past the L2), which sets
#: the compute phase's DRAM activity outside the memory-bound kernels. The 8192³ BF16 GEMM at 700 W on a real H100
#: SXM (``/work/shared/data/h100``, phase ``gemm_peak``): NVML memory utilisation 0.331 at 668.8 TFLOP/s, where a
#: stream at 3,013 GB/s (the D2D copy, ``HBM_EFFICIENCY``) reads 1: 0.331 × 3,013 GB/s / 668.8 TFLOP/s =
#: 1.49e-3 B/FLOP, 4× the compulsory 3.7e-4 (tiles re-read past the 50 MB L2). FP8 moves half the bytes per FLOP
#: (the planner counts FP8 FLOPs at their BF16-equivalent time). The ten capped and clock-locked phases of the same
#: GEMM (345-1,369 MHz, not used for the value) read 1.47-1.54e-3 (``benchmarks/calibrate_h100_constants.py``),
#: and the H200's soak (not fitted: 667 TFLOP/s, 4.8 TB/s) is predicted at 0.230 memory utilisation, measured 0.249
#: (``benchmarks/calibrate_h200.py``); the H100's training run: ``benchmarks/validate_activity_h100.py``. One GEMM
#: shape; replaces the GUESS ``COMPUTE_DRAM_ACTIVE_BASE`` 0.25.
GEMM_HBM_BYTES_PER_FLOP = 1.49e-3

#: PUBLISHED. Thread blocks (CTAs, one per channel, each on its own SM) NCCL's ring/tree collectives run on 8 H100
#: SXM behind NVSwitch: "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels" (NCCL INFO at
#: init on 8× H100, a public benchmark log; DGX A100 also runs 24, github.com/NVIDIA/nccl/issues/1225: "for
#: dgxA100, 12 nvlink and 24 cta for allreduce"; NVLS defaults to 16, ``NCCL_PARAM(NvlsChannels,
#: "NVLS_NCHANNELS", 16)`` in NVIDIA/nccl src/transport/nvls.cc; "Each ring is run by a GPU SM", S. Jeaugey,
#: github.com/NVIDIA/nccl/issues/1360).
NCCL_CTAS = 24.0
#: PUBLISHED. SMs of an H100 SXM5 (the H100 whitepaper; also the 132 × 4,096 FLOP/clock of ``hardware/readings.py``).
H100_SM_COUNT = 132.0
#: DERIVED (from the two above). SM activity while only communication runs: the share of SMs NCCL's CTAs occupy,
#: 24 / 132 = 0.18 (NVLS: 16 / 132 = 0.12). Like ``COMPUTE_SM_ACTIVE`` it does not move power (``c_sm`` = 0).
#: Was the GUESS 0.2.
COMM_SM_ACTIVE = NCCL_CTAS / H100_SM_COUNT

#: DERIVED (an assumption on NCCL's data path, stated). Bytes of a GPU's own HBM traffic (read + write) per byte it
#: sends on the bus in a ring collective with the Simple protocol over P2P: each step of a reduce-scatter reads the
#: local chunk, and the incoming chunk is written into the receiver's FIFO and read back out (3 per bus byte); an
#: all-gather step writes the incoming chunk and reads it to forward (2, 3 through a FIFO). NCCL's FIFOs (4 MiB
#: per channel and peer × 24 channels) exceed the 50 MB L2, so they live in HBM. 3 is the upper end of 2-3. The
#: communication phase's DRAM activity is then ``3 × NCCL bus bandwidth / usable HBM bandwidth``
#: (:func:`twinloop.plan.activity.comm_activity`): 3 × 370 / 3,015 GB/s = 0.37 on an H100 over NVLink, replacing
#: the GUESS 0.15; a collective bound by one 400 Gb/s NIC per GPU (47 GB/s) moves 0.05.
COMM_HBM_BYTES_PER_BUS_BYTE = 3.0

#: PUBLISHED (a range; 1.2 is a setting). Facility power usage effectiveness applied to GPU energy for cost: industry
#: figures range from ~1.1 (hyperscale, Google fleet 2021) to ~1.57 (Uptime Institute 2021 average); 1.2 is a modern
#: liquid-cooled AI hall. Override with ``pue=``.
DEFAULT_PUE = 1.2


@dataclass(frozen=True)
class TrainEfficiency:
    """The efficiency factors the training time model uses, defaulting to the constants above.

    A frozen value so a calibration can try other values (``dataclasses.replace``) without touching globals.
    ``collectives`` picks the collective cost model: ``"nccl"`` (algorithm/protocol per message size, NVLS and
    SHARP; :mod:`twinloop.plan.nccl`) or ``"alpha-beta"`` (the textbook costs, with NVLINK_EFFICIENCY and
    NETWORK_EFFICIENCY to reproduce the model before issue 20's NCCL part). ``fp8_fused_casts`` / ``fp8_amax``:
    whether TE's LayerNorm/activation kernels emit FP8 directly and which scaling recipe runs (``delayed``,
    ``current``, ``tile``), :mod:`twinloop.plan.fp8_casts`. ``recompute_scheme`` says what the
    ``selective`` recompute mode stores (``megatron`` or ``deepseek-v3``, :mod:`twinloop.plan.recompute`) and
    ``pipeline_schedule`` which pipeline schedule runs (``1f1b``: Megatron's 1F1B/interleaved; ``dualpipe``:
    :mod:`twinloop.plan.dualpipe`); both come from the framework profile. ``fp8_step_stretch`` (≥ 1) multiplies
    the compute phase of an FP8 step (:data:`NEMO_2024_FP8_STEP_STRETCH`).
    """

    gemm: float = GEMM_EFFICIENCY
    elementwise_hbm_passes: float = ELEMENTWISE_HBM_PASSES
    flash_attention: float = FLASH_ATTENTION_EFFICIENCY
    hbm: float = HBM_EFFICIENCY
    nvlink: float = NCCL_NVLINK_BUS_EFFICIENCY
    network: float = NCCL_NETWORK_BUS_EFFICIENCY
    collectives: str = "nccl"
    tp_comm_exposed: float = TP_COMM_EXPOSED_FRACTION
    pp_p2p_exposed: float = PP_P2P_EXPOSED_FRACTION
    ep_a2a_exposed: float = EP_A2A_EXPOSED_FRACTION
    dp_bucket_params: float = DP_BUCKET_PARAMS
    gemm_shape: bool = True
    fp8_scaling: str = "tensor"
    fp8_fused_casts: bool = False
    fp8_amax: str = "delayed"
    bubble_scale: float = 1.0
    a2a_dedup: bool = False
    recompute_scheme: str = "megatron"
    pipeline_schedule: str = "1f1b"
    fp8_step_stretch: float = 1.0


DEFAULT_EFFICIENCY = TrainEfficiency()
