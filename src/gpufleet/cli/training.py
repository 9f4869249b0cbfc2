"""`gpufleet estimate|search|validate training`: the training planner on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpufleet.cli.output import check_format, wide_console
from gpufleet.errors import UserError
from gpufleet.formatting import format_decimal_bytes, format_gb
from gpufleet.specs.load import load
from gpufleet.specs.training import TrainingSpec
from gpufleet.validation.training import RowResult

if TYPE_CHECKING:
    from gpufleet.estimate.training_estimate import CommTime

EXIT_INFEASIBLE = 1
SpecArg = Annotated[Path, typer.Argument(help="A training spec YAML file (kind: training).")]
JsonOpt = Annotated[
    str, typer.Option("--format", "-f", help="table (terminal) or json (stable fields).")
]
RowsOpt = Annotated[
    str,
    typer.Option(
        "--rows",
        help="calibration (A100 ground truth and hold-out runs), modern (current "
        "accelerators, measured before any refit) or all.",
    ),
]


def _load(path: Path) -> TrainingSpec:
    return load(TrainingSpec, path)


def estimate_training(spec_path: SpecArg, format: JsonOpt = "table") -> None:
    """Estimate one training configuration: memory, step time, MFU, time and GPU-hours.

    Exit code 1 when the configuration does not fit; 2 for bad input.
    """
    from gpufleet.estimate.training_estimate import estimate_training as run

    fmt = check_format(format)
    result = run(_load(spec_path))
    if fmt == "json":
        typer.echo(result.model_dump_json(indent=2))
    else:
        _print_estimate(result, wide_console())
    if not result.fits:
        raise typer.Exit(EXIT_INFEASIBLE)


def _print_estimate(r: object, console: Console) -> None:
    from gpufleet.estimate.training_estimate import TrainingEstimate

    assert isinstance(r, TrainingEstimate)
    p = r.parallelism
    console.print(
        f"[bold]{r.gpus} × {r.accelerator}[/bold]  tp {p.tp} · pp {p.pp} · dp {p.dp} · cp {p.cp}"
        f" · ep {p.ep} · microbatch {p.microbatch} · virtual stages {p.virtual_stages} · zero "
        f"{p.zero_stage} · recompute {p.recompute}"
        f"{' · offload ' + p.offload if p.offload != 'none' else ''} ({p.chosen_by})"
    )
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column(justify="right")
    rows = [
        ("tokens/s", f"{r.tokens_per_s:,.0f}"),
        ("step time", f"{r.step_time_s:.3f} s"),
        ("TFLOP/s per GPU (model)", f"{r.tflops_per_gpu:.1f}"),
        ("MFU / HFU", f"{r.mfu:.1%} / {r.hfu:.1%}"),
        (
            "memory per GPU",
            f"{format_gb(r.memory_per_gpu_bytes.total)} of "
            f"{format_gb(r.memory_capacity_bytes)}"
            + ("" if r.fits else "  [red]does not fit[/red]"),
        ),
        (
            "  weights / grads / optimizer",
            f"{format_decimal_bytes(r.memory_per_gpu_bytes.weights)} / "
            f"{format_decimal_bytes(r.memory_per_gpu_bytes.gradients)} / "
            f"{format_decimal_bytes(r.memory_per_gpu_bytes.optimizer)}",
        ),
        (
            "  activations / other",
            f"{format_decimal_bytes(r.memory_per_gpu_bytes.activations)} / "
            f"{format_decimal_bytes(r.memory_per_gpu_bytes.other)}",
        ),
        _comm_row(r.comm_time_s),
    ]
    if r.train_time_days is not None:
        rows.append(("train time (no failures)", f"{r.train_time_days:.1f} days"))
        rows.append(("GPU-hours (no failures)", f"{r.gpu_hours:,.0f}"))
    if r.goodput_fraction is not None:
        rows.append(("goodput", f"{r.goodput_fraction:.1%}"))
    if r.wall_clock_days_with_failures is not None:
        rows.append(("wall clock with failures", f"{r.wall_clock_days_with_failures:.1f} days"))
        rows.append(("GPU-hours with failures", f"{r.gpu_hours_with_failures:,.0f}"))
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)
    for reason in r.reasons:
        console.print(f"[red]{reason}[/red]")
    console.print(
        f"{len(r.assumptions)} assumptions; --format json lists them with sources", style="dim"
    )


def search_training(
    spec_path: SpecArg,
    top: Annotated[int, typer.Option("--top", min=1, help="How many candidates to show.")] = 10,
    accelerators: Annotated[
        list[str] | None,
        typer.Option("--accelerator", "-a", help="Accelerator to consider (repeatable)."),
    ] = None,
    max_gpus: Annotated[
        int | None,
        typer.Option(
            "--max-gpus",
            min=1,
            help="Most GPUs to try (default: the spec's hardware.count, else 16,384).",
        ),
    ] = None,
    format: JsonOpt = "table",
) -> None:
    """Search accelerators × GPU counts × parallel layouts; print the best and the Pareto front.

    GPU counts are whole servers that split into tp · pp · cp · dp, the spec's own
    hardware.count among them.
    """
    from gpufleet.catalog.accelerators import get_accelerator
    from gpufleet.estimate.training_search import Constraints
    from gpufleet.estimate.training_search import search_training as run

    fmt = check_format(format)
    spec = _load(spec_path)
    names = [get_accelerator(a).name for a in (accelerators or [spec.hardware.accelerator])]
    result = run(spec, names, constraints=Constraints(max_gpus=max_gpus), top_k=top)
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "candidates_evaluated": result.candidates_evaluated,
                    "rejected": dict(result.rejected.most_common()),
                    "top": [c.__dict__ for c in result.top],
                    "pareto": [c.__dict__ for c in result.pareto],
                    "assumptions": [a.__dict__ for a in result.assumptions.frozen()],
                },
                indent=2,
            )
        )
        if not result.top:
            raise typer.Exit(EXIT_INFEASIBLE)
        return
    console = wide_console()
    # each row is the fastest layout of one (accelerator, GPU count): the search keeps one per
    # count, so "top N of all candidates" would promise the N fastest layouts overall
    table = Table(
        title=f"Fastest {len(result.top)} (accelerator, GPU count) pairs, each with its fastest "
        f"layout, of {result.candidates_evaluated:,} layouts evaluated; GPU-hours and cost "
        "without failures"
    )
    for col in (
        "accelerator",
        "GPUs",
        "tp·pp·dp·cp·ep",
        "mb",
        "zero",
        "recompute",
        "MFU",
        "step s",
        "days",
        "GPU-hours",
        "cost $",
    ):
        table.add_column(col, justify="left" if col in {"accelerator", "recompute"} else "right")
    for c in result.top:
        table.add_row(
            c.accelerator,
            str(c.gpus),
            f"{c.tp}·{c.pp}·{c.dp}·{c.cp}·{c.ep}",
            str(c.microbatch),
            # an offloaded layout is marked here, so fitting results print as before
            str(c.zero_stage) + (" +offload" if c.offload != "none" else ""),
            c.recompute,
            f"{c.mfu:.1%}",
            f"{c.step_time_s:.2f}",
            "-" if c.train_time_s is None else f"{c.train_time_s / 86400:.1f}",
            "-" if c.gpu_hours is None else f"{c.gpu_hours:,.0f}",
            "-" if c.cost_usd is None else f"{c.cost_usd:,.0f}",
        )
    console.print(table)
    console.print(f"Pareto front (time, cost, GPUs): {len(result.pareto)} configurations")
    console.print(
        "Rejected: " + ", ".join(f"{n:,} {why}" for why, n in result.rejected.most_common()),
        style="dim",
    )
    if not result.top:
        raise typer.Exit(EXIT_INFEASIBLE)


def validate_training(
    fit: Annotated[
        bool,
        typer.Option(
            "--fit",
            help="Refit the efficiency parameters: A100 ones on the calibration rows, the "
            "per-family ones with --rows modern (also prints leave-one-source-out errors).",
        ),
    ] = False,
    write: Annotated[bool, typer.Option("--write", help="With --fit: save them.")] = False,
    format: Annotated[
        str, typer.Option("--format", "-f", help="table, json or markdown (for docs/).")
    ] = "table",
    rows: RowsOpt = "calibration",
) -> None:
    """Compare the training estimator with published runs: the A100 ground truth and hold-out
    runs (--rows calibration, the default), current accelerators (--rows modern) or both."""
    from gpufleet.cli.validate_modern import show_rows, training_payload
    from gpufleet.validation.modern import check_rows
    from gpufleet.validation.training import fit_parameters, write_fitted

    fmt = check_format(format, ("table", "json", "markdown"))
    which = check_rows(rows)
    if write and not fit:
        raise UserError("--write needs --fit")
    if fit and which == "all":
        raise UserError("--fit fits one row set: --rows calibration (A100) or --rows modern")
    if fit and which == "modern":
        from gpufleet.cli.validate_fit import show_modern_fit

        show_modern_fit(fmt, write)
        return
    if fit:
        result = fit_parameters()
        if write:
            from importlib import resources

            path = resources.files("gpufleet.estimate").joinpath("data", "efficiency.yaml")
            write_fitted(result.parameters, str(path))
        typer.echo(
            json.dumps(
                {
                    "fitted": result.parameters,
                    "before": result.before.__dict__,
                    "after": result.after.__dict__,
                },
                indent=2,
            )
        )
        return
    show_rows(
        which,
        fmt,
        calibration_json=_calibration_json,
        print_calibration=_print_calibration,
        payload=training_payload,
    )


def _calibration_json() -> dict[str, object]:
    from gpufleet.validation.training import summarise, validate_holdout
    from gpufleet.validation.training import validate_training as run

    results = run()
    return {
        "rows": [r.__dict__ | {"error": r.error} for r in results],
        "summary": summarise(results).__dict__,
        "holdout": [r.__dict__ | {"error": r.error} for r in validate_holdout()],
    }


def _print_calibration(fmt: str) -> None:
    """The A100 calibration rows and the hold-out runs, as markdown or terminal tables."""
    from gpufleet.validation.training import summarise, validate_holdout
    from gpufleet.validation.training import validate_training as run

    results = run()
    holdout = validate_holdout()
    summary = summarise(results)
    if fmt == "markdown":
        typer.echo(_markdown(results) + "\n")
        typer.echo(
            f"Throughput rows: median |error| {summary.throughput_median_abs:.1%}, max "
            f"{summary.throughput_max_abs:.1%}. Goodput (GPU-hour) rows: median "
            f"{summary.goodput_median_abs:.1%}.\n\nHold-out runs (never fitted):\n"
        )
        typer.echo(_markdown(holdout))
        return
    console = wide_console()
    console.print(_table("Training estimator vs published runs (ground truth)", results))
    console.print(_table("Hold-out published runs (never used for fitting)", holdout))
    console.print(
        f"throughput rows: median |error| {summary.throughput_median_abs:.1%} (target ≤ 10%), "
        f"max {summary.throughput_max_abs:.1%} (target ≤ 25%); goodput rows: median "
        f"{summary.goodput_median_abs:.1%} (target ≤ 15%)"
    )


def _markdown(results: list[RowResult]) -> str:
    lines = [
        "| id | metric | published | predicted | error | layout |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.id} | {r.metric} | {r.published:,.2f} | {r.predicted:,.2f} | {r.error:+.1%} | "
        f"{r.layout} |"
        for r in results
    ]
    return "\n".join(lines)


def _table(title: str, results: list[RowResult]) -> Table:
    table = Table(title=title)
    for col in ("id", "metric", "published", "predicted", "error", "layout"):
        table.add_column(
            col, justify="right" if col in {"published", "predicted", "error"} else "left"
        )
    for r in results:
        colour = "green" if abs(r.error) <= 0.10 else ("yellow" if abs(r.error) <= 0.25 else "red")
        table.add_row(
            r.id,
            r.metric,
            f"{r.published:,.2f}",
            f"{r.predicted:,.2f}",
            f"[{colour}]{r.error:+.1%}[/{colour}]",
            r.layout,
        )
    return table


def _comm_row(comm: CommTime) -> tuple[str, str]:
    """Each dimension's communication time and the part of it left exposed; context and
    expert parallelism are listed when they communicate, so the parts a reader adds up are
    the parts the exposed time comes from."""
    parts = [("tp", comm.tp), ("pp", comm.pp), ("dp", comm.dp)]
    parts += [(name, t) for name, t in (("cp", comm.cp), ("ep", comm.ep)) if t > 0]
    label = "comm " + " / ".join(name for name, _ in parts) + " (exposed)"
    return label, " / ".join(f"{t:.3f}" for _, t in parts) + f" s ({comm.exposed:.3f} s)"
