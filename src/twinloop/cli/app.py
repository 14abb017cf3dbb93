"""The shared Typer applications (``twinloop`` and its ``plan`` group) with lazily imported commands.

Start-up time is mostly imports: the planner, the twin, DuckDB, pyarrow, FastAPI and friends take over a
second together. So a command module is imported only when its command runs (or when its own ``--help`` is
asked for). ``twinloop --help`` lists every command from :data:`COMMANDS` / :data:`PLAN_COMMANDS` without
importing any of them.

To add a command: write ``cli/NAME_cmd.py`` that registers on :data:`app` (``@app.command()``) or on
:data:`plan_app`, and add one line to :data:`COMMANDS` (or :data:`PLAN_COMMANDS`) naming the module and
the first line of the command's docstring (``tests/cli/test_lazy.py`` checks that the two agree and that
``--help`` imports nothing heavy). A module imported the ordinary way still registers eagerly.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer._click import Command as ClickCommand
from typer._click.shell_completion import CompletionItem
from typer.core import TyperGroup

import twinloop


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives and its one-line help (shown by the parent's ``--help``)."""

    module: str
    help: str


# Order is the order of `twinloop --help`.
COMMANDS: dict[str, LazyCommand] = {
    "run": LazyCommand(
        "twinloop.cli.run_cmd",
        "The main job: run a scenario with the loop off and on (same seed) and compare outcomes and detection.",
    ),
    "sweep": LazyCommand(
        "twinloop.cli.sweep_cmd",
        "Run a sweep of scenarios x seeds x loop policies on Ray; rows to Parquet and DuckDB; intervals and report.",
    ),
    "plan": LazyCommand("twinloop.cli.app", "Plan training and serving: memory, time, power, energy and cost."),
    "sim": LazyCommand(
        "twinloop.cli.sim_cmd",
        "Run the twin on a scenario; print energy, PUE, throttling, peak power, failures and ETTR per job.",
    ),
    "gpus": LazyCommand(
        "twinloop.cli.catalog_cmds",
        "List the GPU catalog: power, memory, bandwidth, TFLOP/s, clocks and thermal limits.",
    ),
    "models": LazyCommand(
        "twinloop.cli.catalog_cmds",
        "List the model catalog: architecture, parameters (total/active) and KV-cache bytes per token.",
    ),
    "watch": LazyCommand(
        "twinloop.cli.watch_cmd",
        "Watch a cluster: detect → classify → respond → verify at the source's cadence, recording as it goes.",
    ),
    "job-event": LazyCommand(
        "twinloop.cli.job_event_cmd",
        "Record a job's step, checkpoint or restart event for the live loop (appends to DIR/JOB.jsonl).",
    ),
    "ingest": LazyCommand(
        "twinloop.cli.telemetry_cmds",
        "Read telemetry from SOURCE into the DuckDB store; every bad row is counted and reported.",
    ),
    "query": LazyCommand(
        "twinloop.cli.telemetry_cmds",
        "Query the store: raw samples, downsampled buckets (--every) or per-entity aggregates.",
    ),
    "report": LazyCommand(
        "twinloop.cli.report_cmd",
        "Write an HTML report from a store: telemetry, each job's step time with its incidents, incidents, actions.",
    ),
    "export": LazyCommand(
        "twinloop.cli.telemetry_cmds",
        "Serve the latest values of a source at /metrics in dcgm-exporter's Prometheus format.",
    ),
    "detect": LazyCommand(
        "twinloop.cli.detect_cmd",
        "Detect anomalies and change points in a time series file (telemetry exported from elsewhere).",
    ),
    "serve": LazyCommand(
        "twinloop.cli.serve_cmd",
        "Serve the dashboard (overview, floor map, jobs, incidents, planner) and the JSON API under /api.",
    ),
    "probe": LazyCommand(
        "twinloop.cli.probe_cmd",
        "Report kernel, io_uring, CXL, HMM, P2P DMA, NUMA, PCIe GPUs, drivers, IOMMU, huge pages and NVMe.",
    ),
}

PLAN_COMMANDS: dict[str, LazyCommand] = {
    "train": LazyCommand(
        "twinloop.cli.plan_cmds",
        "Plan LLM training: memory per GPU, step time, MFU, power, energy, time and cost to train.",
    ),
    "serve": LazyCommand(
        "twinloop.cli.plan_serve_cmd",
        "Plan LLM serving: KV cache, concurrency, prefill/decode roofline, TTFT, TPOT, throughput, power, cost.",
    ),
    "compare": LazyCommand(
        "twinloop.cli.plan_compare_cmd",
        "Compare Llama-3-70B (dense, GQA) and DeepSeek-V3 (MoE, MLA) on H100/H200 in BF16 and FP8.",
    ),
    "moe": LazyCommand(
        "twinloop.cli.plan_moe_cmd",
        "Simulate MoE routing over time: routers x placements, imbalance, drops, all-to-all, step time, quality.",
    ),
}


def _exists(module: str) -> bool:
    """Whether a command module is present (a registry entry may name one that another branch adds)."""
    import importlib.util

    return module in sys.modules or importlib.util.find_spec(module) is not None


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class LazyGroup(TyperGroup):
    """A Typer group whose commands in :attr:`lazy` are imported on first use.

    Subclasses set :attr:`lazy` (name → :class:`LazyCommand`) and :attr:`owner` (the Typer application the
    command modules register on). The root group also turns every usage error into one stderr line.
    """

    lazy: ClassVar[dict[str, LazyCommand]] = {}

    @staticmethod
    def owner() -> typer.Typer:
        """The Typer application that this group's command modules register on."""
        raise NotImplementedError

    def list_commands(self, ctx: Any) -> list[str]:
        """The lazy commands whose module is present, in registry order, then the ones registered eagerly."""
        names = [n for n, e in self.lazy.items() if n in self.commands or _exists(e.module)]
        return names + [n for n in self.commands if n not in self.lazy]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, its module imported on first use; None when unknown or absent."""
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self.lazy.get(cmd_name)
        if entry is None or not _exists(entry.module):
            return None
        importlib.import_module(entry.module)
        command = _build(self.owner(), cmd_name, self.rich_markup_mode)
        if command is not None:
            self.commands[cmd_name] = command
        return command

    def _listed(self, name: str) -> Any:
        """The command itself if loaded, else a stand-in carrying its one-line help (no import)."""
        if name in self.commands:
            return self.commands[name]
        return typer.core.TyperCommand(name=name, short_help=self.lazy[name].help, help=self.lazy[name].help)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the commands with their one-line help, without importing the lazy ones."""
        rows = [(n, self._listed(n).get_short_help_str(limit=1000)) for n in self.list_commands(ctx)]
        rows = [(n, h) for n, h in rows if not self._listed(n).hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[CompletionItem]:
        """Command names from the registry (no import) that start with ``incomplete``, then the group's own options."""
        items = [
            CompletionItem(n, help=self._listed(n).get_short_help_str())
            for n in self.list_commands(ctx)
            if n.startswith(incomplete)
        ]
        # Options of the group itself (--help, --version, ...), as the base class would add them.
        return items + ClickCommand.shell_complete(self, ctx, incomplete)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Split ``args`` into (name, command, rest); an unknown name's error suggests the lazy commands too."""
        try:
            name, command, rest = super().resolve_command(ctx, args)
            if command is not None:
                _fast_options(command, name or "", ctx)  # its --help too, without pydantic
            return name, command, rest
        except typer.TyperException as exc:
            # The base class suggests close names from the loaded commands only; add the lazy ones.
            import difflib

            near = difflib.get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if near and "Did you mean" not in exc.message:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(repr(n) for n in near)}?"
            raise


def _build(owner: typer.Typer, name: str, markup: Any) -> Any:
    """The click command for ``name`` from what ``owner`` has registered (after its module was imported).

    Its plain str/int/float options convert without pydantic (:mod:`twinloop.cli.scalar_params`).
    """
    from typer.main import get_command_from_info, get_command_name, get_group_from_info

    for info in owner.registered_commands:
        if (info.name or get_command_name(info.callback.__name__)) == name:  # type: ignore[union-attr]
            return _fast_options(get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=markup))
    for group in owner.registered_groups:
        if group.name == name:
            return _fast_options(
                get_group_from_info(group, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=markup)
            )
    return None


def _fast_options(command: Any, name: str | None = None, parent: Any = None) -> Any:
    """``command`` with its plain options converting without pydantic (:mod:`twinloop.cli.scalar_params`).

    With ``name``, its ``--help`` option too (click creates it from a context). That module uses a private hook
    of typer; where an installed typer lacks it, the command is left as typer built it: correct, only slower
    (``tests/cli/test_scalar_params.py`` fails then, so the loss does not go unnoticed).
    """
    try:
        from twinloop.cli.scalar_params import context_for, install

        install(command, context_for(command, name, parent) if name is not None else None)
    except (ImportError, AttributeError, TypeError):  # a typer whose private coercion hook moved
        pass
    return command


class RootGroup(LazyGroup):
    """``twinloop``: lazy commands, and every usage error as one line on stderr with exit code 2."""

    lazy = COMMANDS

    @staticmethod
    def owner() -> typer.Typer:
        """The root ``twinloop`` application."""
        return app

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; a bad flag, unknown option or missing argument is one stderr line, exit 2."""
        # --help and the completion flags of the root itself convert without pydantic.
        _fast_options(self, prog_name or "twinloop")
        try:
            rv = super().main(
                args, prog_name or "twinloop", complete_var, False, windows_expand_args=windows_expand_args, **extra
            )
        except typer.TyperException as exc:
            code = usage_error(exc)
        except typer.Abort:
            sys.stderr.write("error: aborted\n")
            code = 1
        else:
            code = rv if isinstance(rv, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def usage_error(exc: typer.TyperException) -> int:
    """Print a click usage error as one line (``error: COMMAND: MESSAGE``); return its exit code.

    A group called without a subcommand prints its help on stdout instead and exits 0.
    """
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        sys.stdout.write(ctx.get_help() + "\n")
        return 0
    where = f"{ctx.command_path}: " if ctx is not None else ""
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    sys.stderr.write(f"error: {where}{_one_line(exc.format_message())}{hint}\n")
    return 2  # every error of the command line itself, usage or file (click's FileError would say 1)


class PlanGroup(LazyGroup):
    """``twinloop plan``: the planner commands, imported on use."""

    lazy = PLAN_COMMANDS

    @staticmethod
    def owner() -> typer.Typer:
        """The ``twinloop plan`` application."""
        return plan_app

    #: Planner commands without BLAS work: numpy loads for them with one OpenBLAS thread (see get_command).
    #: Not ``serve``/``compare``/``moe``: the MoE routing simulator multiplies large float32 matrices.
    ONE_BLAS_THREAD = frozenset({"train"})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The planner command ``cmd_name``, imported on first use.

        ``plan train``'s arrays are small and its work elementwise (no BLAS), so before numpy loads OpenBLAS is
        limited to one thread: it would start a worker per core at import, ~40 ms of CPU for nothing on a
        2-core machine (issue 15: start-up). ``OPENBLAS_NUM_THREADS`` set by the user wins.
        """
        if cmd_name in self.ONE_BLAS_THREAD:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        return super().get_command(ctx, cmd_name)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"twinloop {twinloop.__version__}\n")
        raise typer.Exit()


app = typer.Typer(
    name="twinloop",
    help="Plan, simulate and operate GPU clusters for LLMs as one machine.",
    cls=RootGroup,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # Plain click help: it wraps long option names and text instead of cutting them at narrow terminals,
    # and it does not import rich's panels.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

plan_app = typer.Typer(
    help="Plan training and serving: memory, time, power, energy and cost.",
    cls=PlanGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(plan_app, name="plan")


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """twinloop: planner, twin and operational loop for GPU clusters."""
