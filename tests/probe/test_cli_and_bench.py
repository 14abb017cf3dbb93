"""CLI, the I/O benchmark, the node-profile loader, and a run on this machine."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.probe import STATUSES, bench_io, build_node_profile, load_node_profile, run_probe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"


def test_cli_json_fixture(cli_json: Callable[..., Any]) -> None:
    doc = cli_json("probe", "--sysfs-root", str(FIXTURES / "dgx-h100"))
    checks = {f["check"]: f["status"] for f in doc["findings"]}
    assert checks["driver.nvidia"] == "present" and checks["cxl.devices"] == "absent"
    profile = doc["node_profile"]
    assert profile["numa_nodes"] == 2
    assert [g["vendor"] for g in profile["pcie_gpus"]] == ["NVIDIA"] * 8  # not the BMC's VGA
    assert min(g["link_bandwidth_bytes_per_s"] for g in profile["pcie_gpus"]) > 60e9  # Gen5 x16
    assert profile["storage_read_bytes_per_s"] is None and doc["bench_io"] is None


def test_cli_human_table(cli: Callable[..., Any]) -> None:
    result = cli("probe", "--sysfs-root", str(FIXTURES / "mi300x"))
    assert result.exit_code == 0
    assert "cxl.regions" in result.stdout and "/sys/bus/cxl/devices" in result.stdout


def test_cli_bad_root(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("probe", "--sysfs-root", str(tmp_path / "nope"), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "--sysfs-root" in result.stderr


def test_cli_bench_missing_file(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("probe", "--bench-io", str(tmp_path / "missing.bin"), "--json")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--bench-io" in result.stderr


def _data_file(tmp_path: Path, nbytes: int) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(nbytes))
    return path


def test_bench_io_small_file(tmp_path: Path) -> None:
    path = _data_file(tmp_path, 3 * 1024 * 1024 + 123)  # not a multiple of the block or the page
    result = bench_io(path, block_bytes=1024 * 1024)
    assert result.file_bytes == path.stat().st_size
    buffered = result.measurements[0]
    assert buffered.method == "buffered" and buffered.available
    assert buffered.bytes_read == result.file_bytes and buffered.bytes_per_s is not None and buffered.bytes_per_s > 0
    direct = result.measurements[1]
    # tmpfs refuses O_DIRECT; then it must say why instead of returning a number
    if direct.available:
        assert direct.bytes_read == result.file_bytes and direct.bytes_per_s is not None and direct.bytes_per_s > 0
    else:
        assert "O_DIRECT" in direct.reason
    uring = result.measurements[2]
    assert uring.available or uring.reason
    if result.mem_total_bytes is not None:
        assert result.warnings and "page" in result.warnings[0]  # a 3 MiB file is smaller than RAM


def test_bench_io_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        bench_io(tmp_path / "missing")
    with pytest.raises(InputError, match="not a regular file"):
        bench_io(tmp_path)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        bench_io(tmp_path / "empty")


def test_cli_bench_json_and_profile_roundtrip(cli: Callable[..., Any], tmp_path: Path) -> None:
    path = _data_file(tmp_path, 2 * 1024 * 1024)
    result = cli("probe", "--sysfs-root", str(FIXTURES / "laptop"), "--bench-io", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["bench_io"]["file_bytes"] == 2 * 1024 * 1024
    assert doc["node_profile"]["storage_read_bytes_per_s"] > 0
    out = tmp_path / "probe.json"
    out.write_text(result.stdout)
    profile = load_node_profile(out)
    assert profile.storage_read_bytes_per_s == doc["node_profile"]["storage_read_bytes_per_s"]
    assert profile.numa_nodes == 1 and profile.pcie_gpus[0].vendor == "Intel"


def test_load_node_profile_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"findings": [], "node_profile": {"storage_read_bytes_per_s": -5}}))
    with pytest.raises(InputError, match=r"bad.json: node_profile.storage_read_bytes_per_s"):
        load_node_profile(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        load_node_profile(bad)
    bad.write_text(json.dumps({"node_profile": {"numa_nodez": 2}}))
    with pytest.raises(InputError, match="numa_nodez"):
        load_node_profile(bad)
    bad.write_text(json.dumps({"findings": []}))
    with pytest.raises(InputError, match=r"bad.json: node_profile: missing"):
        load_node_profile(bad)
    bad.write_text(json.dumps({"storage_read_bytes_per_s": 2.5e9, "numa_nodes": 2}))  # a bare section
    assert load_node_profile(bad).storage_read_bytes_per_s == 2.5e9
    with pytest.raises(InputError, match="file not found"):
        load_node_profile(tmp_path / "missing.json")


def test_profile_prefers_o_direct(tmp_path: Path) -> None:
    result = bench_io(_data_file(tmp_path, 1024 * 1024), block_bytes=256 * 1024)
    profile = build_node_profile(run_probe(FIXTURES / "laptop"), result)
    direct, buffered = result.rate("o_direct"), result.rate("buffered")
    assert profile.storage_read_bytes_per_s == (direct if direct is not None else buffered)


def test_real_machine() -> None:
    """Only what this machine can know: the kernel release and that every status is a valid value."""
    report = run_probe("/")
    kernel = report.get("kernel.version")
    assert kernel.status == "present" and kernel.value == os.uname().release
    assert all(f.status in STATUSES for f in report.findings)
    assert all(f.evidence for f in report.findings)
    numa = report.get("numa.nodes")
    if numa.status == "present":
        assert numa.details["count"] >= 1


def test_bench_io_uring_when_binding_installed(tmp_path: Path) -> None:
    pytest.importorskip("liburing")
    path = _data_file(tmp_path, 5 * 1024 * 1024 + 7)
    uring = bench_io(path, block_bytes=1024 * 1024).measurements[2]
    assert uring.method == "io_uring"
    assert uring.available, uring.reason
    assert uring.bytes_read == path.stat().st_size and uring.bytes_per_s is not None and uring.bytes_per_s > 0
