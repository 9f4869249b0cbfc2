"""The simulator CLI's terminal tables (`gpufleet simulate run|compare|experiment`): apart
from the commands, which read inputs and write files, so each module keeps one job."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def print_run(  # noqa: PLR0917 - what the run's header names
    console: Console, cluster: str, source: str, profile: str, seed: int, metrics: Mapping[str, Any]
) -> None:
    """A run's metrics, per team and per kind, as terminal tables."""
    from gpufleet.report.comparison import fmt_value, metric_label, metric_order
    from gpufleet.sim.compare import GROUPED
    from gpufleet.sim.metrics import HEADLINE_JOBS

    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        if key in GROUPED:
            flat.update({f"{key}.{p}": v for p, v in value.items()})
        elif not isinstance(value, Mapping):
            flat[key] = value
    order = metric_order({"metrics": {profile: flat}})
    console.print(
        f"[bold]{cluster}[/bold] × {source}: profile {profile}, seed {seed}",
        highlight=False,
    )
    replicas = metrics["per_kind"].get("inference", {}).get("jobs_completed", 0)
    apart = (
        f"; {replicas:,} inference replicas apart (their JCT is their serving window): "
        "inference wait, and per kind below"
        if replicas
        else ""
    )
    table = Table(
        title="Metrics",
        caption=f"wait, JCT, slowdown and per size: {metrics['jct_jobs']:,} {HEADLINE_JOBS} "
        f"that completed{apart}{unfinished_note(metrics['jobs_unfinished'])}",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("field", style="dim")
    for key in order:
        table.add_row(metric_label(key), fmt_value(key, flat[key]), key)
    console.print(table)
    teams = Table(title="Per team")
    for col in ("team", "jobs completed", "GPU-hours held", "entitled share", "wait p95"):
        teams.add_column(col, justify="left" if col == "team" else "right")
    for name, row in metrics["per_team"].items():
        entitled = row.get("entitled_share")
        teams.add_row(
            name,
            f"{row['jobs_completed']:,}",
            fmt_value("gpu_hours", row.get("gpu_hours")),
            "-" if entitled is None else f"{entitled * 100:.1f}%",
            fmt_value("wait_s.p95", row["wait_s"]["p95"]),
        )
    console.print(teams)
    kinds = Table(title="Per kind (every completed job of the kind)")
    for col in ("kind", "jobs completed", "wait mean", "wait p95", "JCT mean", "JCT p95"):
        kinds.add_column(col, justify="left" if col == "kind" else "right")
    for name, row in metrics["per_kind"].items():
        kinds.add_row(
            name,
            f"{row['jobs_completed']:,}",
            *(
                fmt_value(f"{m}.{p}", row[m][p])
                for m in ("wait_s", "jct_s")
                for p in ("mean", "p95")
            ),
        )
    console.print(kinds)


def unfinished_note(unfinished: int) -> str:
    """What the wait, JCT and slowdown rows leave out: jobs unfinished at the end (a horizon
    cut them, or they can never run) have no completion time, so a reader comparing the
    mean with a paper's, which counts every job, must be told how many are missing."""
    if not unfinished:
        return ""
    them = "it" if unfinished == 1 else "them"
    return (
        f"; {unfinished:,} job{'s' * (unfinished != 1)} unfinished at the end (never started "
        f"or still running) {'is' if unfinished == 1 else 'are'} in none of {them}"
    )


def jobs_out_line(path: Path, rows: int, unfinished: int, runs: int | None = None) -> str:
    """What `--jobs-out` wrote: completed jobs only, so averaging its rows leaves out the
    jobs unfinished at the end; the line says how many, as the metrics table does."""
    of = "" if runs is None else f" of {runs} run{'s' * (runs != 1)}"
    left = f"; {unfinished:,} unfinished at the end are not in it" if unfinished else ""
    return f"wrote {rows:,} completed job{'s' * (rows != 1)}{of} to {path}{left}"


def print_compare(console: Console, summary: Mapping[str, Any]) -> None:
    """A comparison's metrics per profile (mean ± CI half-width over seeds)."""
    from gpufleet.report.comparison import (
        fmt_estimate,
        headline_note,
        metric_label,
        metric_order,
    )

    profiles = list(summary["profiles"])
    n = len(summary["seeds"])
    pct = f"{summary['confidence'] * 100:g}"
    table = Table(
        title=f"{', '.join(profiles)} over {n} seed{'s' * (n != 1)}"
        + (f" (mean ± {pct} % CI half-width)" if n > 1 else ""),
        caption=headline_note(summary),
    )
    table.add_column("metric")
    for p in profiles:
        table.add_column(p, justify="right")
    for metric in metric_order(summary):
        cells = [fmt_estimate(metric, summary["metrics"][p].get(metric, {})) for p in profiles]
        table.add_row(metric_label(metric), *cells)
    console.print(table)


def print_experiment(console: Console, name: str, result: Mapping[str, Any]) -> None:
    """An experiment's results per policy."""
    rows: Mapping[str, Mapping[str, Any]] = result["results"]
    keys: tuple[str, ...]
    if name == "fragmentation":
        keys = (
            "allocated_share",
            "unallocated_gpus",
            "failed_pods",
            "unallocated_vs_best_baseline",
        )
    else:
        keys = (
            "gpu_allocation_ratio",
            "busy_utilization",
            "effective_gpu_hours",
            "gpu_hours_completed",
            "jobs_completed",
            "slo_attainment",
        )
    table = Table(title=f"experiment: {name}")
    table.add_column("policy")
    for key in keys:
        table.add_column(key, justify="right")
    for policy, row in rows.items():
        cells = []
        for key in keys:
            value = row.get(key)
            cells.append(
                "—"
                if value is None
                else f"{value:,.3f}"
                if isinstance(value, float)
                else str(value)
            )
        table.add_row(policy, *cells)
    console.print(table)
    console.print("method, scenario and caveats: docs/experiments/", style="dim")
