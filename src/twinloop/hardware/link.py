"""Link specifications (scale-up, scale-out, host, memory, storage) from ``catalog/links.yaml``."""

from __future__ import annotations

from functools import cache
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from twinloop.catalog import CATALOG_DIR
from twinloop.errors import unknown_name


class LinkSpec(BaseModel):
    """One link tier: per-direction bandwidth and per-message latency (the alpha-beta costs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["scale-up", "scale-out", "host", "memory", "storage"]
    bandwidth_per_direction_bytes_per_s: float = Field(gt=0)
    latency_s: float = Field(ge=0)
    source: str
    #: The scale-up switch reduces in-network (NVLink SHARP, "NVLS": NVSwitch gen3+ in HGX H100/H200/H800/B200).
    nvls: bool = False
    #: The scale-out fabric reduces in-network (InfiniBand SHARP; NCCL's CollNet algorithms).
    sharp: bool = False


@cache
def link_catalog() -> dict[str, LinkSpec]:
    """The packaged link catalog (cached)."""
    raw = yaml.load((CATALOG_DIR / "links.yaml").read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {name: LinkSpec(name=name, **body) for name, body in raw["links"].items()}


def get_link(name: str, source: str = "--link") -> LinkSpec:
    """Look up a link by name; unknown names raise a clear :class:`~twinloop.errors.InputError`."""
    catalog = link_catalog()
    if name not in catalog:
        raise unknown_name(source, "", "link", name, catalog)
    return catalog[name]
