"""Short functions that do one thing (issue 18): no function or method under src/ runs over 80 lines.

A function's length runs from its first decorator to its last line, docstring and comments included (what a
reader scrolls through). The few that are still longer are named below, each with the branch or issue that owns
splitting it; an entry that is no longer too long must be removed, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "twinloop"
MAX_LINES = 80

#: (path under src/twinloop, qualified name) still over the limit, with who owns the split.
ALLOWED: set[tuple[str, str]] = set()


def _lengths(path: Path) -> dict[str, int]:
    """Qualified name → lines, of every function and method in a module (nested ones too)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = prefix + child.name
                out[name] = max(out.get(name, 0), (child.end_lineno or child.lineno) - start + 1)
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), str(path)), "")
    return out


def _too_long() -> dict[tuple[str, str], int]:
    return {
        (path.relative_to(SRC).as_posix(), name): n
        for path in sorted(SRC.rglob("*.py"))
        for name, n in _lengths(path).items()
        if n > MAX_LINES
    }


def test_no_function_is_over_80_lines_outside_the_named_few() -> None:
    over = {k: n for k, n in _too_long().items() if k not in ALLOWED}
    assert not over, "split these into named steps (<= 80 lines each): " + ", ".join(
        f"{path}:{name} ({n} lines)" for (path, name), n in sorted(over.items())
    )


def test_the_allow_list_only_names_functions_still_too_long() -> None:
    stale = ALLOWED - set(_too_long())
    assert not stale, f"no longer over {MAX_LINES} lines (or gone), remove from ALLOWED: {sorted(stale)}"


def test_the_measure_counts_decorators_docstrings_and_nested_functions(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(78))
    path = tmp_path / "m.py"
    path.write_text(f'@decorator\ndef f():\n    """Doc."""\n{body}\n\nclass C:\n    def g(self):\n        def h():\n'
                    "            pass\n        return h\n")  # fmt: skip
    assert _lengths(path) == {"f": 81, "C.g": 4, "C.g.h": 2}
