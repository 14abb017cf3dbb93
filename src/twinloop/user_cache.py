"""The user's cache directory for twinloop, and atomic writes into it.

Directory: ``$TWINLOOP_CACHE_DIR``, else ``$XDG_CACHE_HOME/twinloop``, else ``~/.cache/twinloop``. What is kept
there can always be rebuilt (parsed catalogs, compiled dataclass methods); a cache that cannot be read or written
is skipped, never an error.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where twinloop keeps what it can rebuild (see the module doc)."""
    env = os.environ
    if env.get("TWINLOOP_CACHE_DIR"):
        return Path(env["TWINLOOP_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "twinloop"


def write_atomically(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file and a rename, so that no reader sees half a file.

    Returns:
        Whether it was written (False where the directory cannot be created or written; nothing is left behind).
    """
    import tempfile  # only when writing: most runs only read

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False
    return True
