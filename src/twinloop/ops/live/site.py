"""Where a live cluster's GPUs sit: GPU ids from source labels, placed by an optional site file.

A source names a GPU by labels (``Hostname``, ``gpu``, ``UUID``, ``modelName``; Kubernetes adds ``pod`` and
``namespace``). Without a site file every host sits in ``site0/row0/rack0`` (the sources' default prefix). A site
file says where each host is::

    site: dc1
    gpu: h100-sxm            # catalog GPU of hosts that do not say (optional; else from modelName, else H100 SXM)
    liquid_rows: [row1]      # rows cooled by a CDU the loop may steer (optional)
    air_rows: [row2]         # rows cooled by air handlers on the same facility water (optional)
    hosts:
      node01: {row: row1, rack: r1, cdu: cdu-a, pdu: pdu-3}
      node02: {row: row1, rack: r1}

so ``node01``'s GPU 3 is ``dc1/row1/r1/node01/gpu3``, rack ``dc1/row1/r1`` is on CDU ``cdu-a`` and node
``dc1/row1/r1/node01`` on PDU ``pdu-3``. The file is a frozen, validated model; errors name the file, the field
and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from twinloop.errors import InputError, pydantic_error
from twinloop.hardware.gpu import get_gpu, gpu_family_key, gpu_key
from twinloop.ops.detect.rules import GpuLimits
from twinloop.ops.ports import Topology
from twinloop.safeio import load_yaml

_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{value!r} is not a name (allowed: letters, digits, _ . : -; no '/')")
    return value


class HostPlace(BaseModel):
    """Where one host sits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row: str = "row0"
    rack: str = "rack0"
    cdu: str | None = None
    pdu: str | None = None
    gpu: str | None = Field(default=None, description="catalog GPU name of this host's GPUs")

    _names = field_validator("row", "rack")(_check_name)


class SiteFile(BaseModel):
    """A site file (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    site: str = "site0"
    gpu: str | None = None
    liquid_rows: tuple[str, ...] = ()
    air_rows: tuple[str, ...] = ()
    hosts: Mapping[str, HostPlace] = Field(default_factory=dict)

    _site = field_validator("site")(_check_name)

    @field_validator("air_rows")
    @classmethod
    def _air_not_liquid(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        both = sorted(set(value) & set(info.data.get("liquid_rows", ())))
        if both:
            raise ValueError(f"{', '.join(both)} also in liquid_rows (a row is cooled one way)")
        return value

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, value: Mapping[str, HostPlace]) -> Mapping[str, HostPlace]:
        for host in value:
            _check_name(host)
        return value


def load_site(path: str | Path) -> SiteFile:
    """Load and validate a site file; errors name the file and the dotted field."""
    p = Path(path)
    raw = load_yaml(p)
    try:
        site = SiteFile.model_validate(raw or {})
    except ValidationError as exc:
        raise pydantic_error(str(p), exc) from None
    for host, place in site.hosts.items():
        for name in (place.gpu, site.gpu):
            if name is not None:
                try:
                    get_gpu(name)
                except (InputError, KeyError):
                    raise InputError(str(p), f"hosts.{host}.gpu", f"unknown catalog GPU {name!r}") from None
    return site


def _catalog_name(model_name: str | None) -> str:
    """The catalog GPU for a reported model name (``NVIDIA H100 80GB HBM3`` → ``h100-sxm``,
    :func:`~twinloop.hardware.gpu.gpu_key`), else a guess by family name in it, else H100 SXM.
    """
    name = model_name or ""
    return gpu_key(name) or gpu_family_key(name) or "h100-sxm"


def gpu_index(entity: str, labels: Mapping[str, str]) -> str:
    """The GPU's index on its host: the ``gpu`` label, else the entity's last component."""
    idx = labels.get("gpu")
    if idx:
        return idx
    leaf = entity.rsplit("/", 1)[-1]
    return leaf[3:] if leaf.startswith("gpu") else leaf


def host_of(entity: str, labels: Mapping[str, str]) -> str:
    """The GPU's host: the ``Hostname`` label, else the entity's node component."""
    host = labels.get("Hostname")
    if host:
        return host
    parts = entity.split("/")
    return parts[-2] if len(parts) >= 2 else "localhost"


def place_gpus(
    source_ids: Sequence[str], labels: Mapping[str, Mapping[str, str]], site: SiteFile | None
) -> tuple[Topology, dict[str, str]]:
    """The loop's topology of the GPUs a source reported, and the source id → GPU id map.

    Without a site file the source's own ids are kept (they are already ``site/row/rack/node/gpu``); with one,
    each GPU becomes ``<site>/<row>/<rack>/<host>/gpu<i>`` from its labels.
    """
    mapping: dict[str, str] = {}
    kinds: list[str] = []
    cdu_of_rack: dict[str, str] = {}
    pdu_of_node: dict[str, str] = {}
    for sid in source_ids:
        lab = labels.get(sid, {})
        host = host_of(sid, lab)
        if site is None:
            gid = sid
            kind = _catalog_name(lab.get("modelName"))
        else:
            place = site.hosts.get(host, HostPlace())
            gid = f"{site.site}/{place.row}/{place.rack}/{host}/gpu{gpu_index(sid, lab)}"
            kind = place.gpu or site.gpu or _catalog_name(lab.get("modelName"))
            rack = f"{site.site}/{place.row}/{place.rack}"
            if place.cdu:
                cdu_of_rack[rack] = place.cdu
            if place.pdu:
                pdu_of_node[f"{rack}/{host}"] = place.pdu
        mapping[sid] = gid
        kinds.append(kind)
    gpu_ids = sorted(set(mapping.values()))
    kind_of = dict(zip(mapping.values(), kinds, strict=True))
    specs = sorted(set(kinds))
    kind_index = np.array([specs.index(kind_of[g]) for g in gpu_ids], dtype=np.int64)
    limits = GpuLimits.from_kinds([get_gpu(s) for s in specs], kind_index)
    liquid = tuple(f"{site.site}/{r}" for r in site.liquid_rows) if site else ()
    air = tuple(f"{site.site}/{r}" for r in site.air_rows) if site else ()
    topo = Topology(tuple(gpu_ids), limits, cdu_of_rack, pdu_of_node, liquid, air)
    return topo, mapping
