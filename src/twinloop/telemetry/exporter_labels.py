"""dcgm-exporter's labels for a twinloop entity, and their text in the exposition format.

GPU series carry dcgm-exporter's labels:

* ``gpu`` (index on the node), ``device`` (``nvidia<gpu>``), ``UUID``, ``modelName``, ``pci_bus_id``;
* ``Hostname``: the node's hostname, unique per node (a twin node ``dc1/r01/k03/n05`` becomes
  ``dc1-r01-k03-n05``; a ``Hostname`` label that came with the data wins);
* ``pod``, ``namespace``, ``container`` for a GPU that runs a job (dcgm-exporter's Kubernetes mapping:
  pod = the job, namespace = the ``namespace`` label or ``twinloop``, container = ``container`` or ``main``)
  and ``hpc_job`` (its HPC job mapping). A plain ``job`` label would be renamed ``exported_job`` by
  Prometheus, which owns ``job``.

Where the data did not bring a ``UUID`` or ``pci_bus_id`` (the twin), both are *synthesized*,
deterministically from the entity id (``GPU-<uuid5>``, bus ``0x18 + 0x10·gpu``): they identify the series,
not hardware. Every series also has an ``entity`` label with the twinloop entity id, so that values map back
exactly.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

_GPU_PART = re.compile(r"^(?:gpu|g)?(\d+)$")
_UUID_NS = uuid.UUID("6b1d2b1e-3f0e-4c55-9a53-74776e6c6f6f")  # fixed: the same entity always gets the same UUID
DEFAULT_NAMESPACE = "twinloop"
DEFAULT_CONTAINER = "main"


def synthetic_uuid(entity: str) -> str:
    """A stable nvidia-smi-style UUID for a GPU that has none (the twin's): ``GPU-<uuid5 of the entity id>``."""
    return f"GPU-{uuid.uuid5(_UUID_NS, entity)}"


def synthetic_pci_bus_id(gpu: int) -> str:
    """A PCI bus id in nvidia-smi's spelling for GPU ``gpu`` of a node (buses 0x18, 0x28, ...; synthetic)."""
    return f"00000000:{(0x18 + 0x10 * gpu) % 256:02X}:00.0"


def entity_labels(entity: str, labels: Mapping[str, str]) -> dict[str, str]:
    """dcgm-exporter labels of one entity (GPU ids ``.../<node>/gpu<i>`` or ``.../g<i>`` get the GPU set).

    Args:
        entity: the twinloop entity id.
        labels: labels that came with the data (``UUID``, ``modelName``/``gpu_kind``, ``job``, ``pod`` ...).

    Returns:
        Label name → value; empty values are left out (Prometheus treats them as absent anyway).
    """
    parts = entity.split("/")
    out: dict[str, str] = {}
    m = _GPU_PART.match(parts[-1]) if len(parts) >= 2 else None
    if m is not None or "gpu" in labels:
        gpu = labels.get("gpu", m.group(1) if m else "0")
        node = "-".join(parts[:-1]) if m is not None else "-".join(parts)
        out["gpu"] = gpu
        out["UUID"] = labels.get("UUID") or synthetic_uuid(entity)
        out["device"] = labels.get("device", f"nvidia{gpu}")
        out["modelName"] = labels.get("modelName", labels.get("gpu_kind", ""))
        out["Hostname"] = labels.get("Hostname") or node
        out["pci_bus_id"] = labels.get("pci_bus_id") or (synthetic_pci_bus_id(int(gpu)) if gpu.isdigit() else "")
    elif len(parts) == 4:
        out["Hostname"] = labels.get("Hostname") or "-".join(parts)
    job = labels.get("job") or labels.get("hpc_job") or ""
    pod = labels.get("pod") or job
    if pod:
        out["pod"] = pod
        out["namespace"] = labels.get("namespace") or DEFAULT_NAMESPACE
        out["container"] = labels.get("container") or DEFAULT_CONTAINER
    if job:
        out["hpc_job"] = job
    if labels.get("model"):
        out["model"] = labels["model"]
    out["entity"] = entity
    return {k: v for k, v in out.items() if v != ""}


def escape_label_value(value: str) -> str:
    """A label value escaped for the text format (backslash, double quote and newline)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_text(labels: Mapping[str, str]) -> str:
    """``{k="v",...}`` with names sorted (as ``prometheus_client`` writes them); ``""`` for no labels."""
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items())) + "}"
