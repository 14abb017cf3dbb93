"""Group simultaneous same-class detections along the topology: one fault, one incident.

Entities are hierarchical ids (``site/row/rack/node/gpu``). A :class:`TopologyTree` is built once from the
entity list (optionally with racks re-parented under their CDU, for cooling classes). Each step the
:class:`IncidentGrouper` takes, per class, the GPUs that fired within the last ``window_s`` and marks every
tree node *covered* when at least ``min_fraction`` of its children (and at least two, if it has two) are
covered, bottom-up (a server is covered by two of its GPUs: they share its PSU, board and switches); a firing
GPU belongs to its highest covered ancestor (or itself). So 64 GPUs of one rack
firing give one rack incident, most racks of a row give one row (or CDU) incident, and two unrelated GPUs in
different racks give two incidents.

Incidents stay open while their members keep firing and close after ``quiet_s`` without a detection. A new
group that overlaps an open incident of the same class (shares a member, or is above or below its root)
grows that incident; when one group covers several open incidents, the oldest survives and the others are
reported as ``merged``, except that an incident open for more than ``quiet_s`` keeps its root and GPUs that start
firing later do not lift it up the tree (a second CDU failing long after the first is a second incident).
``settle_s`` holds a brand-new group back for a few seconds so that GPUs that cross a threshold a little apart
open one incident rather than several.

A power-delivery incident rooted at a row or the whole site is a facility power excursion. Thermal throttling that
fires at once on ``spread_nodes`` (3) or more nodes over two or more racks of one row is one incident of the row (or
its CDU): a hot row, not that many GPUs each with a failing thermal path; so is throttling on GPUs the caller marks
``row_wide`` (no warmer for their power than their row's other GPUs of their model: the tail of a hot row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.events import Detection, EventClass, Impact, Incident, IncidentStatus, Severity, severity

I64 = NDArray[np.int64]
BoolArr = NDArray[np.bool_]

COOLING_CLASSES: frozenset[EventClass] = frozenset({EventClass.COOLING_DEGRADATION, EventClass.THERMAL_THROTTLE})


@dataclass(frozen=True, eq=False)
class TopologyTree:
    """A prefix tree over entity ids (node 0..n_nodes-1; leaves are the entities, in entity order).

    Attributes:
        names: name of every tree node (a path prefix, or a CDU id).
        parent: parent node, -1 for a root.
        depth: 0 for roots.
        n_children: children per node.
        leaf: tree node of each entity (entity index → node).
    """

    names: tuple[str, ...]
    parent: I64
    depth: I64
    n_children: I64
    leaf: I64

    @classmethod
    def from_entities(cls, entities: Sequence[str], cdu_of_rack: Mapping[str, str] | None = None) -> TopologyTree:
        """Tree of ``entities``; with ``cdu_of_rack`` a rack's parent is its CDU instead of its row.

        Args:
            entities: entity ids, ``/``-separated, most general first.
            cdu_of_rack: rack id (a 3-component prefix ``site/row/rack``) → CDU id (any string).
        """
        index: dict[str, int] = {}
        names: list[str] = []
        parent: list[int] = []
        depth: list[int] = []
        leaf = np.empty(len(entities), dtype=np.int64)

        def node(name: str, par: int, d: int) -> int:
            i = index.get(name)
            if i is None:
                i = index[name] = len(names)
                names.append(name)
                parent.append(par)
                depth.append(d)
            return i

        for e, ent in enumerate(entities):
            parts = ent.strip("/").split("/")
            chain = ["/".join(parts[: k + 1]) for k in range(len(parts))]
            if cdu_of_rack and len(chain) >= 3 and chain[2] in cdu_of_rack:
                chain[1] = cdu_of_rack[chain[2]]
            par = -1
            for d, name in enumerate(chain):
                par = node(name, par, d)
            leaf[e] = par
        parent_a = np.asarray(parent, dtype=np.int64)
        n_children = np.bincount(parent_a[parent_a >= 0], minlength=len(names)).astype(np.int64)
        return cls(tuple(names), parent_a, np.asarray(depth, dtype=np.int64), n_children, leaf)

    @property
    def _only_child(self) -> I64:
        """The child of each single-child node (-1 elsewhere)."""
        only = np.full(self.n_nodes, -1, dtype=np.int64)
        has = self.parent >= 0
        kids = np.flatnonzero(has)
        single = self.n_children[self.parent[kids]] == 1
        only[self.parent[kids[single]]] = kids[single]
        return only

    @property
    def n_nodes(self) -> int:
        """Number of tree nodes."""
        return len(self.names)

    def cover(self, active: BoolArr, min_fraction: float = 0.5) -> I64:
        """For each entity, the highest covered ancestor-or-self if it is active, else -1.

        Args:
            active: per entity (leaf) flag.
            min_fraction: a node is covered when at least this fraction of its children is covered (and at
                least two children, when it has two or more); a parent of leaves needs only two.
        """
        covered = np.zeros(self.n_nodes, dtype=bool)
        covered[self.leaf[active]] = True
        max_depth = int(self.depth.max()) if self.n_nodes else 0
        has_parent = self.parent >= 0
        need = np.maximum(np.minimum(2, self.n_children), np.ceil(min_fraction * self.n_children - 1e-9))
        # Two GPUs of one server firing together share the server's cause (PSU, board, NVSwitch).
        leaf_parents = self.parent[self.leaf[self.parent[self.leaf] >= 0]]
        need[leaf_parents] = np.minimum(need[leaf_parents], 2)
        for d in range(max_depth, 0, -1):
            ch = np.flatnonzero((self.depth == d) & covered & has_parent)
            if ch.size == 0:
                continue
            cnt = np.bincount(self.parent[ch], minlength=self.n_nodes)
            covered |= (cnt >= need) & (self.n_children > 0)
        top = np.full(self.n_nodes, -1, dtype=np.int64)
        for d in range(max_depth + 1):
            at = np.flatnonzero(self.depth == d)
            par = self.parent[at]
            inherited = np.where(par >= 0, top[np.maximum(par, 0)], -1)
            top[at] = np.where(inherited >= 0, inherited, np.where(covered[at], at, -1))
        # A chain of single-child nodes covers the same GPUs: report its lowest member (the rack, not a
        # one-rack row above it).
        for _ in range(max_depth):
            single = (top >= 0) & (self.n_children[np.maximum(top, 0)] == 1)
            if not single.any():
                break
            top = np.where(single, self._only_child[np.maximum(top, 0)], top)
        out = np.where(active, top[self.leaf], -1)
        return np.asarray(out, dtype=np.int64)

    def lca(self, a: int, b: int) -> int:
        """Lowest common ancestor of two nodes (-1 if they share none)."""
        seen: set[int] = set()
        x = a
        while x >= 0:
            seen.add(x)
            x = int(self.parent[x])
        y = b
        while y >= 0 and y not in seen:
            y = int(self.parent[y])
        return y


@dataclass
class _Open:
    incident_id: int
    event_class: EventClass
    root: int  # tree node, or -1 - k for named (non-tree) root k
    signature: str
    members: set[int]
    start_ts: float
    end_ts: float
    evidence: list[Detection] = field(default_factory=list)
    n_detections: int = 0
    last_snapshot: tuple[int, int, int, int] | None = None
    max_severity: int = 0


_Stream = tuple[EventClass, str]
ImpactFn = Callable[[EventClass, NDArray[np.int64]], Impact]


def default_impact(event_class: EventClass, members: NDArray[np.int64]) -> Impact:
    """Every member GPU at risk for one hour (a guess at the time since the last checkpoint)."""
    return Impact(gpu_hours_at_risk=float(members.size), n_gpus=int(members.size))


class IncidentGrouper:
    """Stateful grouping of detections into incidents (see module docstring).

    Args:
        entities: the GPU (leaf) entity ids, in the order detections index them.
        cdu_of_rack: optional rack id → CDU id map; cooling classes group racks by CDU.
        window_s: a GPU counts as firing for this long after its last detection, s.
        quiet_s: an incident closes after this long without a detection, s.
        settle_s: a new group waits this long before it opens an incident, s.
        min_fraction: coverage fraction for a tree node (see :meth:`TopologyTree.cover`).
        max_evidence: detections kept as evidence per incident.
        impact_fn: impact of an incident from its class and member entity indices.
        spread_nodes: thermal throttling on this many nodes over two or more racks of one row at once is one row
            incident (:meth:`_spread_to_row`).
    """

    def __init__(
        self,
        entities: Sequence[str],
        cdu_of_rack: Mapping[str, str] | None = None,
        window_s: float = 30.0,
        quiet_s: float = 120.0,
        settle_s: float = 5.0,
        min_fraction: float = 0.5,
        max_evidence: int = 16,
        impact_fn: ImpactFn = default_impact,
        spread_nodes: int = 3,
    ) -> None:
        self.entities = tuple(entities)
        self.tree = TopologyTree.from_entities(self.entities)
        self.cdu_tree = TopologyTree.from_entities(self.entities, cdu_of_rack) if cdu_of_rack else self.tree
        self.window_s, self.quiet_s, self.settle_s = window_s, quiet_s, settle_s
        self.min_fraction = min_fraction
        self.max_evidence = max_evidence
        self.impact_fn = impact_fn
        n = len(self.entities)
        # Per stream (class, signature): a signature tells apart causes of one class that must not mask each other
        # (a GPU's own thermal path failing inside its row's coolant incident).
        self._last: dict[_Stream, NDArray[np.float64]] = {}
        self._first: dict[_Stream, NDArray[np.float64]] = {}
        self._owner: dict[_Stream, I64] = {}
        self._onset: dict[_Stream, dict[int, Detection]] = {}
        self._named: dict[tuple[EventClass, str, str], int] = {}
        self._named_names: list[str] = []
        self._open: dict[int, _Open] = {}
        self._next_id = 1
        self._n = n
        self._updates: list[Incident] = []
        self.spread_nodes = spread_nodes
        #: Per entity, set by the caller where it throttles: its throttling is its row's (``row_wide``), or its own
        #: thermal path's (``local_fault``: never lifted to the row); see :meth:`_spread_to_row`.
        self.row_wide = np.zeros(n, dtype=bool)
        self.local_fault = np.zeros(n, dtype=bool)
        # Row, rack and node of every entity, as integers (``site/row/rack/node/...`` prefixes).
        self._row_of, self._rack_of, self._node_of = (
            np.unique(["/".join(e.split("/")[:k]) for e in self.entities], return_inverse=True)[1].astype(np.int64)
            if self.entities
            else np.zeros(0, dtype=np.int64)
            for k in (2, 3, 4)
        )

    # --- input ------------------------------------------------------------------------------------------------
    def observe(
        self,
        ts: float,
        event_class: EventClass,
        idx: I64,
        onsets: Sequence[tuple[int, Detection]] = (),
        signature: str = "",
    ) -> None:
        """Entities ``idx`` are firing ``event_class`` at ``ts``; ``onsets`` are (entity index, detection) of
        the new detections among them (kept as evidence). Firings of one class with different ``signature`` (a
        different mechanism) group apart: a fault inside an open incident's scope keeps its own incident.
        """
        key = (event_class, signature)
        if key not in self._last:
            self._last[key] = np.full(self._n, -np.inf)
            self._first[key] = np.full(self._n, np.inf)
            self._owner[key] = np.full(self._n, -1, dtype=np.int64)
            self._onset[key] = {}
        last, first = self._last[key], self._first[key]
        fresh = idx[last[idx] < ts - self.window_s]
        first[fresh] = ts
        last[idx] = ts
        onset = self._onset[key]
        for i, det in onsets:
            onset.setdefault(i, det)

    def observe_named(
        self,
        ts: float,
        event_class: EventClass,
        entity: str,
        detection: Detection | None,
        members: I64 | None = None,
        signature: str = "",
    ) -> None:
        """A detection on an entity outside the tree (a job, the site): one incident per (class, entity, signature).

        ``members`` are the tree entities it concerns (the job's GPUs), for the impact estimate. A new ``signature``
        is a new cause on the same entity (a weather event at a site whose plant incident was already open): its own
        incident, while the old one closes after ``quiet_s`` without detections.
        """
        key = (event_class, entity, signature)
        iid = self._named.get(key)
        if iid is None or iid not in self._open:
            self._named_names.append(entity)
            inc = _Open(self._next_id, event_class, -len(self._named_names), signature, set(), ts, ts)
            self._next_id += 1
            self._open[inc.incident_id] = inc
            self._named[key] = inc.incident_id
        inc = self._open[self._named[key]]
        if members is not None:
            inc.members |= set(members.tolist())
        inc.end_ts = ts
        inc.n_detections += 1
        if detection is not None and len(inc.evidence) < self.max_evidence:
            inc.evidence.append(detection)
        self._emit_if_changed(inc, ts)

    def named_start_ts(self, event_class: EventClass, entity: str, signature: str = "") -> float | None:
        """When the open incident of :meth:`observe_named`'s (class, entity, signature) opened, s; None if none is."""
        iid = self._named.get((event_class, entity, signature))
        inc = self._open.get(iid) if iid is not None else None
        return None if inc is None else inc.start_ts

    # --- grouping ---------------------------------------------------------------------------------------------
    def step(self, ts: float) -> list[Incident]:
        """Group what fired up to ``ts``; return the incident updates (opened, grown, merged, closed)."""
        for key in list(self._last):
            self._group_class(ts, key)
        for inc in list(self._open.values()):
            if inc.end_ts < ts - self.quiet_s:
                self._close(inc, "closed", None)
        out, self._updates = self._updates, []
        return out

    def _tree(self, cls: EventClass) -> TopologyTree:
        return self.cdu_tree if cls in COOLING_CLASSES else self.tree

    def _group_class(self, ts: float, key: _Stream) -> None:
        cls, sig = key
        last, first, owner = self._last[key], self._first[key], self._owner[key]
        fired_now = last == ts
        active = last >= ts - self.window_s
        # Groups held back by settle_s must open later even when their GPUs fired only once (an XID).
        trigger = fired_now | (active & (owner < 0))
        if not trigger.any():
            return
        tree = self._tree(cls)
        top = tree.cover(active, self.min_fraction)
        # Late company does not lift an incident up the tree: an incident opened more than quiet_s ago keeps its
        # root, and GPUs that started firing since are covered apart (one cause spreads within minutes; a second CDU
        # failing twenty minutes after the first is a second fault). Within the old incident's subtree the new ones
        # still grow it (the ancestor check below).
        old_ids = [
            i
            for i, inc in self._open.items()
            if inc.event_class == cls and inc.signature == sig and inc.root >= 0 and inc.start_ts < ts - self.quiet_s
        ]
        if old_ids:
            old = active & np.isin(owner, old_ids)
            if old.any():
                top = tree.cover(active & ~old, self.min_fraction)
                for i in old_ids:
                    top[old & (owner == i)] = self._open[i].root
        if cls == EventClass.THERMAL_THROTTLE and sig == "":
            self._spread_to_row(tree, top, active)
        roots = np.unique(top[trigger])
        onset = self._onset[key]
        for r in roots.tolist():
            members = np.flatnonzero(top == r)
            ids = {int(o) for o in owner[members] if o >= 0 and int(o) in self._open}
            for inc in self._open.values():
                if inc.event_class == cls and inc.signature == sig and inc.root >= 0 and inc.incident_id not in ids:
                    lca = tree.lca(inc.root, r)
                    if lca in (inc.root, r):
                        ids.add(inc.incident_id)
            if not ids:
                if float(first[members].min()) > ts - self.settle_s:
                    continue
                inc = _Open(self._next_id, cls, r, sig, set(), float(first[members].min()), ts)
                self._next_id += 1
                self._open[inc.incident_id] = inc
            else:
                inc = self._open[min(ids)]
                for other in sorted(ids - {inc.incident_id}):
                    o = self._open[other]
                    inc.members |= o.members
                    inc.evidence = (inc.evidence + o.evidence)[: self.max_evidence]
                    inc.n_detections += o.n_detections
                    inc.start_ts = min(inc.start_ts, o.start_ts)
                    owner[list(o.members)] = inc.incident_id
                    self._close(o, "merged", inc.incident_id)
                lca = tree.lca(inc.root, r)
                inc.root = lca if lca >= 0 else r
            owner[members] = inc.incident_id
            new_members = set(members.tolist()) - inc.members
            inc.members |= new_members
            inc.end_ts = ts
            inc.n_detections += int(np.count_nonzero(fired_now[members]))
            for m in sorted(new_members):
                det = onset.pop(m, None)
                if det is not None and len(inc.evidence) < self.max_evidence:
                    inc.evidence.append(det)
            self._emit_if_changed(inc, ts)
        # Onsets of GPUs that stopped firing without joining an incident are dropped.
        for m in [m for m in onset if last[m] < ts - self.window_s]:
            del onset[m]

    def _spread_to_row(self, tree: TopologyTree, top: I64, active: BoolArr) -> None:
        """Throttling at once on ``spread_nodes`` or more nodes over two or more racks of one row is the row's (its
        air or coolant, a hot afternoon), not each GPU's own thermal path: one incident at the GPUs' common
        ancestor (the row, or its CDU), in place of scattered GPU and node incidents each drained on its own.
        """
        idx = np.flatnonzero(active)
        if idx.size == 0:
            return
        for row in np.unique(self._row_of[idx]).tolist():
            mine = idx[self._row_of[idx] == row]
            n_nodes, n_racks = np.unique(self._node_of[mine]).size, np.unique(self._rack_of[mine]).size
            spread = n_nodes >= self.spread_nodes and n_racks > 1
            lift = mine[~self.local_fault[mine]] if spread else mine[self.row_wide[mine]]
            if lift.size == 0:
                continue
            # The row's node in the tree (its CDU where racks hang under one): three levels above a GPU.
            root = int(tree.leaf[lift[0]])
            for _ in range(3):
                root = int(tree.parent[root]) if tree.parent[root] >= 0 else root
            top[lift] = root

    # --- output -----------------------------------------------------------------------------------------------
    def _root_name(self, inc: _Open) -> str:
        if inc.root < 0:
            return self._named_names[-inc.root - 1]
        return self._tree(inc.event_class).names[inc.root]

    def _class_of(self, inc: _Open) -> EventClass:
        wide = inc.root >= 0 and int(self._tree(inc.event_class).depth[inc.root]) <= 1 and len(inc.members) > 1
        if inc.event_class == EventClass.POWER_DELIVERY_FAULT and wide:
            return EventClass.FACILITY_POWER_EXCURSION
        return inc.event_class

    def _snapshot(self, inc: _Open, status: IncidentStatus, merged_into: int | None) -> Incident:
        members_idx = np.fromiter(sorted(inc.members), dtype=np.int64, count=len(inc.members))
        cls = self._class_of(inc)
        impact = self.impact_fn(cls, members_idx) if members_idx.size else Impact()
        members = tuple(self.entities[i] for i in members_idx) if members_idx.size else (self._root_name(inc),)
        return Incident(
            incident_id=inc.incident_id,
            event_class=cls,
            root=self._root_name(inc),
            members=members,
            start_ts=inc.start_ts,
            end_ts=inc.end_ts,
            severity=Severity(max(int(severity(cls, impact)), inc.max_severity)),
            impact=impact,
            evidence=tuple(inc.evidence),
            n_detections=inc.n_detections,
            status=status,
            merged_into=merged_into,
        )

    def _emit_if_changed(self, inc: _Open, ts: float) -> None:
        cls = self._class_of(inc)
        members = np.fromiter(inc.members, dtype=np.int64, count=len(inc.members))
        sev = int(severity(cls, self.impact_fn(cls, members))) if members.size else 0
        # Severity only rises while an incident is open: a margin hovering at a threshold must not flap.
        sev = max(sev, inc.max_severity)
        inc.max_severity = sev
        key = (inc.root, len(inc.members), int(cls != inc.event_class), sev)
        if key != inc.last_snapshot:
            inc.last_snapshot = key
            self._updates.append(self._snapshot(inc, "open", None))

    def _close(self, inc: _Open, status: IncidentStatus, merged_into: int | None) -> None:
        self._updates.append(self._snapshot(inc, status, merged_into))
        del self._open[inc.incident_id]
        owner = self._owner.get((inc.event_class, inc.signature))
        if owner is not None and inc.members:
            idx = np.fromiter(inc.members, dtype=np.int64)
            owner[idx[owner[idx] == inc.incident_id]] = -1
        for key, iid in list(self._named.items()):
            if iid == inc.incident_id:
                del self._named[key]

    @property
    def row_index(self) -> I64:
        """Per entity: its row (``site/row`` prefix) as an integer."""
        return self._row_of

    @property
    def open_incidents(self) -> list[Incident]:
        """Snapshots of the incidents open now."""
        return [self._snapshot(inc, "open", None) for inc in self._open.values()]
