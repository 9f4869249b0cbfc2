"""SenseTime's Helios (SC '21) and Acme (NSDI '24) job logs: one CSV row per Slurm job.

Columns used: `job_id, user, vc, gpu_num, node_num, submit_time, start_time, end_time,
duration, state` (others, such as `cpu_num` or `jobname`, are ignored). Times are epoch
seconds or "YYYY-MM-DD HH:MM:SS", depending on the release.

Mapping (docs/guide/traces.md): CPU jobs (gpu_num 0) are dropped; workers = node_num, GPUs
per worker = ceil(gpu_num / node_num); duration = the `duration` column (end − start when it
is empty); team = vc; kind = training (both clusters run deep-learning training).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

from gpufleet.sim.traces._common import (
    CellError,
    Tally,
    is_blank,
    parse_float,
    parse_int,
    parse_time_s,
    read_csv_jobs,
)
from gpufleet.sim.workload import TraceJob, Workload

REQUIRED: Final = ("job_id", "vc", "gpu_num", "node_num", "submit_time")
DURATION_COLUMNS: Final = (("duration",), ("start_time", "end_time"))
ENDED_BADLY: Final = frozenset({"CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})


def read_helios(path: Path) -> Workload:
    """A Helios/Acme job log as a workload (times shifted so the first arrival is 0)."""
    return read_csv_jobs(
        path, "a Helios/Acme job log (CSV)", REQUIRED, _job, one_of=DURATION_COLUMNS
    )


def _job(row: dict[str, str], tally: Tally) -> TraceJob | None:
    gpu_num = parse_int(row["gpu_num"], "gpu_num")
    if gpu_num == 0:
        tally.drop("CPU job (gpu_num 0)")
        return None
    if gpu_num < 0:
        raise CellError("negative gpu_num")
    nodes = 0 if is_blank(row["node_num"]) else parse_int(row["node_num"], "node_num")
    if nodes <= 0:
        nodes = 1
        tally.note("node_num missing or 0: one node assumed")
    per_node = math.ceil(gpu_num / nodes)
    if per_node * nodes != gpu_num:
        tally.note("gpu_num not divisible by node_num: GPUs per node rounded up")
    submit = parse_time_s(row["submit_time"], "submit_time")
    start = parse_time_s(row.get("start_time"), "start_time")
    end = parse_time_s(row.get("end_time"), "end_time")
    duration_text = row.get("duration")
    if duration_text is not None and not is_blank(duration_text):
        duration = parse_float(duration_text, "duration")
    elif start is not None and end is not None:
        duration = end - start
        tally.note("no duration: end_time − start_time")
    elif start is None:
        raise CellError("never started (no start_time, no duration)")
    else:
        raise CellError("no end_time and no duration")
    if submit is None:
        if start is None:
            raise CellError("no submit_time or start_time")
        submit = start
        tally.note("no submit_time: arrival at start_time")
    state = row.get("state", "").strip().upper()
    if state.split(" ")[0] in ENDED_BADLY and duration > 0:
        tally.note("kept a cancelled/failed/timed-out job (it ran until it ended)")
    return TraceJob(
        name=row["job_id"].strip(),
        team=row["vc"].strip(),
        submit_s=submit,
        duration_s=duration,
        gpus=per_node,
        workers=nodes,
        kind="training",
        user=row.get("user", "").strip() or None,
    )
