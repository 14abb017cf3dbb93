"""Loaded GPU/accelerator kernel drivers (``/sys/module``) and DRM/accel device nodes."""

from __future__ import annotations

from typing import Any

from twinloop.probe.context import ProbeContext
from twinloop.probe.finding import Finding, unknown
from twinloop.probe.root import Read

GPU_DRIVERS = ("nvidia", "amdgpu", "i915", "xe", "habanalabs")


def check_drivers(ctx: ProbeContext) -> list[Finding]:
    """One ``driver.<name>`` per GPU driver: present when ``/sys/module/<name>`` exists (a loaded module,
    or a built-in one with parameters), with its version when the module publishes one.
    """
    modules = ctx.root.listdir("sys/module")
    if not modules.ok:
        return [unknown(f"driver.{name}", modules) for name in GPU_DRIVERS]
    out: list[Finding] = []
    for name in GPU_DRIVERS:
        path = f"{modules.path}/{name}"
        if name not in modules.names:
            out.append(Finding(check=f"driver.{name}", status="absent", value="not loaded", evidence=(modules.path,)))
            continue
        version = ctx.root.read(f"sys/module/{name}/version")
        state = ctx.root.read(f"sys/module/{name}/initstate")
        details: dict[str, Any] = {
            "version": version.text if version.ok else None,
            "initstate": state.text if state.ok else None,
        }
        value = f"loaded, version {version.text}" if version.ok else "loaded"
        out.append(Finding(check=f"driver.{name}", status="present", value=value, details=details, evidence=(path,)))
    return out


def _cards(ctx: ProbeContext, cls: str, prefix: str) -> tuple[list[dict[str, Any]], Read]:
    listing = ctx.root.listdir(f"sys/class/{cls}", pattern=rf"{prefix}\d+")
    cards = []
    for name in listing.names:
        uevent = ctx.root.read(f"sys/class/{cls}/{name}/device/uevent")
        fields = dict(line.partition("=")[::2] for line in uevent.text.splitlines()) if uevent.ok else {}
        cards.append(
            {
                "name": name,
                "driver": ctx.root.link_name(f"sys/class/{cls}/{name}/device/driver") or fields.get("DRIVER"),
                "pci_address": fields.get("PCI_SLOT_NAME"),
            }
        )
    return cards, listing


def check_drm(ctx: ProbeContext) -> list[Finding]:
    """``drm.devices``: DRM cards (``/sys/class/drm/cardN``) and compute accelerators (``/sys/class/accel``).

    A missing class directory means the subsystem never registered (no DRM driver loaded): absent, as
    long as ``/sys/class`` itself is readable.
    """
    classes = ctx.root.listdir("sys/class")
    if not classes.ok:
        return [unknown("drm.devices", classes)]
    drm, drm_read = _cards(ctx, "drm", "card")
    accel, accel_read = _cards(ctx, "accel", "accel")
    bad = [r for r in (drm_read, accel_read) if r.state == "unreadable"]
    if bad:
        return [unknown("drm.devices", *bad)]
    devices = drm + accel
    evidence = tuple(r.path for r in (drm_read, accel_read) if r.ok) or (classes.path,)
    if not devices:
        return [Finding(check="drm.devices", status="absent", value="no DRM cards or accel devices", evidence=evidence)]
    drivers = sorted({str(d["driver"]) for d in devices})
    return [
        Finding(
            check="drm.devices",
            status="present",
            value=f"{len(drm)} card(s), {len(accel)} accel device(s); drivers {', '.join(drivers)}",
            details={"cards": drm, "accel": accel},
            evidence=evidence,
        )
    ]
