"""HTML reports in the data directory: ``GET /api/reports`` lists them, ``GET /reports/{name}`` serves one.

A name must match :data:`~twinloop.web.params.FILE_PATTERN` and resolve to a file directly inside the data
directory; anything else is 404, whatever ``..``, encoded slashes or symlinks it tries.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from twinloop.web.api.deps import WebState, web_state
from twinloop.web.auth import require_read
from twinloop.web.models import ReportFile, error_responses
from twinloop.web.params import FILE_RE, safe_data_file

router = APIRouter(tags=["reports"], dependencies=[Depends(require_read)], responses=error_responses(401, 403, 404))

MAX_LISTED = 200


@router.get("/api/reports", response_model=list[ReportFile], summary="HTML reports in the data directory")
def reports(state: WebState = Depends(web_state)) -> list[ReportFile]:
    """Report files directly inside the data directory, by name."""
    root = state.data_dir
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if FILE_RE.fullmatch(p.name) and p.is_file() and p.resolve().parent == root.resolve():
            out.append(ReportFile(name=p.name, bytes=p.stat().st_size))
        if len(out) >= MAX_LISTED:
            break
    return out


@router.get(
    "/reports/{name}",
    response_class=FileResponse,
    summary="One HTML report from the data directory",
    responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}, 404: {"description": "no such file"}},
)
def report(
    name: Annotated[str, PathParam(max_length=140, description="file name, e.g. report.html")],
    state: WebState = Depends(web_state),
) -> FileResponse:
    """The report file (only plain ``.html`` files directly inside the data directory)."""
    return FileResponse(safe_data_file(state.data_dir, name), media_type="text/html")
