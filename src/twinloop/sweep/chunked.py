"""A chunked map over Ray: the local function is the kernel, Ray only runs its chunks in parallel.

Used where a space is large (the planner's ``--search``, the reliability Monte-Carlo over checkpoint intervals).
The caller splits the work into independent chunks whose results, put back together in order, are exactly what
the local call returns: the kernel is the same NumPy code on a slice, so results match bit for bit. Shared
inputs go into the object store once (``ray.put``) instead of once per task.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from twinloop.sweep.runner import ray_session

T = TypeVar("T")


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """``chunks`` contiguous, near-equal (start, stop) slices covering ``range(n)`` (empty ones left out)."""
    edges = np.linspace(0, n, max(1, chunks) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]


def ray_map(
    kernel: Callable[..., T],
    n: int,
    shared: Any,
    *,
    chunks: int | None = None,
    address: str | None = None,
    workers: int | None = None,
) -> list[T]:
    """``[kernel(shared, start, stop) for start, stop in chunk_bounds(n, chunks)]``, each call a Ray task; results
    in order.

    Args:
        kernel: a module-level function ``(shared, start, stop) -> result``.
        n: items to cover.
        shared: the inputs every chunk needs (put in the object store once).
        chunks: number of slices (default: 4 per CPU of the Ray cluster, so a slow task does not hold the end).
        address: an existing Ray cluster; ``None`` uses the initialized Ray or starts a local one.
        workers: local Ray's CPUs when one is started.
    """
    import ray

    with ray_session(address, workers) as resources:
        slices = chunk_bounds(n, chunks or 4 * max(1, int(resources.get("CPU", 1))))
        ref = ray.put(shared)
        task = ray.remote(num_cpus=1)(kernel)
        return list(ray.get([task.remote(ref, a, b) for a, b in slices]))
