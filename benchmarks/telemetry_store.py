"""The telemetry store at 1,000 GPUs (issue 30): its size on disk, and the overview's render.

Done-when: "The store holds 30 days of 5-minute samples for 1,000 GPUs within a documented
size, and the overview still renders in < 300 ms at that size (`make bench`)."

`build_store` makes a store through the normal path (`db.upgrade` up to 0008;
`admin.init`, teams and quotas; `server.sync_nodes`), then fills it in bulk, in time
order as a running server writes it (so the indexes grow as they would), and brings it to
head:

- a schedule: each node split into lanes (one of 8 GPUs, two of 4, or 4 + 2 + 2), each
  lane running jobs back to back from before the window to now: run times lognormal
  (median 16 h, sigma 1, 10 min to 7 days), free gaps exponential (mean 1 h); a job is
  training (80 %, ~85 % busy), serving (10 %, ~50 %) or an idle notebook (10 %, ~1.5 %),
  of one of six teams;
- `gpu_samples_5m`: one roll-up per GPU per five-minute bucket for `days` (20 readings
  each, attributed to the holder at the bucket's start; a holder change inside a bucket
  would add a second row for that GPU, under 1 % more rows at these run times);
- `gpu_samples`: one reading per GPU every 15 s for the last day (the raw retention),
  with the fields a DCGM exporter gives (no SM-active: off in its default counters);
- the per-team tables (rounds, buckets, hours) and `gpu_latest`: from those two by
  migration 0009 itself (its back-fill writes the sums `ingest` and `roll_up` write);
- the ledger: a usage row per job that finished in the window, open allocations and
  utilisation meters for the running ones (idle notebooks flagged), pending jobs.

Raw readings and roll-ups are drawn independently (the tests check the roll-up arithmetic;
this measures size and reads). Then it measures the file (SQLite: `dbstat`; PostgreSQL:
`pg_table_size` and `pg_indexes_size`, after VACUUM ANALYZE) and times the overview: GET
/portal/ as the admin through the app in process (FastAPI's TestClient, the collector tuned
as in a served API process), the default window (30d on a 30-day-old cluster) and 24h,
median of several renders after one warm render.

`python -m benchmarks.telemetry_store [--db sqlite|postgresql|URL] [--nodes 125]
[--days 30] [--renders 7]` prints sizes and render times, and exits 1 over the budget.
The build takes 1.5 minutes on SQLite and 2-2.5 on PostgreSQL for 125 nodes and 30 days
(the 2-vCPU development VM).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import Engine, insert, text, update
from sqlalchemy.orm import Session, sessionmaker

from benchmarks.control_plane import (
    ACCELERATOR,
    GPUS_PER_NODE,
    _insert_jobs,
    _job_row,
    _pending_jobs,
    bench_cluster,
    scratch_db,
)
from gpufleet.api.context import AppContext, RateLimiter
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.models import (
    Allocation,
    JobUtilization,
    NodeRecord,
    TelemetryState,
    UsageEntry,
)
from gpufleet.control.service import tune_gc_for_serving
from gpufleet.control.telemetry_store import BUCKET_S, RAW_KEEP_S
from gpufleet.server.app import create_app

OVERVIEW_BUDGET_S = 0.300  # issue 30
RAW_INTERVAL_S = 15.0  # `--telemetry-interval`'s default
READINGS_PER_BUCKET = int(BUCKET_S / RAW_INTERVAL_S)
MEM_TOTAL_BYTES = 81_559 * 2**20  # an H100 SXM5 80GB as DCGM reports it (MiB x 2^20)
TEAMS = ("vision", "nlp", "speech", "recsys", "robotics", "research")
TEAM_SHARES = (0.25, 0.25, 0.15, 0.15, 0.10, 0.10)
LANES = ((8,), (4, 4), (4, 2, 2))  # how a node's GPUs are split between jobs
LANE_SHARES = (0.5, 0.3, 0.2)
# profile: (share of jobs, mean busy %, spread, share of the GPU's memory used)
PROFILES = {
    "training": (0.8, 85.0, 6.0, 0.85),
    "serving": (0.1, 50.0, 15.0, 0.55),
    "notebook": (0.1, 1.5, 1.0, 0.05),
}
MEDIAN_RUN_S = 16 * 3600.0
MEAN_GAP_S = 3600.0
TELEMETRY_TABLES = (
    "gpu_samples",
    "gpu_samples_5m",
    "gpu_team_samples",
    "gpu_team_5m",
    "gpu_team_1h",
    "gpu_latest",
)
# the revision before the per-team tables: the store is filled at it, then brought to head,
# so migration 0009 back-fills them as it would on a real store
BEFORE_TEAM_TABLES = "0008"

ROLLUP_COLUMNS = (
    "bucket_s, node, gpu, job_id, team, samples, util_mean_pct, util_max_pct, "
    "mem_used_max_bytes, mem_total_bytes, power_mean_w, unhealthy_samples"
)
RAW_COLUMNS = (
    "time_s, node, gpu, job_id, team, util_pct, sm_active_pct, mem_used_bytes, "
    "mem_total_bytes, power_w, temp_c, healthy, health, source"
)
CHUNK_ROWS = 100_000
VERBOSE = False


def _progress(message: str) -> None:
    if VERBOSE:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StoreConfig:
    nodes: int = 125  # x 8 GPUs
    days: float = 30.0  # of five-minute roll-ups (the raw day is the last of them)
    pending: int = 300
    seed: int = 0


@dataclass(frozen=True)
class Schedule:
    """The jobs every lane ran (arrays indexed by job) and, per lane, its node, GPUs and
    jobs in time order."""

    start_s: np.ndarray
    end_s: np.ndarray
    gpus: np.ndarray
    team: np.ndarray  # index into TEAMS
    profile: np.ndarray  # index into PROFILES
    level_pct: np.ndarray  # the job's mean busy %
    lanes: list[tuple[int, tuple[int, ...], np.ndarray]]


def make_schedule(config: StoreConfig, now_s: float, rng: np.random.Generator) -> Schedule:
    window_s = config.days * 86_400
    starts: list[float] = []
    ends: list[float] = []
    gpus: list[int] = []
    lanes: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    for node in range(config.nodes):
        layout = LANES[int(rng.choice(len(LANES), p=LANE_SHARES))]
        first = 0
        for width in layout:
            cursor = now_s - window_s - float(rng.uniform(0, 2 * 86_400))
            mine = []
            while cursor < now_s:
                cursor += float(rng.exponential(MEAN_GAP_S))
                run = float(np.clip(rng.lognormal(math.log(MEDIAN_RUN_S), 1.0), 600, 7 * 86_400))
                if cursor >= now_s:
                    break
                mine.append(len(starts))
                starts.append(cursor)
                ends.append(cursor + run)
                gpus.append(width)
                cursor += run
            lanes.append((node, tuple(range(first, first + width)), np.array(mine, dtype=np.int64)))
            first += width
    n = len(starts)
    shares = [share for share, *_ in PROFILES.values()]
    profile = rng.choice(len(PROFILES), size=n, p=shares)
    means = np.array([mean for _, mean, _, _ in PROFILES.values()])[profile]
    spreads = np.array([spread for _, _, spread, _ in PROFILES.values()])[profile]
    level = np.clip(means + rng.normal(0, 1, size=n) * spreads, 0, 100)
    return Schedule(
        start_s=np.array(starts),
        end_s=np.array(ends),
        gpus=np.array(gpus),
        team=rng.choice(len(TEAMS), size=n, p=TEAM_SHARES),
        profile=profile,
        level_pct=level,
        lanes=lanes,
    )


def holders(schedule: Schedule, times_s: np.ndarray, nodes: int) -> np.ndarray:
    """Job index holding each GPU at each time ([time, node x 8 + gpu]); -1: free."""
    out = np.full((len(times_s), nodes * GPUS_PER_NODE), -1, dtype=np.int64)
    for node, lane_gpus, jobs in schedule.lanes:
        if not len(jobs):
            continue
        at = np.searchsorted(schedule.start_s[jobs], times_s, side="right") - 1
        job = jobs[np.maximum(at, 0)]
        held = (at >= 0) & (times_s < schedule.end_s[job])
        column = np.where(held, job, -1)
        for g in lane_gpus:
            out[:, node * GPUS_PER_NODE + g] = column
    return out


@dataclass
class Built:
    url: str
    now_s: float
    admin_token: str
    nodes: int
    jobs_finished: int = 0
    jobs_running: int = 0
    jobs_pending: int = 0
    ledger_rows: int = 0
    build_s: float = 0.0
    steps_s: dict[str, float] = field(default_factory=dict)


def build_store(url: str, config: StoreConfig = StoreConfig(), now_s: float | None = None) -> Built:
    """Migrate a fresh store at `url` and fill it (see the module docstring)."""
    began = time.perf_counter()
    now = math.floor(time.time() if now_s is None else now_s)
    rng = np.random.default_rng(config.seed)
    cluster = bench_cluster(config.nodes)
    engine = make_engine(url)
    steps: dict[str, float] = {}
    try:
        upgrade(engine, BEFORE_TEAM_TABLES)
        maker = sessions(engine)
        token, team_ids = _teams(maker, config, now)
        schedule = make_schedule(config, now, rng)
        window_start = now - config.days * 86_400
        with _timed(steps, "jobs and ledger"):
            counts = _jobs_and_ledger(maker, cluster, schedule, team_ids, config=config, now=now)
            job_ids = counts.pop("ids")
        from gpufleet.control.server import sync_nodes

        sync_nodes(maker, cluster, now, None)
        with maker.begin() as s:  # the cluster is as old as the window: the default is 30d
            s.execute(update(NodeRecord).values(created_s=window_start))
        fill = _Fill(schedule, job_ids, [n.name for n in cluster.nodes], rng)
        closed_to = math.floor(now / BUCKET_S) * BUCKET_S
        first = math.ceil(window_start / BUCKET_S) * BUCKET_S
        with _timed(steps, "gpu_samples_5m"):
            fill.rows(engine, "gpu_samples_5m", np.arange(first, closed_to, BUCKET_S))
        with _timed(steps, "gpu_samples"):
            count = round(RAW_KEEP_S / RAW_INTERVAL_S)  # the last at `now`
            rounds = now - RAW_KEEP_S + RAW_INTERVAL_S * np.arange(1, count + 1)
            fill.rows(engine, "gpu_samples", rounds)
        with maker.begin() as s:
            s.add(
                TelemetryState(
                    name="rollup",
                    rolled_up_to_s=closed_to,
                    raw_pruned_to_s=now - RAW_KEEP_S,
                )
            )
        with _timed(steps, "team tables"):  # migration 0009's back-fill
            upgrade(engine)
        with _timed(steps, "vacuum/checkpoint"):
            _quiesce(engine)
    finally:
        engine.dispose()
    built = Built(url, float(now), token, config.nodes, steps_s=steps)
    built.jobs_finished = counts["finished"]
    built.jobs_running = counts["running"]
    built.jobs_pending = counts["pending"]
    built.ledger_rows = counts["ledger"]
    built.build_s = time.perf_counter() - began
    return built


@contextlib.contextmanager
def _timed(steps: dict[str, float], name: str) -> Iterator[None]:
    began = time.perf_counter()
    _progress(f"{name} ...")
    yield
    steps[name] = time.perf_counter() - began
    _progress(f"{name}: {steps[name]:.1f} s")


def _teams(maker: sessionmaker[Session], config: StoreConfig, now: float) -> tuple[str, list[int]]:
    actor = admin.cli_principal()
    share = config.nodes * GPUS_PER_NODE // len(TEAMS)
    with maker.begin() as s:
        token = admin.init(s, now).token
        ids = []
        for name in TEAMS:
            team = admin.create_team(s, actor, name, now, cohort="ml", projects=["p1", "p2"])
            s.flush()
            admin.set_quota(s, actor, name, ACCELERATOR, now, guaranteed_gpus=share)
            ids.append(team.id)
    return token, ids


def _jobs_and_ledger(
    maker: sessionmaker[Session],
    cluster: Cluster,
    schedule: Schedule,
    team_ids: Sequence[int],
    *,
    config: StoreConfig,
    now: float,
) -> dict[str, Any]:
    """Jobs of the schedule that overlap the window (finished: a ledger row each; running:
    allocations and meters), pending jobs; `ids` maps schedule index -> job id (-1: none)."""
    window_start = now - config.days * 86_400
    keep = np.flatnonzero(schedule.end_s > window_start)
    running = schedule.end_s[keep] > now
    rows = []
    for k, (j, live) in enumerate(zip(keep.tolist(), running.tolist(), strict=True)):
        team = team_ids[int(schedule.team[j])]
        profile = list(PROFILES)[int(schedule.profile[j])]
        state = "running" if live else ("failed" if k % 17 == 0 else "succeeded")
        row = _job_row(team, k, state, int(schedule.gpus[j]), 1)
        start, end = float(schedule.start_s[j]), float(schedule.end_s[j])
        row.update(
            name=f"job-{k}",
            kind="interactive" if profile == "notebook" else "batch",
            submitted_s=start - 300,
            queued_s=start - 300,
            started_s=start,
            finished_s=None if live else end,
            attempt=1,
            flavor=ACCELERATOR,
            runtime_estimate_s=end - start,
            attained_gpu_s=float(schedule.gpus[j]) * (min(end, now) - start),
            exit_code=None if live else (1 if state == "failed" else 0),
        )
        rows.append(row)
    pending = _pending_jobs(config.pending, team_ids, np.random.default_rng(config.seed + 1), now)
    for k, row in enumerate(pending):
        row["name"] = f"pending-{k}"
    nodes = [n.name for n in cluster.nodes]
    with maker.begin() as s:
        ids = _insert_jobs(s, rows + pending)
        job_ids = np.full(len(schedule.start_s), -1, dtype=np.int64)
        job_ids[keep] = ids[: len(rows)]
        ledger, allocs, meters = [], [], []
        where = {int(j): (node, lane_gpus) for node, lane_gpus, js in schedule.lanes for j in js}
        for j, row in zip(keep.tolist(), rows, strict=True):
            gpus = int(schedule.gpus[j])
            start, level = float(schedule.start_s[j]), float(schedule.level_pct[j])
            held_s = min(float(schedule.end_s[j]), now) - start
            job_id = int(job_ids[j])
            if row["state"] != "running":
                ledger.append(
                    {
                        "job_id": job_id,
                        "attempt": 1,
                        "team": TEAMS[int(schedule.team[j])],
                        "project": row["project"],
                        "user_name": row["user_name"],
                        "flavor": ACCELERATOR,
                        "priority_class": "standard",
                        "start_s": start,
                        "end_s": float(schedule.end_s[j]),
                        "gpu_milli": 1000 * gpus,
                        "used_gpu_s": gpus * held_s * level / 100,
                    }
                )
                continue
            node, lane_gpus = where[j]
            for g in lane_gpus:
                allocs.append(
                    {
                        "job_id": job_id,
                        "attempt": 1,
                        "worker": 0,
                        "kind": "whole",
                        "node": nodes[node],
                        "gpu": g,
                        "slice_id": None,
                        "device": f"{nodes[node]}/gpu{g}",
                        "milli": 1000,
                        "flavor": ACCELERATOR,
                        "allocated_s": start,
                        "released_s": None,
                    }
                )
            idle = level < 5
            meters.append(
                {
                    "job_id": job_id,
                    "attempt": 1,
                    "busy_gpu_s": gpus * held_s * level / 100,
                    "sampled_gpu_s": gpus * held_s,
                    "last_sample_s": now - 5,
                    "last_util_pct": level,
                    "mem_used_bytes": None,
                    "low_since_s": start if idle else None,
                    "idle_flagged_s": start + 1800 if idle and held_s > 1800 else None,
                }
            )
        conn = s.connection()
        for table, batch in ((UsageEntry, ledger), (Allocation, allocs), (JobUtilization, meters)):
            if batch:
                conn.execute(insert(table), batch)
    return {
        "ids": job_ids,
        "finished": len(rows) - int(running.sum()),
        "running": int(running.sum()),
        "pending": len(pending),
        "ledger": len(ledger),
    }


@dataclass(frozen=True)
class _Fill:
    """What the telemetry rows are drawn from: the schedule, its job ids, the node names."""

    schedule: Schedule
    job_ids: np.ndarray  # schedule index -> job id
    names: list[str]
    rng: np.random.Generator

    def rows(self, engine: Engine, table: str, times: np.ndarray) -> None:
        """A row of `table` for every GPU at each of `times`, in time order."""
        held = holders(self.schedule, times, len(self.names))
        n_gpus = held.shape[1]
        nodes = [self.names[i // GPUS_PER_NODE] for i in range(n_gpus)]
        indexes = [i % GPUS_PER_NODE for i in range(n_gpus)]
        mem_share = np.array([m for *_, m in PROFILES.values()])
        per_chunk = max(1, CHUNK_ROWS // n_gpus)
        columns = ROLLUP_COLUMNS if table == "gpu_samples_5m" else RAW_COLUMNS
        with _loader(engine, table, columns) as write:
            for lo in range(0, len(times), per_chunk):
                h = held[lo : lo + per_chunk]
                free = (h < 0).ravel().tolist()
                job = np.maximum(h, 0)
                ids = self.job_ids[job].ravel().tolist()
                teams = self.schedule.team[job].ravel().tolist()
                head = (
                    np.repeat(times[lo : lo + per_chunk], n_gpus).tolist(),
                    nodes * len(h),
                    indexes * len(h),
                    [None if f else j for f, j in zip(free, ids, strict=True)],
                    [None if f else TEAMS[t] for f, t in zip(free, teams, strict=True)],
                )
                level = np.where(h >= 0, self.schedule.level_pct[job], 0.0)
                mem = np.where(h >= 0, mem_share[self.schedule.profile[job]] * MEM_TOTAL_BYTES, 0)
                draw = self._rollups if table == "gpu_samples_5m" else self._readings
                rest = draw(h >= 0, level, mem.astype(np.int64))
                write(list(zip(*head, *rest, strict=True)))
                _progress(f"{table}: {min(len(times), lo + per_chunk):,}/{len(times):,}")

    def _rollups(self, busy: np.ndarray, level: np.ndarray, mem: np.ndarray) -> list[list[Any]]:
        """samples .. unhealthy_samples of `gpu_samples_5m`."""
        rng, n = self.rng, busy.size
        mean = np.clip(level + rng.normal(0, 3, size=busy.shape) * busy, 0, 100)
        peak = np.minimum(100.0, mean + np.abs(rng.normal(0, 6, size=busy.shape)) * busy)
        power = 70 + 6.3 * mean + rng.normal(0, 5, size=busy.shape)
        return [
            [READINGS_PER_BUCKET] * n,
            mean.ravel().round(3).tolist(),
            peak.ravel().round(3).tolist(),
            mem.ravel().tolist(),
            [MEM_TOTAL_BYTES] * n,
            power.ravel().round(1).tolist(),
            [0] * n,
        ]

    def _readings(self, busy: np.ndarray, level: np.ndarray, mem: np.ndarray) -> list[list[Any]]:
        """util_pct .. source of `gpu_samples`, as a DCGM exporter reads them."""
        rng, n = self.rng, busy.size
        util = np.clip(level + rng.normal(0, 5, size=busy.shape) * busy, 0, 100).round(0)
        power = 70 + 6.3 * util + rng.normal(0, 5, size=busy.shape)
        return [
            util.ravel().tolist(),
            [None] * n,  # SM active: off in the exporter's default counters
            mem.ravel().tolist(),
            [MEM_TOTAL_BYTES] * n,
            power.ravel().round(1).tolist(),
            (30 + 0.4 * util).ravel().round(0).tolist(),
            [True] * n,
            [""] * n,
            ["dcgm"] * n,
        ]


@contextlib.contextmanager
def _loader(engine: Engine, table: str, columns: str) -> Iterator[Any]:
    """A bulk writer of row tuples: executemany on SQLite (a transaction per chunk, as the
    telemetry loop commits a round at a time), COPY on PostgreSQL."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if engine.dialect.name == "sqlite":
            marks = ", ".join("?" for _ in columns.split(","))
            sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
            cursor.execute("PRAGMA cache_size=-262144")  # this loader's connection only

            def write(rows: list[tuple[Any, ...]]) -> None:
                cursor.executemany(sql, rows)
                raw.commit()

        else:
            copy_sql = f"COPY {table} ({columns}) FROM STDIN"

            def write(rows: list[tuple[Any, ...]]) -> None:
                with cursor.copy(copy_sql) as copy:
                    for row in rows:
                        copy.write_row(row)
                raw.commit()

        yield write
    finally:
        raw.close()


def _quiesce(engine: Engine) -> None:
    """As a store that has run for a while: PostgreSQL vacuumed and analysed, SQLite's WAL
    folded into the file (the size measured is the file's)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE")
        else:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


# -- size ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSize:
    table: str
    rows: int
    table_bytes: int  # the rows (PostgreSQL: with TOAST and free-space maps)
    index_bytes: int

    @property
    def bytes_per_row(self) -> float:
        return (self.table_bytes + self.index_bytes) / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class StoreSize:
    total_bytes: int  # the SQLite file, or the PostgreSQL database
    tables: list[TableSize]

    def of(self, table: str) -> TableSize:
        return next(t for t in self.tables if t.table == table)


def store_size(url: str) -> StoreSize:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            names = [
                str(n)
                for n in conn.execute(
                    text(
                        "SELECT name FROM sqlite_master WHERE type = 'table'"
                        if engine.dialect.name == "sqlite"
                        else "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                    )
                ).scalars()
            ]
            rows = {
                n: int(conn.execute(text(f'SELECT COUNT(*) FROM "{n}"')).scalar_one())
                for n in names
            }
            if engine.dialect.name == "sqlite":
                pages = dict(
                    conn.execute(text("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")).all()
                )
                owner = dict(
                    conn.execute(
                        text("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'")
                    ).all()
                )
                index_bytes: dict[str, int] = {}
                for index, table in owner.items():
                    index_bytes[table] = index_bytes.get(table, 0) + int(pages.get(index, 0))
                tables = [
                    TableSize(n, rows[n], int(pages.get(n, 0)), index_bytes.get(n, 0))
                    for n in names
                ]
                database = engine.url.database
                assert database is not None
                total = Path(database).stat().st_size
            else:
                tables = []
                for n in names:
                    t_bytes, i_bytes = conn.execute(
                        text("SELECT pg_table_size(:t), pg_indexes_size(:t)"), {"t": n}
                    ).one()
                    tables.append(TableSize(n, rows[n], int(t_bytes), int(i_bytes)))
                total = int(
                    conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
                )
    finally:
        engine.dispose()
    return StoreSize(total, sorted(tables, key=lambda t: -(t.table_bytes + t.index_bytes)))


# -- the overview -------------------------------------------------------------------------


class Overview:
    """The portal on a built store, logged in as the admin; `render(path)` times one GET.
    The garbage collector is tuned as in a served API process (`tune_gc_for_serving`:
    the heap frozen once the app is built), restored by `close`: with the defaults a full
    collection of this process's heap takes 100-150 ms here, in every second or third
    render, which is the server's pause to avoid, not the page's cost."""

    def __init__(self, built: Built) -> None:
        self.engine = make_engine(built.url)
        cluster = bench_cluster(built.nodes)
        ctx = AppContext(
            sessions(self.engine),
            cluster,
            clock=lambda: built.now_s,
            limiter=RateLimiter(rate_per_s=1e6, burst=1e6),
        )
        self.client = TestClient(create_app(ctx))
        form = self.client.get("/portal/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert csrf is not None, "the login form has no CSRF token"
        done = self.client.post(
            "/portal/login",
            data={"token": built.admin_token, "csrf_token": csrf.group(1), "next": "/portal/"},
            follow_redirects=False,
        )
        assert done.status_code == 303, done.text
        self._gc_thresholds = gc.get_threshold()
        tune_gc_for_serving()

    def render(self, path: str = "/portal/") -> float:
        began = time.perf_counter()
        page = self.client.get(path)
        elapsed = time.perf_counter() - began
        assert page.status_code == 200, page.text[:500]
        assert 'id="busy-data"' in page.text, "the overview shows no utilisation chart"
        return elapsed

    def check(self, gpus: int) -> str:
        """The default page's window, after checking it shows every GPU with a reading."""
        page = self.client.get("/portal/").text
        cells = re.findall(r'<li class="heat-cell[^"]*" title="([^"]+)"', page)
        assert len(cells) == gpus, f"{len(cells)} heat-map cells for {gpus} GPUs"
        assert not any("no reading" in c for c in cells), "a GPU has no fresh reading"
        window = re.search(r'<option value="([0-9]+[hd])" selected>', page)
        return window.group(1) if window else "?"

    def close(self) -> None:
        self.client.close()
        self.engine.dispose()
        gc.unfreeze()
        gc.set_threshold(*self._gc_thresholds)


class OverviewBench:
    """A `make bench` entry: the first call (the runner's warm-up) builds the store, prints
    its size and renders once; each later call times one render of `path`."""

    def __init__(self, kind: str, config: StoreConfig = StoreConfig()) -> None:
        self.kind, self.config = kind, config
        self._stack = contextlib.ExitStack()
        self._overview: Overview | None = None

    def __call__(self, path: str) -> float:
        if self._overview is None:
            url = self._stack.enter_context(scratch_db(self.kind))
            built = build_store(url, self.config)
            print(describe(built, store_size(url)), flush=True)
            self._overview = Overview(built)
            self._stack.callback(self._overview.close)
        return self._overview.render(path)

    def close(self) -> None:
        self._stack.close()


def describe(built: Built, size: StoreSize) -> str:
    """Sizes as Markdown: per telemetry table, the whole store, 90 days' retention."""
    gpus = built.nodes * GPUS_PER_NODE
    lines = [
        f"  store: {built.nodes} x {GPUS_PER_NODE} GPUs, built in {built.build_s:.0f} s "
        f"({', '.join(f'{k} {v:.0f} s' for k, v in built.steps_s.items())}); "
        f"{built.jobs_finished:,} finished jobs ({built.ledger_rows:,} ledger rows), "
        f"{built.jobs_running:,} running, {built.jobs_pending:,} pending",
        "",
        "  | table | rows | table MB | index MB | bytes per row |",
        "  |---|---|---|---|---|",
    ]
    for t in size.tables:
        if t.table in TELEMETRY_TABLES or t.table_bytes + t.index_bytes > 1_000_000:
            lines.append(
                f"  | {t.table} | {t.rows:,} | {t.table_bytes / 1e6:,.1f} "
                f"| {t.index_bytes / 1e6:,.1f} | {t.bytes_per_row:,.0f} |"
            )
    rollup = size.of("gpu_samples_5m")
    telemetry = sum(size.of(t).table_bytes + size.of(t).index_bytes for t in TELEMETRY_TABLES)
    rolled = sum(  # what grows with the retention: the roll-ups
        size.of(t).table_bytes + size.of(t).index_bytes
        for t in ("gpu_samples_5m", "gpu_team_5m", "gpu_team_1h")
    )
    days = rollup.rows / max(1, gpus) * BUCKET_S / 86_400
    at_90 = telemetry + rolled * (90 / days - 1) if days else float("nan")
    lines += [
        "",
        f"  whole store {size.total_bytes / 1e9:.2f} GB; telemetry tables {telemetry / 1e9:.2f} GB "
        f"for {gpus:,} GPUs x {days:.0f} days; at the 90-day retention "
        f"{at_90 / 1e9:.2f} GB (roll-ups x {90 / days:.1f}, the raw day as it is)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.telemetry_store")
    parser.add_argument("--db", default="sqlite", help="sqlite, postgresql or a URL")
    parser.add_argument("--nodes", type=int, default=StoreConfig.nodes)
    parser.add_argument("--days", type=float, default=StoreConfig.days)
    parser.add_argument("--renders", type=int, default=7)
    parser.add_argument("--windows", default="default,24h", help="overview windows to time")
    parser.add_argument("--keep", type=Path, help="build the SQLite store at this path, keep it")
    args = parser.parse_args(argv)
    global VERBOSE  # noqa: PLW0603 - the command line's switch for progress lines
    VERBOSE = True
    config = StoreConfig(nodes=args.nodes, days=args.days)
    with contextlib.ExitStack() as stack:
        url = f"sqlite:///{args.keep}" if args.keep else stack.enter_context(scratch_db(args.db))
        built = build_store(url, config)
        print(describe(built, store_size(url)), flush=True)
        overview = Overview(built)
        stack.callback(overview.close)
        shown = overview.check(args.nodes * GPUS_PER_NODE)
        failed = False
        print(f"\n  default window: {shown}\n\n  | window | median ms | min ms | max ms |")
        print("  |---|---|---|---|")
        for window in args.windows.split(","):
            path = "/portal/" if window == "default" else f"/portal/?window={window}"
            overview.render(path)  # warm
            times = [overview.render(path) for _ in range(args.renders)]
            median = statistics.median(times)
            failed |= median > OVERVIEW_BUDGET_S
            print(
                f"  | {window} | {median * 1e3:.0f} | {min(times) * 1e3:.0f} "
                f"| {max(times) * 1e3:.0f} |",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
