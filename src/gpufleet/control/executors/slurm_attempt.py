"""One attempt as the slurm executor keeps it: its run directory, and what its Slurm job's
record means for it.

The executor holds nothing about an attempt only in memory (a restarted server must carry
on where the last one stopped), so what it knows is in these files, written atomically,
and every decision about an attempt is read back from them and from Slurm. Apart from the
executor so that the layout of the directory and the reading of an ended job (exit code,
lost, stopped) are written down once, as functions of the files and the job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpufleet.control.executors.base import ExecEvent, RunKey
from gpufleet.control.executors.local import KILLED_EXIT_CODE, read_json, read_tail
from gpufleet.control.executors.runner import write_json_atomic
from gpufleet.control.executors.slurm_text import NODE_LOSS_STATES, SlurmJob

# an attempt Slurm refused (or gpufleet could not express): no worker ran, as the local
# executor's failed staging
NOT_SUBMITTED_EXIT_CODE = 125
STAGING_FAILED_EXIT_CODE = 125

# the run directory (`base.run_dir`)
SLURM_JSON = "slurm.json"
SCRIPT = "job.sbatch"
HOSTFILE = "hostfile"
RELEASED = "released"
STOPPED = "stopped"
REPORTED_STARTED = "reported-started"
REPORTED_STAGED = "reported-staged"
CHECKPOINT_JSON = "checkpoint.json"
FINAL_JSON = "final.json"
OUTPUT_LOG = "output.log"
STAGED_JSON = "staged.json"
STAGING_ERROR = "staging-error.txt"


def write_record(
    rd: Path,
    job_id: str,
    now_s: float,
    ranks: list[int],
    interval_s: float | None,
    *,
    adopted: bool = False,
) -> None:
    write_json_atomic(
        rd / SLURM_JSON,
        {
            "slurm_job_id": job_id,
            "submitted_s": now_s,
            "ranks": ranks,
            "checkpoint_interval_s": interval_s,
            "adopted": adopted,
        },
    )


def write_error_record(rd: Path, now_s: float, ranks: list[int], why: str) -> None:
    write_json_atomic(
        rd / SLURM_JSON,
        {"slurm_job_id": None, "submitted_s": now_s, "ranks": ranks, "error": why},
    )


def recorded_job_id(rd: Path) -> str | None:
    """The Slurm job id of the attempt in `rd`, if it was submitted."""
    record = read_json(rd / SLURM_JSON)
    job_id = record.get("slurm_job_id") if record else None
    return str(job_id) if job_id else None


def launch_interval_s(rd: Path) -> float | None:
    record = read_json(rd / SLURM_JSON) or {}
    value = record.get("checkpoint_interval_s")
    return float(value) if value else None


def workers_started(rd: Path, record: Mapping[str, Any], job: SlurmJob) -> bool:
    """The workers run: every rank wrote its ``started-<rank>`` marker (Slurm's RUNNING
    alone only means the batch script started; a signal sent before the srun steps exist
    reaches nobody). An ended job that ran counts as started, markers or not."""
    if not job.ran:
        return False
    ranks = record.get("ranks") or []
    return job.terminal or all((rd / f"started-{r}").exists() for r in ranks)


def end_event(
    key: RunKey, job: SlurmJob, rd: Path, now_s: float, node_name: Callable[[str], str]
) -> ExecEvent:
    """How the attempt ended, from its ended job; `node_name` gives a Slurm node's gpufleet
    name."""
    code = job.exit_code
    if code is None:
        code = 0 if job.state == "COMPLETED" else 1
    if job.state != "COMPLETED" and code == 0:
        code = KILLED_EXIT_CODE  # cancelled or timed out without an exit status of its own
    where = ",".join(node_name(n) for n in job.nodes) or "no node"
    at_s = job.end_s or now_s
    detail = f"Slurm job {job.job_id} {job.state} on {where}"
    if (rd / STOPPED).exists():
        detail += " (stopped)"
    elif job.state in NODE_LOSS_STATES:
        return ExecEvent(key, "lost", at_s, detail=detail)
    staging = rd / STAGING_ERROR
    if code == STAGING_FAILED_EXIT_CODE and staging.exists():
        detail += f": {staging.read_text(encoding='utf-8', errors='replace').strip()}"
    return ExecEvent(key, "exited", at_s, code, detail)


def write_final(rd: Path, event: ExecEvent) -> ExecEvent:
    """Save how the attempt ended, so that it is reported once, also across restarts."""
    data = asdict(event)
    del data["key"]
    write_json_atomic(rd / FINAL_JSON, data)
    return event


def read_final(rd: Path, key: RunKey) -> ExecEvent | None:
    """The saved end of the attempt (`write_final`), if it ended."""
    data = read_json(rd / FINAL_JSON)
    if data is None:
        return None
    return ExecEvent(key=key, **{k: v for k, v in data.items() if k != "key"})


def attempt_logs(rd: Path, tail_bytes: int) -> str:
    """`SlurmExecutor.logs` of the attempt in `rd`."""
    if tail_bytes <= 0:
        return ""
    record = read_json(rd / SLURM_JSON) or {}
    ranks = [int(r) for r in record.get("ranks", [])] or sorted(
        int(p.stem.removeprefix("worker-")) for p in rd.glob("worker-*.log")
    )
    parts = [read_tail(rd / OUTPUT_LOG, tail_bytes)]
    if record.get("error"):
        parts.insert(0, f"{record['error']}\n".encode())
    for rank in ranks:
        text = read_tail(rd / f"worker-{rank}.log", tail_bytes)
        if len(ranks) > 1:
            if text and not text.endswith(b"\n"):
                text += b"\n"
            text = f"[rank {rank}]\n".encode() + text
        parts.append(text)
    return b"".join(parts)[-tail_bytes:].decode("utf-8", errors="replace")
