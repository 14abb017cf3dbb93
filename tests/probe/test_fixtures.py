"""Each recorded-style tree gives the statuses its machine has."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinloop.probe import STATUSES, run_probe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"

EXPECTED = {
    "dgx-h100": {
        "kernel.version": "present",
        "kernel.config": "present",
        "io_uring": "present",
        "cxl.devices": "absent",
        "cxl.regions": "absent",
        "hmm.mirror": "present",
        "hmm.device_private": "present",
        "pci.p2pdma": "present",
        "numa.nodes": "present",
        "pci.gpus": "present",
        "driver.nvidia": "present",
        "driver.amdgpu": "absent",
        "driver.i915": "absent",
        "driver.xe": "absent",
        "driver.habanalabs": "absent",
        "drm.devices": "present",
        "iommu": "present",
        "hugepages.reserved": "present",
        "hugepages.thp": "present",
        "nvme": "present",
    },
    "mi300x": {
        "kernel.version": "present",
        "kernel.config": "present",
        "io_uring": "present",
        "cxl.devices": "present",
        "cxl.regions": "present",
        "hmm.mirror": "present",
        "hmm.device_private": "present",
        "pci.p2pdma": "present",
        "numa.nodes": "present",
        "pci.gpus": "present",
        "driver.nvidia": "absent",
        "driver.amdgpu": "present",
        "driver.i915": "absent",
        "drm.devices": "present",
        "iommu": "present",
        "hugepages.reserved": "absent",
        "hugepages.thp": "present",
        "nvme": "present",
    },
    "laptop": {
        "kernel.version": "present",
        "io_uring": "absent",
        "cxl.devices": "absent",
        "cxl.regions": "absent",
        "hmm.mirror": "present",
        "hmm.device_private": "absent",
        "pci.p2pdma": "absent",
        "numa.nodes": "present",
        "pci.gpus": "present",
        "driver.nvidia": "absent",
        "driver.amdgpu": "absent",
        "driver.i915": "present",
        "drm.devices": "present",
        "iommu": "absent",
        "hugepages.reserved": "absent",
        "hugepages.thp": "present",
        "nvme": "present",
    },
}


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_fixture_statuses(machine: str) -> None:
    report = run_probe(FIXTURES / machine)
    got = {check: report.get(check).status for check in EXPECTED[machine]}
    assert got == EXPECTED[machine]
    assert all(f.status in STATUSES for f in report.findings)
    # every finding names at least one evidence path on the node
    assert all(f.evidence and all(e.startswith("/") for e in f.evidence) for f in report.findings)


def test_dgx_h100_details() -> None:
    report = run_probe(FIXTURES / "dgx-h100")
    assert report.kernel_release == "5.15.0-1042-nvidia"
    gpus = [f.details for f in report.all("pci.device") if f.details["vendor"] == "NVIDIA"]
    assert len(gpus) == 8
    assert {g["class_code"] for g in gpus} == {0x030200}
    assert {(g["current_link_generation"], g["current_link_width"]) for g in gpus} == {(5, 16)}
    assert {g["driver"] for g in gpus} == {"nvidia"}
    # Gen5 x16 after 128b/130b encoding: 32e9 * 16 / 8 * 128/130 ≈ 63.0 GB/s per direction
    assert gpus[0]["current_link_bandwidth_bytes_per_s"] == pytest.approx(63.015e9, rel=1e-3)
    summary = report.get("pci.gpus").details
    assert summary["count"] == 9 and summary["compute_count"] == 8  # + the BMC's VGA
    numa = report.get("numa.nodes").details
    assert numa["count"] == 2 and [n["cpus"] for n in numa["nodes"]] == [112, 112]
    assert report.get("iommu").details["mode"] == "passthrough"
    assert report.get("iommu").details["cmdline"] == {"iommu": "pt", "intel_iommu": "on"}
    assert report.get("driver.nvidia").details["version"] == "535.129.03"
    pools = {p["page_bytes"]: p["nr_hugepages"] for p in report.get("hugepages.reserved").details["pools"]}
    assert pools == {2**21: 0, 2**30: 64}
    ctrls = report.get("nvme").details["controllers"]
    assert [c["current_link_width"] for c in ctrls] == [4, 4]
    assert ctrls[0]["namespaces"][0]["size_bytes"] == 3840755982336


def test_mi300x_details() -> None:
    report = run_probe(FIXTURES / "mi300x")
    assert report.get("kernel.config").value == "/proc/config.gz"
    gpus = [f.details for f in report.all("pci.device")]
    assert len(gpus) == 8
    assert {(g["vendor_id"], g["device_id"], g["class_code"]) for g in gpus} == {(0x1002, 0x74A1, 0x120000)}
    assert report.get("cxl.devices").details["memdevs"][0]["ram_bytes"] == 256 * 2**30
    region = report.get("cxl.regions").details["regions"][0]
    assert region == {"name": "region0", "size_bytes": 256 * 2**30, "mode": "ram"}
    assert report.get("numa.nodes").details["memory_only_nodes"] == [2]
    assert report.get("iommu").details["mode"] == "translated (lazy)"
    assert len(report.get("drm.devices").details["cards"]) == 8


def test_laptop_details() -> None:
    report = run_probe(FIXTURES / "laptop")
    summary = report.get("pci.gpus").details
    assert summary["count"] == 1 and summary["compute_count"] == 0
    igpu = report.get("pci.device").details
    assert igpu["vendor"] == "Intel" and igpu["driver"] == "i915"
    assert igpu["current_link_speed_gt_per_s"] is None  # integrated: no link files, not a guess
    assert report.get("io_uring").details["io_uring_disabled"] == 2
    assert report.get("cxl.devices").value == "CONFIG_CXL_BUS not set"
