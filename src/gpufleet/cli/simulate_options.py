"""The options `gpufleet simulate run` and `simulate compare` both take, as Typer
annotations: declared once so the two commands cannot drift (and kept out of
`cli.simulate`, which stays under the module size of design 0015)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpufleet.errors import UserError
from gpufleet.outputs import check_writable

ClusterArg = Annotated[
    str,
    typer.Argument(
        help="Cluster spec (kind: cluster), or 'trace' for the nodes the trace lists (openb).",
        show_default=False,
    ),
]
WorkloadArg = Annotated[
    str,
    typer.Argument(
        help="A kind: workload generator spec (.yaml), a trace file with --trace-format, or "
        "bundled:openb (the Alibaba GPU 2023 trace shipped with gpufleet).",
        show_default=False,
    ),
]
TraceFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--trace-format", help="Trace format of WORKLOAD: openb, philly, helios, sacct, gpufleet."
    ),
]
TraceNodesOpt = Annotated[
    Path | None,
    typer.Option(
        "--trace-nodes", help="openb node list for CLUSTER 'trace' (default: the bundled one)."
    ),
]
TeamsOpt = Annotated[
    Path | None,
    typer.Option(
        "--teams",
        help="Teams and quotas (kind: teams); without it every team may use the whole cluster.",
    ),
]
HorizonOpt = Annotated[
    str | None,
    typer.Option(
        "--horizon",
        help="Stop this long after the first arrival (e.g. 14d, 36h), the clock --window and "
        "every reported time count from (a trace's own clock may start later than 0); "
        "default: all jobs done.",
    ),
]
MtbfOpt = Annotated[
    float | None,
    typer.Option(
        "--gpu-mtbf-h",
        min=0.0,
        help="Mean time between failures of one GPU, in hours; leave out or give 0 for no "
        "failures.",
    ),
]
RepairOpt = Annotated[
    float, typer.Option("--repair-h", min=0.0, help="Mean repair time of a failed node, hours.")
]
RestartOpt = Annotated[
    str,
    typer.Option(
        "--restart-overhead",
        help="What a restarted job pays before it makes progress again (reload, warm-up), "
        "e.g. 30s or 5min.",
    ),
]
CheckpointOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint-every",
        help="Assume every training and batch job whose trace row gives no checkpoint "
        "interval saves its work this often, e.g. 10min (Tiresias's assumption: `tiresias` "
        "evicts only jobs that checkpoint; failures then lose only the work since the last "
        "save). Default: such jobs keep nothing.",
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table or json.")]
SpeedsOpt = Annotated[
    str | None,
    typer.Option(
        "--speeds",
        help="Relative throughput per accelerator, ACC=X,ACC=Y (e.g. h100-sxm5-80gb=1,"
        "h200-sxm-141gb=1.25): a job on ACC runs duration × speed(reference) / X. Others "
        "default to the catalog's dense BF16 peak (compute-bound jobs). Needs a reference.",
    ),
]
ReferenceOpt = Annotated[
    str | None,
    typer.Option(
        "--reference",
        help="The accelerator the trace's durations were measured on (bundled Pollux "
        "workloads: their T4 nodes). Without one, a job takes as long on every accelerator.",
    ),
]
JobsOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--jobs-out",
        help="Write one row per completed job (submit, first start, end, GPUs, wait, JCT, "
        "slowdown, attempts) to this .csv or .parquet file; compare adds each run's profile "
        "and seed.",
    ),
]


def check_jobs_out(path: Path | None) -> None:
    """Refuse a `--jobs-out` path that cannot be written as asked, before anything runs."""
    if path is not None and path.suffix.lower() not in (".csv", ".parquet"):
        raise UserError(f"--jobs-out: {path} must end in .csv or .parquet")
    if path is not None:
        check_writable(path, "--jobs-out", folder=False)
