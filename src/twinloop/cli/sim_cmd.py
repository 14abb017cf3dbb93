"""`twinloop sim [SCENARIO.yaml]`: run the twin, write telemetry, print the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, progress, stdout
from twinloop.errors import InputError
from twinloop.twin.engine import StepResult, Twin
from twinloop.twin.scenario import load_scenario, parse_duration_s
from twinloop.twin.telemetry_writer import TelemetryWriter


def _duration(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
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
        spec = load_scenario(
            scenario, duration_s=_duration("--duration", duration), step_s=_duration("--step", step), seed=seed
        )
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


def _print_summary(doc: dict[str, Any]) -> None:
    e = doc["energy"]
    table = Table(title=f"twin: {doc['scenario']} — {doc['gpus']} GPUs, {doc['simulated_s']:.0f} s simulated")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("facility energy", f"{e['facility_kwh']:.1f} kWh"),
        ("IT energy (GPU)", f"{e['it_kwh']:.1f} kWh ({e['gpu_kwh']:.1f})"),
        ("conversion losses", f"{e['conversion_loss_kwh']:.1f} kWh"),
        ("cooling", f"{e['cooling_kwh']:.1f} kWh"),
        ("emissions", f"{e['emissions_kg_co2e']:.1f} kg CO2e"),
        ("PUE", f"{doc['pue']:.3f}" if doc["pue"] else "—"),
        ("peak facility power", f"{doc['peak_facility_power_w'] / 1e3:.1f} kW"),
        ("PSU overloads", str(doc["psu_overloads"])),
        ("failures", ", ".join(f"{k} {v}" for k, v in doc["failures"].items()) or "none"),
    ]
    rows += [(f"throttled GPU-s: {k}", f"{v:.0f}") for k, v in doc["throttled_gpu_s"].items()]
    rows += [
        (f"job {j['name']} ({j['kind']})", f"ETTR {j['ettr']:.3f}, {j['interruptions']} interruptions")
        for j in doc["jobs"]
    ]
    if "telemetry" in doc:
        rows.append(("telemetry", f"{doc['telemetry']['rows']} rows → {doc['telemetry']['path']}"))
    for k, v in rows:
        table.add_row(k, v)
    stdout.print(table)
