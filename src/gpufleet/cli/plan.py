"""`gpufleet plan SPEC.yaml --out DIR`: the capacity plan, as JSON, Markdown, HTML and PDF."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpufleet.cli.output import wide_console
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

EXIT_INFEASIBLE = 1


def run_plan(spec_path: Path, out_dir: Path, console: Console | None = None) -> int:
    """Plan `spec_path`, write the reports to `out_dir`, print a summary; return the exit code.

    Bad input raises UserError (exit 2 at the CLI); an infeasible plan prints what would
    make it feasible and returns 1, writing nothing.
    """
    from gpufleet.plan.planner import InfeasiblePlanError, plan
    from gpufleet.report.render import pdf_available, write_reports

    out = console or wide_console()
    spec = load(PlanSpec, spec_path)
    steps = len(spec.workloads) * max(len(spec.accelerators), 5) + 3
    started = time.perf_counter()
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    ) as bar:
        task = bar.add_task("planning", total=steps)

        def tick(message: str) -> None:
            bar.update(task, advance=1, description=message)

        try:
            result = plan(spec, tick)
        except InfeasiblePlanError as exc:
            bar.stop()
            out.print("[bold red]no feasible plan[/bold red]")
            for line in exc.advice:
                out.print(f"  {line}")
            return EXIT_INFEASIBLE
        bar.update(task, description="writing reports")
        paths = write_reports(result, out_dir)
    elapsed = time.perf_counter() - started
    rec = result.recommendation
    out.print(
        f"[bold]{spec.name}[/bold]: {rec.total_gpus:,} × {rec.accelerator}, "
        f"{rec.deployment}{f' ({rec.provider})' if rec.provider else ''}"
    )
    for sentence in rec.why[:3]:
        out.print(f"  • {sentence}")
    cost = result.cost
    if cost.on_demand is not None:
        mix = cost.mix.get("total_usd")
        out.print(
            f"  on-demand ${cost.on_demand:,.0f}"
            + (f", optimised mix ${mix:,.0f}" if mix is not None else "")
            + (f", on-prem TCO ${cost.tco['total']:,.0f}" if "total" in cost.tco else "")
            + (
                f", break-even {cost.break_even_months:.0f} months"
                if cost.break_even_months is not None
                else ""
            )
        )
    out.print(f"reports in {out_dir}/: " + ", ".join(p.name for p in paths.values()))
    missing_pdf = pdf_available()
    if missing_pdf is not None:
        out.print(missing_pdf, style="yellow")
    out.print(f"done in {elapsed:.1f} s", style="dim")
    return 0


def plan_command(
    spec_path: Annotated[Path, typer.Argument(help="A plan spec YAML file (kind: plan).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the reports.")] = Path(
        "gpufleet-plan"
    ),
) -> None:
    """Plan hardware, cluster and cost for one or more workloads; write plan.json/md/html/pdf.

    Exit code 1 when no configuration meets the constraints (it says what would); 2 for
    bad input.
    """
    code = run_plan(spec_path, out)
    if code:
        raise typer.Exit(code)
