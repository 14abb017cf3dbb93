"""Kernel release and which build configuration the config-based checks rely on."""

from __future__ import annotations

from twinloop.probe.context import ProbeContext, config_evidence, read_release
from twinloop.probe.finding import Finding, unknown


def check_kernel(ctx: ProbeContext) -> list[Finding]:
    """``kernel.version`` (from ``osrelease``/``/proc/version``) and ``kernel.config`` (where it was read)."""
    release, reads = read_release(ctx.root)
    version = ctx.root.read("proc/version")
    if release:
        details = {"release": release}
        if version.ok:
            details["version"] = version.text
        evidence = tuple(dict.fromkeys([*(r.path for r in reads if r.ok), *([version.path] if version.ok else [])]))
        kernel = Finding(check="kernel.version", status="present", value=release, details=details, evidence=evidence)
    else:
        kernel = unknown("kernel.version", *reads)
    kc = ctx.kconfig
    if kc.source is not None:
        config = Finding(
            check="kernel.config",
            status="present",
            value=kc.source,
            details={"symbols": len(kc.values)},
            evidence=(kc.source,),
        )
    else:
        config = Finding(
            check="kernel.config",
            status="unknown",
            value="no readable kernel config; config-based checks are unknown",
            evidence=config_evidence(kc),
        )
    return [kernel, config]
