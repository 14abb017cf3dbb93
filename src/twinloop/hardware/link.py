"""Link specifications (scale-up, scale-out, host, memory, storage) from ``catalog/links.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

from twinloop.catalog import CATALOG_DIR
from twinloop.checked import Range, build, check_fields
from twinloop.errors import InputError, unknown_name
from twinloop.hardware.yaml_cache import load_yaml


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """One link tier: per-direction bandwidth and per-message latency (the alpha-beta costs).

    A frozen dataclass checked at construction (:mod:`twinloop.checked`).
    """

    name: str
    kind: Literal["scale-up", "scale-out", "host", "memory", "storage"]
    bandwidth_per_direction_bytes_per_s: Annotated[float, Range(gt=0)]
    latency_s: Annotated[float, Range(ge=0)]
    source: str
    #: The scale-up switch reduces in-network (NVLink SHARP, "NVLS": NVSwitch gen3+ in HGX H100/H200/H800/B200).
    nvls: bool = False
    #: The scale-out fabric reduces in-network (InfiniBand SHARP; NCCL's CollNet algorithms).
    sharp: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


@cache
def _entries() -> dict[str, Any]:
    """The packaged ``links`` mapping as parsed, not yet validated."""
    raw = load_yaml(CATALOG_DIR / "links.yaml")
    if not isinstance(raw, dict) or not isinstance(raw.get("links"), dict):
        raise InputError(str(CATALOG_DIR / "links.yaml"), "links", "expected a mapping 'links: {name: {...}}'")
    links: dict[str, Any] = raw["links"]
    return links


@cache
def _link(name: str) -> LinkSpec:
    path = CATALOG_DIR / "links.yaml"
    body = _entries()[name]
    if not isinstance(body, dict):
        raise InputError(str(path), f"links.{name}", "expected a mapping of fields")
    return build(LinkSpec, {"name": name, **body}, str(path), f"links.{name}.")


@cache
def link_catalog() -> dict[str, LinkSpec]:
    """The packaged link catalog, every entry validated (cached)."""
    return {name: _link(name) for name in _entries()}


def get_link(name: str, source: str = "--link") -> LinkSpec:
    """Look up a link by name; unknown names raise a clear :class:`~twinloop.errors.InputError`.

    Only this entry is validated (as :func:`twinloop.hardware.gpu.get_gpu`: start-up time).
    """
    entries = _entries()
    if name not in entries:
        raise unknown_name(source, "", "link", name, entries)
    return _link(name)
