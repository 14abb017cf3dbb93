"""Bounded reading of user files: one place that turns hostile or broken input into one :class:`InputError`.

Every YAML the project reads (scenarios, policies, site and job files, sweep specs, catalogs) goes through
:func:`load_yaml`, and every text file through :func:`read_text`. They bound what a small input may cost:

* the file must be a regular file (a directory, ``/dev/zero`` or a FIFO is refused before any read) no larger
  than ``max_bytes``;
* the text must be UTF-8 (the error names the byte offset);
* a YAML document may hold at most ``max_nodes`` nodes *after* alias expansion and nest at most ``max_depth``
  deep: a 351-byte "billion laughs" alias bomb expands to ~10⁹ nodes, which consumers (pydantic, the twin)
  would walk one by one. The expanded size is counted on the composed node graph with memoisation, so the
  check itself costs one pass over the distinct nodes, not over the expansion.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml

from twinloop.errors import InputError

#: Default bounds: far above any real scenario/policy/sweep file (the largest packaged one is ~10 KB).
MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 64

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_regular_file(path: str | Path, source: str | None = None, max_bytes: int = MAX_BYTES) -> Path:
    """``path`` as a :class:`Path` once it is a readable regular file of at most ``max_bytes`` bytes."""
    p = Path(path)
    src = source or str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(src, "", "file not found") from None
    except OSError as exc:
        raise InputError(src, "", f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(src, "", "is a directory (allowed: a regular file)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(src, "", "not a regular file (allowed: a regular file, not a device or pipe)")
    if st.st_size > max_bytes:
        raise InputError(src, "", f"{st.st_size} bytes (allowed: <= {max_bytes} bytes)")
    return p


def read_bytes(path: str | Path, source: str | None = None, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (read bounded, in case it grows meanwhile)."""
    p = check_regular_file(path, source, max_bytes)
    src = source or str(p)
    try:
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(src, "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InputError(src, "", f"more than {max_bytes} bytes (allowed: <= {max_bytes} bytes)")
    return data


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` decoded as UTF-8, or an :class:`InputError` naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"byte {exc.start}", "not valid UTF-8 (allowed: UTF-8 text)") from None


def read_text(path: str | Path, source: str | None = None, max_bytes: int = MAX_BYTES) -> str:
    """A regular UTF-8 text file of at most ``max_bytes`` bytes."""
    return decode_utf8(read_bytes(path, source, max_bytes), source or str(path))


def _check_graph(root: yaml.Node, source: str, max_nodes: int, max_depth: int) -> None:
    """Expanded node count and depth of a composed YAML graph, with memoisation on shared (aliased) nodes."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    # Iterative post-order walk: deep documents must not hit Python's recursion limit here.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in size and not done:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
            if not done:
                _no_duplicate_keys(node, source)
        if not done:
            if key in on_path:
                raise InputError(source, "", "recursive YAML alias (allowed: aliases to earlier, closed nodes)")
            on_path.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
            if len(on_path) > max_depth:
                raise InputError(source, "", f"YAML nested deeper than {max_depth} levels (allowed: <= {max_depth})")
            continue
        on_path.discard(key)
        size[key] = 1 + sum(size[id(c)] for c in children)
        depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
        if size[key] > max_nodes:
            raise InputError(
                source, "", f"YAML expands to more than {max_nodes} nodes (allowed: <= {max_nodes}; alias bomb?)"
            )
        if depth[key] > max_depth:
            raise InputError(source, "", f"YAML nested deeper than {max_depth} levels (allowed: <= {max_depth})")


def _no_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    """A key given twice in one mapping is an error: YAML loaders keep the last silently (a second ``jobs:`` would
    drop the first list of jobs without a word).
    """
    seen: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value != "<<":
            if key.value in seen:
                where = f"line {key.start_mark.line + 1}"
                raise InputError(source, where, f"key {key.value!r} appears twice in one mapping (allowed: once)")
            seen.add(key.value)


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> InputError:
    """One line naming where and what: PyYAML's first line ("while scanning for the next token") says neither."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return InputError(source, "", f"malformed YAML: {exc}".splitlines()[0])
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    hint = " (a tab: YAML indents with spaces only)" if "\t" in line[: mark.column + 1] else ""
    return InputError(source, f"line {mark.line + 1}, column {mark.column + 1}", f"malformed YAML: {problem}{hint}")


def parse_yaml(text: str, source: str, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """Safe-load one YAML document from ``text`` within the node and depth bounds."""
    try:
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_graph(node, source, max_nodes, max_depth)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # PyYAML >= 6.0.3 stops deep flow nesting in its scanner
            raise InputError(source, "", f"YAML nested too deep (allowed: <= {max_depth} levels)") from None
        raise _yaml_error(exc, text, source) from None
    except RecursionError:
        raise InputError(source, "", f"YAML nested too deep (allowed: <= {max_depth} levels)") from None


def load_yaml(
    path: str | Path,
    source: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Read and safe-load a YAML file with every bound of this module (see the module docstring)."""
    src = source or str(path)
    return parse_yaml(read_text(path, src, max_bytes), src, max_nodes, max_depth)


def load_json(path: str | Path, source: str | None = None, max_bytes: int = MAX_BYTES) -> Any:
    """Read and parse a JSON file: bounded size, UTF-8, no deep-nesting crash, no 5,000-digit integers."""
    src = source or str(path)
    text = read_text(path, src, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(src, f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(src, "", "JSON nested too deep") from None
    except ValueError as exc:  # int() digit limit
        raise InputError(src, "", f"bad JSON value: {exc}".splitlines()[0]) from None
