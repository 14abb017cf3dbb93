"""The names people and drivers give a GPU, resolved to a catalog key (``--gpu H100``, ``NVIDIA H100 80GB HBM3``).

A catalog key (``h100-sxm``) is exact, but nobody types it the first time: an SRE writes ``--gpu H100`` or pastes
what ``nvidia-smi --query-gpu=name`` printed, and telemetry carries the driver's name in dcgm-exporter's
``modelName`` label. Names are compared normalized (lower case, letters and digits only, a leading ``nvidia``
dropped), in this order: a catalog key, a catalog display name, a name the driver reports
(:data:`DRIVER_NAMES`), a family name (:data:`FAMILY_NAMES`). A family name means the SXM / OAM part, the one
LLM training and serving clusters are built from; the plan's output names the key it used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Names the NVIDIA driver reports (nvidia-smi ``name``, NVML, dcgm-exporter ``modelName``), normalized → key.
DRIVER_NAMES = {
    "h10080gbhbm3": "h100-sxm",
    "h100sxm580gb": "h100-sxm",
    "h100pcie": "h100-pcie",
    "h100nvl": "h100-nvl",
    "a100sxm480gb": "a100-sxm-80gb",
    "h200": "h200-sxm",
    "h200141gbhbm3e": "h200-sxm",
    "h800": "h800-sxm",
    "h80080gbhbm3": "h800-sxm",
    "gh200480gb": "gh200",
    "l40s": "l40s",
}

#: Family names people type, normalized → the SXM / OAM part of the family (with the SXM generation where only one
#: memory size exists in the catalog's part: the H100 SXM5 is 80 GB).
FAMILY_NAMES = {
    "a100": "a100-sxm-80gb", "h100": "h100-sxm", "h100sxm5": "h100-sxm", "h800": "h800-sxm", "h200": "h200-sxm",
    "b200": "b200", "b300": "b300", "gh200": "gh200", "gb200": "gb200", "gb300": "gb300", "mi300x": "mi300x",
    "mi325x": "mi325x", "mi355x": "mi355x", "gaudi3": "gaudi3", "l40s": "l40s",
}  # fmt: skip


def normalize(name: str) -> str:
    """``name`` lower case, letters and digits only, without a leading ``nvidia``."""
    return "".join(ch for ch in name.lower() if ch.isalnum()).removeprefix("nvidia")


def catalog_key(name: str, entries: Mapping[str, Any]) -> str | None:
    """The catalog key ``name`` means (see the module docstring), or None. ``entries``: key → raw catalog entry
    (its ``display_name`` is read).
    """
    if name in entries:
        return name
    n = normalize(name)
    if not n:
        return None
    for key, body in entries.items():
        display = body.get("display_name", "") if isinstance(body, Mapping) else ""
        if n in (normalize(key), normalize(str(display))):
            return key
    for table in (DRIVER_NAMES, FAMILY_NAMES):
        alias = table.get(n)
        if alias in entries:
            return alias
    return None


def family_guess(name: str, entries: Mapping[str, Any]) -> str | None:
    """A catalog key whose family name occurs in ``name`` (longest first, so ``GH200`` is not an ``H200``); a
    guess for driver names no table holds yet (``NVIDIA H100 80GB HBM3e``), None when no family matches.
    """
    n = normalize(name)
    for fam in sorted(FAMILY_NAMES, key=len, reverse=True):
        if fam in n and FAMILY_NAMES[fam] in entries:
            return FAMILY_NAMES[fam]
    return None
