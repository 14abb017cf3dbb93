"""FileTail: an append-only file's new complete lines, and a file that is not the one read before told and read
afresh (the heartbeat readers' shared tail: job progress, rank progress, the checkpoint reader).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twinloop.ops.file_tail import FileTail


def test_new_lines_are_read_once_and_a_line_still_being_written_waits(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"a\nb")
    tail = FileTail()
    assert tail.read(path, 1 << 20) == ([(1, b"a")], False)
    assert tail.read(path, 1 << 20) == ([], False)
    with path.open("ab") as f:
        f.write(b"c\nd\n")
    assert tail.read(path, 1 << 20) == ([(2, b"bc"), (3, b"d")], False)
    assert tail.read(tmp_path / "gone", 1 << 20) == ([], False)  # missing for now: what was read stands
    with pytest.raises(FileNotFoundError):
        tail.take(tmp_path / "gone", 1 << 20)


def test_a_file_replaced_by_a_longer_one_is_read_afresh(tmp_path: Path) -> None:
    """Before, only a file that shrank was told: a rotated file already longer than the old one was read from the
    old offset, mid-line, its first lines lost."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"old 1\nold 2\n")
    tail = FileTail()
    tail.read(path, 1 << 20)
    new = tmp_path / "new"
    new.write_bytes(b"new 1\nnew 2\nnew 3\n")
    os.replace(new, path)
    assert tail.read(path, 1 << 20) == ([(1, b"new 1"), (2, b"new 2"), (3, b"new 3")], True)


def test_a_file_rewritten_in_place_to_a_longer_one_is_read_afresh(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"old 1\nold 2\n")
    tail = FileTail()
    tail.read(path, 1 << 20)
    with path.open("r+b") as f:  # the same inode, truncated and written again, longer
        f.truncate(0)
        f.write(b"new 1\nnew 2\nnew 3\n")
    assert tail.read(path, 1 << 20) == ([(1, b"new 1"), (2, b"new 2"), (3, b"new 3")], True)
    path.write_bytes(b"x\n")  # shorter
    assert tail.read(path, 1 << 20) == ([(1, b"x")], True)


def test_a_backlog_is_taken_a_chunk_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"".join(b"line %d\n" % k for k in range(100)))
    tail = FileTail()
    got: list[tuple[int, bytes]] = []
    for _ in range(200):
        lines, fresh = tail.read(path, 64)
        assert not fresh
        got += lines
    assert got == [(k + 1, b"line %d" % k) for k in range(100)]
