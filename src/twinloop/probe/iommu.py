"""IOMMU: hardware units, groups, and the DMA mode (passthrough vs translated) devices get."""

from __future__ import annotations

from collections import Counter

from twinloop.probe.context import ProbeContext
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_cmdline

_CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")
# Default-domain types the kernel writes to iommu_groups/N/type.
_MODE = {"identity": "passthrough", "DMA": "translated (strict)", "DMA-FQ": "translated (lazy)"}


def _cmdline_mode(args: dict[str, str]) -> str | None:
    if args.get("iommu") == "off" or "off" in args.get("intel_iommu", "").split(","):
        return "off"
    if args.get("amd_iommu") == "off":
        return "off"
    if args.get("iommu") == "pt" or args.get("iommu.passthrough") in ("1", "on", "y"):
        return "passthrough"
    if args.get("iommu.passthrough") in ("0", "off", "n"):
        return "translated"
    return None


def check_iommu(ctx: ProbeContext) -> list[Finding]:
    """``iommu``: present when IOMMU units or groups exist, with the mode from the groups' default
    domain type (``identity`` = passthrough) or else from the kernel command line; absent when the
    class directory is readable and empty and there are no groups.
    """
    units = ctx.root.listdir("sys/class/iommu")
    groups = ctx.root.listdir("sys/kernel/iommu_groups", pattern=r"\d+")
    cmdline = ctx.root.read("proc/cmdline")
    args = parse_cmdline(cmdline.text) if cmdline.ok else {}
    cmd = {k: args[k] for k in _CMDLINE_KEYS if k in args}
    cmd_mode = _cmdline_mode(args)
    if "unreadable" in (units.state, groups.state):
        return [unknown("iommu", *(r for r in (units, groups) if r.state == "unreadable"))]
    if units.state == "missing" and groups.state == "missing" and not ctx.root.listdir("sys/class").ok:
        return [unknown("iommu", units, groups, value="no IOMMU class or groups and /sys/class unreadable")]
    types = Counter(
        read.text for read in (ctx.root.read(f"sys/kernel/iommu_groups/{g}/type") for g in groups.names) if read.ok
    )
    details = {
        "units": list(units.names),
        "groups": len(groups.names),
        "group_types": dict(types),
        "cmdline": cmd,
    }
    evidence = tuple(r.path if r.ok else f"{r.path} ({r.state})" for r in (units, groups, cmdline))
    if not units.names and not groups.names:
        why = "disabled on the kernel command line" if cmd_mode == "off" else "no IOMMU units or groups"
        return [Finding(check="iommu", status="absent", value=why, details=details, evidence=evidence)]
    if types:
        main_type = types.most_common(1)[0][0]
        mode = _MODE.get(main_type, main_type)
        value = f"{mode} ({main_type} default domain in {types[main_type]}/{sum(types.values())} groups)"
    elif cmd_mode is not None:
        mode = cmd_mode
        value = f"{mode} (from kernel command line)"
    else:
        mode = "enabled, mode unknown"
        value = mode
    details["mode"] = mode
    return [Finding(check="iommu", status="present", value=value, details=details, evidence=evidence)]
