"""Reading an append-only file as it grows: the new complete lines since the last read.

The heartbeat readers (:mod:`twinloop.ops.live.job_progress`, :mod:`twinloop.ops.live.rank_progress` and the
checkpoint reader :class:`~twinloop.ops.respond.adapters.heartbeats.JobHeartbeats`) tail files a training job
appends to while the watcher reads them. A read starts where the last one stopped; a line still being written (no
newline yet) waits for the next read; a file that is not the one read before is read again from its start, and the
caller is told so, since what it holds now is all there is. "Not the one read before": it shrank (truncated), it is
another file under the same name (rotated: another inode), or its first bytes or the bytes just before where the
last read stopped changed (rewritten in place to a size at least the old one's, which the size alone does not show;
a rotated file that got a freed inode number again). A rewrite that keeps all of these escapes: no heartbeat writer
does that. It lives in ``ops`` (beside ``say_once``), below both ``ops.live`` and ``ops.respond``, which use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

#: Bytes kept from the end of what was read, compared on the next read to tell a file rewritten in place.
_SEEN_BYTES = 64


@dataclass
class FileTail:
    """One file as read so far: where the next read starts, the line still being written, the lines taken."""

    offset: int = 0
    partial: bytes = b""
    line_no: int = 0
    #: (device, inode) of the file read, None before the first read.
    ident: tuple[int, int] | None = field(default=None, repr=False)
    #: (mtime ns, size) when the last read reached the file's end: the same again, nothing changed (one stat).
    stamp: tuple[int, int] | None = field(default=None, repr=False)
    #: The file's first bytes and the last bytes read (each up to :data:`_SEEN_BYTES`; the latter end at ``offset``).
    head: bytes = field(default=b"", repr=False)
    seen: bytes = field(default=b"", repr=False)

    def read(self, path: str | os.PathLike[str], max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        """The complete lines written since the last read, as (1-based line number, bytes), at most ``max_bytes``
        read (a longer backlog is taken over several reads), and whether the file was read afresh (see the module
        docstring). A file that is missing or unreadable for now gives no line: what was read stands.
        """
        try:
            return self.take(path, max_bytes)
        except OSError:
            return [], False

    def take(self, path: str | os.PathLike[str], max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        """:meth:`read`, but a missing or unreadable file raises its ``OSError`` (what was read stands)."""
        st = os.stat(path)
        if self.stamp is not None and (st.st_dev, st.st_ino) == self.ident and self.stamp == _stamp(st):
            return [], False
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            fresh = self.ident is not None and (ident != self.ident or st.st_size < self.offset)
            if not fresh and self.seen:
                fresh = f.read(len(self.head)) != self.head
                f.seek(self.offset - len(self.seen))
                fresh = fresh or f.read(len(self.seen)) != self.seen
            start = 0 if fresh else self.offset
            f.seek(start)
            chunk = f.read(max_bytes)
        if fresh:
            self.offset, self.partial, self.line_no, self.head, self.seen = 0, b"", 0, b"", b""
        self.ident = ident
        if len(self.head) < _SEEN_BYTES:
            self.head = (self.head + chunk)[:_SEEN_BYTES]
        self.offset += len(chunk)
        self.seen = (self.seen + chunk)[-_SEEN_BYTES:]
        self.stamp = _stamp(st) if self.offset >= st.st_size else None
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        first = self.line_no + 1
        self.line_no += len(lines)
        return [(first + k, raw) for k, raw in enumerate(lines)], fresh


def _stamp(st: os.stat_result) -> tuple[int, int]:
    return st.st_mtime_ns, st.st_size
