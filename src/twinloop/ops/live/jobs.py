"""Which job runs on which GPU, where a scheduler says: Slurm (``squeue --json``), Kubernetes pod labels (as
dcgm-exporter attaches them: ``pod``, ``namespace``; grouped by controller in :mod:`.k8s_fleet`), or a file.

A job file (YAML or JSON) maps job ids to hosts or GPUs::

    train-42: [node01, node02]          # every GPU of these hosts
    eval-7: [node03/gpu0, node03/gpu1]  # these GPUs

All three give a :class:`JobMap`: per GPU (in topology order), an index into ``job_ids`` (-1 = none).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.safeio import load_yaml

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class JobMap:
    """Jobs and the GPUs they hold."""

    job_ids: tuple[str, ...]
    job_index: I64

    @classmethod
    def from_hosts(cls, gpu_ids: Sequence[str], hosts_of_job: Mapping[str, Sequence[str]]) -> JobMap:
        """Jobs given as lists of hosts (``node01``) or GPUs (``node01/gpu3``) → per-GPU job index."""
        job_ids = tuple(sorted(hosts_of_job))
        index = np.full(len(gpu_ids), -1, dtype=np.int64)
        parts = [g.split("/") for g in gpu_ids]
        host = np.array([p[-2] if len(p) >= 2 else "" for p in parts])
        hostgpu = np.array([f"{p[-2]}/{p[-1]}" if len(p) >= 2 else "" for p in parts])
        for j, job in enumerate(job_ids):
            names = np.asarray(list(hosts_of_job[job]), dtype=str)
            index[np.isin(host, names) | np.isin(hostgpu, names)] = j
        return cls(job_ids, index)


def load_job_file(path: str | Path, gpu_ids: Sequence[str]) -> JobMap:
    """A job file (see the module docstring); errors name the file and the job."""
    p = Path(path)
    raw = load_yaml(p)
    if not isinstance(raw, dict):
        raise InputError(str(p), "", "expected a mapping job id → list of hosts or host/gpuN")
    jobs: dict[str, list[str]] = {}
    for job, hosts in raw.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
            raise InputError(str(p), str(job), "expected a list of hosts or host/gpuN names")
        jobs[str(job)] = hosts
    return JobMap.from_hosts(gpu_ids, jobs)


_RANGE = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<body>[^\]]+)\](?P<suffix>.*)$")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (``node[01-03,07],gpu-a1``) → host names.

    Raises:
        ValueError: an unbalanced bracket or a bad range.
    """
    out: list[str] = []
    depth, start = 0, 0
    items = []
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if depth < 0:
            raise ValueError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    items.append(text[start:])
    for item in filter(None, (s.strip() for s in items)):
        m = _RANGE.match(item)
        if not m:
            out.append(item)
            continue
        for part in m["body"].split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"bad range {part!r} in host list {text!r}")
            width = len(lo)
            for k in range(int(lo), int(hi or lo) + 1):
                out.extend(expand_hostlist(f"{m['prefix']}{k:0{width}d}{m['suffix']}"))
    return out


def parse_squeue_json(text: str, source: str = "squeue --json") -> dict[str, list[str]]:
    """Running jobs and their hosts from ``squeue --json`` output (Slurm 21.08+ layout).

    Raises:
        InputError: not JSON or not the squeue layout.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(source, "", f"not JSON: {exc}") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise InputError(source, "jobs", "missing (expected squeue --json output)")
    out: dict[str, list[str]] = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise InputError(source, f"jobs[{i}]", "not an object")
        state = job.get("job_state", "RUNNING")
        states = state if isinstance(state, list) else [state]
        if "RUNNING" not in states:
            continue
        try:
            hosts = expand_hostlist(str(job.get("nodes", "")))
        except ValueError as exc:
            raise InputError(source, f"jobs[{i}].nodes", str(exc)) from None
        if hosts:
            out[str(job.get("job_id", i))] = hosts
    return out


def slurm_jobs(gpu_ids: Sequence[str], runner: Callable[[list[str]], str] | None = None) -> JobMap:
    """Ask Slurm which jobs run where (``squeue --json``)."""

    def run(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError("--jobs slurm", "", f"cannot run squeue: {exc}") from None
        if done.returncode != 0:
            raise InputError("--jobs slurm", "", f"squeue exited {done.returncode}: {done.stderr.strip()[:200]}")
        return done.stdout

    return JobMap.from_hosts(gpu_ids, parse_squeue_json((runner or run)(["squeue", "--json"])))


def pod_labelled(labels: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, pod)`` from the labels dcgm-exporter puts on a GPU's series (``exported_*`` where Prometheus
    renamed them); the namespace ``default`` where none is given; None without a pod.
    """
    pod = labels.get("pod") or labels.get("exported_pod")
    ns = labels.get("namespace") or labels.get("exported_namespace") or "default"
    return (str(ns), str(pod)) if pod else None


def k8s_jobs(gpu_ids: Sequence[str], labels: Mapping[str, Mapping[str, Any]]) -> JobMap:
    """Jobs from the Kubernetes labels dcgm-exporter puts on each GPU's series, one per pod: ``namespace.pod``
    (what ``--jobs k8s`` falls back to where kubectl cannot group pods by their controller:
    :mod:`twinloop.ops.live.k8s_fleet`).
    """
    found = [pod_labelled(labels.get(g, {})) for g in gpu_ids]
    names = [f"{p[0]}.{p[1]}" if p else "" for p in found]
    job_ids = tuple(sorted({n for n in names if n}))
    pos = {j: i for i, j in enumerate(job_ids)}
    return JobMap(job_ids, np.array([pos.get(n, -1) for n in names], dtype=np.int64))
