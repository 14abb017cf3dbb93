"""Dataclass methods from the code cache are the methods dataclasses compiles itself, across processes too."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from twinloop import codecache

SRC = str(Path(__file__).resolve().parents[1] / "src")

# Every kind of method dataclasses generates: frozen, order, slots, kw_only, defaults and factories, InitVar,
# ClassVar, __post_init__, inheritance, a field named like the generated code's own names, string annotations.
CLASSES = """
from __future__ import annotations
import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

@dataclass(frozen=True)
class Frozen:
    power_w: float
    name: str = "h100"
    tags: tuple = ()
    table: list = field(default_factory=list, hash=False, compare=False)

@dataclass(order=True, unsafe_hash=True)
class Ordered:
    a: int
    b: int = 2

@dataclass(slots=True, kw_only=True)
class Slotted:
    x: float
    y: float = 0.0

@dataclass
class WithInit:
    total: int = 0
    scale: InitVar[int] = 1
    kind: ClassVar[str] = "k"

    def __post_init__(self, scale: int) -> None:
        self.total *= scale

@dataclass(frozen=True)
class Child(Frozen):
    self: int = 0
    object: int = 1
"""
METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__", "__le__",
           "__gt__", "__ge__")  # fmt: skip


def _define() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "twinloop_codecache_test"}
    sys.modules["twinloop_codecache_test"] = type(sys)("twinloop_codecache_test")
    sys.modules["twinloop_codecache_test"].__dict__.update(namespace)
    exec(compile(CLASSES, "<classes>", "exec"), sys.modules["twinloop_codecache_test"].__dict__)
    return sys.modules.pop("twinloop_codecache_test").__dict__


def _codes(cls: type) -> dict[str, Any]:
    out = {}
    for name in METHODS:
        fn = cls.__dict__.get(name)
        fn = getattr(fn, "__wrapped__", fn)  # __repr__ is wrapped by reprlib's recursion guard
        if fn is not None:
            out[name] = fn.__code__
    return out


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[codecache.CodeCache]:
    monkeypatch.setenv("TWINLOOP_CACHE_DIR", str(tmp_path))
    codecache.uninstall()
    installed = codecache.install()
    assert installed is not None
    yield installed
    codecache.uninstall()


def test_cached_methods_equal_the_compiled_ones(cache: codecache.CodeCache) -> None:
    codecache.uninstall()
    plain = _define()
    cache = codecache.install()  # type: ignore[assignment]
    assert cache is not None and codecache.installed() is cache
    first = _define()  # compiles into the cache
    assert cache.compiled > 0 and cache.reused == 0
    again = _define()  # every method from the cache
    assert cache.reused == cache.compiled
    for name in ("Frozen", "Ordered", "Slotted", "WithInit", "Child"):
        expected = _codes(plain[name])
        assert expected and _codes(first[name]) == expected == _codes(again[name]), name
    f = again["Frozen"](700)
    assert f == again["Frozen"](700.0) and hash(f) == hash(again["Frozen"](700)) and repr(f).startswith("Frozen(")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.power_w = 1  # type: ignore[misc]
    assert again["Ordered"](1) < again["Ordered"](2) and again["WithInit"](3, 2).total == 6
    assert again["Child"](1, self=5).self == 5


def test_other_exec_calls_pass_through(cache: codecache.CodeCache) -> None:
    namespace: dict[str, Any] = {}
    cache.exec(compile("x = 1", "<t>", "exec"), namespace)
    cache.exec("y = 2", namespace, None)
    assert namespace["x"] == 1 and namespace["y"] == 2 and cache.compiled == 1


def test_a_bad_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    cache = codecache.CodeCache(tmp_path)
    cache.file("m").write_bytes(b"\x00garbage")
    cache.exec("def f(): return 3", {"__name__": "m"}, {})
    assert cache.compiled == 1 and cache.save() == 1
    again = codecache.CodeCache(tmp_path)
    namespace: dict[str, Any] = {}
    again.exec("def f(): return 3", {"__name__": "m"}, namespace)
    assert again.reused == 1 and again.compiled == 0 and namespace["f"]() == 3


def test_a_module_file_keeps_what_the_module_still_uses(tmp_path: Path) -> None:
    """A module whose classes changed: its file is rewritten with the current methods only (no growth)."""
    first = codecache.CodeCache(tmp_path)
    for text in ("a = 1", "b = 2"):
        first.exec(text, {"__name__": "m"}, {})
    first.exec("c = 3", {"__name__": "other"}, {})
    assert first.save() == 2
    second = codecache.CodeCache(tmp_path)
    for text in ("a = 1", "b = 20"):  # one class of m changed
        second.exec(text, {"__name__": "m"}, {})
    assert (second.reused, second.compiled) == (1, 1) and second.save() == 1  # "other" untouched
    third = codecache.CodeCache(tmp_path)
    assert set(codecache._read(third.file("m"))) == {"a = 1", "b = 20"}
    assert set(codecache._read(third.file("other"))) == {"c = 3"}


def test_an_unwritable_directory_only_means_compiling_again(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = codecache.CodeCache(blocker / "sub")  # a directory under a file cannot exist
    cache.exec("z = 1", {"__name__": "m"}, {})
    assert cache.save() == 0


def test_the_next_process_compiles_nothing(tmp_path: Path) -> None:
    """The command line's start: the second run takes every dataclass method from the file the first wrote."""
    code = """
import json, sys
from twinloop import codecache
cache = codecache.install()
import twinloop.cli.app, twinloop.plan.train
sys.stdout.write(json.dumps([cache.compiled, cache.reused]))
"""
    env = {**os.environ, "PYTHONPATH": SRC, "TWINLOOP_CACHE_DIR": str(tmp_path)}
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                  timeout=120, check=True).stdout)
        for _ in range(2)
    ]  # fmt: skip
    (first_compiled, first_reused), (second_compiled, second_reused) = runs
    assert first_compiled > 100 and second_compiled == 0 and second_reused == first_compiled + first_reused
    assert (tmp_path / codecache.cache_directory().name / "twinloop.plan.train.marshal").is_file()
