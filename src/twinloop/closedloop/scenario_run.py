"""``twinloop run`` as one library call: a scenario with the loop off and on, written to one directory.

:func:`run_scenario` runs the loop-off pass, then the loop-on pass (same seed), keeps the loop-on pass's
telemetry in ``out/telemetry.duckdb``, adds both passes' incidents, actions and injected ground truth to that
file, and writes ``out/report.html`` from it. The CLI only parses flags and prints; anything else (the web,
a notebook) gets the same files from the same call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinloop.closedloop.passes import PassResult, outcome_metrics, run_pass
from twinloop.ops import AdvisoryModel, GroundTruthLabel, Mode, load_advisory_model, write_run
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult
from twinloop.twin.scenario import ScenarioSpec
from twinloop.twin.telemetry_writer import TelemetryWriter

__all__ = ["ScenarioRun", "run_scenario"]


@dataclass(frozen=True)
class ScenarioRun:
    """What :func:`run_scenario` produced.

    Attributes:
        spec: the scenario run; off / on: the loop-off and loop-on passes.
        out: the output directory; store: its ``telemetry.duckdb``; report: its ``report.html``.
    """

    spec: ScenarioSpec
    off: PassResult
    on: PassResult
    out: Path
    store: Path
    report: Path


def run_scenario(
    spec: ScenarioSpec,
    out: Path,
    *,
    mode: Mode = "auto",
    source: str = "scenario",
    on_step: Callable[[Twin, StepResult], None] | None = None,
    advisory: AdvisoryModel | None | Literal["packaged"] = "packaged",
) -> ScenarioRun:
    """Run ``spec`` with the loop off, then on, and write telemetry, loop records and the report under ``out``.

    Args:
        spec: the scenario.
        out: output directory (created); its ``telemetry.duckdb`` is replaced.
        mode: the loop-on pass's mode (observe, approve, auto).
        source: what errors and records name as the scenario's origin.
        on_step: called after every step of both passes (progress).
        advisory: the learned classifier's model for the advisory class of every incident (both passes; it acts
            on nothing), ``"packaged"`` (default) for the packaged one, None for none.
    """
    from twinloop.report.sim import sim_report

    out.mkdir(parents=True, exist_ok=True)
    writers: list[TelemetryWriter] = []

    def tick(twin: Twin, result: StepResult) -> None:
        if on_step is not None:
            on_step(twin, result)

    def record(twin: Twin, result: StepResult) -> None:
        # The writer needs the twin's topology, which exists once run_pass has made the twin.
        if not writers:
            writers.append(TelemetryWriter(twin, out))
        writers[0].add(result)
        tick(twin, result)

    model = load_advisory_model() if advisory == "packaged" else advisory
    assert model is None or isinstance(model, AdvisoryModel)
    off = run_pass(spec, False, on_step=tick, source=source, advisory=model)
    on = run_pass(spec, True, mode=mode, on_step=record, source=source, advisory=model)
    writer = writers[0]
    writer.close()
    store = writer.store
    for r in (off, on):
        gt = [GroundTruthLabel(f.kind, f.entity, f.start_s, f.end_s) for f in r.faults]
        advice = r.advisor.advice.values() if r.advisor is not None else ()
        write_run(store.con, r.name, r.incidents, r.actions, gt, advice)
    store.close()
    m_off, m_on = outcome_metrics(off), outcome_metrics(on)
    report = sim_report(
        writer.path,
        out / "report.html",
        title=f"twinloop run: {spec.name}",
        summary=on.summary,
        comparison=(m_off, m_on),
        higher_is_better=[k for k in m_off if k.startswith(("goodput", "ettr"))],
    )
    return ScenarioRun(spec=spec, off=off, on=on, out=out, store=writer.path, report=report)
