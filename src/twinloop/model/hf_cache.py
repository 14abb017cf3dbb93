"""Find a model's ``config.json`` in the local Hugging Face cache, offline (no network, no huggingface_hub).

The cache layout is the one ``huggingface_hub`` writes::

    <hub cache>/models--ORG--NAME/refs/main            (the commit hash of the main branch)
    <hub cache>/models--ORG--NAME/snapshots/<rev>/config.json

``<hub cache>`` is ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE`` (older name), else ``$HF_HOME/hub``,
else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub's own order).
The snapshot named by ``refs/main`` is preferred; without it, the newest snapshot that has a config.json.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from twinloop.errors import InputError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
_REV = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def looks_like_hub_id(name: str) -> bool:
    """True for ``ORG/NAME`` (letters, digits, ``_.-``; no ``..``), the shape of a Hugging Face model id."""
    return bool(_HUB_ID.match(name)) and ".." not in name


def hub_cache_dirs() -> list[Path]:
    """Hub cache folders to search, in huggingface_hub's order of precedence (first set one wins, but a
    set ``HF_HUB_CACHE`` that lacks the model still falls back to the default location).
    """
    env = os.environ
    dirs: list[Path] = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            dirs.append(Path(env[var]).expanduser())
    if env.get("HF_HOME"):
        dirs.append(Path(env["HF_HOME"]).expanduser() / "hub")
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    dirs.append(base / "huggingface" / "hub")
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def _snapshot_config(repo_dir: Path) -> Path | None:
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        try:
            rev = ref.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            rev = ""
        if _REV.match(rev) and (snapshots / rev / "config.json").is_file():
            return snapshots / rev / "config.json"
    if not snapshots.is_dir():
        return None
    candidates = [p / "config.json" for p in snapshots.iterdir() if (p / "config.json").is_file()]
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime)


def find_cached_config(model_id: str, source: str = "--model") -> Path:
    """Path of ``model_id``'s config.json in the local Hugging Face cache.

    Args:
        model_id: ``ORG/NAME`` as on the Hub (e.g. ``google/gemma-2-9b``).
        source: the flag or file the id came from, for the error message.

    Raises:
        InputError: the model is in none of the cache folders (the message lists where it looked and how
            to get the file: ``huggingface-cli download ORG/NAME config.json``), or the id is malformed.
    """
    if not looks_like_hub_id(model_id):
        raise InputError(source, "", f"{model_id!r} is not a Hugging Face id of the form ORG/NAME")
    folder = "models--" + model_id.replace("/", "--")
    searched = hub_cache_dirs()
    for cache_dir in searched:
        found = _snapshot_config(cache_dir / folder)
        if found is not None:
            return found
    where = ", ".join(str(d / folder) for d in searched)
    raise InputError(
        source,
        "",
        f"{model_id}: not a catalog model, file or folder, and no cached config.json under {where} "
        f"(fetch it with `huggingface-cli download {model_id} config.json`, or pass the config.json path)",
    )
