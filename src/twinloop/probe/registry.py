"""The registry of check families and :func:`run_probe`, which runs them all over one root."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from twinloop.probe.context import ProbeContext, build_context
from twinloop.probe.cxl import check_cxl
from twinloop.probe.drivers import check_drivers, check_drm
from twinloop.probe.finding import Finding
from twinloop.probe.hugepages import check_hugepages
from twinloop.probe.io_uring import check_io_uring
from twinloop.probe.iommu import check_iommu
from twinloop.probe.kconfig import check_kconfig
from twinloop.probe.kernel import check_kernel
from twinloop.probe.numa import check_numa
from twinloop.probe.nvme import check_nvme
from twinloop.probe.pci import check_pci
from twinloop.probe.root import SysRoot

Check = Callable[[ProbeContext], list[Finding]]

#: Check families in report order; each returns its findings and never raises on unreadable files.
CHECKS: dict[str, Check] = {
    "kernel": check_kernel,
    "io_uring": check_io_uring,
    "cxl": check_cxl,
    "kconfig": check_kconfig,
    "numa": check_numa,
    "pci": check_pci,
    "drivers": check_drivers,
    "drm": check_drm,
    "iommu": check_iommu,
    "hugepages": check_hugepages,
    "nvme": check_nvme,
}


class ProbeReport(BaseModel):
    """Everything one probe found.

    Attributes:
        root: the directory ``proc/``, ``sys/`` and ``boot/`` were read under (``/`` on a live node).
        kernel_release: the release the kernel config lookup used (empty when unreadable).
        findings: every finding, in :data:`CHECKS` order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str
    kernel_release: str
    findings: tuple[Finding, ...]

    def get(self, check: str) -> Finding:
        """The first finding named ``check`` (``KeyError`` when there is none)."""
        for f in self.findings:
            if f.check == check:
                return f
        raise KeyError(check)

    def all(self, check: str) -> list[Finding]:
        """Every finding named ``check`` (``pci.device`` has one per device)."""
        return [f for f in self.findings if f.check == check]


def run_probe(root: str | Path = "/") -> ProbeReport:
    """Probe the node whose ``proc/``, ``sys/`` and ``boot/`` live under ``root``.

    Args:
        root: ``/`` for this node, or a recorded tree. Its existence is the caller's to check; a root
            with nothing readable gives ``unknown`` findings.

    Returns:
        The report; reading never needs root privileges and never raises on unreadable files.
    """
    ctx = build_context(SysRoot(Path(root)))
    findings: list[Finding] = []
    for check in CHECKS.values():
        findings.extend(check(ctx))
    return ProbeReport(root=str(root), kernel_release=ctx.release, findings=tuple(findings))
