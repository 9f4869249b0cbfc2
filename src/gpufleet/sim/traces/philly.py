"""Microsoft Philly `cluster_job_log` (msr-fiddle/philly-traces, ATC '19).

A JSON array of jobs, each with `jobid`, `status` (Pass / Killed / Failed), `vc` (the
virtual cluster, Philly's tenant), `user`, `submitted_time` and `attempts`: every launch of
the job with `start_time`, `end_time` and `detail` (per host: `ip` and the `gpus` it used).
Times are "YYYY-MM-DD HH:MM:SS" strings or "None".

Mapping (docs/guide/traces.md): the request is the first attempt's placement (hosts with
GPUs are workers; GPUs per worker the most any host had); the duration runs from the first
attempt's start to the last attempt's end (retries and the gaps between them included: that
is how long the job held the cluster's attention); team = vc; kind = training. Killed and
failed jobs are kept: they held GPUs until they ended.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Final

from gpufleet.errors import UserError
from gpufleet.sim.traces._common import (
    CellError,
    Tally,
    finish,
    open_text,
    parse_one,
    parse_time_s,
    reading,
)
from gpufleet.sim.workload import TraceJob, Workload

WHAT: Final = "a Philly cluster_job_log (JSON array of jobs)"
REQUIRED_FIELDS: Final = ("jobid", "vc", "submitted_time", "attempts")


def read_philly(path: Path) -> Workload:
    """A Philly `cluster_job_log` as a workload (times shifted so the first arrival is 0)."""
    with reading(path, WHAT), open_text(path) as stream:
        try:
            records = json.load(stream)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not {WHAT}: invalid JSON ({exc})") from None
    if not isinstance(records, list):
        raise UserError(f"{path}: not {WHAT}: the top level is not an array")
    if records:
        first = records[0]
        if not isinstance(first, dict):
            raise UserError(f"{path}: not {WHAT}: the first entry is not an object")
        missing = [f for f in REQUIRED_FIELDS if f not in first]
        if missing:
            names = ", ".join(f"'{f}'" for f in missing)
            raise UserError(f"{path}: not {WHAT}: the first job has no field {names}")
    tally = Tally()
    jobs: list[TraceJob] = []
    for record in records:
        job = parse_one(tally, partial(_job, record, tally), check_submit=False)
        if job is not None:
            jobs.append(job)
    return finish(path.name, len(records), jobs, tally)


def _job(record: object, tally: Tally) -> TraceJob | None:
    if not isinstance(record, dict):
        raise CellError("entry is not a job object")
    for name in REQUIRED_FIELDS:
        if name not in record:
            raise CellError(f"job has no field '{name}'")
    attempts = record["attempts"]
    if not isinstance(attempts, list) or not attempts:
        raise CellError("never started (no attempts)")
    if not all(isinstance(a, dict) for a in attempts):
        raise CellError("attempt is not an object")
    start = parse_time_s(_text(attempts[0].get("start_time")), "start_time")
    if start is None:
        raise CellError("first attempt has no start_time")
    end = parse_time_s(_text(attempts[-1].get("end_time")), "end_time")
    if end is None:
        raise CellError("last attempt has no end_time (still running at the trace's end?)")
    submit = parse_time_s(_text(record["submitted_time"]), "submitted_time")
    if submit is None:
        submit = start
        tally.note("no submitted_time: arrival at the first attempt's start")
    elif submit > start:
        submit = start
        tally.note("submitted after it started: arrival at the first attempt's start")
    per_host = _gpus_per_host(attempts[0])
    if not per_host:
        per_host = next((p for p in map(_gpus_per_host, attempts[1:]) if p), [])
        if not per_host:
            raise CellError("no GPUs recorded in any attempt")
        tally.note("first attempt lists no GPUs: request from a later attempt")
    if len(set(per_host)) > 1:
        tally.note("uneven GPUs per host: every worker given the largest host's count")
    if len(attempts) > 1:
        tally.note("several attempts: duration from the first start to the last end")
    status = str(record.get("status", ""))
    if status in ("Killed", "Failed"):
        tally.note("kept a killed/failed job (it used GPUs until it ended)")
    team = _text(record["vc"])
    user = _text(record.get("user"))
    return TraceJob(
        name=_text(record["jobid"]) or "",
        team=team or "",
        submit_s=submit,
        duration_s=end - start,
        gpus=max(per_host),
        workers=len(per_host),
        kind="training",
        user=user or None,
    )


def _gpus_per_host(attempt: dict[str, object]) -> list[int]:
    """GPUs on each host of an attempt that had any (hosts listed with none are not workers)."""
    detail = attempt.get("detail")
    if not isinstance(detail, list):
        return []
    counts: list[int] = []
    for host in detail:
        gpus = host.get("gpus") if isinstance(host, dict) else None
        if isinstance(gpus, list) and gpus:
            counts.append(len(gpus))
    return counts


def _text(value: object) -> str | None:
    """A JSON scalar as text; Philly writes missing values as the string "None" or null."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None") else text
