"""Link specifications (scale-up, scale-out, host, memory, storage) from ``catalog/links.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Literal

from twinloop.catalog import CATALOG_DIR
from twinloop.checked import Range, build, check_fields
from twinloop.errors import unknown_name
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
def link_catalog() -> dict[str, LinkSpec]:
    """The packaged link catalog (cached)."""
    path = CATALOG_DIR / "links.yaml"
    raw = load_yaml(path)
    return {
        name: build(LinkSpec, {"name": name, **body}, str(path), f"links.{name}.")
        for name, body in raw["links"].items()
    }


def get_link(name: str, source: str = "--link") -> LinkSpec:
    """Look up a link by name; unknown names raise a clear :class:`~twinloop.errors.InputError`."""
    catalog = link_catalog()
    if name not in catalog:
        raise unknown_name(source, "", "link", name, catalog)
    return catalog[name]
