"""Reading an append-only file as it grows: the new complete lines since the last read.

The job and rank heartbeat readers (:mod:`.job_progress`, :mod:`.rank_progress`) tail files a training job appends to
while the watcher reads them. A read starts where the last one stopped; a line still being written (no newline yet)
waits for the next read; a file that shrank (rotated or truncated) is read again from its start, and the caller is
told so, since what it holds now is all there is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class FileTail:
    """One file as read so far: where the next read starts, the line still being written, the lines taken."""

    offset: int = 0
    partial: bytes = b""
    line_no: int = 0

    def read(self, path: str | os.PathLike[str], max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        """The complete lines written since the last read, as (1-based line number, bytes), at most ``max_bytes``
        read (a longer backlog is taken over several reads), and whether the file had shrunk (read afresh).
        A file that is missing or unreadable for now gives no line: what was read stands.
        """
        try:
            size = os.stat(path).st_size
            rotated = size < self.offset
            if rotated:
                self.offset, self.partial, self.line_no = 0, b"", 0
            if size == self.offset:
                return [], rotated
            with open(path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read(max_bytes)
        except OSError:
            return [], False
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        first = self.line_no + 1
        self.line_no += len(lines)
        return [(first + k, raw) for k, raw in enumerate(lines)], rotated
