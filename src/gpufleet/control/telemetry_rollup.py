"""Roll-ups and retention of the GPU readings: five-minute buckets per GPU and per team,
hours per team, and the pruning of raw rows after a day and roll-ups after 90 days
(`telemetry_store` writes the readings; retention in docs/design/0017).

`roll_up` is idempotent (a bucket is rolled up once, by `telemetry_state`), so the reader's
loop runs it in its own transaction after a round: a crash between the two loses nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Float, delete, func, insert, literal, select
from sqlalchemy.orm import Session

from gpufleet.control.models import (
    GpuLatest,
    GpuSample,
    GpuSample5m,
    GpuTeam1h,
    GpuTeam5m,
    GpuTeamSample,
    TelemetryState,
)
from gpufleet.control.telemetry_store import (
    BUCKET_S,
    HOUR_S,
    RAW_KEEP_S,
    ROLLUP_KEEP_S,
    TeamSums,
    team_order,
)


def roll_up(session: Session, now_s: float) -> int:
    """Roll closed five-minute buckets of raw rows into `gpu_samples_5m`; prune both tables.
    Returns the roll-up rows written. Idempotent: a bucket is rolled up once.

    As `ingest`, it reads and sums before its first write and writes in bulk: a bucket of
    8,000 GPUs is 160,000 raw rows, and SQLite's write lock is held from the first write
    to the commit (the caller commits it in its own transaction, not with a round)."""
    state = session.get(TelemetryState, "rollup")
    closed_to = math.floor(now_s / BUCKET_S) * BUCKET_S
    if state is None:
        first = session.scalar(select(func.min(GpuSample.time_s)))
        if first is None:
            return 0
        start = math.floor(first / BUCKET_S) * BUCKET_S
    else:
        start = state.rolled_up_to_s
    rows: list[dict[str, Any]] = []
    team_rows: list[dict[str, Any]] = []
    if closed_to > start:
        rows, team_rows = _bucket_rows(session, start, closed_to)
    cutoff = now_s - RAW_KEEP_S
    oldest = session.scalar(select(func.min(GpuSample.time_s)))
    # the writes, from here to the commit
    if state is None:
        state = TelemetryState(name="rollup", rolled_up_to_s=start)
        session.add(state)
    if closed_to > start:
        if rows:
            session.connection().execute(insert(GpuSample5m), rows)
        if team_rows:
            session.connection().execute(insert(GpuTeam5m), team_rows)
        _roll_up_hours(session, start, closed_to)
        state.rolled_up_to_s = closed_to
    if oldest is not None and oldest < cutoff:
        session.execute(delete(GpuSample).where(GpuSample.time_s < cutoff))
        session.execute(delete(GpuTeamSample).where(GpuTeamSample.time_s < cutoff))
        session.execute(delete(GpuLatest).where(GpuLatest.time_s < cutoff))
        state.raw_pruned_to_s = cutoff
    # to the hour, so an hour is in the hourly table exactly when its buckets are kept
    keep_from = math.floor((now_s - ROLLUP_KEEP_S) / HOUR_S) * HOUR_S
    session.execute(delete(GpuSample5m).where(GpuSample5m.bucket_s < keep_from))
    session.execute(delete(GpuTeam5m).where(GpuTeam5m.bucket_s < keep_from))
    session.execute(delete(GpuTeam1h).where(GpuTeam1h.hour_s < keep_from))
    session.flush()
    return len(rows)


def _bucket_rows(
    session: Session, start_s: float, end_s: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `gpu_samples_5m` and `gpu_team_5m` rows of the buckets in [start_s, end_s), from
    the raw rows' columns (no ORM objects: a bucket can be 160,000 rows)."""
    raw = GpuSample
    q = select(
        raw.time_s,
        raw.node,
        raw.gpu,
        raw.job_id,
        raw.team,
        raw.util_pct,
        raw.mem_used_bytes,
        raw.mem_total_bytes,
        raw.power_w,
        raw.healthy,
    ).where(raw.time_s >= start_s, raw.time_s < end_s)
    cells: dict[tuple[float, str, int, int | None, str | None], list[Any]] = defaultdict(list)
    for r in session.execute(q):
        b = math.floor(r.time_s / BUCKET_S) * BUCKET_S
        cells[(b, r.node, r.gpu, r.job_id, r.team)].append(r)
    teams: dict[float, dict[tuple[bool, str | None], TeamSums]] = defaultdict(
        lambda: defaultdict(TeamSums)
    )
    rows = []
    for (b, node, gpu, job_id, team), got in sorted(cells.items(), key=_cell_order):
        powers = [r.power_w for r in got if r.power_w is not None]
        row = {
            "bucket_s": b,
            "node": node,
            "gpu": gpu,
            "job_id": job_id,
            "team": team,
            "samples": len(got),
            "util_mean_pct": sum(r.util_pct for r in got) / len(got),
            "util_max_pct": max(r.util_pct for r in got),
            "mem_used_max_bytes": _max_known(r.mem_used_bytes for r in got),
            "mem_total_bytes": _max_known(r.mem_total_bytes for r in got),
            "power_mean_w": sum(powers) / len(powers) if powers else None,
            "unhealthy_samples": sum(1 for r in got if not r.healthy),
        }
        rows.append(row)
        # the team's sums are the per-GPU rows' own (mean x samples), so a series read
        # from either table adds up the same numbers
        for key in ((False, team), (True, None)):
            teams[b][key].add(row["util_mean_pct"], row["mem_used_max_bytes"], row["samples"])
    team_rows = [
        {
            "bucket_s": b,
            "cluster": whole,
            "team": team,
            "samples": sums.readings,
            "rounds": sums.rounds,
            "util_sum_pct": sums.util_sum_pct,
            "mem_used_sum_bytes": sums.mem_used_sum_bytes,
            "mem_samples": sums.mem_readings,
        }
        for b, per_key in sorted(teams.items())
        for (whole, team), sums in sorted(per_key.items(), key=team_order)
    ]
    return rows, team_rows


# `gpu_team_1h`'s columns in the order `_roll_up_hours` selects them
_HOUR_COLUMNS = (
    "hour_s",
    "cluster",
    "team",
    "samples",
    "rounds",
    "util_sum_pct",
    "mem_used_sum_bytes",
    "mem_samples",
)


def _roll_up_hours(session: Session, from_s: float, to_s: float) -> None:
    """Sum the hours whose last bucket was just rolled up (buckets [from_s, to_s)) from
    their `gpu_team_5m` rows, once each. An hour the store began in the middle of is
    summed from the buckets it has, as the five-minute table holds them."""
    t = GpuTeam5m
    end = (math.floor(from_s / HOUR_S) + 1) * HOUR_S
    while end <= to_s:
        hour = end - HOUR_S
        sums = select(
            literal(hour, Float),
            t.cluster,
            t.team,
            func.sum(t.samples),
            func.sum(t.rounds),
            func.sum(t.util_sum_pct),
            func.sum(t.mem_used_sum_bytes),
            func.sum(t.mem_samples),
        ).where(t.bucket_s >= hour, t.bucket_s < end)
        session.execute(
            insert(GpuTeam1h).from_select(_HOUR_COLUMNS, sums.group_by(t.cluster, t.team))
        )
        end += HOUR_S


def _max_known(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _cell_order(
    item: tuple[tuple[float, str, int, int | None, str | None], object],
) -> tuple[float, str, int, int]:
    (b, node, gpu, job_id, _), _ = item
    return (b, node, gpu, job_id if job_id is not None else -1)
