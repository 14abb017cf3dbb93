"""Kernel build options for GPU memory sharing: HMM (mirror, device-private memory) and PCI P2P DMA."""

from __future__ import annotations

from twinloop.probe.context import ProbeContext, config_evidence
from twinloop.probe.finding import Finding

_OPTIONS = (
    ("hmm.mirror", "CONFIG_HMM_MIRROR", "GPU drivers can mirror CPU page tables (HMM)"),
    ("hmm.device_private", "CONFIG_DEVICE_PRIVATE", "device memory can back process pages"),
    ("pci.p2pdma", "CONFIG_PCI_P2PDMA", "PCI peer-to-peer DMA (GPUDirect-style NVMe/NIC ↔ GPU)"),
)


def config_finding(ctx: ProbeContext, check: str, symbol: str, meaning: str) -> Finding:
    """Status of one kernel option: ``y``/``m`` → present, not set → absent, no config → unknown."""
    value = ctx.kconfig.option(symbol)
    evidence = config_evidence(ctx.kconfig)
    if value is None:
        return Finding(check=check, status="unknown", value=f"{symbol}: no readable kernel config", evidence=evidence)
    status = "present" if value in ("y", "m") else "absent"
    shown = f"{symbol} not set" if value == "n" else f"{symbol}={value}"
    return Finding(
        check=check,
        status=status,
        value=shown,
        details={"symbol": symbol, "config_value": value, "meaning": meaning},
        evidence=evidence,
    )


def check_kconfig(ctx: ProbeContext) -> list[Finding]:
    """HMM mirror, device-private memory and P2P DMA from the kernel configuration.

    P2P DMA also lists PCI devices that publish peer memory (``p2pmem/``) when the config has it.
    """
    out = [config_finding(ctx, check, symbol, meaning) for check, symbol, meaning in _OPTIONS]
    p2p = out[-1]
    if p2p.status == "present":
        listing = ctx.root.listdir("sys/bus/pci/devices")
        providers = [bdf for bdf in listing.names if ctx.root.exists(f"sys/bus/pci/devices/{bdf}/p2pmem")]
        details = {**p2p.details, "p2pmem_providers": providers}
        out[-1] = p2p.model_copy(update={"details": details})
    return out
