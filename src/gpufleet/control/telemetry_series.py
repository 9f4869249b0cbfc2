"""Utilisation series from the telemetry tables: what the portal's charts and a job's page plot.

A series is summed per chart step in the database from the per-team continuous aggregates
(`gpu_team_samples`, `gpu_team_5m`, `gpu_team_1h`, migration 0009) wherever it is not one
job's: at 1,000 GPUs a month is a few thousand of their rows, where the per-GPU tables hold
millions. A job's series, and `series(per_gpu=True)` (the check that both agree), sum the
per-GPU rows `telemetry_store` writes. Which rows a step reads (raw readings or roll-ups,
hours whole or their buckets) is decided here, the same way for both.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Subquery,
    TextClause,
    case,
    cast,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import Label

from gpufleet.control.models import (
    GpuSample,
    GpuSample5m,
    GpuTeam1h,
    GpuTeam5m,
    GpuTeamSample,
    TelemetryState,
)
from gpufleet.control.telemetry_store import BUCKET_S, HOUR_S


@dataclass(frozen=True)
class Point:
    """One point of a utilisation series: mean busy % and GPUs read over [start_s, +step_s)."""

    start_s: float
    util_pct: float
    gpus: float  # mean number of GPUs read per reading round in the step
    # mean memory used per GPU read (None: the source has no figure); where a step is read
    # from roll-ups (after a day, or a step of whole buckets) each GPU's five-minute peak
    mem_used_bytes: float | None = None


def series(
    session: Session,
    start_s: float,
    end_s: float,
    step_s: float,
    *,
    team: str | None = None,
    job_id: int | None = None,
    by_team: bool = False,
    per_gpu: bool = False,
) -> dict[str, list[Point]]:
    """Utilisation over [start_s, end_s) in steps of `step_s`. Keys: a team name
    (`by_team`), else "all".

    A step of whole five-minute buckets (the overview's windows of a day and more) reads
    the roll-ups of every closed bucket and raw readings after them, as a time-series
    store's continuous aggregates do; a finer step (the last hour, a short job) reads raw
    readings wherever all of them are still there, roll-ups before. A roll-up counts in
    the step its bucket starts in.

    Without a job filter it reads the per-team tables (`gpu_team_samples`, `gpu_team_5m`,
    `gpu_team_1h`), summed per step in the database: a few rows per round, bucket or hour
    instead of one per GPU. A job's series, or `per_gpu` (the check that both give the same
    numbers), reads the per-GPU tables those summarise."""
    spans = _spans(session, start_s, end_s, step_s)
    if job_id is None and not per_gpu:
        cells = _team_cells(session, spans, start_s, step_s, team=team, by_team=by_team)
    else:
        cells = _gpu_cells(
            session, spans, start_s, step_s, team=team, job_id=job_id, by_team=by_team
        )
    result: dict[str, list[Point]] = {}
    steps = max(1, math.ceil((end_s - start_s) / step_s))
    for key, by_step in sorted(cells.items()):
        result[key] = [
            Point(start_s + i * step_s, busy / n, n / rounds, mem / mem_n if mem_n else None)
            for i in range(steps)
            if (cell := by_step.get(i)) is not None
            for busy, n, rounds, mem, mem_n in [cell]
            if n > 0
        ]
    return result


# key -> step -> [sum of busy %, readings, reading rounds, sum of memory, readings with memory]
_Cells = dict[str, dict[int, list[float]]]
_Spans = tuple[tuple[float, float], tuple[float, float]]  # (roll-ups, raw rows): [from, to)


def _step_of(t_s: float, start_s: float, step_s: float) -> int:
    """The step a time falls in; a roll-up that began before the window goes to the first.
    The same arithmetic as `_Steps.of` in SQL, so both paths put a row in the same step."""
    return max(0, math.floor((t_s - start_s) / step_s))


def _gpu_cells(
    session: Session,
    spans: _Spans,
    start_s: float,
    step_s: float,
    *,
    team: str | None,
    job_id: int | None,
    by_team: bool,
) -> _Cells:
    """Sums per step from the per-GPU tables. A reading round (a raw time, or a bucket's
    rounds) counts once per key however many teams' rows it has: the whole cluster's
    `gpus` is GPUs read per round, not that divided by the number of teams."""
    out: _Cells = defaultdict(dict)
    rounds: dict[tuple[str, int, float], float] = {}
    (roll_from, roll_to), (raw_from, raw_to) = spans
    for source_rows in (
        _rollup_rows(session, roll_from, roll_to, team, job_id),
        _raw_rows(session, raw_from, raw_to, team, job_id),
    ):
        for t_s, team_name, busy, n, r, mem, mem_n in source_rows:
            key = (team_name or "unattributed") if by_team else "all"
            i = _step_of(t_s, start_s, step_s)
            acc = out[key].setdefault(i, [0.0] * 5)
            acc[0] += busy
            acc[1] += n
            acc[3] += mem
            acc[4] += mem_n
            rounds[(key, i, t_s)] = max(rounds.get((key, i, t_s), 0.0), r)
    for (key, i, _), r in rounds.items():
        out[key][i][2] += r
    return out


def _team_cells(
    session: Session,
    spans: _Spans,
    start_s: float,
    step_s: float,
    *,
    team: str | None,
    by_team: bool,
) -> _Cells:
    """Sums per step from the per-team tables, added up in the database: for a month at
    1,000 GPUs a few hundred result rows, where the per-GPU tables hold millions. The whole
    cluster reads its own rows (one per round, bucket or hour), a team or every team
    theirs; an hour is read whole where all its buckets fall in one step."""
    (roll_from, roll_to), (raw_from, raw_to) = spans
    t5, tr = GpuTeam5m, GpuTeamSample
    whole = team is None and not by_team
    step = _Steps(start_s, step_s, sqlite=session.get_bind().dialect.name == "sqlite")
    t1 = GpuTeam1h
    parts: list[Subquery] = []
    if roll_from < roll_to:
        hours, buckets = _whole_hours(roll_from, roll_to, start_s, step_s)
        for table, t, ranges in ((t1, t1.hour_s, hours), (t5, t5.bucket_s, buckets)):
            if not ranges:
                continue
            where: list[ColumnElement[bool] | TextClause] = [_in_ranges(t, whole, ranges)]
            if team is not None:
                where.append(table.team == team)
            sums = (
                table.util_sum_pct,
                table.samples,
                table.rounds,
                table.mem_used_sum_bytes,
                table.mem_samples,
            )
            parts.append(
                select(*_labelled(t, table.team, *sums, step=step)).where(*where).subquery()
            )
    if raw_from < raw_to:
        where = [tr.cluster == whole, tr.time_s >= raw_from, tr.time_s < raw_to]
        if team is not None:
            where.append(tr.team == team)
        one = literal(1)  # a row is one round of its team (or of the cluster)
        raw = (tr.util_sum_pct, tr.readings, one, tr.mem_used_sum_bytes, tr.mem_readings)
        parts.append(
            select(*_labelled(tr.time_s, tr.team, *raw, step=step)).where(*where).subquery()
        )
    out: _Cells = defaultdict(dict)
    for rows in parts:
        q = select(rows.c.i, rows.c.team, *(func.sum(rows.c[k]) for k in _SUMS)).group_by(
            rows.c.i, rows.c.team
        )
        for i, team_name, *totals in session.execute(q):
            key = (team_name or "unattributed") if by_team else "all"
            acc = out[key].setdefault(max(0, int(i)), [0.0] * 5)
            for k, value in enumerate(totals):
                acc[k] += float(value or 0)
    return out


_SUMS = ("busy", "n", "rounds", "mem", "mem_n")
_Ranges = list[tuple[float, float]]  # [from, to)


def _in_ranges(t: InstrumentedAttribute[float], whole: bool, ranges: _Ranges) -> TextClause:
    """Rows of the cluster (or of teams) with `t` in any of `ranges`, as SQL text: one
    SQLAlchemy expression per range cost ~0.1 ms to build, more than the database takes
    to read them. The bounds are Python floats, written exactly (`repr` round-trips); each
    range repeats the cluster test, so SQLite reads each through the (cluster, time) index."""
    flag = "TRUE" if whole else "FALSE"
    terms = (f"(cluster = {flag} AND {t.key} >= {a!r} AND {t.key} < {b!r})" for a, b in ranges)
    return text(f"({' OR '.join(terms)})")


def _whole_hours(
    roll_from: float, roll_to: float, start_s: float, step_s: float
) -> tuple[_Ranges, _Ranges]:
    """The roll-up span's buckets (those starting after `roll_from - BUCKET_S` and before
    `roll_to`) split into hours read whole from `gpu_team_1h` (all of their buckets in the
    span and in one step) and the buckets left, as ranges. Each bucket is read once, and
    counts in the step it would alone."""
    first = (math.floor((roll_from - BUCKET_S) / BUCKET_S) + 1) * BUCKET_S
    last_bucket = HOUR_S - BUCKET_S  # of an hour, from its start
    hours: _Ranges = []
    h = math.ceil(first / HOUR_S) * HOUR_S
    while h + last_bucket < roll_to:
        if _step_of(h, start_s, step_s) == _step_of(h + last_bucket, start_s, step_s):
            if hours and hours[-1][1] == h:
                hours[-1] = (hours[-1][0], h + HOUR_S)
            else:
                hours.append((h, h + HOUR_S))
        h += HOUR_S
    buckets: _Ranges = []
    at = first
    for a, b in [*hours, (roll_to, roll_to)]:
        if at < a:
            buckets.append((at, a))
        at = b
    return hours, buckets


def _labelled(
    t: InstrumentedAttribute[float],
    team: InstrumentedAttribute[str | None],
    *sums: ColumnElement[Any] | InstrumentedAttribute[Any],
    step: _Steps,
) -> list[Label[Any]]:
    """A team table's step (`_Steps.of`), team and sums under the names the query uses.
    The step is computed in a subquery and grouped on outside: PostgreSQL would not match
    a GROUP BY expression holding bound parameters with the same one in the select list."""
    return [
        step.of(t).label("i"),
        team.label("team"),
        *(c.label(name) for c, name in zip(sums, _SUMS, strict=True)),
    ]


@dataclass(frozen=True)
class _Steps:
    """`_step_of` in SQL, before the clamp at 0 (done on the result). SQLite's CAST
    truncates, which is floor for the times at or after `start_s`; earlier ones (a roll-up
    begun before the window) come out at 0 or below and are clamped to the first step."""

    start_s: float
    step_s: float
    sqlite: bool

    def of(self, t: InstrumentedAttribute[float]) -> ColumnElement[int]:
        x = (t - literal(float(self.start_s), Float)) / literal(float(self.step_s), Float)
        return cast(x, Integer) if self.sqlite else cast(func.floor(x), Integer)


def _spans(session: Session, start_s: float, end_s: float, step_s: float) -> _Spans:
    """Where `series` reads roll-ups and where raw rows: they never overlap, and each is
    complete where it is read. Raw rows are complete from the first bucket boundary after
    the last prune (buckets before it were rolled up before their rows went); roll-ups up
    to the last bucket rolled up."""
    state = session.get(TelemetryState, "rollup")
    split = -math.inf  # nothing rolled up or pruned yet: raw rows everywhere
    if state is not None and step_s % BUCKET_S == 0:
        split = state.rolled_up_to_s
    elif state is not None and state.raw_pruned_to_s is not None:
        split = math.ceil(state.raw_pruned_to_s / BUCKET_S) * BUCKET_S
    return (start_s, min(end_s, split)), (max(start_s, split), end_s)


def _filters(
    model: type[GpuSample] | type[GpuSample5m], team: str | None, job_id: int | None
) -> list[ColumnElement[bool]]:
    out: list[ColumnElement[bool]] = []
    if team is not None:
        out.append(model.team == team)
    if job_id is not None:
        out.append(model.job_id == job_id)
    return out


def _raw_rows(
    session: Session, start_s: float, end_s: float, team: str | None, job_id: int | None
) -> Iterable[tuple[float, str | None, float, float, float, float, float]]:
    """(time, team, Σ busy %, readings, rounds=1, Σ memory, readings with memory) per
    reading round and team."""
    if not start_s < end_s:
        return []
    q = (
        select(
            GpuSample.time_s,
            GpuSample.team,
            func.sum(GpuSample.util_pct),
            func.count(),
            func.sum(GpuSample.mem_used_bytes),
            func.count(GpuSample.mem_used_bytes),
        )
        .where(
            GpuSample.time_s >= start_s,
            GpuSample.time_s < end_s,
            *_filters(GpuSample, team, job_id),
        )
        .group_by(GpuSample.time_s, GpuSample.team)
    )
    return [
        (float(t), tm, float(u), float(n), 1.0, float(mem or 0), float(mem_n))
        for t, tm, u, n, mem, mem_n in session.execute(q)
    ]


def _rollup_rows(
    session: Session, start_s: float, end_s: float, team: str | None, job_id: int | None
) -> Iterable[tuple[float, str | None, float, float, float, float, float]]:
    """Roll-ups count `samples` readings per GPU; a bucket's rounds are its largest count."""
    if not start_s < end_s:
        return []
    q = (
        select(
            GpuSample5m.bucket_s,
            GpuSample5m.team,
            func.sum(GpuSample5m.util_mean_pct * GpuSample5m.samples),
            func.sum(GpuSample5m.samples),
            func.max(GpuSample5m.samples),
            func.sum(GpuSample5m.mem_used_max_bytes * GpuSample5m.samples),
            func.sum(
                case((GpuSample5m.mem_used_max_bytes.is_not(None), GpuSample5m.samples), else_=0)
            ),
        )
        .where(
            GpuSample5m.bucket_s > start_s - BUCKET_S,
            GpuSample5m.bucket_s < end_s,
            *_filters(GpuSample5m, team, job_id),
        )
        .group_by(GpuSample5m.bucket_s, GpuSample5m.team)
    )
    return [
        (float(b), tm, float(u), float(n), float(r), float(mem or 0), float(mem_n or 0))
        for b, tm, u, n, r, mem, mem_n in session.execute(q)
    ]
