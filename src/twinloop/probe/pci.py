"""PCIe display, 3D and processing-accelerator devices with their link speed and width."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import (
    parse_int,
    parse_link_speed,
    parse_link_width,
    pcie_bandwidth_bytes_per_s,
    pcie_generation,
)
from twinloop.probe.root import SysRoot

PCI_DEVICES = "sys/bus/pci/devices"

#: PCI base class + subclass (class >> 8) that carry GPUs and accelerators.
ACCELERATOR_CLASSES = {0x0300: "VGA/display", 0x0302: "3D controller", 0x0380: "display (other)", 0x1200: "accelerator"}
VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x1DA3: "Habana"}


def _uevent(root: SysRoot, rel: str) -> dict[str, str]:
    read = root.read(f"{rel}/uevent")
    out: dict[str, str] = {}
    if read.ok:
        for line in read.text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
    return out


def link_of(root: SysRoot, bdf: str) -> dict[str, Any]:
    """Current and maximum PCIe link of device ``bdf`` with its per-direction bandwidth (bytes/s)."""
    rel = f"{PCI_DEVICES}/{bdf}"
    out: dict[str, Any] = {}
    for kind in ("current", "max"):
        speed = root.read(f"{rel}/{kind}_link_speed")
        width = root.read(f"{rel}/{kind}_link_width")
        gt = parse_link_speed(speed.text) if speed.ok else None
        lanes = parse_link_width(width.text) if width.ok else None
        out[f"{kind}_link_speed_gt_per_s"] = gt
        out[f"{kind}_link_width"] = lanes
        out[f"{kind}_link_generation"] = pcie_generation(gt) if gt is not None else None
        out[f"{kind}_link_bandwidth_bytes_per_s"] = (
            pcie_bandwidth_bytes_per_s(gt, lanes) if gt is not None and lanes is not None else None
        )
    return out


def describe_link(link: dict[str, Any]) -> str:
    """``Gen5 x16 (max Gen5 x16)`` style text for a :func:`link_of` dict."""

    def one(kind: str) -> str:
        gen, gt, width = (link[f"{kind}_link_{k}"] for k in ("generation", "speed_gt_per_s", "width"))
        rate = f"Gen{gen}" if gen else (f"{gt:g} GT/s" if gt else "?")
        return f"{rate} x{width if width else '?'}"

    if link["current_link_speed_gt_per_s"] is None and link["current_link_width"] is None:
        return "no PCIe link reported (integrated device?)"
    return f"{one('current')} (max {one('max')})"


def pci_device(root: SysRoot, bdf: str) -> dict[str, Any] | None:
    """Identity and link of one PCI device; ``None`` when its class is unreadable."""
    rel = f"{PCI_DEVICES}/{bdf}"
    cls = root.read(f"{rel}/class")
    code = parse_int(cls.text) if cls.ok else None
    if code is None:
        return None
    vendor = root.read(f"{rel}/vendor")
    device = root.read(f"{rel}/device")
    numa = root.read(f"{rel}/numa_node")
    vendor_id = parse_int(vendor.text) if vendor.ok else None
    driver = root.link_name(f"{rel}/driver") or _uevent(root, rel).get("DRIVER")
    return {
        "address": bdf,
        "class_code": code,
        "class_name": ACCELERATOR_CLASSES.get(code >> 8, f"0x{code >> 8:04x}"),
        "vendor_id": vendor_id,
        "vendor": VENDORS.get(vendor_id, "other") if vendor_id is not None else None,
        "device_id": parse_int(device.text) if device.ok else None,
        "driver": driver,
        "numa_node": parse_int(numa.text) if numa.ok else None,
        **link_of(root, bdf),
    }


def check_pci(ctx: ProbeContext) -> list[Finding]:
    """``pci.gpus`` summary plus one ``pci.device`` finding per GPU/accelerator function.

    Devices whose ``class`` file cannot be read make the summary carry them as unreadable; a readable
    bus with no display/3D/accelerator device → absent.
    """
    listing = ctx.root.listdir(PCI_DEVICES)
    if not listing.ok:
        return [unknown("pci.gpus", listing)]
    found: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for bdf in listing.names:
        dev = pci_device(ctx.root, bdf)
        if dev is None:
            unreadable.append(f"{listing.path}/{bdf}/class")
        elif dev["class_code"] >> 8 in ACCELERATOR_CLASSES:
            found.append(dev)
    per_device = [
        Finding(
            check="pci.device",
            status="present",
            value=(
                f"{d['address']} {d['vendor'] or '?'} {d['class_name']} "
                f"{(d['vendor_id'] or 0):04x}:{(d['device_id'] or 0):04x}, {describe_link(d)}, "
                f"driver {d['driver'] or 'none'}, NUMA {d['numa_node']}"
            ),
            details=d,
            evidence=(f"{listing.path}/{d['address']}",),
        )
        for d in found
    ]
    if found:
        by_vendor: dict[str, int] = {}
        for d in found:
            by_vendor[str(d["vendor"])] = by_vendor.get(str(d["vendor"]), 0) + 1
        value = ", ".join(f"{n}× {v}" for v, n in sorted(by_vendor.items()))
        summary = Finding(
            check="pci.gpus",
            status="present",
            value=value,
            details={
                "count": len(found),
                # 3D controllers and processing accelerators: the compute parts, not display-only GPUs
                "compute_count": sum(1 for d in found if d["class_code"] >> 8 in (0x0302, 0x1200)),
                "unreadable": unreadable,
            },
            evidence=(listing.path,),
        )
    elif unreadable:
        summary = Finding(
            check="pci.gpus",
            status="unknown",
            value=f"{len(unreadable)} device(s) with unreadable class",
            evidence=tuple(f"{u} (unreadable)" for u in unreadable),
        )
    else:
        summary = Finding(
            check="pci.gpus",
            status="absent",
            value=f"no display/3D/accelerator among {len(listing.names)} PCI functions",
            evidence=(listing.path,),
        )
    return [summary, *per_device]
