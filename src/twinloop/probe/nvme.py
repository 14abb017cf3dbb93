"""NVMe controllers: model, namespaces and the PCIe link of each controller."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_int
from twinloop.probe.pci import describe_link, link_of

_CLASS = "sys/class/nvme"


def _controller(ctx: ProbeContext, name: str) -> dict[str, Any]:
    rel = f"{_CLASS}/{name}"
    model = ctx.root.read(f"{rel}/model")
    transport = ctx.root.read(f"{rel}/transport")
    address = ctx.root.read(f"{rel}/address")
    namespaces = ctx.root.listdir(rel, pattern=rf"{name}(?:c\d+)?n\d+")
    ns = []
    for ns_name in namespaces.names:
        size = ctx.root.read(f"{rel}/{ns_name}/size")
        sectors = parse_int(size.text) if size.ok else None
        # sysfs block sizes are always in 512-byte sectors, whatever the LBA format
        ns.append({"name": ns_name, "size_bytes": sectors * 512 if sectors is not None else None})
    bdf = address.text if address.ok and address.text else ctx.root.link_name(f"{rel}/device")
    is_pci = transport.ok and transport.text == "pcie" and bdf is not None
    link = link_of(ctx.root, bdf) if is_pci and bdf else {}
    return {
        "name": name,
        "model": model.text if model.ok else None,
        "transport": transport.text if transport.ok else None,
        "pci_address": bdf,
        "namespaces": ns,
        **link,
    }


def check_nvme(ctx: ProbeContext) -> list[Finding]:
    """``nvme``: present with one entry per controller; absent when the NVMe class is not registered
    (no NVMe driver) or has no controllers, provided ``/sys/class`` itself is readable.
    """
    listing = ctx.root.listdir(_CLASS, pattern=r"nvme\d+")
    if listing.state == "unreadable":
        return [unknown("nvme", listing)]
    if listing.state == "missing":
        classes = ctx.root.listdir("sys/class")
        if not classes.ok:
            return [unknown("nvme", listing, classes)]
        return [
            Finding(check="nvme", status="absent", value="no NVMe class (driver not loaded)", evidence=(classes.path,))
        ]
    if not listing.names:
        return [Finding(check="nvme", status="absent", value="no NVMe controllers", evidence=(listing.path,))]
    ctrls = [_controller(ctx, n) for n in listing.names]
    parts = []
    for c in ctrls:
        link = f", {describe_link(c)}" if "current_link_width" in c else ""
        parts.append(f"{c['name']} {c['model'] or '?'}{link}")
    return [
        Finding(
            check="nvme",
            status="present",
            value=f"{len(ctrls)} controller(s): " + "; ".join(parts),
            details={"controllers": ctrls},
            evidence=(listing.path,),
        )
    ]
