"""Entry point: import every command module (each registers on the shared app) and run."""

from __future__ import annotations

from twinloop.cli import (  # noqa: F401
    catalog_cmds,
    detect_cmd,
    plan_cmds,
    plan_compare_cmd,
    plan_serve_cmd,
    probe_cmd,
    run_cmd,
    serve_cmd,
    sim_cmd,
    telemetry_cmds,
    watch_cmd,
)
from twinloop.cli.app import app


def main() -> None:
    """Run the ``twinloop`` command line."""
    app()


if __name__ == "__main__":
    main()
