"""A co-tenant: a compute process on a job's GPU that is not one of the job's ranks (a forgotten notebook kernel, a
second user on a shared node, an MPS or time-sliced neighbour).

On a real H200 a co-tenant's GEMMs doubled a training job's step time while NVML showed nothing odd: power at its
limit, the clock unchanged (``tests/fixtures/h200_job_progress``). The straggler rules saw the slower steps and the
respond stage moved the job: a healthy job moved for someone else's process. What NVML does show is the process:
``nvmlDeviceGetComputeRunningProcesses`` lists it (``TWINLOOP_FI_GPU_COMPUTE_PROCESSES``, the count per GPU). A job
has ``own_per_gpu`` processes on each of its GPUs (one rank a GPU); more than that is someone else's.

The count is the signal, not the pids: inside a container NVML may report the host's pids, so a pid is never
compared with the job's own. Who the processes are (pid, name, memory, where the source gives them: the NVML
source's ``compute_processes`` label) is told to :class:`CoTenants` by the runner and only named in the explanation.

A straggler (by clock or by the rank's own step time) on such a GPU, and a job slowdown on a job with such a GPU,
become a co-tenant explanation: a straggler incident *rooted at the GPU* whose detections come from
``rule:co_tenant`` (:data:`SOURCE`); the respond stage gives it to a person instead of moving the job. Where the
count is not reported (DCGM, nvidia-smi's GPU query, the twin) nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.ops.detect.rules import BoolArr, RuleFrame
from twinloop.telemetry.fields import TWINLOOP_FI_GPU_COMPUTE_PROCESSES
from twinloop.telemetry.sources.nvml_processes import decode, describe_all

#: The detection source (``Detection.source``) of a co-tenant explanation: what the respond stage keys on.
SOURCE = "rule:co_tenant"
#: The grouping signature of co-tenant incidents: apart from a straggler of another cause on the same GPU.
SIGNATURE = "co_tenant"


class CoTenants:
    """Which GPUs of a job carry a foreign compute process, and who the processes are.

    Args:
        entities: the pipeline's GPU ids, in array order.
        own_per_gpu: compute processes a job runs on each of its GPUs (its ranks there; one by default).
    """

    def __init__(self, entities: tuple[str, ...], own_per_gpu: int = 1) -> None:
        if isinstance(own_per_gpu, bool) or not isinstance(own_per_gpu, int) or own_per_gpu < 1:
            raise InputError("pipeline", "own_processes_per_gpu", f"{own_per_gpu!r} (allowed: an integer >= 1)")
        self._index = {e: i for i, e in enumerate(entities)}
        self.own_per_gpu = own_per_gpu
        self._named: dict[int, str] = {}  # GPU index -> the label text of its processes, as last told
        self._seen_s = np.full(len(entities), -np.inf)  # when each GPU last carried a foreign process
        self._slot = np.full(len(entities), -1, dtype=np.int64)  # ... and for which job

    def tell(self, processes: Mapping[str, str]) -> None:
        """The processes each GPU runs now (GPU entity -> ``compute_processes`` label text), as the source gave them."""
        for entity, text in processes.items():
            i = self._index.get(entity)
            if i is not None:
                self._named[i] = text

    def foreign(self, frame: RuleFrame, linger_s: float) -> BoolArr:
        """Per GPU: in a job, and running more compute processes than the job's own there now or within ``linger_s``
        (False where never reported). A straggler rule's smoothed pace lags the co-tenant's leaving (and the job's last
        step time is the slow one until its next step): that lag is still the co-tenant's, no straggler of its own.
        """
        count = frame.gpu.get(TWINLOOP_FI_GPU_COMPUTE_PROCESSES)
        in_job = frame.job_slot >= 0
        if count is not None:
            with np.errstate(invalid="ignore"):
                now = in_job & (count > self.own_per_gpu)
            self._seen_s[now] = frame.ts
            self._slot[now] = frame.job_slot[now]
        out: BoolArr = in_job & (self._slot == frame.job_slot) & (self._seen_s >= frame.ts - linger_s)
        return out

    @staticmethod
    def of_slots(foreign: BoolArr, job_slot: NDArray[np.int64], n_slots: int) -> BoolArr:
        """Per job slot: one of its GPUs carries a foreign process (vectorized, no loop over jobs)."""
        in_job = job_slot >= 0
        hits = np.bincount(job_slot[in_job], weights=foreign[in_job], minlength=n_slots)[:n_slots]
        out: BoolArr = hits > 0
        return out

    def explain(self, gpu: int, entity: str, count: float, slowdown: str) -> str:
        """One line for a person: the GPU, its processes against the job's own, who they are, the slowdown measured.

        Every process on the GPU is named (the job's own among them: which pid is whose NVML cannot say across
        namespaces).
        """
        who = describe_all(decode(self._named.get(gpu, "")))
        n = int(count) if np.isfinite(count) else 0
        own = f"{self.own_per_gpu} rank" + ("s" if self.own_per_gpu != 1 else "")
        named = f": {who}" if who else " (pids not reported)"
        return f"co-tenant on {entity}: {n} compute processes for the job's {own} there{named}; {slowdown}"
