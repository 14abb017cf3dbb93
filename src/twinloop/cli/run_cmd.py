"""`twinloop run`: the main job — the scenario with the loop off and on, side by side, scored on ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, output_dir, print_json, progress, stdout
from twinloop.cli.sim_cmd import _duration
from twinloop.closedloop.passes import PassResult, outcome_metrics
from twinloop.closedloop.scenario_run import run_scenario
from twinloop.errors import InputError
from twinloop.twin import load_scenario
from twinloop.twin.engine import Twin
from twinloop.twin.events import StepResult

_MODES = ("observe", "approve", "auto")


def _pass_doc(r: PassResult) -> dict[str, Any]:
    return {
        "name": r.name,
        "outcome": outcome_metrics(r),
        "detection": [
            {
                "fault": q.fault,
                "faults": q.n_faults,
                "detected": q.n_detected,
                "precision": q.precision,
                "recall": q.recall,
                "median_time_to_detect_s": q.median_time_to_detect_s,
            }
            for q in r.detection.per_fault
        ],
        "false_alarms": [
            {"class": str(i.event_class), "root": i.root, "start_s": i.start_ts} for i in r.detection.false_alarms
        ],
        "incidents": len(r.incidents),
        # The learned classifier's second opinion (acts on nothing): per incident, and where it and the rules differ.
        "advisory": None
        if r.advisor is None
        else {**r.advisor.summary(), "incidents": [a.to_dict() for a in r.advisor.advice.values()]},
        "actions": [
            {
                "t_s": a.ts,
                "kind": str(a.request.kind),
                "target": a.request.target,
                "value": a.request.value,
                "status": a.status,
                "detail": a.detail,
                "incident_id": a.request.incident_id,
                "source": a.source,
                "reason": a.request.reason,
                "expected": a.expected,
                "judges_action": int(a.extra["of_action"]) if "of_action" in a.extra else None,
            }
            for a in r.actions
        ],
        "wall_s": r.wall_s,
    }


def _print(doc: dict[str, Any]) -> None:
    from twinloop.cli.tables import Col, duration, print_table

    off, on = doc["loop_off"], doc["loop_on"]
    rows = []
    for k, a in off["outcome"].items():
        b = on["outcome"].get(k)
        change = f"{(b - a) / abs(a):+.1%}" if isinstance(a, float | int) and isinstance(b, float | int) and a else "—"
        rows.append([escape(k), "—" if a is None else f"{a:,.3g}", "—" if b is None else f"{b:,.3g}", change])
    cols = [Col("metric", "left"), Col("loop off"), Col("loop on"), Col("change")]
    print_table(stdout, f"{doc['scenario']}: loop off vs loop on (seed {doc['seed']})", cols, rows)
    cols = [Col("fault", "left"), Col("faults"), Col("detected"), Col("precision"), Col("recall"),
            Col("median time\nto detect")]  # fmt: skip
    rows = []
    for q in on["detection"]:
        ttd = q["median_time_to_detect_s"]
        rows.append([q["fault"], str(q["faults"]), str(q["detected"]), f"{q['precision']:.2f}", f"{q['recall']:.2f}",
                     "—" if ttd is None else duration(ttd)])  # fmt: skip
    if rows:
        print_table(stdout, "Detection vs injected faults (loop-on pass)", cols, rows)
    else:  # a short run ends before the scenario's first fault: an empty table would read as a broken one
        stdout.print("Detection vs injected faults (loop-on pass): no fault injected within the run")
    counts: dict[tuple[str, str], int] = {}
    for a in on["actions"]:
        counts[(a["kind"], a["status"])] = counts.get((a["kind"], a["status"]), 0) + 1
    stdout.print("Actions (loop on): " + (", ".join(f"{k} {s} x{n}" for (k, s), n in sorted(counts.items())) or "none"))
    adv = on.get("advisory")
    if adv:
        stdout.print(
            f"Advisory classifier (loop on; acts on nothing): {adv['incidents_judged']} incidents judged, "
            f"{adv['disagreements']} with another class than the rules"
            + (" (" + ", ".join(f"{k} x{n}" for k, n in adv["by_pair"].items()) + ")" if adv["by_pair"] else "")
        )
    stdout.print(f"False alarms: {len(on['false_alarms'])}. Telemetry, records and report: {doc['out']}")


@app.command()
def run(
    scenario: Path | None = typer.Argument(None, help="Scenario YAML (default: the packaged 1,024-H100 hall)."),
    out: Path = typer.Option(Path("twinloop-out"), "--out", help="Directory for telemetry.duckdb and report.html."),
    duration: str | None = typer.Option(None, "--duration", help="Simulated time, e.g. 30m (default: scenario)."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed (default: scenario)."),
    mode: str = typer.Option("auto", "--mode", help="Loop mode for the loop-on pass: observe, approve or auto."),
    json_out: bool = JSON_OPTION,
) -> None:
    """The main job: run a scenario with the loop off and on (same seed) and compare outcomes and detection."""

    def go() -> dict[str, Any]:
        if mode not in _MODES:
            raise InputError("--mode", "", f"unknown mode {mode!r} (allowed: {', '.join(_MODES)})")
        spec = load_scenario(scenario, duration_s=_duration("--duration", duration), seed=seed)
        output_dir(out)
        src = str(scenario) if scenario else "default scenario"
        n = round(spec.duration_s / spec.step_s)
        with progress("loop off, then loop on", 2 * n, enabled=not json_out) as advance:

            def count(twin: Twin, result: StepResult) -> None:
                if twin.step_index % 60 == 0:
                    advance(60)

            r = run_scenario(spec, out, mode=mode, source=src, on_step=count)  # type: ignore[arg-type]
        return {"scenario": spec.name, "seed": spec.seed, "out": str(out), "loop_off": _pass_doc(r.off),
                "loop_on": _pass_doc(r.on), "report": str(r.report)}  # fmt: skip

    doc = guarded(go)
    if json_out:
        print_json(doc)
        return
    _print(doc)
