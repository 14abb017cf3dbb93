"""Read-only access to a procfs/sysfs tree under a root (``/`` or a recorded fixture).

Every read returns a :class:`Read` that says whether the file was there, missing or unreadable; no
read raises. Evidence paths are written as the path on the node (``/sys/bus/cxl``), independent of
where the tree is mounted, so a report from a recorded tree reads like one from the machine.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ReadState = Literal["ok", "missing", "unreadable"]

# sysfs/procfs files the probe reads are small; a cap keeps a garbage fixture from eating memory.
_MAX_READ_BYTES = 4 * 1024 * 1024
_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Read:
    """Outcome of reading one file or listing one directory.

    Attributes:
        path: the node path (``/proc/...``), used as evidence.
        state: ``ok``, ``missing`` (no such path) or ``unreadable`` (exists but could not be read:
            permission, a directory where a file belongs, a broken symlink, bad encoding).
        text: the stripped file text when ``state == "ok"`` (listings use :attr:`names`).
        names: sorted entry names of a directory listing when ``state == "ok"``.
        error: why it could not be read, for ``unreadable``.
    """

    path: str
    state: ReadState
    text: str = ""
    names: tuple[str, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the file or directory was read."""
        return self.state == "ok"


@dataclass(frozen=True)
class SysRoot:
    """A filesystem root under which ``proc/``, ``sys/`` and ``boot/`` are looked up.

    Args:
        base: the root directory (``/`` for this node, or a recorded tree).
    """

    base: Path

    def node_path(self, rel: str) -> str:
        """The path as it is on the node (``/sys/...``), for evidence."""
        return "/" + rel.strip("/")

    def host_path(self, rel: str) -> Path:
        """The path on this filesystem."""
        return self.base / rel.strip("/")

    def exists(self, rel: str) -> bool:
        """True when ``rel`` exists (a broken symlink counts as not existing)."""
        return self.host_path(rel).exists()

    def read(self, rel: str) -> Read:
        """Read a text file (``.gz`` files are decompressed)."""
        node = self.node_path(rel)
        path = self.host_path(rel)
        if not path.exists():
            return _absent(node, path)
        try:
            if path.suffix == ".gz":
                with gzip.open(path, "rb") as gz:
                    raw = _read_capped(gz.read)
            else:
                with path.open("rb") as fh:
                    raw = _read_capped(fh.read)
            return Read(node, "ok", text=raw.decode("utf-8").strip())
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
            return Read(node, "unreadable", error=_reason(exc))

    def listdir(self, rel: str, pattern: str | None = None) -> Read:
        """List a directory; ``pattern`` is a regular expression the names must match fully."""
        node = self.node_path(rel)
        path = self.host_path(rel)
        if not path.exists():
            return _absent(node, path)
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            return Read(node, "unreadable", error=_reason(exc))
        if pattern is not None:
            rx = re.compile(pattern)
            names = [n for n in names if rx.fullmatch(n)]
        return Read(node, "ok", names=tuple(names))

    def link_name(self, rel: str) -> str | None:
        """Base name of a symlink's target (``driver -> ../drivers/nvidia`` gives ``nvidia``)."""
        try:
            return os.path.basename(os.readlink(self.host_path(rel)))
        except OSError:
            return None


def _absent(node: str, path: Path) -> Read:
    """What a path that does not exist reads as: missing, or unreadable when it is a broken symlink."""
    if path.is_symlink():
        return Read(node, "unreadable", error="broken symlink")
    return Read(node, "missing")


def _read_capped(read: Callable[[int], bytes]) -> bytes:
    # procfs sysctl handlers allocate a kernel buffer of the requested size, so one huge read()
    # fails with ENOMEM; read in small chunks instead.
    chunks: list[bytes] = []
    total = 0
    while total < _MAX_READ_BYTES:
        chunk = read(_CHUNK_BYTES)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a file"
    if isinstance(exc, NotADirectoryError):
        return "is a file, expected a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(exc) or type(exc).__name__
