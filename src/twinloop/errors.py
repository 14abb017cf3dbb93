"""The one error type for bad input: it always names the source, the field and what is allowed.

Every loader, parser and validator raises :class:`InputError`; the CLI turns it into one line on
stderr and exit code 2, so a user sees exactly which file and field to fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Longest message an :class:`InputError` keeps: a bad file's whole first line (a JSON document, a binary blob)
#: quoted into a message must not become a 200 kB "one line" on stderr.
MAX_MESSAGE_CHARS = 2000


class InputError(ValueError):
    """Bad user input (file, flag, telemetry row, configuration).

    Args:
        source: the file, flag or stream the input came from (e.g. ``scenario.yaml``, ``--model``).
        field: the field inside it (dotted path, column name or line number); may be empty.
        message: what is wrong, including the allowed range or values.
    """

    def __init__(self, source: str, field: str, message: str) -> None:
        if len(message) > MAX_MESSAGE_CHARS:
            message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message) - MAX_MESSAGE_CHARS} more characters)"
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Known names closest to ``name``, for 'did you mean' hints."""
    known_list = list(known)
    hits = difflib.get_close_matches(name.lower(), [k.lower() for k in known_list], n=n, cutoff=0.4)
    by_lower = {k.lower(): k for k in known_list}
    return [by_lower[h] for h in hits]


def unknown_name(source: str, field: str, kind: str, name: str, known: Iterable[str]) -> InputError:
    """An :class:`InputError` for an unknown catalog name that lists the closest known ones."""
    known_list = sorted(known)
    near = close_names(name, known_list)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return InputError(source, field, f"unknown {kind} {name!r}{hint} (known: {', '.join(known_list)})")


def pydantic_error(source: str, exc: Exception) -> InputError:
    """Convert a pydantic ``ValidationError`` into one-line :class:`InputError` naming the field."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = first.get("msg", str(exc))
        ctx = first.get("ctx") or {}
        allowed = ", ".join(f"{k} {v}" for k, v in ctx.items() if k in ("ge", "gt", "le", "lt", "expected"))
        if allowed and allowed not in msg:
            msg = f"{msg} (allowed: {allowed})"
        return InputError(source, loc, msg)
    return InputError(source, "", str(exc))
