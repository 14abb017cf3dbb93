"""Entry point: import every command module (each registers on the shared app) and run."""

from __future__ import annotations

from twinloop.cli import catalog_cmds, plan_cmds, plan_serve_cmd, probe_cmd  # noqa: F401  (registers commands)
from twinloop.cli.app import app


def main() -> None:
    """Run the ``twinloop`` command line."""
    app()


if __name__ == "__main__":
    main()
