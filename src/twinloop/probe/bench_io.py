"""Measured sequential read throughput of one file: buffered, O_DIRECT, and io_uring when a binding exists.

These are the node's real storage → DRAM numbers for the serving planner's warm-up model. They are
measurements of one file on one filesystem at one moment, not device specifications.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from twinloop.errors import InputError
from twinloop.probe.parsers import parse_meminfo

DEFAULT_BLOCK_BYTES = 8 * 1024 * 1024
_DIRECT_ALIGN = 4096  # O_DIRECT wants offsets, lengths and buffers aligned to the logical block size
_IO_URING_MODULES = ("liburing",)

Method = Literal["buffered", "o_direct", "io_uring"]


class ReadMeasurement(BaseModel):
    """One method's result.

    Attributes:
        method: ``buffered``, ``o_direct`` or ``io_uring``.
        available: False when the method could not run here (see ``reason``).
        bytes_read: bytes read.
        seconds: wall time of the reads, in seconds.
        bytes_per_s: ``bytes_read / seconds``; ``None`` when unavailable.
        reason: why the method was unavailable, or a caveat about the number.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Method
    available: bool
    bytes_read: int = 0
    seconds: float = 0.0
    bytes_per_s: float | None = None
    reason: str = ""


class IoBenchResult(BaseModel):
    """Sequential-read benchmark of one file.

    Attributes:
        path: the file read.
        file_bytes: its size in bytes.
        block_bytes: the read size per call, in bytes.
        mem_total_bytes: this node's RAM (``/proc/meminfo``), for the page-cache warning.
        measurements: one per method, in the order they ran.
        warnings: caveats (page cache, dropping caches needs root).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    file_bytes: int
    block_bytes: int
    mem_total_bytes: int | None
    measurements: tuple[ReadMeasurement, ...]
    warnings: tuple[str, ...]

    def rate(self, method: Method) -> float | None:
        """Measured bytes/s of ``method``, or ``None`` when it did not run."""
        for m in self.measurements:
            if m.method == method:
                return m.bytes_per_s
        return None


def _measured(method: Method, nbytes: int, seconds: float, reason: str = "") -> ReadMeasurement:
    rate = nbytes / seconds if seconds > 0 and nbytes > 0 else None
    return ReadMeasurement(
        method=method, available=True, bytes_read=nbytes, seconds=seconds, bytes_per_s=rate, reason=reason
    )


def _drop_file_cache(fd: int) -> bool:
    """Ask the kernel to drop this file's cached pages (works without root, unlike drop_caches).

    DONTNEED only drops clean pages, so a freshly written file is flushed first.
    """
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (AttributeError, OSError):
        return False


def read_buffered(path: Path, block_bytes: int) -> ReadMeasurement:
    """Sequential buffered reads through the page cache, after evicting the file's cached pages."""
    buf = bytearray(block_bytes)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as fh:
        dropped = _drop_file_cache(fh.fileno())
        total = 0
        start = time.perf_counter()
        while n := fh.readinto(view):
            total += n
        seconds = time.perf_counter() - start
    note = "" if dropped else "could not evict the file from the page cache (posix_fadvise failed)"
    return _measured("buffered", total, seconds, note)


def read_direct(path: Path, block_bytes: int) -> ReadMeasurement:
    """Sequential reads with ``O_DIRECT`` into a page-aligned (mmap) buffer, bypassing the page cache."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return ReadMeasurement(method="o_direct", available=False, reason="O_DIRECT not supported on this OS")
    size = max(_DIRECT_ALIGN, block_bytes - block_bytes % _DIRECT_ALIGN)
    try:
        fd = os.open(path, os.O_RDONLY | flag)
    except OSError as exc:
        return ReadMeasurement(
            method="o_direct", available=False, reason=f"filesystem refused O_DIRECT open: {exc.strerror}"
        )
    buf = mmap.mmap(-1, size)
    try:
        total = 0
        start = time.perf_counter()
        while True:
            n = os.readv(fd, [buf])
            total += n
            if n < size:
                break
        seconds = time.perf_counter() - start
    except OSError as exc:
        return ReadMeasurement(method="o_direct", available=False, reason=f"O_DIRECT read failed: {exc.strerror}")
    finally:
        os.close(fd)
        buf.close()
    return _measured("o_direct", total, seconds)


def io_uring_binding() -> str | None:
    """Name of an importable io_uring Python binding, or ``None``."""
    for name in _IO_URING_MODULES:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def read_io_uring(path: Path, block_bytes: int, queue_depth: int = 4) -> ReadMeasurement:
    """Sequential reads through io_uring (``liburing`` Python binding, ``Ring`` API), ``queue_depth``
    block reads in flight, on a buffered descriptor after evicting the file's cached pages.
    """
    binding = io_uring_binding()
    if binding is None:
        return ReadMeasurement(method="io_uring", available=False, reason="io_uring binding not installed")
    try:
        return _io_uring_loop(path, block_bytes, queue_depth)
    except (AttributeError, TypeError, ImportError) as exc:
        return ReadMeasurement(
            method="io_uring", available=False, reason=f"{binding} API not supported (needs its Ring API): {exc}"
        )
    except OSError as exc:
        return ReadMeasurement(method="io_uring", available=False, reason=f"io_uring failed: {exc}")


def _io_uring_loop(path: Path, block_bytes: int, queue_depth: int) -> ReadMeasurement:
    import liburing as lu  # optional; only reached when importable

    ring, cqe = lu.Ring(), lu.Cqe()
    lu.io_uring_queue_init(queue_depth, ring)
    fd = os.open(path, os.O_RDONLY)
    bufs = [bytearray(block_bytes) for _ in range(queue_depth)]
    try:
        dropped = _drop_file_cache(fd)
        size = os.fstat(fd).st_size
        offset = total = in_flight = 0
        start = time.perf_counter()
        while total < size:
            while in_flight < queue_depth and offset < size:
                sqe = lu.io_uring_get_sqe(ring)
                lu.io_uring_prep_read(sqe, fd, bufs[(offset // block_bytes) % queue_depth], offset)
                offset += block_bytes
                in_flight += 1
            lu.io_uring_submit(ring)
            lu.io_uring_wait_cqe(ring, cqe)
            res = cqe[0].res
            lu.io_uring_cq_advance(ring, 1)
            in_flight -= 1
            if res is None or res <= 0:
                break
            total += res
        seconds = time.perf_counter() - start
        while in_flight:  # reads past EOF still hold buffers; reap them before tearing down
            lu.io_uring_wait_cqe(ring, cqe)
            lu.io_uring_cq_advance(ring, 1)
            in_flight -= 1
    finally:
        os.close(fd)
        lu.io_uring_queue_exit(ring)
    note = f"queue depth {queue_depth}, buffered descriptor"
    if not dropped:
        note += "; could not evict the file from the page cache"
    return _measured("io_uring", total, seconds, note)


def _mem_total_bytes() -> int | None:
    try:
        return parse_meminfo(Path("/proc/meminfo").read_text()).get("MemTotal")
    except OSError:
        return None


def bench_io(
    path: str | Path,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    on_method: Callable[[str], None] | None = None,
) -> IoBenchResult:
    """Measure sequential read throughput of ``path`` with each method.

    Args:
        path: a regular file on the storage to measure (ideally larger than RAM).
        block_bytes: bytes per read call (4-16 MiB reaches full sequential speed on NVMe).
        on_method: called with each method's name before it runs (progress notes).

    Raises:
        InputError: the path is missing, not a regular file, empty, or ``block_bytes`` is out of range.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("--bench-io", str(p), "file not found")
    if not p.is_file():
        raise InputError("--bench-io", str(p), "not a regular file")
    if not 4096 <= block_bytes <= 1 << 30:
        raise InputError("--bench-io", "block_bytes", f"{block_bytes} out of range (allowed 4096 .. 2**30)")
    file_bytes = p.stat().st_size
    if file_bytes == 0:
        raise InputError("--bench-io", str(p), "file is empty (allowed: a file with data to read)")
    mem = _mem_total_bytes()
    results = []
    for name, fn in (("buffered", read_buffered), ("o_direct", read_direct), ("io_uring", read_io_uring)):
        if on_method is not None:
            on_method(name)
        results.append(fn(p, block_bytes))
    warnings = []
    if mem is None or file_bytes < mem:
        ram = f"{mem / 2**30:.1f} GiB" if mem else "unknown"
        warnings.append(
            f"file ({file_bytes / 2**30:.2f} GiB) is smaller than RAM ({ram}): buffered numbers may include "
            "page-cache hits; the file's pages were evicted with posix_fadvise(DONTNEED), but a clean cold "
            "run needs `echo 3 > /proc/sys/vm/drop_caches`, which only root may do; prefer the O_DIRECT figure"
        )
    return IoBenchResult(
        path=str(p),
        file_bytes=file_bytes,
        block_bytes=block_bytes,
        mem_total_bytes=mem,
        measurements=tuple(results),
        warnings=tuple(warnings),
    )
