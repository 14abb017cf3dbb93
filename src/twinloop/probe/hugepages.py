"""Huge pages: reserved persistent pools per size and transparent huge pages (THP) mode."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_bracketed_choice, parse_int, parse_meminfo
from twinloop.probe.root import Read

_POOLS = "sys/kernel/mm/hugepages"


def _pools(ctx: ProbeContext) -> tuple[list[dict[str, Any]], list[Read]]:
    listing = ctx.root.listdir(_POOLS, pattern=r"hugepages-\d+kB")
    pools: list[dict[str, Any]] = []
    bad: list[Read] = []
    for name in listing.names:
        nr = ctx.root.read(f"{_POOLS}/{name}/nr_hugepages")
        free = ctx.root.read(f"{_POOLS}/{name}/free_hugepages")
        count = parse_int(nr.text) if nr.ok else None
        if count is None:
            bad.append(nr)
            continue
        pools.append(
            {
                "page_bytes": int(name[len("hugepages-") : -2]) * 1024,
                "nr_hugepages": count,
                "free_hugepages": parse_int(free.text) if free.ok else None,
            }
        )
    return pools, bad


def check_hugepages(ctx: ProbeContext) -> list[Finding]:
    """``hugepages.reserved`` (pool pages > 0 → present, supported but none → absent) and
    ``hugepages.thp`` (``always``/``madvise`` → present, ``never`` → absent).
    """
    listing = ctx.root.listdir(_POOLS)
    meminfo = ctx.root.read("proc/meminfo")
    info = parse_meminfo(meminfo.text) if meminfo.ok else {}
    out: list[Finding] = []
    if listing.ok:
        pools, bad = _pools(ctx)
        total = sum(p["nr_hugepages"] * p["page_bytes"] for p in pools)
        details = {"pools": pools, "hugetlb_bytes": info.get("Hugetlb"), "unreadable": [r.path for r in bad]}
        reserved = [p for p in pools if p["nr_hugepages"] > 0]
        if reserved:
            value = ", ".join(f"{p['nr_hugepages']}× {p['page_bytes'] // 1024} kB" for p in reserved)
            out.append(
                Finding(
                    check="hugepages.reserved",
                    status="present",
                    value=f"{value} ({total / 2**30:.1f} GiB)",
                    details=details,
                    evidence=(listing.path,),
                )
            )
        elif bad:
            out.append(unknown("hugepages.reserved", *bad))
        else:
            sizes = ", ".join(f"{p['page_bytes'] // 1024} kB" for p in pools) or "none"
            out.append(
                Finding(
                    check="hugepages.reserved",
                    status="absent",
                    value=f"none reserved (sizes supported: {sizes})",
                    details=details,
                    evidence=(listing.path,),
                )
            )
    elif meminfo.ok and "HugePages_Total" in info:
        n = info["HugePages_Total"]
        size = info.get("Hugepagesize", 0)
        out.append(
            Finding(
                check="hugepages.reserved",
                status="present" if n > 0 else "absent",
                value=f"{n}× {size // 1024} kB" if n > 0 else "none reserved",
                details={"pools": [{"page_bytes": size, "nr_hugepages": n}]},
                evidence=(meminfo.path,),
            )
        )
    else:
        out.append(unknown("hugepages.reserved", listing, meminfo))
    thp = ctx.root.read("sys/kernel/mm/transparent_hugepage/enabled")
    mode = parse_bracketed_choice(thp.text) if thp.ok else None
    if mode is None:
        out.append(unknown("hugepages.thp", thp))
    else:
        out.append(
            Finding(
                check="hugepages.thp",
                status="absent" if mode == "never" else "present",
                value=mode,
                details={"mode": mode, "anon_huge_bytes": info.get("AnonHugePages")},
                evidence=(thp.path,),
            )
        )
    return out
