"""What FP8 training costs beyond the FP8 GEMM itself: casts, transposes, amax and the FP8 weight copies.

The mechanism is Transformer Engine's (TE) default FP8 recipe as Megatron-Core runs it; every byte count is
derived from what the kernels read and write, nothing here is fitted.

Which GEMMs run in FP8 is the precision policy's business (:mod:`twinloop.model.precision`): under TE's
``fp8_autocast`` only the ``te.Linear`` / ``LayerNormLinear`` / ``LayerNormMLP`` GEMMs of a transformer layer
(QKV, attention output projection, FFN up/gate and down, experts) run in FP8; the attention BMMs and softmax
(``DotProductAttention``, unless FP8 attention is switched on), the LM head (Megatron's
``ColumnParallelLinear`` output layer) and the embedding stay BF16. ``fp8-mixed`` encodes exactly that.

Per FP8 GEMM ``Y = X·Wᵀ`` TE quantises three tensors per training step:

* the input ``X`` (forward), kept as FP8 *and* as a transposed FP8 copy for the weight-gradient GEMM (Hopper
  FP8 tensor cores take only the TN layout): a cast-transpose kernel reads BF16 (2 bytes) and writes FP8 and
  FP8ᵀ (1 + 1): :data:`CAST_TRANSPOSE_BYTES` = 4 bytes of extra HBM traffic per element;
* the output gradient ``dY`` (backward, E5M2), the same cast-transpose, 4 bytes per element. ``dY`` has the
  GEMM's *output* width (QKV: ``q + kv``; FFN up/gate: ``2·f`` when gated), so the backward casts are larger
  than the forward ones;
* the weight ``W``: cast and transposed once per optimizer step, not per micro-batch (TE caches the FP8
  weights from the first micro-batch, ``is_first_microbatch``): 4 bytes per FP8 weight element per step, and
  the FP8 copy plus its transpose stay resident: :data:`FP8_WEIGHT_COPY_BYTES` = 2 bytes per element. Under
  ZeRO-3 / FSDP the gathered weights are freed after use, so they are cast again at every gather (forward and
  backward of each micro-batch); FP8 all-gather (casting the local shard before gathering) is not modelled.

**Fusion** (``fused``, the profile's ``fp8_fused_casts``): TE's ``LayerNormLinear`` / ``LayerNormMLP`` emit
the LayerNorm output (QKV and FFN-up inputs) directly in FP8 + FP8ᵀ, and its activation kernels emit the
SwiGLU/GELU output (FFN-down input) and the dSwiGLU/dGELU output (FFN-up ``dY``) the same way. A fused kernel
writes 1 + 1 bytes instead of the 2 the BF16 kernel wrote: 0 extra bytes. Not fusible: the attention output
(from the flash-attention kernel, BF16) and the residual-stream gradients (``dY`` of the output projection
and of the FFN down projection) and the QKV ``dY`` (from the flash-attention backward): 4 bytes each.

**Sequence parallelism** (Hopper): TE cannot all-gather a transposed FP8 tensor, so the tensors SP gathers
(the QKV and FFN-up inputs forward, the output-projection and FFN-down ``dY`` backward: the ``repl`` class
below) are cast row-wise on the local shard (no local transpose: 1 B less), gathered in FP8, and the
transposed copy is made from the gathered tensor: :data:`GATHER_TRANSPOSE_BYTES` = 2 bytes (read 1, write 1)
per *gathered* element (published: Transformer Engine docs, ``docs/features/low_precision_training/
fp8_current_scaling/fp8_current_scaling.rst`` as stored for github.com/pggPL/TransformerEngine, a fork of
NVIDIA/TransformerEngine; section Distributed training: "All
gather of transposed FP8 tensors is not supported ... the non-transposed tensor is gathered and then it is
transposed"; applied to every scaling recipe, GUESS for delayed scaling). Added after the published cells'
errors were seen (see the calibration doc); nothing was tuned.

**Scaling**: delayed scaling (TE's default ``DelayedScaling``; amax history) takes the scale from previous
steps, so the amax is a by-product of the cast kernel, and the per-step amax reduction is one small
all-reduce per ``fp8_autocast`` (microseconds: not modelled). *Current* scaling (NeMo 25.x's ``FP8-CS``)
needs the whole tensor's amax before casting: one more BF16 read (:data:`CURRENT_AMAX_BYTES` = 2) on every
quantised tensor (published: TE docs, "the tensor needs to be read twice - first to compute amax, then to apply
the scaling factor and quantize"), and the fused kernels cannot emit FP8 in the same pass (GUESS: charged as an unfused
cast + amax, 6 bytes). The per-tensor amax all-reduce that current scaling needs under sequence parallelism
is latency-bound (tens of µs per layer) and not modelled. Block/tile scaling (DeepSeek-V3, 1×128 tiles)
computes each tile's amax inside the cast kernel: like delayed scaling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

Fp8Amax = Literal["delayed", "current", "tile"]

#: Derived. Cast-transpose kernel: read BF16 (2 bytes), write FP8 (1) and the transposed FP8 copy (1).
CAST_TRANSPOSE_BYTES = 4.0

#: Published (TE docs, "FP8 Current Scaling"). Current scaling reads the BF16 tensor once more for its amax.
CURRENT_AMAX_BYTES = 2.0

#: Published (TE docs, see the module docstring). Under sequence parallelism the transposed FP8 copy of a gathered
#: tensor is made after the all-gather: read FP8 (1) + write FP8ᵀ (1) per gathered element.
GATHER_TRANSPOSE_BYTES = 2.0

#: Derived. TE keeps the FP8 weight and its transpose for the whole step (1 + 1 bytes per element), beside
#: the BF16 weights.
FP8_WEIGHT_COPY_BYTES = 2.0


@dataclass(frozen=True)
class Fp8CastElems:
    """Quantised tensor elements per token of an average layer, one training step (forward + backward).

    ``repl``: replicated across TP ranks without sequence parallelism (layer inputs, residual-stream
    gradients; SP shards them); ``shard``: sharded by TP (attention output, QKV ``dY``, FFN hidden). ``fused``
    ones are emitted by a TE LayerNorm/activation kernel, ``unfused`` ones need their own cast-transpose.
    ``layer_param_share`` / ``expert_param_share``: share of the non-expert layer / expert parameters that
    are FP8 GEMM weights (FLOP-weighted; 0 without FP8).
    """

    fused_repl: float = 0.0
    fused_shard: float = 0.0
    unfused_repl: float = 0.0
    unfused_shard: float = 0.0
    layer_param_share: float = 0.0
    expert_param_share: float = 0.0

    @property
    def any(self) -> bool:
        """Whether the policy runs any GEMM in FP8."""
        return self.fused_repl + self.fused_shard + self.unfused_repl + self.unfused_shard > 0


def cast_bytes_per_element(amax: str, fused_casts: bool) -> tuple[float, float]:
    """Extra HBM bytes per (fused, unfused) quantised element for a scaling recipe and fusion setting."""
    unfused = CAST_TRANSPOSE_BYTES + (CURRENT_AMAX_BYTES if amax == "current" else 0.0)
    if not fused_casts or amax == "current":
        return unfused, unfused
    return 0.0, unfused


def sp_gathered_bytes_per_element(amax: str, fused_casts: bool, tp: F64) -> tuple[F64, F64]:
    """Extra HBM bytes per *local* (fused, unfused) element of a tensor that sequence parallelism gathers over
    ``tp`` ranks (array): the local row-wise cast (no transposed write) plus the transpose of the ``tp``-times
    larger gathered tensor.
    """
    fused, unfused = cast_bytes_per_element(amax, fused_casts)
    local_f = max(fused - 1.0, 0.0)  # a fused kernel writing FP8 instead of BF16 costs nothing either way
    gathered = GATHER_TRANSPOSE_BYTES * np.asarray(tp, dtype=np.float64)
    return local_f + gathered, unfused - 1.0 + gathered


def weight_cast_bytes_per_element(amax: str) -> float:
    """Extra HBM bytes per FP8 weight element per step (cast + transpose, + amax pass under current scaling)."""
    return CAST_TRANSPOSE_BYTES + (CURRENT_AMAX_BYTES if amax == "current" else 0.0)
