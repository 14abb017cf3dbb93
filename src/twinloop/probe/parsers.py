"""Parsers for the text formats of procfs/sysfs; each returns ``None`` (or empty) on garbage, never raises."""

from __future__ import annotations

import re

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_MEMINFO = re.compile(r"^(?:Node\s+\d+\s+)?([A-Za-z0-9_()]+):\s+(\d+)(?:\s+(kB))?\s*$")
_GT_S = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
_MAX_CPUS = 1 << 16  # no Linux build supports more; bounds a hostile "0-99999999"


def parse_cpulist(text: str) -> tuple[int, ...] | None:
    """Parse a kernel CPU list such as ``0-3,8-11`` (also ``""`` → no CPUs).

    Returns:
        Sorted CPU ids, or ``None`` when the text is not a CPU list.
    """
    text = text.strip()
    if not text:
        return ()
    cpus: set[int] = set()
    for part in text.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi >= _MAX_CPUS:
            return None
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def parse_meminfo(text: str) -> dict[str, int]:
    """Parse ``/proc/meminfo`` (or a node's ``meminfo``) into bytes for ``kB`` fields, counts otherwise.

    Lines that do not parse are skipped.
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _MEMINFO.match(line.strip())
        if m is None:
            continue
        value = int(m.group(2))
        out[m.group(1)] = value * 1024 if m.group(3) else value
    return out


def parse_link_speed(text: str) -> float | None:
    """Parse a PCIe ``current_link_speed`` such as ``32.0 GT/s PCIe`` or ``8 GT/s`` to GT/s.

    Returns:
        Transfer rate in GT/s, or ``None`` for ``Unknown`` and garbage.
    """
    m = _GT_S.match(text)
    if m is None:
        return None
    value = float(m.group(1))
    return value if 0 < value < 1e4 else None


def parse_link_width(text: str) -> int | None:
    """Parse a PCIe link width (``16``, ``x16``); ``None`` for garbage or 0 (link down)."""
    t = text.strip().lower().removeprefix("x")
    if not t.isdigit() or not t.isascii():
        return None
    width = int(t)
    return width if 0 < width <= 64 else None


def pcie_generation(gt_per_s: float) -> int | None:
    """PCIe generation for a transfer rate (2.5 → 1, …, 64 → 6); ``None`` if not a standard rate."""
    for gen, rate in ((1, 2.5), (2, 5.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 64.0), (7, 128.0)):
        if abs(gt_per_s - rate) < 1e-6:
            return gen
    return None


def pcie_bandwidth_bytes_per_s(gt_per_s: float, width: int) -> float:
    """Raw per-direction PCIe link bandwidth after line encoding (no TLP/DLLP overhead).

    8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s, FLIT mode (242/256) from 64 GT/s.
    """
    if gt_per_s <= 5.0:
        efficiency = 8 / 10
    elif gt_per_s < 64.0:
        efficiency = 128 / 130
    else:
        efficiency = 242 / 256
    return gt_per_s * 1e9 * efficiency * width / 8


def parse_cmdline(text: str) -> dict[str, str]:
    """Parse a kernel command line into ``{key: value}`` (flags get ``""``; the last one wins).

    Stops at ``--`` (what follows goes to init). Double-quoted values keep their spaces.
    """
    out: dict[str, str] = {}
    for token in re.findall(r'(?:[^\s"]+|"[^"]*")+', text):
        if token == "--":
            break
        key, sep, value = token.partition("=")
        if not key:
            continue
        out[key.replace('"', "")] = value.replace('"', "") if sep else ""
    return out


def parse_kconfig(text: str) -> dict[str, str]:
    """Parse a kernel ``.config``: ``CONFIG_X=y|m|"str"|123`` and ``# CONFIG_X is not set`` (→ ``n``)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        m = re.fullmatch(r"# (CONFIG_\w+) is not set", line)
        if m:
            out[m.group(1)] = "n"
            continue
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip('"')
    return out


def parse_int(text: str) -> int | None:
    """Parse a decimal or ``0x`` hexadecimal integer; ``None`` on garbage."""
    t = text.strip()
    try:
        return int(t, 16) if t.lower().startswith("0x") else int(t)
    except ValueError:
        return None


def parse_bracketed_choice(text: str) -> str | None:
    """The selected word of a sysfs choice list such as ``always [madvise] never``."""
    m = re.search(r"\[([^\]\s]+)\]", text)
    return m.group(1) if m else None
