"""`gpufleet demo`: the portal on an emulated cluster with jobs arriving (see portal.demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo(
    *,
    cluster_path: Annotated[
        Path, typer.Option("--cluster", help="Cluster spec (kind: cluster).")
    ] = Path("examples/sched-cluster.yaml"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    speed: Annotated[
        float, typer.Option(help="Emulated seconds per real second (ETAs assume 1).")
    ] = 1.0,
    interval: Annotated[float, typer.Option(help="Seconds between new jobs.")] = 4.0,
    seed: Annotated[int, typer.Option(help="Seed of the job stream.")] = 7,
    work_dir: Annotated[
        Path | None,
        typer.Option("--dir", help="Keep the store and log here (default: a temporary dir)."),
    ] = None,
) -> None:
    """Start the service with the emulated executor, demo teams and tokens, and a stream of
    jobs, so the portal has something to show; prints the URL and tokens. Ctrl-C stops it."""
    from gpufleet.portal.demo import DemoOptions, run_demo

    options = DemoOptions(
        cluster_path=cluster_path,
        host=host,
        port=port,
        speed=speed,
        interval_s=interval,
        seed=seed,
        work_dir=work_dir,
    )
    run_demo(options, typer.echo)
