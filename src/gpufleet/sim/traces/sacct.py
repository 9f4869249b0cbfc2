"""Slurm accounting: `sacct --parsable2` output (pipe-separated, one header line).

Any site with Slurm can replay its own history with

    sacct -a -X --parsable2 --starttime 2024-01-01 \\
        --format=JobID,JobName,User,Account,Partition,Submit,Start,End,Elapsed,State,AllocTRES,NNodes,ReqTRES,Timelimit

Mapping (docs/guide/traces.md): GPUs from AllocTRES (`gres/gpu=8`, or `gres/gpu:a100=8`
whose type becomes an accelerator hint, kept as written); workers = NNodes with the GPUs
split evenly; duration = Elapsed (End − Start without it); team = Account; the declared
Timelimit is the runtime estimate. Job steps, jobs that never started and jobs without an
End (pending, running) are dropped with a reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

from gpufleet.sim.traces._common import (
    CellError,
    Tally,
    is_blank,
    parse_clock_s,
    parse_int,
    parse_time_s,
    read_csv_jobs,
)
from gpufleet.sim.workload import TraceJob, Workload

REQUIRED: Final = ("JobID", "Account", "Submit", "Start", "End", "AllocTRES")
NO_LIMIT: Final = frozenset({"UNLIMITED", "PARTITION_LIMIT", "INVALID", "NONE", "UNKNOWN", ""})
ENDED_BADLY: Final = frozenset(
    {
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
NO_ACCOUNT_TEAM: Final = "unassigned"


def read_sacct(path: Path) -> Workload:
    """`sacct --parsable2` output as a workload (times shifted so the first arrival is 0)."""
    return read_csv_jobs(
        path, "a `sacct --parsable2` listing", REQUIRED, _job, delimiter="|", quoted=False
    )


def gpus_from_tres(tres: str) -> tuple[int, tuple[str, ...]]:
    """Total GPUs and GPU types named in a TRES string such as `cpu=8,gres/gpu:a100=4`.

    Slurm lists both the untyped total (`gres/gpu=4`) and per-type counts; the untyped one
    wins when present, else the typed counts are summed. `gres/gpumem` and `gres/gpuutil`
    are not GPU counts.
    """
    untyped: int | None = None
    typed: dict[str, int] = {}
    for item in tres.split(","):
        key, _, value = item.strip().partition("=")
        if key != "gres/gpu" and not key.startswith("gres/gpu:"):
            continue
        count = parse_int(value, "GPU count in TRES")
        if key == "gres/gpu":
            untyped = count
        else:
            typed[key.removeprefix("gres/gpu:")] = count
    total = untyped if untyped is not None else sum(typed.values())
    return total, tuple(t for t, n in typed.items() if n > 0)


def _job(row: dict[str, str], tally: Tally) -> TraceJob | None:
    job_id = row["JobID"].strip()
    if "." in job_id:
        tally.drop("job step (its job is counted on its own row)")
        return None
    state = row.get("State", "").strip().upper().split(" ")[0]
    start = parse_time_s(row["Start"], "Start")
    if start is None:
        tally.drop("never started (Start Unknown or None)")
        return None
    end = parse_time_s(row["End"], "End")
    if end is None:
        tally.drop("no End (still pending or running)")
        return None
    gpus, types = _gpus(row, tally)
    if gpus == 0:
        tally.drop("no GPUs allocated (CPU job)")
        return None
    nodes = 0 if is_blank(row.get("NNodes")) else parse_int(row["NNodes"], "NNodes")
    if nodes <= 0:
        nodes = 1
        tally.note("NNodes missing or 0: one node assumed")
    per_node = math.ceil(gpus / nodes)
    if per_node * nodes != gpus:
        tally.note("GPUs not divisible by NNodes: GPUs per node rounded up")
    elapsed = row.get("Elapsed", "")
    if is_blank(elapsed):
        duration = end - start
        tally.note("no Elapsed: End − Start")
    else:
        duration = parse_clock_s(elapsed, "Elapsed")
    submit = parse_time_s(row["Submit"], "Submit")
    if submit is None:
        submit = start
        tally.note("no Submit: arrival at Start")
    team = row["Account"].strip()
    if not team:
        team = NO_ACCOUNT_TEAM
        tally.note(f"no Account: team '{NO_ACCOUNT_TEAM}'")
    if state in ENDED_BADLY:
        tally.note("kept a cancelled/failed/timed-out job (it ran until it ended)")
    return TraceJob(
        name=job_id,
        team=team,
        submit_s=submit,
        duration_s=duration,
        gpus=per_node,
        workers=nodes,
        accelerators=types,
        user=row.get("User", "").strip() or None,
        runtime_estimate_s=_limit(row.get("Timelimit", ""), tally),
    )


def _gpus(row: dict[str, str], tally: Tally) -> tuple[int, tuple[str, ...]]:
    alloc = row["AllocTRES"]
    if not is_blank(alloc):
        return gpus_from_tres(alloc)
    requested = row.get("ReqTRES", "")
    if is_blank(requested):
        return 0, ()
    gpus, types = gpus_from_tres(requested)
    if gpus:
        tally.note("empty AllocTRES: GPUs from ReqTRES")
    return gpus, types


def _limit(text: str, tally: Tally) -> float | None:
    if text.strip().upper() in NO_LIMIT:
        return None
    try:
        limit = parse_clock_s(text, "Timelimit")
    except CellError:
        tally.note("unreadable Timelimit: no runtime estimate")
        return None
    return limit if limit > 0 else None
