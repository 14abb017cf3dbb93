"""CXL memory devices and memory regions from ``/sys/bus/cxl``."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext, config_evidence
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_int

_BUS = "sys/bus/cxl/devices"


def _region_details(ctx: ProbeContext, name: str) -> dict[str, Any]:
    size = ctx.root.read(f"{_BUS}/{name}/size")
    mode = ctx.root.read(f"{_BUS}/{name}/mode")
    return {
        "name": name,
        "size_bytes": parse_int(size.text) if size.ok else None,
        "mode": mode.text if mode.ok else None,
    }


def _memdev_details(ctx: ProbeContext, name: str) -> dict[str, Any]:
    ram = ctx.root.read(f"{_BUS}/{name}/ram/size")
    pmem = ctx.root.read(f"{_BUS}/{name}/pmem/size")
    numa = ctx.root.read(f"{_BUS}/{name}/numa_node")
    return {
        "name": name,
        "ram_bytes": parse_int(ram.text) if ram.ok else None,
        "pmem_bytes": parse_int(pmem.text) if pmem.ok else None,
        "numa_node": parse_int(numa.text) if numa.ok else None,
    }


def check_cxl(ctx: ProbeContext) -> list[Finding]:
    """``cxl.devices`` (memory devices ``memN``) and ``cxl.regions`` (``regionN``).

    The bus directory with no such entries → absent. No bus directory: absent only when the kernel
    config says ``CONFIG_CXL_BUS`` is not set; otherwise (config unknown, or CXL built but the bus not
    registered) unknown, because the hardware may be there without its driver.
    """
    listing = ctx.root.listdir(_BUS)
    if listing.state == "unreadable":
        return [unknown("cxl.devices", listing), unknown("cxl.regions", listing)]
    if listing.state == "missing":
        built = ctx.kconfig.enabled("CONFIG_CXL_BUS")
        evidence = (f"{listing.path} (missing)", *config_evidence(ctx.kconfig))
        if built is False:
            return [
                Finding(check=c, status="absent", value="CONFIG_CXL_BUS not set", evidence=evidence)
                for c in ("cxl.devices", "cxl.regions")
            ]
        why = "CXL bus not registered (cxl_core not loaded?)" if built else "no CXL bus and no readable kernel config"
        return [
            Finding(check=c, status="unknown", value=why, evidence=evidence) for c in ("cxl.devices", "cxl.regions")
        ]
    memdevs = [n for n in listing.names if n.startswith("mem") and n[3:].isdigit()]
    regions = [n for n in listing.names if n.startswith("region") and n[6:].isdigit()]
    dev_details = [_memdev_details(ctx, n) for n in memdevs]
    reg_details = [_region_details(ctx, n) for n in regions]
    total_ram = sum(d["ram_bytes"] or 0 for d in dev_details)
    devices = Finding(
        check="cxl.devices",
        status="present" if memdevs else "absent",
        value=f"{len(memdevs)} memory device(s), {total_ram / 2**30:.0f} GiB volatile" if memdevs else "none on bus",
        details={"memdevs": dev_details, "bus_entries": len(listing.names)},
        evidence=(listing.path,),
    )
    total_region = sum(d["size_bytes"] or 0 for d in reg_details)
    region = Finding(
        check="cxl.regions",
        status="present" if regions else "absent",
        value=f"{len(regions)} region(s), {total_region / 2**30:.0f} GiB" if regions else "none configured",
        details={"regions": reg_details},
        evidence=(listing.path,),
    )
    return [devices, region]
