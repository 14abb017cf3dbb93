"""Typed, bounded reading of Hugging Face ``config.json`` files and their fields.

A config file is untrusted input: it may not be UTF-8, may nest a million brackets, hold a 5,000-digit
integer, ``"false"`` where a boolean belongs, NaN or a list where a size belongs, or sizes so absurd
(10¹⁸ layers, 2⁸⁰ experts) that the planner would run for minutes. Every such case becomes one
:class:`~twinloop.errors.InputError` naming the file, the (dotted) field and the allowed range.

The bounds are far above any published model (the largest have ~160 layers, hidden 25,600, vocab
~260k, 512 experts with top-10, 10M positions) and exist only to keep the arithmetic and the planner's arrays small.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twinloop.errors import InputError

MAX_CONFIG_BYTES = 16 * 2**20  # a config.json is a few kB; this refuses /dev/zero and stray weight files
LAYERS_MAX = 10_000
WIDTH_MAX = 2**20  # hidden, intermediate, head and latent dims
HEADS_MAX = 2**14
VOCAB_MAX = 2**24
POSITIONS_MAX = 2**31
# The routing simulation the planner runs costs tokens x experts x EP sizes: 1,024 experts (2x the most of any
# published LLM, Qwen3-Next's 512; Kimi K2 has 384) and top-k <= 64 (published: <= 10) bound the worst case.
EXPERTS_MAX = 1024
TOP_K_MAX = 64

_MISSING: Any = object()


def read_json_file(path: Path) -> Any:
    """Parse a JSON file defensively: size-capped, UTF-8 only, bounded nesting and integer length.

    Raises:
        InputError: unreadable, too large, not UTF-8, malformed, too deeply nested or an oversized number.
    """
    source = str(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise InputError(source, "", f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(source, "", f"file is larger than {MAX_CONFIG_BYTES} bytes (a config.json is a few kB)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"byte {exc.start}", "not UTF-8 text (a config.json is UTF-8 JSON)") from None
    return parse_json_text(text, source)


def parse_json_text(text: str, source: str) -> Any:
    """``json.loads`` with every failure mode turned into :class:`InputError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(source, "", "JSON nested too deeply (a config.json is a few levels deep)") from None
    except ValueError as exc:  # e.g. an integer longer than Python's 4,300-digit conversion limit
        raise InputError(source, "", f"invalid JSON value: {str(exc).splitlines()[0]}") from None


class ConfigReader:
    """Reads typed fields of one config mapping; errors name ``source`` and the dotted field path.

    Args:
        cfg: the config mapping (top level or a nested ``text_config``).
        source: the file (or flag) the config came from.
        prefix: dotted path of ``cfg`` inside the file (``"text_config."`` for a nested config).
    """

    def __init__(self, cfg: Mapping[str, Any], source: str, prefix: str = "") -> None:
        self.cfg = cfg
        self.source = source
        self.prefix = prefix

    def error(self, key: str, message: str) -> InputError:
        """An :class:`InputError` for ``key`` of this config."""
        return InputError(self.source, f"{self.prefix}{key}", message)

    def has(self, key: str) -> bool:
        """True when ``key`` is present and not null."""
        return self.cfg.get(key) is not None

    def _raw(self, keys: tuple[str, ...]) -> tuple[str, Any]:
        for key in keys:
            if self.cfg.get(key) is not None:
                return key, self.cfg[key]
        return keys[0], None

    def integer(self, *keys: str, default: Any = _MISSING, lo: int = 1, hi: int = WIDTH_MAX) -> int:
        """An integer in ``[lo, hi]`` from the first present key of ``keys`` (aliases), else ``default``.

        JSON integers only (an integral float such as ``4096.0`` is accepted); booleans, strings, lists,
        NaN and infinities are refused.
        """
        key, value = self._raw(keys)
        if value is None:
            if default is _MISSING:
                names = " or ".join(f"{self.prefix}{k}" for k in keys)
                raise InputError(self.source, names, f"required field missing (an integer in [{lo}, {hi}])")
            return int(default)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer in [{lo}, {hi}], got {_show(value)}")
        if not lo <= value <= hi:
            raise self.error(key, f"must be an integer in [{lo}, {hi}], got {_show(value)}")
        return int(value)

    def boolean(self, key: str, default: bool) -> bool:
        """A JSON boolean (``true``/``false``); the string ``"false"`` is refused, never read as true."""
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"must be a JSON boolean (true or false), got {_show(value)}")
        return value

    def number(self, key: str, default: float, lo: float = 0.0, hi: float = 1e12) -> float:
        """A finite number in ``[lo, hi]``."""
        value = self.cfg.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number in [{lo:g}, {hi:g}], got {_show(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise self.error(key, f"must be a number in [{lo:g}, {hi:g}], got {_show(value)}") from None
        if not (math.isfinite(number) and lo <= number <= hi):
            raise self.error(key, f"must be a finite number in [{lo:g}, {hi:g}], got {_show(value)}")
        return number

    def string(self, key: str, default: str, allowed: tuple[str, ...] | None = None) -> str:
        """A string (one of ``allowed`` when given)."""
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or (allowed is not None and value not in allowed):
            what = f"one of {', '.join(allowed)}" if allowed else "a string"
            raise self.error(key, f"must be {what}, got {_show(value)}")
        return value

    def int_list(self, key: str, lo: int, hi: int, max_len: int = LAYERS_MAX) -> list[int]:
        """A list of integers each in ``[lo, hi]`` (empty when absent)."""
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > max_len:
            raise self.error(key, f"must be a list of at most {max_len} integers in [{lo}, {hi}]")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, int) or not lo <= item <= hi:
                raise self.error(f"{key}[{i}]", f"must be an integer in [{lo}, {hi}], got {_show(item)}")
        return list(value)

    def str_list(self, key: str, allowed: tuple[str, ...], length: int) -> list[str]:
        """A list of exactly ``length`` strings from ``allowed`` (empty when absent)."""
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) != length:
            raise self.error(key, f"must be a list of {length} entries (one per layer) from {', '.join(allowed)}")
        for i, item in enumerate(value):
            if item not in allowed:
                raise self.error(f"{key}[{i}]", f"must be one of {', '.join(allowed)}, got {_show(item)}")
        return list(value)


def _show(value: Any) -> str:
    """A short repr for error messages (a 5,000-digit integer or a huge list is not echoed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4000'} digits"
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
