"""Memory per GPU of a training job, vectorized over arrays of configurations.

Per GPU on the heaviest pipeline stage (``v·⌈L/(pp·v)⌉`` layers plus the embedding or LM head):

* weights: non-expert layer parameters ``/tp``, routed experts ``/(ep·tp)`` (expert tensor parallelism =
  TP), embedding-type parameters ``/tp`` (vocabulary-parallel), in the policy's ``weights_stored`` dtype;
  ZeRO-3 also shards them over the data-parallel group (``dp·cp``, experts ``dp·cp/ep``).
* gradients: same parameters in the ``gradients`` dtype; sharded from ZeRO-2.
* optimizer: Adam, master weights + two moments per parameter; sharded from ZeRO-1.
* activations (Korthikanti et al. 2022): per layer per micro-batch
  ``tokens·(repl/(tp if SP else 1) + shard/tp) + b·(s/cp)·s·a/tp·score`` bytes
  (see :mod:`twinloop.plan.workload`); selective recompute drops the attention-core term (Megatron) or
  stores what DeepSeek-V3's scheme stores (:mod:`twinloop.plan.recompute`), as the framework profile says;
  full recompute keeps only each layer's input (``d·h`` per token, ``/tp`` with SP). 1F1B keeps
  ``min(pp, m)`` micro-batches in flight on the first stage, DualPipe ``min(pp + 1, m)``
  (:mod:`twinloop.plan.dualpipe`), the interleaved schedule ``min(pp·v + pp - 1, m·v)`` model
  chunks of ``L/(pp·v)`` layers (:func:`in_flight_chunks`, Megatron-LM's warm-up counts); with
  ``pp == 1`` the output layer adds ``2·d·tokens·(h + V)/tp`` (Korthikanti's ``4sbh/t·(1 + V/h)``).
* DualPipe holds two copies of its stages' parameters (:func:`twinloop.plan.dualpipe.param_copies`): unsharded
  weights and gradients double, ZeRO-sharded state is sharded over twice the ranks.
* communication buffers: the gathered sequence-parallel input, MoE dispatch/combine buffers (×imbalance),
  ZeRO-3's prefetch of two layers, plus RESERVED_BYTES (CUDA context, NCCL, fragmentation). Data-parallel
  gradient buckets are views into the contiguous gradient buffer (Megatron-LM), so they add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.plan import dualpipe
from twinloop.plan import efficiency as eff
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY, TrainEfficiency
from twinloop.plan.fp8_casts import FP8_WEIGHT_COPY_BYTES
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.workload import TrainWorkload

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class MemoryArrays:
    """Bytes per GPU for each configuration (arrays aligned with the :class:`ConfigArrays`)."""

    weights: F64
    gradients: F64
    optimizer: F64
    activations: F64
    comm_buffers: F64
    total: F64


def stage_layers(n_layers: int, pp: NDArray[np.int64], interleave: NDArray[np.int64] | int = 1) -> F64:
    """Layers on the heaviest pipeline stage: ``v·⌈L/(pp·v)⌉`` (uneven splits put the extra layers on some
    stages, as Llama 3 405B's 126 layers on 16 stages did).
    """
    v = np.asarray(interleave)
    return np.asarray(v * np.ceil(n_layers / (pp * v)), dtype=np.float64)


def params_per_gpu(w: TrainWorkload, c: ConfigArrays) -> tuple[F64, F64]:
    """(non-expert, expert) parameters held by one GPU before any ZeRO sharding."""
    frac = stage_layers(w.n_layers, c.pp, c.interleave) / w.n_layers
    emb = np.where(c.pp == 1, w.params_embedding_all, w.params_embedding_stage)
    dense = (w.params_layers * frac + emb) / c.tp
    experts = w.params_experts * frac / (c.ep * c.tp)
    return dense, experts


def fp8_weight_elems(w: TrainWorkload, c: ConfigArrays) -> F64:
    """FP8 GEMM weight elements one GPU quantises per step and keeps as FP8 + FP8ᵀ (:mod:`.fp8_casts`)."""
    frac = stage_layers(w.n_layers, c.pp, c.interleave) / w.n_layers
    fx = w.fp8
    dense = w.params_layers * frac * fx.layer_param_share
    experts = w.params_experts * frac * fx.expert_param_share / c.ep
    return np.asarray((dense + experts) / c.tp, dtype=np.float64)


def micro_batches(global_batch: int, c: ConfigArrays) -> NDArray[np.int64]:
    """Micro-batches per pipeline per step: ``B / (dp·b)``."""
    return global_batch // (c.dp * c.micro_batch)


def activation_bytes_per_layer(w: TrainWorkload, c: ConfigArrays) -> F64:
    """Activation bytes one layer stores for one micro-batch on one GPU *without* recompute."""
    tokens = c.micro_batch * (w.seq_len / c.cp)
    repl_div = np.where(c.sequence_parallel == 1, c.tp, 1)
    per_token = w.act_repl_bytes / repl_div + w.act_shard_bytes / c.tp
    scores = c.micro_batch * (w.seq_len / c.cp) * w.seq_len * w.n_heads / c.tp * w.act_score_bytes
    return tokens * per_token + scores


def activation_memory(
    w: TrainWorkload, c: ConfigArrays, global_batch: int, efficiency: TrainEfficiency = DEFAULT_EFFICIENCY
) -> F64:
    """Activation bytes per GPU on the first pipeline stage (the one holding the most micro-batches).

    ``efficiency.recompute_scheme`` says what ``selective`` stores, ``efficiency.pipeline_schedule`` how many
    micro-batches are in flight.
    """
    tokens = c.micro_batch * (w.seq_len / c.cp)
    repl_div = np.where(c.sequence_parallel == 1, c.tp, 1)
    full = tokens * w.act_input_bytes / repl_div
    if efficiency.recompute_scheme == "deepseek-v3":
        selective = tokens * (w.ds.stored_repl_bytes / repl_div + w.ds.stored_shard_bytes / c.tp)
    else:
        selective = tokens * (w.act_repl_bytes / repl_div + w.act_shard_bytes / c.tp)
    per_layer = np.select(
        [c.recompute == 0, c.recompute == 1], [activation_bytes_per_layer(w, c), selective], default=full
    )
    chunks = in_flight_chunks(c.pp, c.interleave, micro_batches(global_batch, c), efficiency.pipeline_schedule)
    chunk_layers = stage_layers(w.n_layers, c.pp, c.interleave) / c.interleave
    output = np.where(c.pp == 1, 2 * w.bytes_act * tokens * (w.hidden + w.vocab) / c.tp, 0.0)
    # the embedding's dropout mask lives once per micro-batch in flight (Korthikanti: sbhp/t on stage one)
    emb_dropout = tokens * w.hidden / repl_div * chunks / c.interleave if w.dropout else 0.0
    return chunk_layers * chunks * per_layer + output + emb_dropout


def in_flight_chunks(
    pp: NDArray[np.int64], interleave: NDArray[np.int64], m: NDArray[np.int64], schedule: str = "1f1b"
) -> F64:
    """Model chunks (``L/(pp·v)`` layers × one micro-batch) whose activations the first pipeline stage holds at
    its peak, as Megatron-LM's schedules run them.

    1F1B (``v == 1``): the first stage runs ``pp - 1`` warm-up forwards and one more before its first
    backward, so ``min(pp, m)`` micro-batches are in flight. Interleaved (``v > 1``): Megatron's warm-up on
    rank 0 is ``2(pp-1) + (v-1)·pp`` chunk forwards, plus the one of its first 1F1B step, so
    ``min(pp·v + pp - 1, m·v)`` chunks; with ``m ≥ pp`` that is Korthikanti et al.'s ``L·(1 + (p-1)/(p·v))``
    layers (§4.2.3). ``schedule="dualpipe"`` (without interleaving): ``min(pp + 1, m)``
    (:func:`twinloop.plan.dualpipe.in_flight_micro_batches`).
    """
    p, v, mm = (np.asarray(x, dtype=np.float64) for x in (pp, interleave, m))
    one_f_one_b = dualpipe.in_flight_micro_batches(p, mm) if schedule == "dualpipe" else np.minimum(p, mm)
    interleaved = np.minimum(p * v + p - 1, mm * v)
    return np.asarray(np.where(v > 1, interleaved, one_f_one_b), dtype=np.float64)


def memory_per_gpu(
    w: TrainWorkload,
    c: ConfigArrays,
    global_batch: int,
    imbalance: F64 | float = 1.0,
    efficiency: TrainEfficiency = DEFAULT_EFFICIENCY,
) -> MemoryArrays:
    """Memory per GPU for every configuration in ``c``.

    Args:
        w: the model-side scalars.
        c: configurations.
        global_batch: sequences per optimizer step.
        imbalance: MoE routing imbalance (hottest EP rank's load / mean) sizing the dispatch buffers.
        efficiency: the framework's recompute scheme and pipeline schedule (DualPipe's parameter copies).
    """
    dense, experts = params_per_gpu(w, c)
    copies = dualpipe.param_copies(c, efficiency.pipeline_schedule)
    dense, experts = dense * copies, experts * copies
    dp_group = (c.dp * c.cp).astype(np.float64) * copies
    exp_group = dp_group / c.ep

    def sharded(stage: int) -> F64:
        return np.where(c.zero >= stage, dense / dp_group + experts / exp_group, dense + experts)

    # TE's FP8 weight + transpose, held for the step (ZeRO-3 gathers a layer at a time: two layers' worth)
    fp8_w = fp8_weight_elems(w, c) * copies
    fp8_w = np.where(c.zero == 3, 2 * fp8_w / (stage_layers(w.n_layers, c.pp, c.interleave) * copies), fp8_w)
    weights = sharded(3) * w.bytes_weights + FP8_WEIGHT_COPY_BYTES * fp8_w
    gradients = sharded(2) * w.bytes_grads
    optimizer = sharded(1) * (w.bytes_master + 2 * w.bytes_opt_state)
    activations = activation_memory(w, c, global_batch, efficiency)

    tokens = c.micro_batch * (w.seq_len / c.cp)
    sp_gather = np.where(c.tp > 1, 2 * tokens * w.hidden * w.bytes_act, 0.0)
    moe: F64 | float = 0.0
    if w.is_moe:
        moe = tokens * w.experts_per_token * w.hidden * (w.bytes_dispatch + w.bytes_combine) * imbalance
    per_layer_params = (dense + experts) / (stage_layers(w.n_layers, c.pp, c.interleave) * copies)
    zero3_prefetch = np.where(c.zero == 3, 2 * per_layer_params * w.bytes_weights, 0.0)
    comm = sp_gather + moe + zero3_prefetch + eff.RESERVED_BYTES
    total = weights + gradients + optimizer + activations + comm
    return MemoryArrays(weights, gradients, optimizer, activations, comm, total)
