"""The ``node_profile`` section of ``twinloop probe --json``: measured numbers the planner can use.

``plan serve --node-profile probe.json`` calls :func:`load_node_profile`; it accepts the whole probe
document or just its ``node_profile`` object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from twinloop.errors import InputError, pydantic_error
from twinloop.probe.bench_io import IoBenchResult
from twinloop.probe.pci import VENDORS
from twinloop.probe.registry import ProbeReport

GPU_VENDORS = frozenset(VENDORS.values())


class PcieGpu(BaseModel):
    """A GPU/accelerator PCI function and its negotiated link.

    Attributes:
        address: PCI address (``0000:18:00.0``).
        vendor: ``NVIDIA``, ``AMD``, ``Intel``, ``Habana`` or ``other``.
        device_id: PCI device id.
        class_code: PCI class code (``0x030200`` 3D controller, ``0x120000`` accelerator).
        driver: bound kernel driver, if any.
        numa_node: NUMA node of the slot (-1 when the platform does not say).
        link_speed_gt_per_s: negotiated transfer rate, GT/s.
        link_width: negotiated lanes.
        link_bandwidth_bytes_per_s: per-direction bandwidth after line encoding, bytes/s.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str
    vendor: str | None = None
    device_id: int | None = Field(default=None, ge=0)
    class_code: int = Field(ge=0)
    driver: str | None = None
    numa_node: int | None = None
    link_speed_gt_per_s: float | None = Field(default=None, gt=0)
    link_width: int | None = Field(default=None, gt=0)
    link_bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)


class NodeProfile(BaseModel):
    """Measured and probed facts about one node for the planner.

    Attributes:
        kernel_release: the running kernel.
        storage_read_bytes_per_s: sequential storage → DRAM read rate the planner should use, bytes/s:
            the O_DIRECT figure when measured (it bypasses the page cache), else the buffered one.
        o_direct_read_bytes_per_s: measured O_DIRECT sequential read, bytes/s.
        buffered_read_bytes_per_s: measured buffered sequential read, bytes/s (may include cache hits).
        io_uring_read_bytes_per_s: measured io_uring sequential read, bytes/s.
        numa_nodes: NUMA node count.
        pcie_gpus: GPUs and accelerators of GPU vendors (NVIDIA, AMD, Intel, Habana) on PCIe with
            their links; a BMC's display controller is left out.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel_release: str | None = None
    storage_read_bytes_per_s: float | None = Field(default=None, gt=0)
    o_direct_read_bytes_per_s: float | None = Field(default=None, gt=0)
    buffered_read_bytes_per_s: float | None = Field(default=None, gt=0)
    io_uring_read_bytes_per_s: float | None = Field(default=None, gt=0)
    numa_nodes: int | None = Field(default=None, ge=1)
    pcie_gpus: tuple[PcieGpu, ...] = ()


def build_node_profile(report: ProbeReport, bench: IoBenchResult | None = None) -> NodeProfile:
    """Collect the planner-relevant numbers from a probe report and an optional I/O benchmark."""
    numa = report.get("numa.nodes")
    gpus = [
        PcieGpu(
            address=d["address"],
            vendor=d["vendor"],
            device_id=d["device_id"],
            class_code=d["class_code"],
            driver=d["driver"],
            numa_node=d["numa_node"],
            link_speed_gt_per_s=d["current_link_speed_gt_per_s"],
            link_width=d["current_link_width"],
            link_bandwidth_bytes_per_s=d["current_link_bandwidth_bytes_per_s"],
        )
        for d in (f.details for f in report.all("pci.device"))
        # a BMC's VGA (ASPEED, Matrox) is no workload GPU; its Gen2 x1 link must not set the host-link speed
        if d["vendor"] in GPU_VENDORS
    ]
    direct = bench.rate("o_direct") if bench else None
    buffered = bench.rate("buffered") if bench else None
    return NodeProfile(
        kernel_release=report.kernel_release or None,
        storage_read_bytes_per_s=direct if direct is not None else buffered,
        o_direct_read_bytes_per_s=direct,
        buffered_read_bytes_per_s=buffered,
        io_uring_read_bytes_per_s=bench.rate("io_uring") if bench else None,
        numa_nodes=numa.details.get("count") if numa.status == "present" else None,
        pcie_gpus=tuple(gpus),
    )


def load_node_profile(path: str | Path) -> NodeProfile:
    """Load a node profile from ``twinloop probe --json`` output (or a bare ``node_profile`` object).

    Raises:
        InputError: the file is missing, not JSON, has no ``node_profile`` object, or a field is invalid
            (the message names the file and the field).
    """
    p = Path(path)
    try:
        data: Any = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(str(p), "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(p), "", f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"line {exc.lineno}", f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(str(p), "", "expected a JSON object (the output of `twinloop probe --json`)")
    if "findings" in data and "node_profile" not in data:
        raise InputError(str(p), "node_profile", "missing (expected the output of `twinloop probe --json`)")
    section = data.get("node_profile", data)
    if not isinstance(section, dict):
        raise InputError(str(p), "node_profile", "expected an object")
    try:
        return NodeProfile.model_validate(section)
    except ValidationError as exc:
        err = pydantic_error(str(p), exc)
        field = f"node_profile.{err.field}" if "node_profile" in data else err.field
        raise InputError(str(p), field, err.message) from None
