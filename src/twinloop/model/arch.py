"""Where a model comes from: the packaged catalog, a config.json file or folder, the Hugging Face cache.

:func:`load_model` resolves a name or path to a :class:`~twinloop.model.architecture.ModelArch` (the typed
architecture, defined in :mod:`twinloop.model.architecture` and importable from here too), parsed by
:mod:`twinloop.model.hf_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from twinloop.catalog import CATALOG_DIR
from twinloop.errors import InputError, unknown_name
from twinloop.model.architecture import SUPPORTED_MODEL_TYPES, ModelArch

__all__ = [
    "MODELS_DIR",
    "SUPPORTED_MODEL_TYPES",
    "ModelArch",
    "catalog_model_names",
    "config_path",
    "from_hf_config",
    "load_config_file",
    "load_model",
]

MODELS_DIR = CATALOG_DIR / "models"


def from_hf_config(cfg: Mapping[str, Any], name: str, source: str = "config.json") -> ModelArch:
    """Build a :class:`ModelArch` from a Hugging Face ``config.json`` mapping (see
    :func:`twinloop.model.hf_config.parse_hf_config`).

    Raises:
        InputError: unsupported ``model_type`` (listing the supported ones) or a missing/invalid field,
            naming the source, the dotted field and the allowed range.
    """
    from twinloop.model.hf_config import parse_hf_config

    return parse_hf_config(cfg, name, source)


def catalog_model_names() -> list[str]:
    """Names of the packaged model configs (``catalog/models/<name>.json``)."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.json"))


def load_config_file(path: Path, name: str | None = None) -> ModelArch:
    """Read a Hugging Face config.json file into a :class:`ModelArch` (name = file's parent or stem).

    The file is read defensively (:func:`twinloop.model.hf_fields.read_json_file`): size-capped, UTF-8,
    bounded nesting; every failure is an :class:`InputError` naming the file.
    """
    from twinloop.model.hf_fields import read_json_file

    cfg = read_json_file(path)
    if name is None:
        name = path.stem if path.stem != "config" else path.resolve().parent.name
    return from_hf_config(cfg, name=name, source=str(path))


@cache
def _catalog_model(name: str) -> ModelArch:
    return load_config_file(MODELS_DIR / f"{name}.json")


def load_model(name_or_path: str, source: str = "--model") -> ModelArch:
    """A model by catalog name (``llama-3-70b``), config.json path, model folder, or Hugging Face id.

    Resolution order: the packaged catalog; an existing file or folder (a folder's ``config.json``); a
    Hugging Face id ``ORG/NAME`` looked up offline in the local Hugging Face cache
    (:func:`twinloop.model.hf_cache.find_cached_config`). A name none of these resolve raises one
    :class:`InputError` that lists close catalog names, or says where the cache was searched.
    """
    if name_or_path in catalog_model_names():
        return _catalog_model(name_or_path)
    path = config_path(name_or_path, source)
    hub_id = not Path(name_or_path).exists()  # found in the Hugging Face cache: named as given
    return load_config_file(path, name=name_or_path if hub_id else None)


def config_path(name_or_path: str, source: str = "--model") -> Path:
    """The config.json a model name or path resolves to (see :func:`load_model`; a catalog name: its file).

    Raises:
        InputError: no such file, or a name that is neither in the catalog nor in the local Hugging Face cache.
    """
    if name_or_path in catalog_model_names():
        return MODELS_DIR / f"{name_or_path}.json"
    path = Path(name_or_path)
    if path.is_dir():  # a downloaded model folder: read its config.json
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise InputError(source, "", f"{name_or_path}: no such config file")
        return path
    from twinloop.model.hf_cache import find_cached_config, looks_like_hub_id

    if looks_like_hub_id(name_or_path):
        return find_cached_config(name_or_path, source)
    raise unknown_name(source, "", "model", name_or_path, catalog_model_names())
