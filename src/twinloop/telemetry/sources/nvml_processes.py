"""The compute processes NVML lists on a GPU, carried beside the numeric telemetry as one frame label.

The count is a field (``TWINLOOP_FI_GPU_COMPUTE_PROCESSES``) like any other; who the processes are (pid, name,
framebuffer memory) is text, which frames carry only as labels: the NVML source puts them under
:data:`PROCESSES_LABEL` on each GPU's entity, as compact JSON ``[[pid, used_mib | null, name | null], ...]``, and
the live cluster hands the latest to the detection, which names them in a co-tenant explanation.

A pid is the one NVML reports: inside a container it can be the host's (NVML reads the driver's table), so it is
shown to a person, never compared with a process of this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: Frame label (per GPU entity) holding the GPU's compute processes.
PROCESSES_LABEL = "compute_processes"


@dataclass(frozen=True)
class ComputeProcess:
    """One compute process on a GPU.

    Attributes:
        pid: the process id NVML reports (the host's, where NVML sees the host's table).
        used_mib: its framebuffer memory, MiB; None where the driver does not say (MIG, some containers).
        name: its name (``nvmlSystemGetProcessName``); None where NVML may not read it.
    """

    pid: int
    used_mib: float | None = None
    name: str | None = None

    def describe(self) -> str:
        """``pid 4242 (python3, 2048 MiB)``, leaving out what is unknown."""
        extra = [x for x in (self.name, None if self.used_mib is None else f"{self.used_mib:.0f} MiB") if x]
        return f"pid {self.pid}" + (f" ({', '.join(extra)})" if extra else "")


def encode(processes: tuple[ComputeProcess, ...]) -> str:
    """The label text of a GPU's processes (sorted by pid, so equal sets give equal labels)."""
    rows = [[p.pid, p.used_mib, p.name] for p in sorted(processes, key=lambda p: p.pid)]
    return json.dumps(rows, separators=(",", ":"))


def decode(text: str) -> tuple[ComputeProcess, ...]:
    """Processes from a label written by :func:`encode`; malformed text or rows give what could be read (a label is
    a courtesy to a person, never a reason to stop the loop).
    """
    try:
        rows = json.loads(text)
    except ValueError:
        return ()
    out: list[ComputeProcess] = []
    for row in rows if isinstance(rows, list) else ():
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], int) and not isinstance(row[0], bool)):
            continue
        mib = row[1] if isinstance(row[1], int | float) and not isinstance(row[1], bool) else None
        out.append(
            ComputeProcess(row[0], None if mib is None else float(mib), row[2] if isinstance(row[2], str) else None)
        )
    return tuple(out)


def describe_all(processes: tuple[ComputeProcess, ...]) -> str:
    """``pid 4242 (python3, 2048 MiB), pid 77`` (empty where none are known)."""
    return ", ".join(p.describe() for p in processes)
