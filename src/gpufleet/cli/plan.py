"""`gpufleet plan SPEC.yaml --out DIR`: the capacity plan, as JSON, Markdown, HTML and PDF.

A spec with `workloads:` is sized by the estimators (`plan.planner`); one with `teams:` is a
shared cluster sized by simulation (`plan.fleet`), with `--seeds` and `--workers`, or
`--ray ADDRESS` to run the simulations on a Ray cluster.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from gpufleet.cli.output import wide_console
from gpufleet.errors import UserError
from gpufleet.formatting import fmt_usd
from gpufleet.specs.fleet import FleetPlanSpec, load_plan

if TYPE_CHECKING:
    from gpufleet.plan.fleet_model import FleetPlan
    from gpufleet.plan.model import Plan

EXIT_INFEASIBLE = 1


def run_plan(
    spec_path: Path,
    out_dir: Path,
    console: Console | None = None,
    *,
    seeds: int | None = None,
    workers: int | None = None,
    ray: str | None = None,
) -> int:
    """Plan `spec_path`, write the reports to `out_dir`, print a summary; return the exit code.

    Bad input raises UserError (exit 2 at the CLI); an infeasible plan prints what would
    make it feasible and returns 1, writing nothing.
    """
    from gpufleet.plan.planner import InfeasiblePlanError, plan
    from gpufleet.report.render import pdf_available, write_reports

    out = console or wide_console()
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder")
    spec = load_plan(spec_path)
    if isinstance(spec, FleetPlanSpec):
        if ray is not None and workers is not None:
            raise UserError(
                "--workers and --ray: give one; on Ray every CPU of the cluster runs a simulation"
            )
        return run_fleet_plan(spec, spec_path, out_dir, out, seeds=seeds, workers=workers, ray=ray)
    if ray is not None:
        raise UserError(
            f"--ray is for multi-team plans (a spec with teams:); {spec_path} plans workloads "
            "with the estimators, which simulate nothing"
        )
    if seeds is not None or workers is not None:
        raise UserError(
            "--seeds and --workers are for multi-team plans (a spec with teams:); "
            f"{spec_path} plans workloads with the estimators"
        )
    candidates = max(len(spec.accelerators), 5)
    # sizing each workload on each candidate, then costing each candidate's plan (the ranking)
    steps = (len(spec.workloads) + 1) * candidates + 3
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
        f"[bold]{spec.name}[/bold]: {_fleet_text(result)}, "
        f"{rec.deployment}{f' ({rec.provider})' if rec.provider else ''}"
    )
    for sentence in rec.why[:4]:  # the decision, instances, accelerator, rent or own
        out.print(f"  • {sentence}")
    cost = result.cost
    if cost.on_demand is not None:
        mix = cost.mix.get("total_usd")
        out.print(
            f"  on-demand {fmt_usd(cost.on_demand)}"
            + (f", optimised mix {fmt_usd(mix)}" if mix is not None else "")
            + (f", on-prem TCO {fmt_usd(cost.tco['total'])}" if "total" in cost.tco else "")
            + (
                f", payback {cost.break_even_months:.1f} months if owned and kept "
                f"{spec.expected_utilization:.0%} busy"
                + (
                    f", after the {cost.tco['horizon_years'] * 12:g}-month horizon"
                    if cost.break_even_months > cost.tco.get("horizon_years", math.inf) * 12
                    else ""
                )
                if cost.break_even_months is not None
                else ""
            )
        )
    summary = result.summary
    if summary is not None and summary.cost_low_usd is not None:
        # mid-sentence: "GPU price, utilization" (a label's capital only where it is an acronym)
        movers = ", ".join(
            d.name if d.name[:2].isupper() else d.name[:1].lower() + d.name[1:]
            for d in summary.drivers
        )
        out.print(
            f"  likely {fmt_usd(summary.cost_low_usd)} to {fmt_usd(summary.cost_high_usd)} "
            f"around {fmt_usd(summary.cost_usd)} {summary.cost_what}"
            + (f"; moves most with {movers}" if movers else "")
        )
        for sentence in summary.would_change:
            out.print(f"  → {sentence}")
    out.print(f"reports in {out_dir}/: " + ", ".join(p.name for p in paths.values()))
    missing_pdf = pdf_available()
    if missing_pdf is not None:
        out.print(missing_pdf, style="yellow")
    out.print(f"done in {elapsed:.1f} s", style="dim")
    return 0


def run_fleet_plan(
    spec: FleetPlanSpec,
    spec_path: Path,
    out_dir: Path,
    out: Console,
    *,
    seeds: int | None,
    workers: int | None,
    ray: str | None = None,
) -> int:
    """A multi-team plan: simulate, write the reports, print the answer; 1 when no candidate
    meets every target (the reports say what was tried), 2 (a UserError) for bad input.
    With `ray`, the simulations run on that Ray cluster and `workers` is unused (`run_plan`
    refuses both: Ray runs one simulation per CPU of its nodes)."""
    import os

    from gpufleet.plan.fleet import DEFAULT_SEEDS, InfeasibleFleetError, plan_fleet
    from gpufleet.plan.fleet_specs import answer_specs
    from gpufleet.report.fleet import write_fleet_reports
    from gpufleet.report.render import pdf_available

    n_seeds = DEFAULT_SEEDS if seeds is None else seeds
    if n_seeds < 1:
        raise UserError(f"--seeds: must be at least 1, got {n_seeds}")
    n_workers = min(2, os.cpu_count() or 1) if workers is None else workers
    if n_workers < 1:
        raise UserError(f"--workers: must be at least 1, got {n_workers}")
    started, cpu0 = time.perf_counter(), time.process_time()
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        auto_refresh=False,  # no refresh thread: worker processes are forked from this one
    ) as bar:
        task = bar.add_task("simulating", total=0)

        def submitted(n: int) -> None:
            total = bar.tasks[0].total or 0
            bar.update(task, total=total + n)
            bar.refresh()

        def done(n: int) -> None:
            bar.update(task, advance=n)
            bar.refresh()

        try:
            result = plan_fleet(
                spec,
                spec_path.parent,
                seeds=n_seeds,
                workers=n_workers,
                on_submit=submitted,
                on_done=done,
                ray_address=ray,
            )
        except InfeasibleFleetError as exc:
            bar.stop()
            out.print("[bold red]no feasible plan[/bold red]")
            for line in exc.advice:
                out.print(f"  {line}", highlight=False)
            return EXIT_INFEASIBLE
        simulations = int(bar.tasks[0].completed)
        bar.update(task, description="writing reports")
        bar.refresh()
        paths = write_fleet_reports(
            result, out_dir, extra=answer_specs(spec, spec_path.parent, result)
        )
    elapsed = time.perf_counter() - started
    rec = result.recommendation
    _print_fleet_answer(result, spec.name, out)
    out.print(f"reports in {out_dir}/: " + ", ".join(p.name for p in paths.values()))
    missing_pdf = pdf_available()
    if missing_pdf is not None:
        out.print(missing_pdf, style="yellow")
    out.print(
        f"{simulations:,} simulations ({n_seeds} seeds, "
        + (f"{n_workers} worker{'s' * (n_workers != 1)}" if ray is None else f"on Ray at {ray}")
        + f") in {elapsed:.1f} s; this process used {time.process_time() - cpu0:.1f} s of CPU",
        style="dim",
    )
    return 0 if rec is not None else EXIT_INFEASIBLE


def _fleet_text(result: Plan) -> str:
    """The headline GPUs as the summary counts them (`plan.summary.fleet_text`): "16 ×
    h100 (12 used)", "528 × h100 at once (1,296 across the workloads)"."""
    from gpufleet.plan.summary import fleet_text

    return fleet_text(result)


def _print_fleet_answer(result: FleetPlan, name: str, out: Console) -> None:
    """The answer, where it is sensitive, the quotas (and whether a check run verified
    them) and the queue policies: each line is a sentence the plan built from its numbers."""
    rec = result.recommendation
    if rec is None:
        out.print("[bold red]no candidate met every target within the search limit[/bold red]")
    else:
        period = rec.cost.period if rec.cost is not None else "over the plan's horizon_years"
        cost = "" if rec.cost_usd is None else f", ${rec.cost_usd:,.0f} {period} ({rec.deployment})"
        out.print(
            f"[bold]{name}[/bold]: {rec.cluster_text}{cost}: {result.targets_text}",
            highlight=False,
        )
    for sentence in result.sensitive_to:
        out.print(f"  • {sentence}", highlight=False)
    q = result.quotas
    if q is not None:
        quotas = ", ".join(f"{t.team} {t.guaranteed_gpus}/{t.burst_limit_gpus}" for t in q.teams)
        if q.recommended:
            out.print(f"  quotas at {q.gpus:,} GPUs (guaranteed/burst): {quotas}", highlight=False)
            out.print(f"    {q.verdict}", highlight=False)
        else:
            out.print(f"  quotas NOT verified (guaranteed/burst GPUs): {quotas}", style="yellow")
            out.print(f"    {q.verdict}", style="yellow", highlight=False)
    if result.queue_policy_summary:
        out.print(f"  queue policies: {result.queue_policy_summary}", highlight=False)


def plan_command(
    spec_path: Annotated[Path, typer.Argument(help="A plan spec YAML file (kind: plan).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the reports.")] = Path(
        "gpufleet-plan"
    ),
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            help="Multi-team plans: seeds 0..N-1 simulated at every cluster size (default 5).",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Multi-team plans: worker processes for the simulations (default: up to 2, "
            "the CPUs there are). The result does not depend on it.",
            show_default=False,
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Multi-team plans: run the simulations on a Ray cluster instead of local "
            "workers (not with --workers); same plan.json. ADDRESS: the head's HOST:PORT "
            "(`ray start --head` prints it) from a machine of the cluster, 'auto' (the "
            "cluster `ray start` joined here), or 'local' (a private Ray for this run).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Plan hardware, cluster and cost; write plan.json/md/html/pdf.

    A spec with `workloads:` sizes each workload with the estimators; one with `teams:`
    sizes a shared cluster by simulation (smallest cluster where every team meets its
    targets, quotas, policy comparison). Exit code 1 when nothing meets the constraints;
    2 for bad input (nothing is written).
    """
    code = run_plan(spec_path, out, seeds=seeds, workers=workers, ray=ray)
    if code:
        raise typer.Exit(code)
