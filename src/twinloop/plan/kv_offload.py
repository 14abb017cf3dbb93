"""Paged KV cache (blocks of ``block_size`` tokens) and KV offload tiers (host DRAM, CXL memory, NVMe).

Paged attention (vLLM, Kwon et al. SOSP'23) stores each sequence's KV in fixed-size blocks, so a sequence
of ``n`` tokens holds ``ceil(n / block) · block`` token slots: the waste is at most one partial block per
sequence. Sequences are sized at their final length (prompt + output), as a scheduler must reserve for
them to avoid preemption; that makes "max concurrent sequences" conservative and non-increasing in
either length.

Offload tiers extend the cache beyond HBM: their capacity adds sequences, and every decode step must
stream the offloaded share of the KV it reads over the tier's path into HBM, which adds time (no
prefetch overlap is assumed — conservative). Paths, one per GPU (assumption: every GPU has its own host
link and its own share of the tier, as in an 8-GPU HGX node with 8 NVMe drives):

* ``dram``: host DRAM over the GPU's PCIe host link;
* ``cxl``: CXL memory expander (cxl-gen5-x16) reached through the host link, the slower of the two;
* ``nvme``: NVMe Gen5 drive (nvme-gen5) through the host link, the slower of the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.link import get_link

Num = TypeVar("Num", float, NDArray[np.float64])
OffloadTier = Literal["none", "dram", "cxl", "nvme"]
OFFLOAD_TIERS: tuple[str, ...] = ("none", "dram", "cxl", "nvme")

#: PCIe host link per GPU kind; PCIe Gen5 x16 for everything newer than A100 (A100 SXM: Gen4 x16).
HOST_LINK_BY_GPU: dict[str, str] = {"a100-sxm-80gb": "pcie-gen4-x16"}
DEFAULT_HOST_LINK = "pcie-gen5-x16"
#: Device link of each tier before the host link (``dram`` is the host link itself).
TIER_DEVICE_LINK: dict[str, str] = {"cxl": "cxl-gen5-x16", "nvme": "nvme-gen5"}


def host_link_name(gpu: GpuSpec) -> str:
    """Catalog name of the GPU's PCIe host link."""
    return HOST_LINK_BY_GPU.get(gpu.name, DEFAULT_HOST_LINK)


def padded_tokens(tokens: Num, block_size: int) -> Num:
    """Token slots a sequence of ``tokens`` tokens occupies in a paged cache of ``block_size`` blocks."""
    if block_size < 1:
        raise InputError("--block-size", "", f"must be >= 1 token, got {block_size}")
    t = np.ceil(np.asarray(tokens, dtype=np.float64) / block_size) * block_size
    return t if t.ndim else float(t)  # type: ignore[return-value]


def fragmentation_fraction(tokens: Num, block_size: int) -> Num:
    """Share of a sequence's allocated slots that hold no token (the last block's empty tail), 0..1."""
    padded = np.asarray(padded_tokens(tokens, block_size), dtype=np.float64)
    frac = np.where(padded > 0, 1.0 - np.asarray(tokens, dtype=np.float64) / np.maximum(padded, 1.0), 0.0)
    return frac if frac.ndim else float(frac)  # type: ignore[return-value]


@dataclass(frozen=True)
class OffloadPath:
    """Where offloaded KV lives and how fast a GPU reads it back.

    Attributes:
        tier: ``none``, ``dram``, ``cxl`` or ``nvme``.
        capacity_bytes: tier capacity available to one model replica (bytes).
        read_bytes_per_s: per-GPU read bandwidth of the path into HBM (bytes/s).
        links: catalog links on the path, slowest decides.
    """

    tier: str
    capacity_bytes: float
    read_bytes_per_s: float
    links: tuple[str, ...]


def offload_path(tier: str, gpu: GpuSpec, capacity_bytes_per_replica: float) -> OffloadPath:
    """The offload path for ``tier`` on ``gpu`` with ``capacity_bytes_per_replica`` of tier memory.

    Raises:
        InputError: unknown tier, or a negative capacity, or a tier without capacity.
    """
    if tier not in OFFLOAD_TIERS:
        raise InputError("--kv-offload", "", f"unknown tier {tier!r} (allowed: {', '.join(OFFLOAD_TIERS)})")
    if capacity_bytes_per_replica < 0:
        raise InputError("--kv-offload-gb", "", f"must be >= 0, got {capacity_bytes_per_replica / 1e9:g}")
    if tier == "none":
        return OffloadPath("none", 0.0, 0.0, ())
    if capacity_bytes_per_replica <= 0:
        raise InputError("--kv-offload-gb", "", f"tier {tier!r} needs a capacity > 0 GB")
    host = get_link(host_link_name(gpu))
    links = [host.name]
    bw = host.bandwidth_per_direction_bytes_per_s
    if tier in TIER_DEVICE_LINK:
        dev = get_link(TIER_DEVICE_LINK[tier])
        links.insert(0, dev.name)
        bw = min(bw, dev.bandwidth_per_direction_bytes_per_s)
    return OffloadPath(tier, capacity_bytes_per_replica, bw, tuple(links))


@dataclass(frozen=True)
class KvCapacity:
    """How many sequences fit in one replica's KV cache.

    Attributes:
        bytes_per_sequence_per_gpu: KV bytes one sequence (padded to blocks) holds on each GPU.
        hbm_sequences: sequences whose whole KV fits in HBM (per replica).
        offload_sequences: extra sequences the offload tier holds (per replica).
        fragmentation_fraction: mean share of allocated KV slots left empty by block rounding.
    """

    bytes_per_sequence_per_gpu: float
    hbm_sequences: int
    offload_sequences: int
    fragmentation_fraction: float

    @property
    def max_sequences(self) -> int:
        """HBM plus offload sequences (per replica)."""
        return self.hbm_sequences + self.offload_sequences


def kv_capacity(
    free_hbm_bytes_per_gpu: float,
    kv_bytes_per_token_per_gpu: float,
    sequence_tokens: NDArray[np.float64],
    block_size: int,
    offload: OffloadPath,
    gpus_per_replica: int,
) -> KvCapacity:
    """Sequences that fit in HBM (and the offload tier) for sequences of the given final lengths.

    Args:
        free_hbm_bytes_per_gpu: HBM left for KV on each GPU after weights, activations and runtime (bytes).
        kv_bytes_per_token_per_gpu: KV bytes per token stored on each GPU (after TP/PP sharding).
        sequence_tokens: final lengths (prompt + output) of the sequences to serve; their mean padded size
            sets the per-sequence footprint.
        block_size: paged-KV block size, tokens.
        offload: the offload path (capacity is per replica, spread over its GPUs).
        gpus_per_replica: GPUs holding one model replica.
    """
    padded = np.asarray(padded_tokens(np.asarray(sequence_tokens, dtype=np.float64), block_size))
    per_seq = float(padded.mean()) * kv_bytes_per_token_per_gpu
    frag = float(1.0 - np.asarray(sequence_tokens, dtype=np.float64).sum() / max(float(padded.sum()), 1.0))
    if per_seq <= 0:
        return KvCapacity(0.0, 0, 0, frag)
    hbm = int(np.floor(max(free_hbm_bytes_per_gpu, 0.0) / per_seq))
    off = int(np.floor(offload.capacity_bytes / gpus_per_replica / per_seq)) if offload.tier != "none" else 0
    return KvCapacity(per_seq, hbm, off, frag)


def offload_read_s(batch: Num, hbm_sequences: int, kv_read_bytes_per_gpu: Num, offload: OffloadPath) -> Num:
    """Extra decode-step time to stream the offloaded share of the KV a step reads (seconds).

    Sequences beyond ``hbm_sequences`` keep their KV in the tier; a step that reads
    ``kv_read_bytes_per_gpu`` for ``batch`` sequences reads the share ``(batch - hbm) / batch`` over the path.
    """
    b = np.asarray(batch, dtype=np.float64)
    if offload.tier == "none" or offload.read_bytes_per_s <= 0:
        t = np.zeros_like(b)
    else:
        share = np.clip((b - hbm_sequences) / np.maximum(b, 1e-12), 0.0, 1.0)
        t = share * np.asarray(kv_read_bytes_per_gpu, dtype=np.float64) / offload.read_bytes_per_s
    return t if t.ndim else float(t)  # type: ignore[return-value]
