"""`gpufleet admin slurm ...`: the cluster as Slurm sees it, and the ledger against sacct."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from gpufleet.errors import UserError

app = typer.Typer(
    help="The Slurm executor: read the cluster from Slurm, check the ledger against sacct.",
    no_args_is_help=True,
)
TagOpt = Annotated[str, typer.Option(help="The job-name tag the server uses (--slurm-tag).")]


@app.command("cluster")
def cluster(
    accelerator: Annotated[
        list[str] | None,
        typer.Option(
            help="GRES type = catalog accelerator, e.g. h100=h100-sxm5-80gb (repeatable; "
            "'gpu=NAME' for untyped GPUs)."
        ),
    ] = None,
    partition: Annotated[str | None, typer.Option(help="Only nodes of this partition.")] = None,
    name: Annotated[str, typer.Option(help="The cluster's name.")] = "slurm",
) -> None:
    """Print a cluster spec (YAML) built from `scontrol show node`, for `gpufleet serve
    --cluster`: one node group per node-name prefix, with the GRES GPU count per node."""
    import yaml

    from gpufleet.control.executors.slurm import SlurmExecutor
    from gpufleet.control.executors.slurm_cluster import cluster_spec_from_slurm

    mapping: dict[str, str] = {}
    for item in accelerator or []:
        gres, sep, acc = item.partition("=")
        if not sep or not acc:
            raise UserError(f"--accelerator {item!r}: use TYPE=ACCELERATOR")
        mapping["" if gres == "gpu" else gres] = acc
    executor = SlurmExecutor(Path())
    executor.check()
    nodes = executor.nodes()
    for n in nodes:  # a GRES type that names a catalog accelerator needs no mapping
        if n.gpu_type and n.gpu_type not in mapping:
            from gpufleet.catalog.accelerators import get_accelerator

            with contextlib.suppress(UserError):
                mapping[n.gpu_type] = get_accelerator(n.gpu_type).name
    spec = cluster_spec_from_slurm(nodes, mapping, name=name, partition=partition)
    typer.echo(yaml.safe_dump(spec, sort_keys=False), nl=False)


@app.command("reconcile")
def reconcile(
    db: Annotated[
        str | None,
        typer.Option("--db", help="Store URL (default: $GPUFLEET_DB, else ./gpufleet.db)."),
    ] = None,
    days: Annotated[float, typer.Option(help="Attempts that ended in the last N days.")] = 30.0,
    tag: TagOpt = "gpufleet",
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Compare the usage ledger's GPU-seconds per attempt with sacct's elapsed x gres/gpu.

    They agree when the GPU counts, end times and end states match (an attempt gpufleet
    stopped ends CANCELLED); the ledger then exceeds Slurm by the GPUs x the startup
    (allocation in gpufleet to start in Slurm). Exits 1 if any attempt differs."""
    from rich.table import Table

    from gpufleet.cli.output import check_format, wide_console
    from gpufleet.control.db import make_engine, require_current, sessions
    from gpufleet.control.executors.slurm import SlurmExecutor
    from gpufleet.control.executors.slurm_commands import SlurmOptions
    from gpufleet.control.slurm_usage import reconcile as compare

    check_format(fmt)
    if days <= 0:
        raise UserError("--days must be > 0")
    now = time.time()
    since = now - days * 86400
    executor = SlurmExecutor(Path(), SlurmOptions(tag=tag, accounting="sacct")).check()
    jobs = executor.accounted_jobs(since)
    engine = make_engine(db)
    require_current(engine)
    with sessions(engine)() as s:
        checks = compare(s, jobs, tag, since, now + 1)
    bad = [c for c in checks if c.problem]
    if fmt == "json":
        rows = [
            {
                "job_id": c.key.job_id,
                "attempt": c.key.attempt,
                "slurm_job_id": c.slurm_job_id,
                "ledger_gpus": c.ledger_gpus,
                "slurm_gpus": c.slurm_gpus,
                "ledger_gpu_s": c.ledger_gpu_s,
                "slurm_gpu_s": c.slurm_gpu_s,
                "slurm_state": c.slurm_state,
                "startup_s": c.startup_s,
                "problem": c.problem,
            }
            for c in checks
        ]
        typer.echo(json.dumps({"attempts": rows, "differences": len(bad)}, indent=2))
    else:
        table = Table(title=f"Ledger against sacct, last {days:g} days")
        for col in ("job", "attempt", "slurm job", "GPUs", "ledger GPU-s", "sacct GPU-s"):
            table.add_column(col, justify="right")
        table.add_column("startup s", justify="right")
        table.add_column("Slurm state")
        table.add_column("difference")

        def num(x: float | None, fmt_: str = ".0f") -> str:
            return "" if x is None else format(x, fmt_)

        for c in checks:
            table.add_row(
                str(c.key.job_id),
                str(c.key.attempt),
                c.slurm_job_id or "",
                num(c.ledger_gpus, "g") if c.slurm_gpus is None else str(c.slurm_gpus),
                num(c.ledger_gpu_s),
                num(c.slurm_gpu_s),
                num(c.startup_s),
                c.slurm_state or "",
                c.problem or "ok",
            )
        wide_console().print(table)
        typer.echo(f"{len(checks)} attempts, {len(bad)} with differences")
    if bad:
        raise typer.Exit(1)
