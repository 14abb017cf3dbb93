"""Shell completion of catalog names for ``--gpu`` and ``--model`` (``twinloop --install-completion``).

Completion runs on every TAB, so these read the catalog files directly (file names, YAML keys) instead of
loading and validating the catalogs.
"""

from __future__ import annotations

import re

from twinloop.catalog import CATALOG_DIR

_GPU_KEY = re.compile(r"^  ([A-Za-z0-9][A-Za-z0-9_.-]*):\s*$", re.MULTILINE)


def gpu_names(incomplete: str) -> list[str]:
    """Catalog GPU names starting with ``incomplete`` (the top-level keys under ``gpus:`` in gpus.yaml)."""
    text = (CATALOG_DIR / "gpus.yaml").read_text()
    return [n for n in _GPU_KEY.findall(text) if n.startswith(incomplete)]


def model_names(incomplete: str) -> list[str]:
    """Catalog model names starting with ``incomplete`` (``catalog/models/<name>.json``)."""
    return sorted(p.stem for p in (CATALOG_DIR / "models").glob("*.json") if p.stem.startswith(incomplete))
