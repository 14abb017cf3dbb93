"""Warm-up: time to load the weights SSD → DRAM → HBM, with and without GPUDirect Storage (GDS).

Every GPU loads its own shard (weights / (tp·pp)) and all GPUs load at once, so the shards share the
node's storage and DRAM but each GPU has its own PCIe host link. A loader streams the shard in chunks, so
the time is the shard over the slowest stage (the bottleneck) plus one storage latency:

* storage read: the node's NVMe read rate (``drives × link`` from the catalog, or the measured
  ``node_profile.storage_read_bytes_per_s`` of ``twinloop probe --json``), shared by the node's loading GPUs;
* without GDS the bytes bounce through host DRAM: the page cache → pinned buffer copy by one CPU thread per
  GPU (:data:`BOUNCE_COPY_BYTES_PER_S`), capped by the node's DRAM bandwidth shared by its GPUs;
* the PCIe host link into HBM (measured link bandwidth when the profile has it).

GDS DMAs storage straight into HBM, skipping the bounce; it helps only when the bounce is the bottleneck.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinloop.errors import InputError
from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.link import get_link
from twinloop.plan.kv_offload import host_link_name

#: NVMe data drives per node: DGX H100 has 8 x 3.84 TB NVMe U.2 data drives (NVIDIA DGX H100 datasheet);
#: DGX A100 has 4 (15 TB). A default for the catalog path only; a node profile replaces it.
DEFAULT_NVME_DRIVES_PER_NODE = 8
DEFAULT_STORAGE_LINK = "nvme-gen4"
#: GUESS: one CPU thread copying page cache → pinned host buffer reaches ~8-12 GB/s (single-thread memcpy
#: on current x86 servers); loaders (safetensors → torch) use about one such thread per GPU.
BOUNCE_COPY_BYTES_PER_S = 10.0e9
#: Host DRAM: two sockets of ``ddr5-host`` per node (typical dual-socket GPU server); a bounced byte crosses
#: DRAM twice (written by the copy, read by the DMA).
SOCKETS_PER_NODE = 2


@dataclass(frozen=True)
class WarmupPlan:
    """Weight-loading time per replica set (all GPUs load in parallel).

    Attributes:
        shard_bytes_per_gpu: weight bytes each GPU loads.
        storage_read_bytes_per_s_per_gpu / bounce_bytes_per_s_per_gpu / host_link_bytes_per_s: each stage's
            rate for one GPU (bytes/s).
        warmup_s_without_gds / warmup_s_with_gds: time to load every shard (s).
        bottleneck_without_gds / bottleneck_with_gds: the slowest stage's name.
        storage_source: ``catalog <link> x <drives>`` or ``node profile <file>``.
    """

    shard_bytes_per_gpu: float
    storage_read_bytes_per_s_per_gpu: float
    bounce_bytes_per_s_per_gpu: float
    host_link_bytes_per_s: float
    warmup_s_without_gds: float
    warmup_s_with_gds: float
    bottleneck_without_gds: str
    bottleneck_with_gds: str
    storage_source: str


def plan_warmup(
    weight_bytes_total: float,
    gpus_per_replica: int,
    gpus: int,
    gpu: GpuSpec,
    *,
    storage_read_bytes_per_s_per_node: float | None = None,
    host_link_bytes_per_s: float | None = None,
    storage_source: str | None = None,
    storage_link: str = DEFAULT_STORAGE_LINK,
    drives_per_node: int = DEFAULT_NVME_DRIVES_PER_NODE,
) -> WarmupPlan:
    """Weight-loading time SSD → DRAM → HBM with and without GDS.

    Args:
        weight_bytes_total: bytes of one replica's weights.
        gpus_per_replica: GPUs one replica is sharded over (tp·pp).
        gpus: GPUs loading at once (all replicas).
        gpu: the GPU kind (host link, GPUs per node).
        storage_read_bytes_per_s_per_node: measured node storage read rate (bytes/s); None = catalog.
        host_link_bytes_per_s: measured per-GPU PCIe rate (bytes/s); None = catalog host link.
        storage_source: label for a measured storage rate (e.g. the profile file).
        storage_link: catalog storage link used when nothing is measured.
        drives_per_node: NVMe drives per node used when nothing is measured.
    """
    if weight_bytes_total <= 0 or gpus_per_replica < 1 or gpus < gpus_per_replica:
        raise InputError("warm-up", "", "need weight bytes > 0 and gpus >= gpus per replica >= 1")
    per_node = min(gpus, gpu.gpus_per_node)
    if storage_read_bytes_per_s_per_node is None:
        link = get_link(storage_link, source="storage link")
        storage_node = link.bandwidth_per_direction_bytes_per_s * drives_per_node
        source = f"catalog {link.name} x {drives_per_node} drives per node"
        latency_s = link.latency_s
    else:
        storage_node = storage_read_bytes_per_s_per_node
        source = storage_source or "measured"
        latency_s = 0.0
    host = host_link_bytes_per_s or get_link(host_link_name(gpu)).bandwidth_per_direction_bytes_per_s
    dram_node = get_link("ddr5-host").bandwidth_per_direction_bytes_per_s * SOCKETS_PER_NODE
    storage = storage_node / per_node
    bounce = min(BOUNCE_COPY_BYTES_PER_S, dram_node / per_node / 2)
    shard = weight_bytes_total / gpus_per_replica
    stages_bounce = {"storage read": storage, "DRAM bounce copy": bounce, "PCIe host link": host}
    stages_gds = {"storage read": storage, "PCIe host link": host}
    slow_bounce = min(stages_bounce, key=lambda k: stages_bounce[k])
    slow_gds = min(stages_gds, key=lambda k: stages_gds[k])
    return WarmupPlan(
        shard_bytes_per_gpu=shard,
        storage_read_bytes_per_s_per_gpu=storage,
        bounce_bytes_per_s_per_gpu=bounce,
        host_link_bytes_per_s=host,
        warmup_s_without_gds=latency_s + shard / stages_bounce[slow_bounce],
        warmup_s_with_gds=latency_s + shard / stages_gds[slow_gds],
        bottleneck_without_gds=slow_bounce,
        bottleneck_with_gds=slow_gds,
        storage_source=source,
    )
