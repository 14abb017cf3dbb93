"""The loop's one view of a cluster, simulated or real: the :class:`Cluster` port.

Detection, classification, response, verification, precooling and learning see a cluster only through this
port, so the same loop runs over the twin (``twinloop.closedloop``) and over a live cluster
(``twinloop.ops.live``: NVML, nvidia-smi, dcgm-exporter, Prometheus, a replayed recording). Nothing here, and
nothing under ``twinloop.ops``, imports the twin.

A cluster offers:

* :meth:`Cluster.topology`: which GPUs there are (``site/row/rack/node/gpu`` ids, the order of every field
  array), their physical limits, and which rack sits on which CDU and which node on which PDU, where known;
* :meth:`Cluster.poll`: the next telemetry sample (DCGM-named per-GPU arrays, the node and row fields the rules
  read per GPU, job and site fields, the setpoints the control system commanded since the last sample, and, where
  a scheduler tells what is coming, the per-rack heat load with the changes known ahead), or None when the source
  has nothing new yet, or :data:`END` when it is exhausted;
* :meth:`Cluster.read`: the latest value of a field over an entity now, or some seconds ago (effect checks);
* :attr:`Cluster.adapter`: the :class:`~twinloop.ops.respond.adapters.base.ActionAdapter` that carries actions
  out (a dry-run one on a cluster the loop may not touch);
* :meth:`Cluster.now_s`: the cluster's clock (simulation time, or Unix seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from twinloop.ops.detect.rules import GpuLimits
from twinloop.ops.respond.adapters.base import ActionAdapter

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class Topology:
    """What the loop knows of a cluster's layout.

    Attributes:
        gpu_ids: GPU entity ids ``site/row/rack/node/gpu``, in the order of every per-GPU array of a sample.
        limits: per-GPU physical limits (same order).
        cdu_of_rack: rack id → CDU id, where the site file or the simulation says (cooling incidents group by it).
        pdu_of_node: node id → PDU id, where known.
        liquid_rows: row ids cooled by a CDU the loop may steer (the cooling optimizer's rows); empty for air.
        air_rows: row ids cooled by air handlers on the same facility water: the loop does not steer them, but the
            facility water it sets must still let them reach their supply setpoint.
        cdu_approach_c: the CDUs' design approach to facility water, °C (None when unknown).
    """

    gpu_ids: tuple[str, ...]
    limits: GpuLimits
    cdu_of_rack: Mapping[str, str] = field(default_factory=dict)
    pdu_of_node: Mapping[str, str] = field(default_factory=dict)
    liquid_rows: tuple[str, ...] = ()
    air_rows: tuple[str, ...] = ()
    cdu_approach_c: float | None = None

    @property
    def site(self) -> str:
        """The site id (first part of the GPU ids)."""
        return self.gpu_ids[0].split("/", 1)[0] if self.gpu_ids else "site"


@dataclass(frozen=True)
class RackHeat:
    """Per-rack heat load and what the scheduler knows is coming: the precooling forecaster's input
    (:class:`~twinloop.ops.learn.precool.RowHeatForecast`). Only a cluster whose scheduler tells the loop its
    queue (the twin; a live Slurm site could) offers it; without it precooling stays off.

    Attributes:
        t_s: time-of-day-aligned sample time, s (seconds since a midnight; the forecaster has a daily term).
        rack_ids: rack entity ids ``site/row/rack``, in the order of the arrays.
        load_w: measured heat load per rack (rack power), W.
        scheduled_delta_w: planned power change of the jobs that started or stopped since the last
            :class:`RackHeat`, per rack, W.
        known_ahead_w: horizon (s) → ``(n_racks, K)`` load changes in (t, t+h] known at t, W, in the columns of
            :data:`twinloop.ops.learn.forecast.KNOWN_COLUMNS` (training starts, serving starts, ends,
            checkpoints).
    """

    t_s: float
    rack_ids: tuple[str, ...]
    load_w: F64
    scheduled_delta_w: F64
    known_ahead_w: Mapping[float, F64]


@dataclass(frozen=True)
class Sample:
    """One telemetry sample of every GPU, in the arguments' shape of
    :meth:`~twinloop.ops.detect.pipeline.DetectionPipeline.step`.

    Attributes:
        ts: sample time, s (simulation time or Unix seconds).
        gpu: DCGM field name → per-GPU values (n_gpus,), NaN where a GPU did not report; node and row fields
            the rules read per GPU (PSU state, the CDU's supply/setpoint/flow...) broadcast to their GPUs.
        job_index: per GPU, index into ``job_ids`` (-1 = no job), or None when no scheduler tells us.
        job_ids: job ids of this sample.
        job_fields: job field name → values (len(job_ids),).
        site_fields: site field name → value (PUE, facility / IT power, power budget).
        commanded_setpoints: CDU id → supply setpoint °C the control system commanded since the last sample.
        warnings: data-quality notes about this sample (gaps, duplicates, a source that came back), for a person.
        rack_heat: per-rack load and known-ahead heat, on the samples where the cluster offers it (else None).
        gpu_processes: GPU id → its compute processes as the source last named them (the NVML source's
            ``compute_processes`` label text), where the source names them; the count is a field.
    """

    ts: float
    gpu: Mapping[str, F64]
    job_index: I64 | None = None
    job_ids: Sequence[str] = ()
    job_fields: Mapping[str, F64] | None = None
    site_fields: Mapping[str, Any] | None = None
    commanded_setpoints: Mapping[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    rack_heat: RackHeat | None = None
    gpu_processes: Mapping[str, str] = field(default_factory=dict)


class _End:
    """The sentinel :meth:`Cluster.poll` returns once its source is exhausted."""

    def __repr__(self) -> str:
        return "END"


#: Returned by :meth:`Cluster.poll` when the source will deliver no more samples (end of a file or a run).
END: Final = _End()

#: What :meth:`Cluster.poll` returns: a sample, None (nothing new yet) or :data:`END`.
PollResult = Sample | _End | None


@runtime_checkable
class Cluster(Protocol):
    """The loop's view of a cluster (see the module docstring)."""

    @property
    def adapter(self) -> ActionAdapter:
        """Carries the loop's actions out (dry-run on a cluster the loop may not touch)."""
        ...

    def topology(self) -> Topology:
        """The GPUs, their limits and the cooling/power membership known."""
        ...

    def poll(self) -> Sample | _End | None:
        """The next sample; None when nothing new has arrived yet; :data:`END` when the source is exhausted."""
        ...

    def read(self, field: str, entity: str, aggregate: str = "mean", ago_s: float = 0.0) -> float | None:
        """A field over an entity's GPUs (``mean`` or ``max``), now or ``ago_s`` seconds ago; None when unknown.

        This is the :class:`~twinloop.ops.respond.responder.Reader` the responder verifies effects with.
        """
        ...

    def now_s(self) -> float:
        """The cluster's clock, s."""
        ...
