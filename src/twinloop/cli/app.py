"""The shared Typer application object that every command module registers on."""

from __future__ import annotations

import typer

from twinloop import __version__

app = typer.Typer(
    name="twinloop",
    help="Plan, simulate and operate GPU clusters for LLMs as one machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"twinloop {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """twinloop: planner, twin and operational loop for GPU clusters."""
