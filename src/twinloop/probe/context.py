"""What every check gets: the root, the kernel release and the kernel build configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

from twinloop.probe.parsers import parse_kconfig
from twinloop.probe.root import Read, SysRoot


@dataclass(frozen=True)
class KernelConfig:
    """The running kernel's build configuration, when one could be read.

    Attributes:
        source: node path of the config that was read (``/boot/config-6.8.0``, ``/proc/config.gz``),
            or ``None`` when none was readable.
        values: ``CONFIG_X`` → ``y``/``m``/``n``/string; a symbol a readable config does not list is
            not set (Kconfig omits symbols whose dependencies are unmet).
        tried: every read attempted, for evidence when no config was found.
    """

    source: str | None
    values: dict[str, str] = field(default_factory=dict)
    tried: tuple[Read, ...] = ()

    def option(self, symbol: str) -> str | None:
        """``y``, ``m``, ``n`` (or a string value) for ``symbol``; ``None`` when no config was read."""
        if self.source is None:
            return None
        return self.values.get(symbol, "n")

    def enabled(self, symbol: str) -> bool | None:
        """True for ``y``/``m``, False when not set, ``None`` when no config was read."""
        value = self.option(symbol)
        return None if value is None else value in ("y", "m")


@dataclass(frozen=True)
class ProbeContext:
    """Inputs shared by all checks.

    Attributes:
        root: where ``proc/``, ``sys/`` and ``boot/`` are read.
        release: the kernel release read from ``/proc/sys/kernel/osrelease`` (empty if unreadable).
        kconfig: the kernel build configuration.
    """

    root: SysRoot
    release: str
    kconfig: KernelConfig


def read_release(root: SysRoot) -> tuple[str, tuple[Read, ...]]:
    """Kernel release from ``osrelease``, else from the third word of ``/proc/version``."""
    osrelease = root.read("proc/sys/kernel/osrelease")
    if osrelease.ok and osrelease.text:
        return osrelease.text.split()[0], (osrelease,)
    version = root.read("proc/version")
    words = version.text.split() if version.ok else []
    if len(words) >= 3 and words[0] == "Linux" and words[1] == "version":
        return words[2], (osrelease, version)
    return "", (osrelease, version)


def load_kconfig(root: SysRoot, release: str) -> KernelConfig:
    """Read ``/boot/config-<release>``, else ``/proc/config.gz``; a config that does not parse is skipped."""
    candidates = ([f"boot/config-{release}"] if release else []) + ["proc/config.gz"]
    tried: list[Read] = []
    for rel in candidates:
        read = root.read(rel)
        tried.append(read)
        if read.ok:
            values = parse_kconfig(read.text)
            if values:
                return KernelConfig(source=read.path, values=values, tried=tuple(tried))
    return KernelConfig(source=None, tried=tuple(tried))


def build_context(root: SysRoot) -> ProbeContext:
    """Read the release and the kernel configuration once for all checks."""
    release, _ = read_release(root)
    return ProbeContext(root=root, release=release, kconfig=load_kconfig(root, release))


def config_evidence(kconfig: KernelConfig) -> tuple[str, ...]:
    """Evidence for a config-based status: the config read, or every path tried."""
    if kconfig.source is not None:
        return (kconfig.source,)
    return tuple(f"{r.path} ({r.error or r.state})" for r in kconfig.tried)
