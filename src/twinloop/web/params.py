"""Request-parameter validation shared by the API routers: entity ids, time ranges, point counts, file names.

Everything a request carries is checked against a strict pattern or range before it reaches SQL or the
filesystem. Entity ids are hierarchical (``site/row/rack/node/gpu``, ``<site>/jobs/<name>``); each segment
starts with a letter or digit, so ``..`` or an absolute path can never pass.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from fastapi import HTTPException, Query
from fastapi.exceptions import RequestValidationError

#: One path segment of an entity id.
SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}"
#: A whole entity id: 1 to 6 segments.
ENTITY_PATTERN = rf"^{SEGMENT}(/{SEGMENT}){{0,5}}$"
ENTITY_RE = re.compile(ENTITY_PATTERN)
#: A file name in the data directory that the web app may serve (no directories).
FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.html$"
FILE_RE = re.compile(FILE_PATTERN)
#: A run name in the loop tables (``loop-off``, ``loop-on`` ...).
RUN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

#: Most points one time series may return.
MAX_POINTS = 2000
#: Longest time range a query may span, s (one year).
MAX_RANGE_S = 366 * 86400.0
#: Bounds for timestamps, epoch s (or simulation s, which start at 0).
MIN_TS_S = -1.0e10
MAX_TS_S = 1.0e11

EntityId = Annotated[
    str, Query(pattern=ENTITY_PATTERN, max_length=400, description="entity id, e.g. dc1/r01/k03/n05/g7")
]
RackId = Annotated[str, Query(pattern=ENTITY_PATTERN, max_length=400, description="rack id, e.g. dc1/r01/k03")]
OptionalRun = Annotated[str | None, Query(pattern=RUN_PATTERN, max_length=64, description="loop run name")]
SinceS = Annotated[
    float | None, Query(ge=MIN_TS_S, le=MAX_TS_S, description="start of the range, epoch s (default: range end − span)")
]
UntilS = Annotated[
    float | None, Query(ge=MIN_TS_S, le=MAX_TS_S, description="end of the range, epoch s (default: newest)")
]
Points = Annotated[int, Query(ge=2, le=MAX_POINTS, description="most points per series")]


def invalid(loc: tuple[str, ...], message: str) -> RequestValidationError:
    """A 422 in FastAPI's own validation-error shape (``detail`` is a list of ``{loc, msg, type}``), so every
    422 of the API matches its documented schema.
    """
    return RequestValidationError([{"type": "value_error", "loc": loc, "msg": message}])


def time_window(
    since_s: float | None, until_s: float | None, newest_s: float | None, oldest_s: float | None, default_span_s: float
) -> tuple[float, float] | None:
    """The ``[since, until)`` window to query, or ``None`` when the store is empty.

    Defaults: ``until`` = just after the newest sample, ``since`` = ``until − default_span_s`` (not before the
    oldest sample).

    Raises:
        RequestValidationError: 422 when ``since >= until`` or the span exceeds :data:`MAX_RANGE_S`.
    """
    if newest_s is None or oldest_s is None:
        return None
    until = float(until_s) if until_s is not None else float(newest_s) + 1e-6
    since = float(since_s) if since_s is not None else max(float(oldest_s), until - default_span_s)
    if since >= until:
        raise invalid(("query", "since_s"), f"since_s ({since:g}) must be before until_s ({until:g})")
    if until - since > MAX_RANGE_S:
        raise invalid(("query", "until_s"), f"time range {until - since:g} s exceeds the limit of {MAX_RANGE_S:g} s")
    return since, until


def safe_data_file(data_dir: Path, name: str) -> Path:
    """The file ``name`` inside ``data_dir``; 404 unless it is a plain ``.html`` file directly inside it.

    The name must match :data:`FILE_PATTERN` and its resolved path (symlinks followed) must stay in the
    resolved ``data_dir``, so neither ``../`` nor a symlink can lead a request out of the data directory.
    """
    if not FILE_RE.fullmatch(name):
        raise HTTPException(404, "no such file")
    root = data_dir.resolve()
    path = (root / name).resolve()
    if path.parent != root or not path.is_file():
        raise HTTPException(404, "no such file")
    return path
