"""The `gpufleet` command: plan, schedule and account for GPU clusters."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from gpufleet import __version__
from gpufleet.cli import (
    catalog,
    control,
    demo,
    export,
    inference,
    plan,
    schedule,
    simulate,
    specs,
    training,
    wizard,
)
from gpufleet.errors import EXIT_USER_ERROR, UserError

app = typer.Typer(
    name="gpufleet",
    help="Plan, schedule and account for GPU clusters for AI.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(catalog.app, name="catalog")
estimate_app = typer.Typer(help="Estimate one configuration of a workload.", no_args_is_help=True)
estimate_app.command("training")(training.estimate_training)
estimate_app.command("inference")(inference.estimate_inference)
search_app = typer.Typer(
    help="Search hardware and parallel layouts for a workload.", no_args_is_help=True
)
search_app.command("training")(training.search_training)
search_app.command("inference")(inference.search_inference)
validate_app = typer.Typer(
    help="Compare the estimators with published measurements.", no_args_is_help=True
)
validate_app.command("training")(training.validate_training)
validate_app.command("inference")(inference.validate_inference)
bench_app = typer.Typer(
    help="Benchmarks a user can run on their own machine.", no_args_is_help=True
)
bench_app.command("scheduler")(schedule.bench_scheduler)
app.add_typer(estimate_app, name="estimate")
app.add_typer(bench_app, name="bench")
app.add_typer(search_app, name="search")
app.add_typer(validate_app, name="validate")
app.add_typer(simulate.app, name="simulate")
app.add_typer(control.db_app, name="db")
app.add_typer(control.admin_app, name="admin")
app.command("serve")(control.serve)
app.add_typer(export.export_app, name="export")
app.add_typer(export.import_app, name="import")
app.command("demo")(demo.demo)
_GROUPS = frozenset(
    {"catalog", "estimate", "search", "validate", "bench", "simulate", "db", "admin"}
    | {"export", "import"}
)
app.command("schema")(specs.schema)
app.command("check")(specs.check)
app.command("plan")(plan.plan_command)
app.command("wizard")(wizard.wizard)
app.command("schedule")(schedule.schedule)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpufleet {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = None,
) -> None:
    """gpufleet: capacity plans, a multi-tenant GPU scheduler and chargeback."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code: user errors print one message and give 2.

    Click's standalone mode handles usage errors (exit 2), --help and broken pipes;
    our own `UserError`s pass through it and are reported here, never as tracebacks.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args or (len(args) == 1 and args[0] in _GROUPS):
        args = [*args, "--help"]  # a bare command group is a request for help, not an error
    try:
        app(args=args, prog_name="gpufleet", standalone_mode=True)
    except UserError as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False
        )
        return EXIT_USER_ERROR
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
