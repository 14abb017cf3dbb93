"""Entry point of the ``twinloop`` command line.

Command modules are imported lazily (see :mod:`twinloop.cli.app`): ``twinloop plan train`` imports the
planner and nothing of the twin, the store or the web app.
"""

from __future__ import annotations

from twinloop.cli.app import app


def main() -> None:
    """Run the ``twinloop`` command line."""
    app()


if __name__ == "__main__":
    main()
