"""Shared CLI plumbing: JSON vs human output, one-line errors with exit code 2, progress bars."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from twinloop.errors import InputError


def _console(stderr: bool = False, soft_wrap: bool = False) -> Console:
    console = Console(stderr=stderr, soft_wrap=soft_wrap, emoji=False)
    if console.color_system is None:
        # rich's automatic highlighting only adds colour: without a colour system (a pipe, a file, NO_COLOR,
        # TERM=dumb) the bytes are the same, and its regexes cost a few ms of every command (issue 15: start-up).
        console = Console(stderr=stderr, soft_wrap=soft_wrap, emoji=False, highlight=False)
    return console


# soft_wrap: a free-text line longer than the terminal is left for the terminal to wrap, so a long path or
# name is never broken or cut by rich; tables still lay out at the console width (see cli/tables.py).
# emoji=False: ":ab:" in a PCI address or ":cd:" in a path must print as written, not as an emoji.
stdout = _console(soft_wrap=True)
stderr = _console(stderr=True)

JSON_OPTION = typer.Option(False, "--json", help="Print one JSON document on stdout and nothing else.")


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return _jsonable(obj.model_dump())
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return _jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def print_json(obj: Any) -> None:
    """Print ``obj`` (dicts, dataclasses, pydantic models, numpy values) as one JSON document."""
    sys.stdout.write(json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def fail(message: str) -> typer.Exit:
    """Print one error line on stderr and return the exit (code 2) for the caller to raise."""
    stderr.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def output_dir(path: Path, option: str = "--out") -> Path:
    """Create the output directory ``path`` now, before the work that fills it.

    A path that is a file, lies under a file or cannot be created was a traceback (exit 1) raised by the
    writer's own ``mkdir`` — for ``plan moe`` and ``sweep`` only after the study or the first run had finished.

    Raises:
        InputError: naming ``option`` and the path (exit code 2 through :func:`guarded`).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(option, "", f"{path}: exists and is not a directory") from None
    except OSError as exc:
        raise InputError(option, "", f"{path}: cannot create the directory: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(option, "", f"{path}: directory not writable")
    return path


_EPOCH_2001_S = 978_307_200.0  # timestamps from this on are shown as UTC dates, below as seconds
_EPOCH_9999_S = 253_402_300_800.0  # ... up to the last date a datetime holds (year 9999), beyond as seconds


def clock_text(ts: float) -> str:
    """A timestamp for people: a UTC date and time for wall-clock seconds, else the seconds (a twin's clock)."""
    if _EPOCH_2001_S <= ts < _EPOCH_9999_S:
        return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{ts:.3f}"


def guarded(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; turn :class:`InputError` (and friends) into one stderr line and exit code 2."""
    try:
        return fn()
    except InputError as exc:
        raise fail(str(exc)) from None
    except FileNotFoundError as exc:
        raise fail(f"{exc.filename}: file not found") from None


@contextmanager
def progress(description: str, total: float, enabled: bool = True) -> Iterator[Callable[[float], None]]:
    """A rich progress bar on stderr; yields ``advance(n)``. Disabled → a no-op callback."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def busy(description: str, enabled: bool = True) -> Iterator[None]:
    """A spinner with elapsed time on stderr for work that cannot count its steps (a search, a replay).

    Shown only when stderr is a terminal and ``enabled`` (pass ``not json_out``); stdout is never touched.
    """
    if not enabled or not sys.stderr.isatty():
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=stderr,
                  transient=True) as bar:  # fmt: skip
        bar.add_task(description, total=None)
        yield
