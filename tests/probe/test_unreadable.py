"""Unreadable or missing evidence gives ``unknown`` naming the path — never an exception or a guess."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from twinloop.probe import run_probe


def _make_dir_where_file(path: Path) -> None:
    path.unlink()
    path.mkdir()


def test_osrelease_as_directory_falls_back_to_proc_version(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    _make_dir_where_file(root / "proc/sys/kernel/osrelease")
    report = run_probe(root)
    assert report.get("kernel.version").value == "6.8.0-45-generic"
    assert report.get("kernel.version").evidence == ("/proc/version",)


def test_kernel_version_unknown_when_nothing_readable(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    _make_dir_where_file(root / "proc/sys/kernel/osrelease")
    (root / "proc/version").unlink()
    os.symlink(root / "does-not-exist", root / "proc/version")  # broken symlink
    report = run_probe(root)
    f = report.get("kernel.version")
    assert f.status == "unknown"
    assert any("/proc/version" in e and "broken symlink" in e for e in f.evidence)
    # no release → no /boot/config-<release>: config checks are unknown, not absent
    assert report.get("kernel.config").status == "unknown"
    assert report.get("pci.p2pdma").status == "unknown"
    assert report.get("hmm.mirror").status == "unknown"


def test_io_uring_sysctl_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")
    _make_dir_where_file(root / "proc/sys/kernel/io_uring_disabled")
    f = run_probe(root).get("io_uring")
    assert f.status == "unknown"
    assert "/proc/sys/kernel/io_uring_disabled" in f.evidence[0]
    assert "directory" in f.evidence[0]


def test_io_uring_restricted_group(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")
    (root / "proc/sys/kernel/io_uring_disabled").write_text("1\n")
    (root / "proc/sys/kernel/io_uring_group").write_text("1001\n")
    f = run_probe(root).get("io_uring")
    assert f.status == "present" and "group 1001" in f.value


def test_io_uring_no_sysctl_no_config_is_unknown(tree: Callable[[str], Path]) -> None:
    root = tree("dgx-h100")
    shutil.rmtree(root / "boot")
    assert run_probe(root).get("io_uring").status == "unknown"


def test_cxl_missing_bus_depends_on_config(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")
    shutil.rmtree(root / "sys/bus/cxl")
    # config has CONFIG_CXL_BUS=m but no bus registered: hardware may exist without its driver
    assert run_probe(root).get("cxl.devices").status == "unknown"
    (root / "proc/config.gz").unlink()
    assert run_probe(root).get("cxl.devices").status == "unknown"


def test_cxl_bus_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    (root / "sys/bus").mkdir(parents=True, exist_ok=True)
    (root / "sys/bus/cxl").mkdir()
    (root / "sys/bus/cxl/devices").write_text("not a directory\n")
    f = run_probe(root).get("cxl.regions")
    assert f.status == "unknown" and "/sys/bus/cxl/devices" in f.evidence[0]


def test_pci_class_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    _make_dir_where_file(root / "sys/bus/pci/devices/0000:00:02.0/class")
    report = run_probe(root)
    f = report.get("pci.gpus")
    assert f.status == "unknown"
    assert f.evidence == ("/sys/bus/pci/devices/0000:00:02.0/class (unreadable)",)


def test_sys_module_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("dgx-h100")
    shutil.rmtree(root / "sys/module")
    os.symlink(root / "nowhere", root / "sys/module")
    report = run_probe(root)
    assert {f.status for f in report.findings if f.check.startswith("driver.")} == {"unknown"}


def test_numa_without_node_dir(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    shutil.rmtree(root / "sys/devices/system/node")
    assert run_probe(root).get("numa.nodes").status == "unknown"  # CONFIG_NUMA=y: should exist


def test_thp_garbage_is_unknown(tree: Callable[[str], Path]) -> None:
    root = tree("laptop")
    (root / "sys/kernel/mm/transparent_hugepage/enabled").write_bytes(b"\xff\xfe garbage")
    assert run_probe(root).get("hugepages.thp").status == "unknown"


def test_empty_root_is_all_unknown_or_absent_with_reason(tmp_path: Path) -> None:
    report = run_probe(tmp_path)
    assert report.get("kernel.version").status == "unknown"
    # nothing readable: nothing can be present
    assert all(f.status != "present" for f in report.findings)
    assert report.get("io_uring").status == "unknown"
    assert report.get("pci.gpus").status == "unknown"
    assert report.get("nvme").status == "unknown"


def test_drm_class_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")
    shutil.rmtree(root / "sys/class/drm")
    (root / "sys/class/drm").write_text("")
    f = run_probe(root).get("drm.devices")
    assert f.status == "unknown" and f.evidence[0].startswith("/sys/class/drm (")


def test_hugepage_pool_unreadable(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")  # no pages reserved, so an unreadable pool leaves the answer open
    _make_dir_where_file(root / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
    f = run_probe(root).get("hugepages.reserved")
    assert f.status == "unknown"
    assert f.evidence == ("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages (is a directory, expected a file)",)


def test_io_uring_garbage_value(tree: Callable[[str], Path]) -> None:
    root = tree("mi300x")
    (root / "proc/sys/kernel/io_uring_disabled").write_text("seven\n")
    f = run_probe(root).get("io_uring")
    assert f.status == "unknown" and f.evidence == ("/proc/sys/kernel/io_uring_disabled",)
