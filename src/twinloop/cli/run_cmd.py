"""`twinloop run`: the main job."""

from __future__ import annotations

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION
from twinloop.cli.plan_compare_cmd import run_showcase


@app.command()
def run(json_out: bool = JSON_OPTION) -> None:
    """The main job: the planner showcase across models, GPUs and precisions (the loop comes next)."""
    run_showcase(json_out)
