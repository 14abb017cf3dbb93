"""The catalogs' YAML, parsed once per content and kept as JSON in the user's cache directory.

Importing PyYAML and parsing ``gpus.yaml`` costs ~30 ms of every ``twinloop plan`` start (issue 15: the whole
command must answer in 0.4 s); reading the same data back from JSON costs ~1 ms. The cache file is named by two
checksums of the YAML text (CRC-32 and Adler-32, with its length; ``zlib``, as ``hashlib`` alone costs ~3 ms to
import), so an edited catalog is parsed afresh rather than served stale; it is written atomically
(temporary file, then rename) and only when JSON round-trips the parsed data exactly. Where no cache directory
is writable the YAML is parsed every time, as before.

Cache directory: :func:`twinloop.user_cache.cache_dir`.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from twinloop.errors import InputError
from twinloop.user_cache import cache_dir, write_atomically

__all__ = ["cache_dir", "load_yaml"]


def _parse(text: str, path: Path) -> Any:
    import yaml

    try:
        # libyaml when present: the pure-Python loader is ~5x slower.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise InputError(str(path), "", f"malformed YAML: {exc}".splitlines()[0]) from None


def load_yaml(path: Path) -> Any:
    """The data of the YAML file ``path`` (from the JSON cache when this exact text was parsed before).

    Raises:
        InputError: the YAML is malformed (naming the file).
    """
    text = path.read_text()
    raw = text.encode()
    cached = cache_dir() / f"{path.stem}-{len(raw):x}-{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"
    try:
        return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    data = _parse(text, path)
    try:
        encoded = json.dumps(data)
    except (TypeError, ValueError):
        return data
    if json.loads(encoded) == data:  # only plain data: a date or an int key would not come back the same
        write_atomically(cached, encoded.encode())  # where it cannot, the next run parses the YAML again
    return data
