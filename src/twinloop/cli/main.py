"""Entry point of the ``twinloop`` command line.

Command modules are imported lazily (see :mod:`twinloop.cli.app`): ``twinloop plan train`` imports the
planner and nothing of the twin, the store or the web app. Before anything defines a dataclass, the compiled
dataclass methods come from the user's cache (:mod:`twinloop.codecache`: a fifth of a planner command's start).
"""

from __future__ import annotations

from twinloop import codecache

codecache.install()

from twinloop.cli.app import app  # noqa: E402  (after the cache: typer, rich and the planner define dataclasses)


def main() -> None:
    """Run the ``twinloop`` command line."""
    app()


if __name__ == "__main__":
    main()
