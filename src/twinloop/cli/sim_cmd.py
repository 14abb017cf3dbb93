"""`twinloop sim [SCENARIO.yaml]`: run the twin, write telemetry, print the summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, output_dir, print_json, progress, stdout
from twinloop.cli.tables import energy_wh, power, print_pairs
from twinloop.errors import InputError
from twinloop.twin.summary import never_started

if TYPE_CHECKING:
    from twinloop.twin.events import StepResult


def _duration(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
    from twinloop.twin.scenario import parse_duration_s

    try:
        return parse_duration_s(value)
    except ValueError as exc:
        raise InputError(flag, "", str(exc)) from None


@app.command()
def sim(
    scenario: Path | None = typer.Argument(None, help="Scenario YAML (default: the packaged 1,024-H100 hall)."),
    duration: str | None = typer.Option(None, "--duration", help="Simulated time, e.g. 6h, 90s (default: scenario)."),
    step: str | None = typer.Option(None, "--step", help="Step length, e.g. 1s (default: scenario)."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed (default: scenario)."),
    out: Path | None = typer.Option(None, "--out", help="Directory for telemetry (telemetry.duckdb)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Run the twin on a scenario; print energy, PUE, throttling, peak power, failures and ETTR per job."""

    def run() -> dict[str, Any]:
        from twinloop.twin.engine import Twin
        from twinloop.twin.scenario import load_scenario
        from twinloop.twin.telemetry_writer import TelemetryWriter

        spec = load_scenario(
            scenario, duration_s=_duration("--duration", duration), step_s=_duration("--step", step), seed=seed
        )
        if out is not None:
            output_dir(out)
        twin = Twin(spec, source=str(scenario) if scenario else "default scenario")
        writer = TelemetryWriter(twin, out) if out is not None else None
        n = round(spec.duration_s / spec.step_s)
        with progress("simulating", n, enabled=not json_out) as advance:

            def on_step(result: StepResult) -> None:
                if writer is not None:
                    writer.add(result)
                if twin.step_index % 60 == 0:
                    advance(60)

            twin.run(callback=on_step)
        doc = twin.summary()
        if writer is not None and out is not None:
            doc["telemetry"] = writer.close()
            from twinloop.report.sim import sim_report

            doc["report"] = str(
                sim_report(writer.path, out / "report.html", title=f"twinloop sim: {spec.name}", summary=doc)
            )
        return doc

    doc = guarded(run)
    if json_out:
        print_json(doc)
        return
    _print_summary(doc)


def _job_text(job: dict[str, Any]) -> str:
    """A job's line: its ETTR, or that it never started (ETTR 0 would read as a job that lost all its time)."""
    if never_started(job):
        return "not started (queued)"
    return f"ETTR {job['ettr']:.3f}, {job['interruptions']} interruptions"


def _print_summary(doc: dict[str, Any]) -> None:
    e = doc["energy"]
    kwh = 3.6e6  # J per kWh
    rows = [
        ("facility energy", energy_wh(e["facility_kwh"] * kwh)),
        ("IT energy (GPU)", f"{energy_wh(e['it_kwh'] * kwh)} ({energy_wh(e['gpu_kwh'] * kwh)})"),
        ("conversion losses", energy_wh(e["conversion_loss_kwh"] * kwh)),
        ("cooling", energy_wh(e["cooling_kwh"] * kwh)),
        ("emissions", f"{e['emissions_kg_co2e']:.1f} kg CO2e"),
        ("PUE", f"{doc['pue']:.3f}" if doc["pue"] else "—"),
        ("peak facility power", power(doc["peak_facility_power_w"])),
        ("PSU overloads", str(doc["psu_overloads"])),
        ("failures", ", ".join(f"{k} {v}" for k, v in doc["failures"].items()) or "none"),
    ]
    rows += [(f"throttled GPU-s: {k}", f"{v:.0f}") for k, v in doc["throttled_gpu_s"].items()]
    rows += [(escape(f"job {j['name']} ({j['kind']})"), _job_text(j)) for j in doc["jobs"]]
    if "telemetry" in doc:
        rows.append(("telemetry", escape(f"{doc['telemetry']['rows']} rows → {doc['telemetry']['path']}")))
    if "report" in doc:
        rows.append(("report", escape(doc["report"])))
    title = f"twin: {doc['scenario']} — {doc['gpus']} GPUs, {doc['simulated_s']:.0f} s simulated"
    print_pairs(stdout, escape(title), rows)
