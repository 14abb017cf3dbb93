"""Parsers never crash on garbage and parse what the kernel writes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.probe.parsers import (
    parse_bracketed_choice,
    parse_cmdline,
    parse_cpulist,
    parse_int,
    parse_kconfig,
    parse_link_speed,
    parse_link_width,
    parse_meminfo,
    pcie_bandwidth_bytes_per_s,
    pcie_generation,
)


def test_cpulist_valid() -> None:
    assert parse_cpulist("0-3,8-11") == (0, 1, 2, 3, 8, 9, 10, 11)
    assert parse_cpulist("5") == (5,)
    assert parse_cpulist("") == ()
    assert parse_cpulist("3-1") is None
    assert parse_cpulist("0-3,x") is None


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 20)), min_size=1, max_size=8))
def test_cpulist_roundtrip(ranges: list[tuple[int, int]]) -> None:
    text = ",".join(f"{lo}-{lo + n}" if n else str(lo) for lo, n in ranges)
    expected = sorted({c for lo, n in ranges for c in range(lo, lo + n + 1)})
    assert parse_cpulist(text) == tuple(expected)


@given(st.text())
def test_parsers_never_crash(text: str) -> None:
    cpus = parse_cpulist(text)
    assert cpus is None or all(c >= 0 for c in cpus)
    assert all(v >= 0 for v in parse_meminfo(text).values())
    speed = parse_link_speed(text)
    assert speed is None or speed > 0
    width = parse_link_width(text)
    assert width is None or 1 <= width <= 64
    assert isinstance(parse_cmdline(text), dict)
    assert isinstance(parse_kconfig(text), dict)
    parse_int(text)
    parse_bracketed_choice(text)


def test_meminfo_valid() -> None:
    text = "MemTotal:       16384 kB\nHugePages_Total:      4\nNode 1 MemFree:   2 kB\nbogus line\n"
    assert parse_meminfo(text) == {"MemTotal": 16384 * 1024, "HugePages_Total": 4, "MemFree": 2048}


@given(st.sampled_from([2.5, 5.0, 8.0, 16.0, 32.0, 64.0]), st.sampled_from(["", " PCIe"]))
def test_link_speed_valid(gt: float, suffix: str) -> None:
    assert parse_link_speed(f"{gt:.1f} GT/s{suffix}") == gt
    assert pcie_generation(gt) is not None


def test_link_speed_and_bandwidth() -> None:
    assert parse_link_speed("32.0 GT/s PCIe") == 32.0
    assert parse_link_speed("8 GT/s") == 8.0
    assert parse_link_speed("Unknown") is None
    assert parse_link_width("16") == 16 and parse_link_width("x8") == 8 and parse_link_width("0") is None
    assert pcie_generation(16.0) == 4 and pcie_generation(3.0) is None
    assert pcie_bandwidth_bytes_per_s(2.5, 1) == pytest.approx(2.5e9 * 0.8 / 8)  # 8b/10b
    assert pcie_bandwidth_bytes_per_s(16.0, 16) == pytest.approx(16e9 * 16 / 8 * 128 / 130)


_KEYS = st.from_regex(r"[a-z_.]{1,12}", fullmatch=True)
_VALUES = st.from_regex(r"[a-z0-9,]{0,8}", fullmatch=True)


@given(st.dictionaries(_KEYS, _VALUES))
def test_cmdline_roundtrip(args: dict[str, str]) -> None:
    text = " ".join(f"{k}={v}" for k, v in args.items())
    assert parse_cmdline(text) == args


def test_cmdline_valid() -> None:
    text = 'BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on iommu=pt opt="a b" -- init-arg=1'
    got = parse_cmdline(text)
    assert got["intel_iommu"] == "on" and got["iommu"] == "pt" and got["ro"] == "" and got["opt"] == "a b"
    assert "init-arg" not in got


def test_kconfig_and_choice() -> None:
    cfg = parse_kconfig('CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C="x y"\nCONFIG_D=m\n')
    assert cfg == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": "x y", "CONFIG_D": "m"}
    assert parse_bracketed_choice("always [madvise] never") == "madvise"
    assert parse_int("0x4000000000") == 256 * 2**30 and parse_int("-1") == -1 and parse_int("zz") is None
