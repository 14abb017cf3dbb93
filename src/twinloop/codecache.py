"""Dataclass methods compiled once, not at every start: their code objects kept in the user's cache.

Why: ``@dataclass`` writes the source of each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and (when
frozen) ``__setattr__``/``__delattr__`` and compiles it with ``exec`` every time the class is defined. On Python 3.11
that compiling is a fifth of ``twinloop plan train`` (issue 15: answer in 0.4 s): the planner's ~40 frozen
dataclasses, typer's and rich's, ~220 M of the command's ~1,100 M instructions (``valgrind --tool=cachegrind``,
docs/sections/benchmarks-cli.md), ~80 ms of CPU on the development VM.

How: :func:`install` gives the :mod:`dataclasses` module its own name ``exec`` (a module global, found before the
builtin) bound to :func:`CodeCache.exec`: a source text is compiled once, as the builtin would compile it (file
name ``<string>``, no inherited ``__future__`` flags), and its code object is kept by its exact text; the next
process loads the code objects from marshal files, as Python loads ``__pycache__``, and runs them with the same
globals and locals. The same text gives the same code object, so the classes are the same; only the compiling is
skipped. There is one file per module that defines dataclasses (read only when that module defines its first
one), in a folder named by the interpreter's cache tag and optimisation level (marshal is version-specific). When a
module compiled something new its file is rewritten atomically at exit with what the process used from it: a
module's classes are all defined when it is imported, so what it did not use is stale. An unreadable file is
ignored; an unwritable directory only means compiling again next time. It relies on nothing private beyond
``dataclasses`` calling the name ``exec`` with a source string and a globals dict (3.10 to 3.13 do; Python 3.13
compiles a class's methods in one ``exec`` and gains less); any other call goes to the builtin unchanged.

The command line installs it first thing (:mod:`twinloop.cli.main`); importing the library does not.
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from twinloop.user_cache import cache_dir, write_atomically


class CodeCache:
    """Code objects by their exact source text, one marshal file per defining module."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.known: dict[str, dict[str, CodeType]] = {}  # by module: read from its file, plus what was compiled
        self.used: dict[str, dict[str, CodeType]] = {}  # by module: what this process ran
        self.dirty: set[str] = set()  # modules that compiled something new
        self.compiled = 0  # source texts compiled by this process
        self.reused = 0  # source texts served from the cache

    def file(self, module: str) -> Path:
        """The marshal file of ``module``."""
        name = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in module[:200])
        return self.directory / f"{name}.marshal"

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """``builtins.exec`` for dataclasses: a source string's code object comes from the cache."""
        if type(source) is not str or type(globals) is not dict:  # not dataclasses' call: the builtin as it is
            builtins.exec(source, globals, locals)
            return
        module = str(globals.get("__name__", ""))
        known = self.known.get(module)
        if known is None:
            known = self.known[module] = _read(self.file(module))
        code = known.get(source)
        if code is None:
            code = known[source] = compile(source, "<string>", "exec", dont_inherit=True)
            self.dirty.add(module)
            self.compiled += 1
        else:
            self.reused += 1
        self.used.setdefault(module, {})[source] = code
        builtins.exec(code, globals, locals)

    def save(self) -> int:
        """Rewrite the file of each module that compiled something new; return how many were written."""
        written = sum(write_atomically(self.file(m), marshal.dumps(self.used[m])) for m in sorted(self.dirty))
        self.dirty.clear()
        return written


def _read(path: Path) -> dict[str, CodeType]:
    try:
        data = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if type(k) is str and type(v) is CodeType}


def cache_directory() -> Path:
    """The folder for this interpreter (its cache tag and ``-O`` level name it)."""
    return cache_dir() / f"dataclass-code-{sys.implementation.cache_tag}-O{sys.flags.optimize}"


def installed() -> CodeCache | None:
    """The cache :func:`install` put in place, if any."""
    import dataclasses

    bound = getattr(dataclasses, "exec", None)
    owner = getattr(bound, "__self__", None)
    return owner if isinstance(owner, CodeCache) else None


def install() -> CodeCache | None:
    """Let :mod:`dataclasses` take compiled methods from the cache from now on; saved at exit.

    Returns:
        The cache (the one already installed, if any); None where the interpreter has no bytecode cache tag.
    """
    if sys.implementation.cache_tag is None:
        return None
    current = installed()
    if current is not None:
        return current
    import dataclasses

    cache = CodeCache(cache_directory())
    dataclasses.exec = cache.exec  # type: ignore[attr-defined]
    atexit.register(cache.save)
    return cache


def uninstall() -> None:
    """Give :mod:`dataclasses` the builtin ``exec`` back (tests)."""
    import dataclasses

    cache = installed()
    if cache is not None:
        del dataclasses.exec  # type: ignore[attr-defined]
        atexit.unregister(cache.save)
