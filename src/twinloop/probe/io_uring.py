"""io_uring: built into the kernel and not switched off by ``kernel.io_uring_disabled``."""

from __future__ import annotations

from twinloop.probe.context import ProbeContext, config_evidence
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.parsers import parse_int


def check_io_uring(ctx: ProbeContext) -> list[Finding]:
    """``io_uring`` status.

    The sysctl (Linux ≥ 6.6) is registered by io_uring itself, so its presence proves the kernel has
    io_uring: 0 → enabled, 1 → only for ``kernel.io_uring_group`` (present, restricted), 2 → disabled
    (absent). Without the sysctl, ``CONFIG_IO_URING`` decides; without a config, unknown.
    """
    sysctl = ctx.root.read("proc/sys/kernel/io_uring_disabled")
    if sysctl.ok:
        level = parse_int(sysctl.text)
        details: dict[str, object] = {"io_uring_disabled": level}
        if level == 0:
            return [
                Finding(check="io_uring", status="present", value="enabled", details=details, evidence=(sysctl.path,))
            ]
        if level == 1:
            group = ctx.root.read("proc/sys/kernel/io_uring_group")
            gid = parse_int(group.text) if group.ok else None
            details["io_uring_group"] = gid
            who = f"group {gid}" if gid is not None and gid >= 0 else "CAP_SYS_ADMIN only"
            return [
                Finding(
                    check="io_uring",
                    status="present",
                    value=f"restricted to {who} (kernel.io_uring_disabled=1)",
                    details=details,
                    evidence=(sysctl.path, group.path),
                )
            ]
        if level == 2:
            return [
                Finding(
                    check="io_uring",
                    status="absent",
                    value="disabled (kernel.io_uring_disabled=2)",
                    details=details,
                    evidence=(sysctl.path,),
                )
            ]
        return [unknown("io_uring", sysctl, value=f"{sysctl.path}: unexpected value {sysctl.text[:40]!r}")]
    if sysctl.state == "unreadable":
        return [unknown("io_uring", sysctl)]
    built = ctx.kconfig.enabled("CONFIG_IO_URING")
    evidence = (f"{sysctl.path} (missing)", *config_evidence(ctx.kconfig))
    if built is None:
        return [
            Finding(
                check="io_uring",
                status="unknown",
                value="no io_uring_disabled sysctl and no readable kernel config",
                evidence=evidence,
            )
        ]
    if built:
        return [
            Finding(
                check="io_uring",
                status="present",
                value="enabled (CONFIG_IO_URING=y; kernel predates kernel.io_uring_disabled)",
                details={"io_uring_disabled": None},
                evidence=evidence,
            )
        ]
    return [Finding(check="io_uring", status="absent", value="CONFIG_IO_URING not set", evidence=evidence)]
