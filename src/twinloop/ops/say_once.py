"""Say each warning once: the loop's sources and adapters are asked every refresh, and the same inconsistency or
failure would otherwise flood the watcher's stream once a minute.
"""

from __future__ import annotations

from collections.abc import Callable


class SayOnce:
    """Tells ``warn`` each message once (or once per ``key``); no ``warn``: says nothing."""

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self._warn = warn or (lambda _m: None)
        self._said: set[str] = set()

    def __call__(self, message: str, key: str | None = None) -> None:
        """Say ``message`` unless it (or ``key``) was said before."""
        once = message if key is None else key
        if once not in self._said:
            self._said.add(once)
            self._warn(message)
