"""GPU telemetry in the store: attribute readings to holders, keep them bounded, flag idle jobs.

Readings come from any collector (`gpufleet.telemetry`); this module is the only
writer of the telemetry tables. Each reading is attributed to whoever holds the
GPU *in the store* at that moment (the active allocation), never to what the
collector claims, so utilisation and the ledger bill the same holder.

Retention (documented in docs/design/0017): raw rows for `RAW_KEEP_S` (one day),
then only five-minute roll-ups, for `ROLLUP_KEEP_S` (90 days, to the hour). Beside
the per-GPU rows, as a time-series store's continuous aggregates, the same sums per
team and for the whole cluster (per reading round, per bucket, per hour) and each
GPU's latest reading: what the overview reads, so a page does not scan millions of
rows at 1,000 GPUs (migration 0009). The series are read in `telemetry_series`.

Size, measured (`python -m benchmarks.telemetry_store`, 2026-12-04; 125 x 8 GPUs
read every 15 s, 30 days of roll-ups and the raw day; 2-vCPU, 24 GiB VM): SQLite
101 bytes per raw row and 108 per roll-up (row and indexes), 1.52 GB for 1,000 GPUs
x 30 days (5.76 M raw rows, 8.64 M roll-ups; the per-team tables ~7 MB) and 3.41 GB
at the 90-day retention (25.9 M roll-ups); PostgreSQL 236 and 233 bytes: 3.40 GB
and 7.45 GB. The size follows from GPUs x retention, not from how long the store
runs.

Used GPU-seconds: each reading adds, per running attempt, `held GPUs × dt` to the
GPU-seconds observed and `held GPUs × busy % × dt` to the busy ones, `dt` being
the time since the attempt's previous reading (capped, so a collector outage is
not filled with a guess). The ledger bills `held GPU-seconds × busy / observed`:
the busy share over the time it was measured, applied to the time it was held.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    Insert,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from gpufleet.control import lifecycle
from gpufleet.control.models import (
    Allocation,
    GpuLatest,
    GpuSample,
    GpuTeamSample,
    Job,
    JobUtilization,
    Team,
)
from gpufleet.control.periodic import retrying
from gpufleet.telemetry.samples import GpuSample as Reading

RAW_KEEP_S = 86_400.0
ROLLUP_KEEP_S = 90 * 86_400.0
BUCKET_S = 300.0
HOUR_S = 3600.0  # the coarser roll-up per team, for long windows
# the team of a reading of a GPU that several teams hold (slices, fractions): not a team
# name, which is a DNS label (`admin.check_name`), so it never stands for a real team
SEVERAL_TEAMS = "(several teams)"
# a reading older than this is not "now": its collector stopped, so nothing is shown for it
FRESH_S = 300.0
IdlePolicy = Literal["off", "notify", "reclaim"]
IDLE_POLICIES: tuple[IdlePolicy, ...] = ("off", "notify", "reclaim")
T = TypeVar("T")


@dataclass(frozen=True)
class TelemetryConfig:
    """How readings become used GPU-hours and idle flags (`gpufleet serve --idle-*`)."""

    interval_s: float = 15.0  # how often the collector is read
    idle_threshold_pct: float = 5.0  # a job's mean busy % under this counts as idle
    idle_after_s: float = 1800.0  # ... for this long before it is flagged
    max_gap_s: float = 60.0  # longer gaps between readings are not counted as observed

    def __post_init__(self) -> None:
        for name in ("interval_s", "idle_after_s", "max_gap_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        if not 0 <= self.idle_threshold_pct <= 100:
            raise ValueError(
                f"idle_threshold_pct must be within 0-100, not {self.idle_threshold_pct}"
            )


@dataclass(frozen=True)
class Holder:
    job_id: int
    attempt: int
    team: str
    milli: int  # thousandths of this GPU the attempt holds


@dataclass(frozen=True)
class IdleNotice:
    """A job just flagged idle (or reclaimed), for whoever the server notifies."""

    job_id: int
    job_name: str
    team: str
    text: str
    reclaimed: bool


@dataclass
class IngestReport:
    samples: int = 0
    unattributed: int = 0  # readings of GPUs no job holds
    busy_again: list[int] = field(default_factory=list)
    notices: list[IdleNotice] = field(default_factory=list)  # jobs just flagged idle


def gpu_of(alloc: Allocation) -> int | None:
    """The GPU index an allocation is on: its own, or a MIG slice's ("<node>/gpu<g>/mig:...")."""
    return gpu_index(alloc.gpu, alloc.slice_id)


def gpu_index(gpu: int | None, slice_id: str | None) -> int | None:
    """`gpu_of` from the two columns (for queries that read columns, not allocations)."""
    if gpu is not None:
        return gpu
    if slice_id and "/gpu" in slice_id:
        index = slice_id.split("/gpu", 1)[1].split("/", 1)[0]
        return int(index) if index.isdigit() else None
    return None


def holders(session: Session) -> dict[tuple[str, int], list[Holder]]:
    """Who holds each GPU now: whole GPUs, MIG slices and shares of it (several holders)."""
    a = Allocation
    q = (  # columns, not allocations: 8,000 GPUs' rows every round
        select(a.node, a.gpu, a.slice_id, a.job_id, a.attempt, a.milli, Team.name)
        .join(Job, Job.id == a.job_id)
        .join(Team, Team.id == Job.team_id)
        .where(a.released_s.is_(None))
    )
    out: dict[tuple[str, int], list[Holder]] = defaultdict(list)
    for node, on, slice_id, job_id, attempt, milli, team in session.execute(q):
        gpu = gpu_index(on, slice_id)
        if gpu is not None:
            out[(node, gpu)].append(Holder(job_id, attempt, team, milli))
    return dict(out)


def ingest(
    session: Session,
    readings: Sequence[Reading],
    now_s: float,
    config: TelemetryConfig,
    *,
    commit_every: int | None = None,
) -> IngestReport:
    """Store one round of readings taken at `now_s` and update every holder's meters.

    Everything is read and computed before the first write, and the rows go in as bulk
    inserts. On SQLite the first write takes the store's one write lock until the commit,
    and every API request that writes (a submit) waits for it: at 8,000 GPUs a round
    written at once held it for 0.2-0.5 s (submits' and reads' p99 0.4-0.5 s in `make
    bench` against 15 ms without telemetry). With `commit_every` the session is committed
    after every that many GPUs' rows and meters, so the lock is held a piece at a time
    (the reader's loop, `TelemetryLoop`); without it the caller commits the round whole.
    A round cut short by a crash leaves rows of some GPUs and the meters of some jobs
    updated: the next round's meters cover the time since each one's own last reading."""
    report = IngestReport()
    held = holders(session)
    # per attempt: sum of milli × busy %, and milli read, at this round
    busy: dict[tuple[int, int], float] = defaultdict(float)
    read_milli: dict[tuple[int, int], int] = defaultdict(int)
    mem: dict[tuple[int, int], int] = defaultdict(int)
    # per team (False, name; SEVERAL_TEAMS: shared; None: nobody) and the cluster (True, None)
    per_team: dict[tuple[bool, str | None], TeamSums] = defaultdict(TeamSums)
    samples: list[dict[str, Any]] = []  # each GPU's row of `gpu_samples`
    for r in _per_gpu(readings, held):
        assert r.gpu_index is not None
        who = held.get((r.node, r.gpu_index), [])
        sole = who[0] if len(who) == 1 else None
        util = min(100.0, max(0.0, float(r.sm_util_pct)))
        team = sole.team if sole else _shared_team(who)
        per_team[(False, team)].add(util, r.mem_used_bytes)
        per_team[(True, None)].add(util, r.mem_used_bytes)
        samples.append(
            {
                "node": r.node,
                "gpu": r.gpu_index,
                "time_s": now_s,
                "job_id": sole.job_id if sole else None,
                "team": team,
                "util_pct": util,
                "mem_used_bytes": r.mem_used_bytes,
                "mem_total_bytes": r.mem_total_bytes,
                "healthy": r.healthy,
                "sm_active_pct": r.sm_active_pct,
                "power_w": r.power_w,
                "temp_c": r.temp_c,
                "health": r.health_detail,
                "source": r.source[:16],
            }
        )
        report.samples += 1
        if not who:
            report.unattributed += 1
        for h in who:
            # a shared GPU's (MIG, fraction) utilisation cannot be split per holder from
            # device counters: each holder is credited with the device's busy share
            key = (h.job_id, h.attempt)
            busy[key] += h.milli * util
            read_milli[key] += h.milli
            if r.mem_used_bytes is not None:
                mem[key] += round(r.mem_used_bytes * h.milli / 1000)
    round_ = _Round(busy, read_milli, mem)
    known = _read_meters(session, round_)
    # the writes, from here to the commit (or, with `commit_every`, in pieces): each piece is
    # written from rows computed above, so a piece rolled back is written again as it was
    step = commit_every or max(1, len(samples))
    for i in range(0, len(samples), step):
        _in_piece(
            session, commit_every, partial(_write_samples, session, samples[i : i + step], now_s)
        )
    team_rows = [
        {
            "time_s": now_s,
            "cluster": whole,
            "team": team,
            "readings": sums.readings,
            "util_sum_pct": sums.util_sum_pct,
            "mem_used_sum_bytes": sums.mem_used_sum_bytes,
            "mem_readings": sums.mem_readings,
        }
        for (whole, team), sums in sorted(per_team.items(), key=team_order)
    ]
    if team_rows:
        team_insert = insert(GpuTeamSample)
        _in_piece(
            session, commit_every, lambda: session.connection().execute(team_insert, team_rows)
        )
    for piece in _metered(round_, known, now_s=now_s, config=config, per_piece=commit_every):
        done = _in_piece(
            session, commit_every, partial(_write_piece, session, piece, now_s=now_s, config=config)
        )
        report.busy_again += done.busy_again
        report.notices += done.notices
    session.flush()
    if commit_every:
        session.commit()
    return report


def _in_piece(session: Session, commit_every: int | None, write: Callable[[], T]) -> T:
    """`write`, then, in pieces (`commit_every`), the commit ending its transaction, done
    again where it lost a race to another writer (PostgreSQL aborted it to break a deadlock
    over a job's row, which a reclaim locks: `periodic.retrying`). A try rolled back wrote
    nothing, and `write` writes rows computed before the round's first write: nothing is
    written twice. Without pieces the one transaction is the caller's, to commit and retry."""
    if not commit_every:
        return write()

    def once() -> T:
        out = write()
        session.commit()
        return out

    return retrying(once, "telemetry round, one piece", undo=session.rollback)


# the raw row's columns, in the order COPY writes them (`id` comes from its sequence)
_SAMPLE_COLUMNS = tuple(c.name for c in GpuSample.__table__.columns if c.name != "id")
_LATEST_COLUMNS = tuple(c.name for c in GpuLatest.__table__.columns)


def _write_samples(session: Session, rows: Sequence[dict[str, Any]], now_s: float) -> None:
    """Insert raw rows and make them their GPUs' latest readings.

    The latest rows are copied from the raw rows just inserted, in the store (INSERT ..
    SELECT .. ON CONFLICT DO UPDATE), not sent a second time: a round of 8,000 GPUs was
    18,000 statements, ~0.3 s of the reader's CPU beside the API's. On PostgreSQL the raw
    rows go in by COPY, which parses no statement per row (with psycopg, the driver
    `control.db` picks; any other goes through executemany)."""
    if not rows:
        return
    conn = session.connection()
    before = conn.scalar(select(func.max(GpuSample.id))) or 0
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        import psycopg  # the PostgreSQL driver (control/db.py); not needed for SQLite

        dbapi = conn.connection.dbapi_connection
        assert isinstance(dbapi, psycopg.Connection)
        columns = ", ".join(_SAMPLE_COLUMNS)
        with (
            dbapi.cursor() as cursor,
            cursor.copy(f"COPY gpu_samples ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row([row[c] for c in _SAMPLE_COLUMNS])
    else:
        conn.execute(insert(GpuSample), rows)
    conn.execute(_latest_from(conn.dialect.name, now_s, before))


def _latest_from(dialect: str, now_s: float, after_id: int) -> Insert:
    """INSERT INTO gpu_latest SELECT the raw rows of this round past `after_id` ON CONFLICT
    (node, gpu) DO UPDATE: SQLite and PostgreSQL spell it alike (SQLite's upsert after a
    SELECT needs the WHERE it has)."""
    raw = GpuSample.__table__.c
    rows = select(*(raw[c] for c in _LATEST_COLUMNS)).where(raw.time_s == now_s, raw.id > after_id)
    stmt = (sqlite_insert if dialect == "sqlite" else postgresql_insert)(GpuLatest)
    stmt = stmt.from_select(list(_LATEST_COLUMNS), rows)
    kept = [c.name for c in GpuLatest.__table__.columns if not c.primary_key]
    return stmt.on_conflict_do_update(
        index_elements=["node", "gpu"], set_={name: stmt.excluded[name] for name in kept}
    )


def team_order(item: tuple[tuple[bool, str | None], object]) -> tuple[bool, str]:
    (whole, team), _ = item
    return (whole, team or "")


@dataclass
class TeamSums:
    """A team's readings of one round (`gpu_team_samples`), or its GPUs' roll-ups of one
    bucket (`gpu_team_5m`), summed as the series add them up."""

    readings: int = 0
    util_sum_pct: float = 0.0
    mem_used_sum_bytes: float = 0.0
    mem_readings: int = 0
    rounds: int = 0  # roll-ups only: the most readings of one GPU in the bucket

    def add(self, util_pct: float, mem_used_bytes: int | None, readings: int = 1) -> None:
        """Add `readings` readings of one GPU at a mean of `util_pct` (memory: their peak)."""
        self.readings += readings
        self.util_sum_pct += util_pct * readings
        self.rounds = max(self.rounds, readings)
        if mem_used_bytes is not None:
            self.mem_used_sum_bytes += mem_used_bytes * readings
            self.mem_readings += readings


@dataclass(frozen=True)
class _Round:
    """One reading round, per attempt (job id, attempt): Σ milli × busy %, milli read, and
    the memory its GPUs use (a shared GPU's memory split by the shares held)."""

    busy: dict[tuple[int, int], float]
    read_milli: dict[tuple[int, int], int]
    mem: dict[tuple[int, int], int]


def _per_gpu(
    readings: Sequence[Reading], held: dict[tuple[str, int], list[Holder]]
) -> list[Reading]:
    """Readings per GPU: a job-level reading (Slurm's TRES usage has no device index) stands
    for every GPU its job holds now; one whose job holds none here is dropped."""
    out = [r for r in readings if r.gpu_index is not None]
    job_level = [r for r in readings if r.gpu_index is None and r.job_id]
    if job_level:
        gpus_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for (node, gpu), who in held.items():
            for h in who:
                gpus_of[str(h.job_id)].append((node, gpu))
        out += [
            replace(r, node=node, gpu_index=gpu, gpu_count=1)
            for r in job_level
            for node, gpu in gpus_of.get(str(r.job_id), [])
        ]
    return _one_per_gpu(out)


def _one_per_gpu(readings: list[Reading]) -> list[Reading]:
    """One reading per GPU per round: a DCGM exporter reports each MIG instance of a GPU as
    its own reading with the GPU's index; they are combined (mean busy share, summed memory,
    healthy only if all are), so a GPU is never counted twice in a series."""
    by_gpu: dict[tuple[str, int | None], list[Reading]] = defaultdict(list)
    for r in readings:
        by_gpu[(r.node, r.gpu_index)].append(r)
    out = []
    for group in by_gpu.values():
        first = group[0]
        if len(group) == 1:
            out.append(first)
            continue
        mems = [r.mem_used_bytes for r in group if r.mem_used_bytes is not None]
        out.append(
            replace(
                first,
                sm_util_pct=sum(r.sm_util_pct for r in group) / len(group),
                mem_used_bytes=sum(mems) if mems else None,
                healthy=all(r.healthy for r in group),
                health_detail="; ".join(r.health_detail for r in group if r.health_detail),
            )
        )
    return out


def _shared_team(who: Sequence[Holder]) -> str | None:
    """The team a GPU's reading is filed under: its one team, `SEVERAL_TEAMS` when teams
    share it (MIG slices, fractions), None only when nobody holds it. None for a shared GPU
    read as free on the heat map and as team="" in /metrics while it was allocated."""
    names = {h.team for h in who}
    if len(names) > 1:
        return SEVERAL_TEAMS
    return next(iter(names), None)


@dataclass(slots=True)
class _Meter:
    """One attempt's `job_utilization` row as read, then as this round leaves it."""

    attempt: int
    busy_gpu_s: float = 0.0
    sampled_gpu_s: float = 0.0
    last_sample_s: float | None = None
    last_util_pct: float | None = None
    mem_used_bytes: int | None = None
    low_since_s: float | None = None
    idle_flagged_s: float | None = None


_METER_FIELDS = tuple(f.name for f in fields(_Meter))


@dataclass(frozen=True)
class _Known:
    """What the meters' update reads of the store, read before the round's first write:
    the holders' meters, their jobs' (state, team id) and their teams' idle policies."""

    meters: dict[int, _Meter]
    jobs: dict[int, tuple[str, int]]
    policies: dict[int, str]


def _read_meters(session: Session, round_: _Round) -> _Known:
    """Columns, not ORM objects: a round touches every running job (1,000s at 8,000 GPUs)."""
    ids = sorted({job_id for job_id, _ in round_.read_milli})
    if not ids:
        return _Known({}, {}, {})
    u = JobUtilization
    columns = [getattr(u, name) for name in _METER_FIELDS]
    meters = {
        row[0]: _Meter(*row[1:])
        for row in session.execute(select(u.job_id, *columns).where(u.job_id.in_(ids)))
    }
    jobs = {
        job_id: (state, team_id)
        for job_id, state, team_id in session.execute(
            select(Job.id, Job.state, Job.team_id).where(Job.id.in_(ids))
        )
    }
    team_ids = {team_id for _, team_id in jobs.values()}
    policies: dict[int, str] = dict(
        session.execute(select(Team.id, Team.idle_policy).where(Team.id.in_(team_ids))).all()
    )
    return _Known(meters, jobs, policies)


@dataclass
class _Piece:
    """One transaction's meters (`commit_every` attempts' rows) and the idle flags they set
    or clear, computed once: a try rolled back is written again from these."""

    updated: list[dict[str, Any]] = field(default_factory=list)  # same attempt: UPDATE
    replaced: list[int] = field(default_factory=list)  # an earlier attempt's: DELETE first
    fresh: list[dict[str, Any]] = field(default_factory=list)  # a new attempt's: INSERT
    idle: list[_IdleChange] = field(default_factory=list)


@dataclass(frozen=True)
class _IdleChange:
    """An attempt's idle flag set (`busy` False) or cleared by this round, recorded with its
    meters (`_record_idle`)."""

    job_id: int
    busy: bool
    util: float
    low_since_s: float | None
    policy: str


def _metered(
    round_: _Round,
    known: _Known,
    *,
    now_s: float,
    config: TelemetryConfig,
    per_piece: int | None = None,
) -> list[_Piece]:
    """Each holder's meters after this round, in pieces of `per_piece` attempts (one piece
    without it). Computed, not written: the meters add this round's time to what was read,
    so a piece written twice (a retry) must not compute them twice."""
    busy, read_milli, mem = round_.busy, round_.read_milli, round_.mem
    pieces: list[_Piece] = []
    for done, ((job_id, attempt), milli) in enumerate(sorted(read_milli.items())):
        if done % (per_piece or len(read_milli)) == 0:
            pieces.append(_Piece())
        piece = pieces[-1]
        util = busy[(job_id, attempt)] / milli  # milli-weighted mean busy % of its GPUs
        gpus = milli / 1000
        m = known.meters.get(job_id)
        same = m is not None and m.attempt == attempt
        if m is None or not same:  # a new attempt starts its meters afresh
            if m is not None:
                piece.replaced.append(job_id)
            m = _Meter(attempt)
            dt = config.interval_s
        else:
            last = m.last_sample_s if m.last_sample_s is not None else now_s - config.interval_s
            dt = now_s - last if now_s - last <= config.max_gap_s else 0.0
        m.low_since_s = _low_since(m.low_since_s, util, now_s - dt, config)
        m.busy_gpu_s += gpus * dt * util / 100
        m.sampled_gpu_s += gpus * dt
        m.last_sample_s = now_s
        m.last_util_pct = util
        m.mem_used_bytes = mem[(job_id, attempt)]
        state, team_id = known.jobs.get(job_id, ("", 0))
        if state == "running":
            policy = known.policies.get(team_id, "notify")
            change = _idle_change(job_id, m, util, now_s=now_s, config=config, policy=policy)
            if change is not None:
                piece.idle.append(change)
        values = {name: getattr(m, name) for name in _METER_FIELDS}
        if same:
            piece.updated.append({"b_job_id": job_id} | {f"b_{k}": v for k, v in values.items()})
        else:
            piece.fresh.append({"job_id": job_id} | values)
    return pieces


def _write_piece(
    session: Session, piece: _Piece, *, now_s: float, config: TelemetryConfig
) -> IngestReport:
    """A piece's meters, and its idle flags' events (and reclaims); what it flagged, for the
    round's report once the piece is committed (a try rolled back flagged nothing)."""
    _write_meters(session, piece.updated, piece.replaced, piece.fresh)
    done = IngestReport()
    for change in piece.idle:
        _record_idle(session, change, now_s=now_s, config=config, report=done)
    session.flush()
    return done


def _write_meters(
    session: Session,
    updated: list[dict[str, Any]],
    replaced: list[int],
    fresh: list[dict[str, Any]],
) -> None:
    u = JobUtilization
    conn = session.connection()
    if updated:
        values: dict[str, Any] = {name: bindparam(f"b_{name}") for name in _METER_FIELDS}
        conn.execute(update(u).where(u.job_id == bindparam("b_job_id")).values(values), updated)
    if replaced:
        conn.execute(delete(u).where(u.job_id.in_(replaced)))
    if fresh:
        conn.execute(insert(u), fresh)


def _low_since(
    since_s: float | None, util: float, covers_from_s: float, config: TelemetryConfig
) -> float | None:
    """When the attempt's run of readings under the threshold began (None: it is busy).
    A reading stands for the interval since the previous one, so a run starts there."""
    if util >= config.idle_threshold_pct:
        return None
    return since_s if since_s is not None else covers_from_s


def _idle_change(
    job_id: int,
    m: _Meter,
    util: float,
    *,
    now_s: float,
    config: TelemetryConfig,
    policy: str,
) -> _IdleChange | None:
    """Flag a job whose GPUs stayed under the threshold for `idle_after_s`, once; the flag
    clears (with an event) when it gets busy again. Sets the flag on `m`; the event (and a
    reclaim, which stops it as a cancel would) is written with the meters."""
    if m.low_since_s is None:
        if m.idle_flagged_s is None:
            return None
        m.idle_flagged_s = None
        return _IdleChange(job_id, True, util, None, policy)
    if (
        m.idle_flagged_s is not None
        or policy == "off"
        or now_s - m.low_since_s < config.idle_after_s
    ):
        return None
    m.idle_flagged_s = now_s
    return _IdleChange(job_id, False, util, m.low_since_s, policy)


def _record_idle(
    session: Session,
    change: _IdleChange,
    *,
    now_s: float,
    config: TelemetryConfig,
    report: IngestReport,
) -> None:
    """The event of an idle flag set or cleared; `reclaim` stops the job as a cancel would."""
    job = _job(session, change.job_id)
    util = change.util
    if change.busy:
        lifecycle.record(session, job, "busy", now_s, f"GPUs busy again ({util:.0f} %)")
        report.busy_again.append(job.id)
        return
    assert change.low_since_s is not None
    minutes = (now_s - change.low_since_s) / 60
    text = (
        f"GPUs idle: under {config.idle_threshold_pct:g} % busy for {minutes:.0f} min "
        f"(now {util:.1f} %)"
    )
    reclaim = change.policy == "reclaim" and job.preemptible
    if reclaim:  # a stop decides on the state as stored (the reconciler may have moved it)
        job = lifecycle.locked(session, job)
        reclaim = job.state in ("starting", "running")
    team = job.team.name
    if reclaim:
        job.stop_for = "idle"
        text = f"{text}; the team's policy reclaims idle GPUs"
        lifecycle.move(session, job, "stopping", now_s, text)
    else:
        text = f"{text}; flagged for the team (the portal's idle list)"
        lifecycle.record(session, job, "idle", now_s, text)
    report.notices.append(IdleNotice(job.id, job.name, team, text, reclaim))


def _job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    assert job is not None  # read as running in this round, and jobs are never deleted
    return job


def busy_share(session: Session, job_id: int, attempt: int) -> float | None:
    """Busy GPU-seconds over observed GPU-seconds of an attempt (None: never measured)."""
    m = session.get(JobUtilization, job_id)
    if m is None or m.attempt != attempt:
        return None
    return _share(m.busy_gpu_s, m.sampled_gpu_s)


def open_busy_shares(session: Session) -> dict[tuple[int, int], float]:
    """`busy_share` of every attempt (job id, attempt) that holds GPUs now, in one query:
    the ledger reads them for each running job at every overview and chargeback."""
    holding = select(Allocation.job_id).where(Allocation.released_s.is_(None))
    q = select(
        JobUtilization.job_id,
        JobUtilization.attempt,
        JobUtilization.busy_gpu_s,
        JobUtilization.sampled_gpu_s,
    ).where(JobUtilization.job_id.in_(holding))
    return {
        (job_id, attempt): share
        for job_id, attempt, busy_s, sampled_s in session.execute(q)
        if (share := _share(busy_s, sampled_s)) is not None
    }


def _share(busy_gpu_s: float, sampled_gpu_s: float) -> float | None:
    return min(1.0, busy_gpu_s / sampled_gpu_s) if sampled_gpu_s > 0 else None


@dataclass(frozen=True)
class GpuNow:
    """The latest reading of one GPU, for the cluster heat map."""

    node: str
    gpu: int
    time_s: float
    util_pct: float
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    healthy: bool
    job_id: int | None  # its one holder's job; None when free or shared
    team: str | None  # its team, `SEVERAL_TEAMS` when shared, None when free


def latest(session: Session) -> list[GpuNow]:
    """The most recent reading of every GPU that has one (in the raw day): one row per GPU
    of `gpu_latest`, which `ingest` keeps."""
    t = GpuLatest
    q = select(*(getattr(t, f.name) for f in fields(GpuNow))).order_by(t.node, t.gpu)
    return [GpuNow(**row._asdict()) for row in session.execute(q)]
