"""NUMA nodes, their CPUs and memory from ``/sys/devices/system/node``."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext, config_evidence
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_cpulist, parse_meminfo

_NODE_DIR = "sys/devices/system/node"


def _node(ctx: ProbeContext, name: str) -> dict[str, Any]:
    cpus = ctx.root.read(f"{_NODE_DIR}/{name}/cpulist")
    mem = ctx.root.read(f"{_NODE_DIR}/{name}/meminfo")
    cpu_ids = parse_cpulist(cpus.text) if cpus.ok else None
    mem_total = parse_meminfo(mem.text).get("MemTotal") if mem.ok else None
    return {
        "node": int(name[4:]),
        "cpulist": cpus.text if cpus.ok else None,
        "cpus": len(cpu_ids) if cpu_ids is not None else None,
        "mem_total_bytes": mem_total,
    }


def check_numa(ctx: ProbeContext) -> list[Finding]:
    """``numa.nodes``: present with per-node CPU count and memory; nodes without CPUs (CXL or HBM
    exposed as memory-only nodes) are listed as such.

    No node directory: absent when ``CONFIG_NUMA`` is not set (one memory node), else unknown.
    """
    listing = ctx.root.listdir(_NODE_DIR, pattern=r"node\d+")
    if listing.state == "missing":
        numa = ctx.kconfig.enabled("CONFIG_NUMA")
        evidence = (f"{listing.path} (missing)", *config_evidence(ctx.kconfig))
        if numa is False:
            return [Finding(check="numa.nodes", status="absent", value="CONFIG_NUMA not set", evidence=evidence)]
        return [Finding(check="numa.nodes", status="unknown", value="no NUMA node directory", evidence=evidence)]
    if not listing.ok:
        return [unknown("numa.nodes", listing)]
    if not listing.names:
        return [
            Finding(check="numa.nodes", status="unknown", value="node directory is empty", evidence=(listing.path,))
        ]
    nodes = sorted((_node(ctx, n) for n in listing.names), key=lambda d: d["node"])
    cpu_less = [d["node"] for d in nodes if d["cpus"] == 0]
    parts = []
    for d in nodes:
        mem = f"{d['mem_total_bytes'] / 2**30:.0f} GiB" if d["mem_total_bytes"] is not None else "? GiB"
        cpus = d["cpulist"] if d["cpulist"] else "no CPUs"
        parts.append(f"node{d['node']}: {cpus}, {mem}")
    return [
        Finding(
            check="numa.nodes",
            status="present",
            value=f"{len(nodes)} node(s) — " + "; ".join(parts),
            details={"count": len(nodes), "nodes": nodes, "memory_only_nodes": cpu_less},
            evidence=(listing.path, *(f"{listing.path}/{n}/meminfo" for n in listing.names)),
        )
    ]
