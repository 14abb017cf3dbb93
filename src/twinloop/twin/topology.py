"""The site as index arrays: GPU → node → rack → row, GPU kinds, and hierarchical entity ids.

GPUs are numbered in site/row/rack/node/gpu order, so every node's and every rack's GPUs are contiguous and
per-node / per-rack sums are one ``np.add.reduceat`` each.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec, gpu_catalog
from twinloop.twin.scenario import RowSpec, ScenarioSpec


@dataclass(frozen=True)
class Topology:
    """Index arrays of the site (all int32/int64 NumPy arrays are read-only by convention).

    Attributes:
        site: site id (first path component of every entity id).
        rows: one RowSpec per physical row (the scenario's ``count`` expanded).
        kinds: GPU specs, one per distinct kind; ``gpu_kind`` indexes it.
        gpu_node, gpu_rack, gpu_row, gpu_kind: per GPU.
        node_rack, node_row, node_start: per node (``node_start`` = first GPU index).
        rack_row, rack_start, rack_node_start: per rack (first GPU, first node).
        row_rack_start: per row (first rack).
    """

    site: str
    rows: tuple[RowSpec, ...]
    kinds: tuple[GpuSpec, ...]
    gpu_node: NDArray[np.int32]
    gpu_rack: NDArray[np.int32]
    gpu_row: NDArray[np.int32]
    gpu_kind: NDArray[np.int32]
    gpu_local: NDArray[np.int32]
    node_rack: NDArray[np.int32]
    node_row: NDArray[np.int32]
    node_start: NDArray[np.int64]
    node_gpus: NDArray[np.int32]
    rack_row: NDArray[np.int32]
    rack_start: NDArray[np.int64]
    rack_node_start: NDArray[np.int64]
    row_rack_start: NDArray[np.int64]

    @property
    def n_gpus(self) -> int:
        """Number of GPUs."""
        return int(self.gpu_node.size)

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.node_rack.size)

    @property
    def n_racks(self) -> int:
        """Number of racks."""
        return int(self.rack_row.size)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self.rows)

    def row_id(self, row: int) -> str:
        """Entity id of a row, e.g. ``dc1/r01``."""
        return f"{self.site}/r{row + 1:02d}"

    def rack_id(self, rack: int) -> str:
        """Entity id of a rack, e.g. ``dc1/r01/k03`` (rack numbers restart in every row)."""
        row = int(self.rack_row[rack])
        return f"{self.row_id(row)}/k{rack - int(self.row_rack_start[row]) + 1:02d}"

    def node_id(self, node: int) -> str:
        """Entity id of a node, e.g. ``dc1/r01/k03/n05``."""
        rack = int(self.node_rack[node])
        return f"{self.rack_id(rack)}/n{node - int(self.rack_node_start[rack]) + 1:02d}"

    def gpu_id(self, gpu: int) -> str:
        """Entity id of a GPU, e.g. ``dc1/r01/k03/n05/g7`` (GPU numbers start at 0 as in nvidia-smi)."""
        return f"{self.node_id(int(self.gpu_node[gpu]))}/g{int(self.gpu_local[gpu])}"

    def ids(self, level: str) -> list[str]:
        """All entity ids of ``level`` ('gpu', 'node', 'rack', 'row') in index order."""
        count = {"gpu": self.n_gpus, "node": self.n_nodes, "rack": self.n_racks, "row": self.n_rows}[level]
        fn = {"gpu": self.gpu_id, "node": self.node_id, "rack": self.rack_id, "row": self.row_id}[level]
        return [fn(i) for i in range(count)]

    def resolve(self, entity: str) -> tuple[str, int]:
        """(level, index) of an entity id; raises KeyError for ids that do not exist."""
        parts = entity.strip("/").split("/")
        if parts[0] != self.site:
            raise KeyError(entity)
        if len(parts) == 1:
            return "site", 0
        try:
            row = int(parts[1][1:]) - 1
            if not (parts[1][0] == "r" and 0 <= row < self.n_rows):
                raise KeyError(entity)
            if len(parts) == 2:
                return "row", row
            rack = int(self.row_rack_start[row]) + int(parts[2][1:]) - 1
            row_end = int(self.row_rack_start[row + 1]) if row + 1 < self.n_rows else self.n_racks
            if not (parts[2][0] == "k" and int(self.row_rack_start[row]) <= rack < row_end):
                raise KeyError(entity)
            if len(parts) == 3:
                return "rack", rack
            node = int(self.rack_node_start[rack]) + int(parts[3][1:]) - 1
            if not (parts[3][0] == "n" and node < self.n_nodes and self.node_rack[node] == rack):
                raise KeyError(entity)
            if len(parts) == 4:
                return "node", node
            local = int(parts[4][1:])
            if not (parts[4][0] == "g" and 0 <= local < int(self.node_gpus[node])) or len(parts) > 5:
                raise KeyError(entity)
            return "gpu", int(self.node_start[node]) + local
        except (ValueError, IndexError):
            raise KeyError(entity) from None

    def gpus_of(self, level: str, index: int) -> NDArray[np.int64]:
        """GPU indices under an entity."""
        sel = {"site": None, "row": self.gpu_row, "rack": self.gpu_rack, "node": self.gpu_node}
        if level == "gpu":
            return np.array([index], dtype=np.int64)
        arr = sel[level]
        if arr is None:
            return np.arange(self.n_gpus, dtype=np.int64)
        return np.flatnonzero(arr == index).astype(np.int64)

    def select(self, level: str, patterns: tuple[str, ...]) -> NDArray[np.int64]:
        """Indices of ``level`` entities whose id matches any glob pattern (``*`` keeps all).

        An entity is also kept when a pattern selects everything under it (``dc1/r01/k02/*`` keeps rack k02).
        """
        count = {"gpu": self.n_gpus, "node": self.n_nodes, "rack": self.n_racks, "row": self.n_rows}[level]
        if "*" in patterns:
            return np.arange(count, dtype=np.int64)
        ids = self.ids(level)
        keep = [
            i
            for i, e in enumerate(ids)
            if any(fnmatch.fnmatchcase(e, p) or fnmatch.fnmatchcase(e + "/", p) for p in patterns)
        ]
        return np.asarray(keep, dtype=np.int64)


def build_topology(spec: ScenarioSpec) -> Topology:
    """Expand the scenario's rows into index arrays (vectorized per row group)."""
    catalog = gpu_catalog()
    rows: list[RowSpec] = [r for r in spec.rows for _ in range(r.count)]
    kind_names: list[str] = []
    for r in rows:
        if r.node.gpu not in kind_names:
            kind_names.append(r.node.gpu)
    gpu_node, gpu_rack, gpu_row, gpu_kind, gpu_local = [], [], [], [], []
    node_rack, node_row, node_gpus, rack_row = [], [], [], []
    rack_node_start: list[int] = []
    row_rack_start: list[int] = []
    n_node = n_rack = 0
    for ri, r in enumerate(rows):
        row_rack_start.append(n_rack)
        g = r.node.gpus
        nodes = r.racks * r.nodes_per_rack
        racks_here = np.repeat(np.arange(n_rack, n_rack + r.racks), r.nodes_per_rack)
        node_idx = np.arange(n_node, n_node + nodes)
        rack_node_start.extend(range(n_node, n_node + nodes, r.nodes_per_rack))
        node_rack.append(racks_here)
        node_row.append(np.full(nodes, ri))
        node_gpus.append(np.full(nodes, g))
        rack_row.append(np.full(r.racks, ri))
        gpu_node.append(np.repeat(node_idx, g))
        gpu_rack.append(np.repeat(racks_here, g))
        gpu_row.append(np.full(nodes * g, ri))
        gpu_kind.append(np.full(nodes * g, kind_names.index(r.node.gpu)))
        gpu_local.append(np.tile(np.arange(g), nodes))
        n_node += nodes
        n_rack += r.racks

    def cat(parts: list[NDArray[np.int64]], dtype: type = np.int32) -> NDArray[np.int32]:
        return np.concatenate(parts).astype(dtype)

    node_gpus_arr = cat(node_gpus)
    node_start = np.concatenate([[0], np.cumsum(node_gpus_arr)[:-1]]).astype(np.int64)
    rack_node_start_arr = np.asarray(rack_node_start, dtype=np.int64)
    return Topology(
        site=spec.site,
        rows=tuple(rows),
        kinds=tuple(catalog[k] for k in kind_names),
        gpu_node=cat(gpu_node),
        gpu_rack=cat(gpu_rack),
        gpu_row=cat(gpu_row),
        gpu_kind=cat(gpu_kind),
        gpu_local=cat(gpu_local),
        node_rack=cat(node_rack),
        node_row=cat(node_row),
        node_start=node_start,
        node_gpus=node_gpus_arr,
        rack_row=cat(rack_row),
        rack_start=node_start[rack_node_start_arr],
        rack_node_start=rack_node_start_arr,
        row_rack_start=np.asarray(row_rack_start, dtype=np.int64),
    )
