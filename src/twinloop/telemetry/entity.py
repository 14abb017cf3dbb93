"""Entity ids: hierarchical paths ``site/row/rack/node/gpu`` (and ``site/jobs/<job>`` for jobs).

Ids are plain strings so that they travel unchanged through Arrow, DuckDB and Prometheus labels; these
helpers build and take them apart. A prefix selects a subtree by whole path components
(``site0/row1`` matches ``site0/row1/...`` but not ``site0/row10``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

LEVELS = ("site", "row", "rack", "node", "gpu")
JOBS = "jobs"


def gpu_entity(site: str, row: str, rack: str, node: str, gpu: str | int) -> str:
    """``site/row/rack/node/gpu<i>`` (an integer ``gpu`` becomes ``gpu<i>``)."""
    parts = (site, row, rack, node, f"gpu{gpu}" if isinstance(gpu, int) else gpu)
    for level, part in zip(LEVELS, parts, strict=True):
        if not part or "/" in part:
            raise InputError("entity", level, f"must be a non-empty name without '/', got {part!r}")
    return "/".join(parts)


def job_entity(site: str, job: str) -> str:
    """``site/jobs/<job>``."""
    if not job or "/" in job:
        raise InputError("entity", "job", f"must be a non-empty name without '/', got {job!r}")
    return f"{site}/{JOBS}/{job}"


def level_of(entity: str) -> str:
    """``site``, ``row``, ``rack``, ``node``, ``gpu`` by depth, or ``job`` for ``site/jobs/<job>``."""
    parts = entity.split("/")
    if len(parts) == 3 and parts[1] == JOBS:
        return "job"
    if not 1 <= len(parts) <= len(LEVELS) or not all(parts):
        raise InputError("entity", "id", f"expected site/row/rack/node/gpu (1-5 components), got {entity!r}")
    return LEVELS[len(parts) - 1]


def parent(entity: str) -> str | None:
    """The enclosing entity (``None`` for a site)."""
    head, sep, _ = entity.rpartition("/")
    if head.endswith("/" + JOBS):
        return head[: -len(JOBS) - 1]
    return head if sep else None


def under(entities: Sequence[str] | NDArray[np.str_], prefix: str) -> NDArray[np.bool_]:
    """Boolean mask of the entities at or below ``prefix`` (``""`` selects all)."""
    names = np.asarray(entities, dtype=str)
    prefix = prefix.rstrip("/")
    if not prefix:
        return np.ones(names.shape, dtype=bool)
    return np.asarray((names == prefix) | np.char.startswith(names, prefix + "/"), dtype=np.bool_)
