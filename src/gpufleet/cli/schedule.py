"""`gpufleet schedule CLUSTER.yaml JOBS.yaml`: one scheduling cycle on a given state."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from gpufleet.cli.output import check_format, wide_console
from gpufleet.errors import UserError
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.jobs import JobSpec, JobsSpec
from gpufleet.specs.load import load
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import DEFAULT_PRIORITY_CLASSES, OPEN_QUOTA_GPUS, TeamsSpec

if TYPE_CHECKING:
    from gpufleet.sched.framework import Relayout


def _open_teams(jobs: list[JobSpec], accelerators: Iterable[str]) -> TeamsSpec:
    """Without a teams file quotas are not enforced: each team of `jobs` is guaranteed
    `OPEN_QUOTA_GPUS` of every accelerator, which no use or request reaches (the quota
    check has no "unlimited": a team without a quota entry may not use the flavor)."""
    names = sorted({j.team for j in jobs})
    classes = [c.model_dump() for c in DEFAULT_PRIORITY_CLASSES]
    known = {c["name"] for c in classes}
    for name in sorted({j.priority_class for j in jobs if j.priority_class} - known):
        classes.append({"name": name, "value": 500, "preemptible": True})
    quota = dict.fromkeys(sorted(set(accelerators)), OPEN_QUOTA_GPUS)
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": classes,
            "teams": [{"name": n, "quota": quota, "default_priority": "standard"} for n in names]
            or [{"name": "default"}],
        }
    )


PROFILE_NAMES = tuple(PROFILES)  # specs.profiles is data only: cheap to import here
PROFILE_HELP = (
    "Scheduling profile: "
    + ", ".join(PROFILE_NAMES)
    + " (what each does: docs/guide/scheduling.md)."
)


def schedule(
    cluster_path: Annotated[Path, typer.Argument(help="Cluster spec (kind: cluster).")],
    jobs_path: Annotated[
        Path, typer.Argument(help="Jobs (kind: jobs); running ones with placement.")
    ],
    *,
    teams_path: Annotated[
        Path | None,
        typer.Option("--teams", help="Teams and quotas (kind: teams); without it, no quotas."),
    ] = None,
    profile: Annotated[str, typer.Option("--profile", help=PROFILE_HELP)] = "default",
    now_s: Annotated[float, typer.Option("--now", help="Clock for the cycle, seconds.")] = 0.0,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Run one scheduling cycle and print each job's state, placement and reason.

    Also prints the backfill reservation (who, where, from when), preemptions with
    their reasons, and MIG re-layout proposals.
    """
    from gpufleet.cluster import Cluster, State
    from gpufleet.sched.decide import decide

    fmt = check_format(format)
    cluster_spec = load(ClusterSpec, cluster_path)
    jobs = load(JobsSpec, jobs_path).jobs
    cluster = Cluster.from_spec(cluster_spec)
    if teams_path is not None:
        teams = load(TeamsSpec, teams_path)
    else:
        teams = _open_teams(jobs, cluster.gpus_by_accelerator)
    running = [j for j in jobs if j.state == "running"]
    pending = [j for j in jobs if j.state == "pending"]
    result = decide(cluster, State(cluster), running, pending, teams, profile=profile, now_s=now_s)
    rows: list[dict[str, Any]] = []
    for job in jobs:
        if job.name in result.preempted:
            state, where = "preempted", _placement_text(job)
            reason = result.preempted[job.name].text()
        elif job.state == "running":
            state, where, reason = "running", _placement_text(job), ""
        elif job.name in result.admitted:
            state = "admitted"
            where = "; ".join(_text(p) for p in result.admitted[job.name])
            reason = f"on {result.flavors.get(job.name, '')}".strip()
        else:
            state, where, reason = "pending", "", result.pending_reasons.get(job.name, "")
        rows.append(
            {
                "job": job.name,
                "team": job.team,
                "state": state,
                "placement": where,
                "reason": reason,
            }
        )
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "profile": profile,
                    "jobs": rows,
                    "preempted": {name: e.text() for name, e in result.preempted.items()},
                    "reserved": {
                        name: {
                            "start_s": result.reserved_start_s[name],
                            "placement": "; ".join(_text(p) for p in placements),
                        }
                        for name, placements in result.reserved.items()
                    },
                    "relayouts": [_relayout_json(r) for r in result.relayouts],
                    "timings_s": dict(result.timings_s),
                    "quotas_enforced": teams_path is not None,
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"One scheduling cycle ({profile})")
    for col in ("job", "team", "state", "placement", "reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        colour = {"admitted": "green", "pending": "yellow", "preempted": "red"}.get(r["state"], "")
        table.add_row(
            r["job"],
            r["team"],
            f"[{colour}]{r['state']}[/{colour}]" if colour else r["state"],
            r["placement"],
            r["reason"],
        )
    console = wide_console()
    console.print(table)
    for name, placements in result.reserved.items():
        start = result.reserved_start_s[name]
        where = "; ".join(_text(p) for p in placements)
        console.print(f"reservation: {name} on {where} from t={start:g} s")
    for proposal in result.relayouts:
        console.print(f"MIG re-layout proposal: {proposal.reason}")
    if teams_path is None:
        console.print("no --teams file: quotas not enforced", style="dim")


def _relayout_json(r: Relayout) -> dict[str, Any]:
    return {
        "node": r.node,
        "gpu": r.gpu,
        "accelerator": r.accelerator,
        "current": dict(r.current),
        "proposed": dict(r.proposed),
        "drain": list(r.drain),
        "drain_s": r.drain_s,
        "serves": list(r.serves),
        "reason": r.reason,
    }


def _placement_text(job: JobSpec) -> str:
    parts = []
    for p in job.placement:
        what = ",".join(map(str, p.gpus)) or ",".join(p.mig_slices) or f"{p.fraction} GPU"
        parts.append(f"{p.node}[{what}]")
    return "; ".join(parts)


def _text(p: Any) -> str:
    if p.gpus:
        return f"{p.node}[{','.join(map(str, p.gpus))}]"
    if p.mig_slices:
        return ", ".join(p.mig_slices)
    return f"{p.node}/gpu{p.gpu} {p.milli / 1000:g} GPU"


def bench_scheduler(
    *,
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Nodes of 8 H100 GPUs.")] = 5000,
    gpus_per_node: Annotated[
        int, typer.Option("--gpus-per-node", min=8, max=8, help="8 (the synthetic cluster's).")
    ] = 8,
    pending: Annotated[int, typer.Option("--pending", min=1, help="Pending jobs.")] = 50_000,
    profile: Annotated[str, typer.Option("--profile", help=PROFILE_HELP)] = "default",
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help="busy: the cycle runs on a cluster already filled by a first cycle (default); "
            "empty: on an idle cluster.",
        ),
    ] = "busy",
    format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Time one scheduling cycle on a synthetic cluster: decisions/s, cycle and phase times."""
    from gpufleet.sched.bench import run_bench

    fmt = check_format(format)
    del gpus_per_node  # fixed at 8 by the synthetic cluster; the option documents it
    if start not in ("busy", "empty"):
        raise UserError(f"--start must be busy or empty, got {start!r}")
    result = run_bench(nodes, pending, profile, start="busy" if start == "busy" else "empty")
    data = {
        "nodes": result.nodes,
        "start": start,
        "running": result.running,
        "pending": result.pending,
        "admitted": result.admitted,
        "decisions_per_s": result.decisions_per_s,
        "cycle_s": result.cycle_s,
        "timings_s": result.timings_s,
    }
    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
        return
    console = wide_console()
    console.print(
        f"{nodes:,} nodes × 8 GPUs ({start}: {result.running:,} running), {pending:,} pending: "
        f"{result.decisions_per_s:,.0f} decisions/s "
        f"(cycle {result.cycle_s:.2f} s, {result.admitted:,} admitted)"
    )
    for phase, seconds in result.timings_s.items():
        console.print(f"  {phase:<9} {seconds:8.3f} s")
