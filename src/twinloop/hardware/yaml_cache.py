"""The catalogs' YAML, parsed once per content and kept as JSON in the user's cache directory.

Importing PyYAML and parsing ``gpus.yaml`` costs ~30 ms of every ``twinloop plan`` start (issue 15: the whole
command must answer in 0.4 s); reading the same data back from JSON costs ~1 ms. The cache file is named by two
checksums of the YAML text (CRC-32 and Adler-32, with its length; ``zlib``, as ``hashlib`` alone costs ~3 ms to
import), so an edited catalog is parsed afresh rather than served stale; it is written atomically
(temporary file, then rename) and only when JSON round-trips the parsed data exactly. Where no cache directory
is writable the YAML is parsed every time, as before.

Cache directory: ``$TWINLOOP_CACHE_DIR``, else ``$XDG_CACHE_HOME/twinloop``, else ``~/.cache/twinloop``.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from twinloop.errors import InputError


def cache_dir() -> Path:
    """Where parsed catalogs are kept (see the module doc)."""
    env = os.environ
    if env.get("TWINLOOP_CACHE_DIR"):
        return Path(env["TWINLOOP_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "twinloop"


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
    tmp = None
    try:
        encoded = json.dumps(data)
        if json.loads(encoded) == data:  # only plain data: a date or an int key would not come back the same
            import tempfile

            cached.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=cached.name, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(encoded)
            os.replace(tmp, cached)
    except (OSError, TypeError, ValueError):
        if tmp is not None:  # no cache this time: the next run parses the YAML again
            Path(tmp).unlink(missing_ok=True)
    return data
