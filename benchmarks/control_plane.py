"""Benchmarks of the control plane: API latency under load, and the reconciler's cycle.

Targets (issue 8):
- (a) `GET /api/v1/jobs/{id}` (state, queue position, ETA, events) p99 < 50 ms at 200
  requests/s with 100,000 jobs stored, on SQLite and on PostgreSQL;
- (b) one reconciler cycle < 1 s with 10,000 pending jobs on 1,000 nodes.

`seed_store` fills a fresh store the way a busy installation looks: mostly finished
history, ~10,000 pending jobs, running jobs holding ~94 % of a 1,000 x 8 H100 cluster
(allocation rows consistent with it), four teams with quotas, member tokens, events.
`settle` then runs real reconciler cycles until nothing moves, so the queue snapshot
(positions, reasons, ETAs) exists as it would on a live server.

`api_latency` starts a real `gpufleet serve --executor emulated` process on the store
(its reconciler runs in the same process, as in production) and drives it open-loop:
request i is sent at `start + i / rate` whatever happened to the earlier ones, and its
latency is counted from that scheduled time, so a stalled server is charged for the
requests that queue behind the stall (no coordinated omission).

`python -m benchmarks.control_plane api|reconciler [--db sqlite|postgresql|URL]` prints a
table and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import gc
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import Engine, create_engine, insert, select, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.executors.emulated import EmulatedExecutor
from gpufleet.control.leader import release
from gpufleet.control.models import Allocation, Job, JobEvent
from gpufleet.control.reconciler import CycleReport, Reconciler, ReconcilerConfig
from gpufleet.control.server import sync_nodes
from gpufleet.specs.cluster import ClusterSpec

ACCELERATOR = "h100-sxm5-80gb"
GPUS_PER_NODE = 8
NODES_PER_LEAF = 32
API_P99_TARGET_S = 0.050
API_RATE_TARGET = 200.0
SUBMIT_P99_TARGET_S = 0.100
SUBMIT_RATE_TARGET = 200.0
CYCLE_TARGET_S = 1.0
PG_ADMIN_URL = os.environ.get(
    "GPUFLEET_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
HOLDER = "bench-seed"
# pending request shapes (GPUs per worker, workers) and their shares
PENDING_SHAPES = ((1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4))
PENDING_WEIGHTS = (0.30, 0.20, 0.20, 0.15, 0.10, 0.05)
HISTORY_STATES = (("succeeded", 0.80), ("cancelled", 0.12), ("failed", 0.08))
VERBOSE = False  # progress lines on stderr (the command line turns them on)


def _progress(message: str) -> None:
    if VERBOSE:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the store ----------------------------------------------------------------------------


def cluster_spec(nodes: int) -> dict[str, Any]:
    """`nodes` x 8 H100 in one block, 32 nodes per leaf (names h100-0 ... h100-<n-1>)."""
    leaves = max(1, math.ceil(nodes / NODES_PER_LEAF))
    return {
        "kind": "cluster",
        "name": "bench",
        "topology_levels": ["block", "leaf", "node"],
        "nodes": [
            {
                "name": "h100",
                "count": nodes,
                "accelerator": ACCELERATOR,
                "gpus_per_node": GPUS_PER_NODE,
                "topology": {"block": "b0", "leaf": [f"l{i}" for i in range(leaves)]},
            }
        ],
    }


def bench_cluster(nodes: int) -> Cluster:
    return Cluster.from_spec(ClusterSpec.model_validate(cluster_spec(nodes)))


@dataclass
class Seeded:
    """A seeded store: what the load generator needs to ask for visible jobs."""

    url: str
    nodes: int
    tokens: dict[int, list[str]]  # team id -> member tokens of that team
    jobs: list[tuple[int, int]] = field(default_factory=list)  # (job id, team id), all jobs
    pending: list[tuple[int, int]] = field(default_factory=list)  # the same, pending ones
    states: dict[str, int] = field(default_factory=dict)
    events: int = 0
    allocations: int = 0
    seed_s: float = 0.0
    settle: list[CycleReport] = field(default_factory=list)


@dataclass(frozen=True)
class SeedConfig:
    jobs: int = 100_000
    pending: int = 10_000
    nodes: int = 1000
    teams: int = 4
    tokens_per_team: int = 4
    fill: float = 0.9  # share of the nodes running jobs fill (the others are partly used)
    seed: int = 0


def seed_store(url: str, config: SeedConfig = SeedConfig(), now_s: float | None = None) -> Seeded:
    """Migrate a fresh store at `url` and fill it (bulk inserts); no reconciler cycle yet.

    Pending jobs are `config.pending` plus one per free GPU, so that at least
    `config.pending` are still pending after the first cycle admits its burst."""
    started = time.perf_counter()
    now = time.time() if now_s is None else now_s
    rng = np.random.default_rng(config.seed)
    cluster = bench_cluster(config.nodes)
    engine = make_engine(url)
    try:
        upgrade(engine)
        maker = sessions(engine)
        team_ids, tokens = _teams_and_tokens(maker, config, now)
        running, allocs = _running_jobs(cluster, config, team_ids, rng, now)
        free = config.nodes * GPUS_PER_NODE - len(allocs)
        pending = config.pending + free
        history = max(0, config.jobs - len(running) - pending)
        before = _history_jobs(history, team_ids, rng, now)
        rows = before + running + _pending_jobs(pending, team_ids, rng, now)
        for k, row in enumerate(rows):
            row["name"] = f"job-{k}"
        with maker.begin() as s:
            ids = _insert_jobs(s, rows)
            for a in allocs:
                a["job_id"] = ids[len(before) + a.pop("row")]
            s.connection().execute(insert(Allocation), allocs)
            events = _events(rows, ids)
            for chunk in range(0, len(events), 50_000):
                s.connection().execute(insert(JobEvent), events[chunk : chunk + 50_000])
        sync_nodes(maker, cluster, now, None)
    finally:
        engine.dispose()
    seeded = Seeded(url, config.nodes, tokens)
    seeded.states = dict(Counter(r["state"] for r in rows))
    seeded.events, seeded.allocations = len(events), len(allocs)
    seeded.seed_s = time.perf_counter() - started
    return seeded


def _teams_and_tokens(
    maker: sessionmaker[Session], config: SeedConfig, now: float
) -> tuple[list[int], dict[int, list[str]]]:
    actor = admin.cli_principal()
    share = config.nodes * GPUS_PER_NODE // config.teams  # the cluster, shared out evenly
    tokens: dict[int, list[str]] = {}
    team_ids: list[int] = []
    with maker.begin() as s:
        admin.init(s, now)
        for t in range(config.teams):
            name = f"team-{t}"
            team = admin.create_team(s, actor, name, now, cohort="ml", projects=["p1", "p2"])
            s.flush()
            admin.set_quota(s, actor, name, ACCELERATOR, now, guaranteed_gpus=share)
            team_ids.append(team.id)
            tokens[team.id] = [
                admin.create_token(
                    s, actor, now, role="member", team=name, user=f"{name}-u{k}", expires_s=None
                ).token
                for k in range(config.tokens_per_team)
            ]
    return team_ids, tokens


def _job_row(team_id: int, i: int, state: str, gpus: int, workers: int) -> dict[str, Any]:
    return {
        "name": "job",
        "team_id": team_id,
        "project": "p1" if i % 3 else "p2",
        "user_name": f"user-{i % 50}",
        "kind": "training" if workers > 1 else "batch",
        "priority_class": "standard",
        "request": {"gpus": gpus, "workers": workers},
        "command": ["python", "train.py", f"--run={i}"],
        "env": {"RUN": str(i)},
        "data": [],
        "preemptible": True,
        "checkpoint_interval_s": None,
        "runtime_estimate_s": 4 * 3600.0,
        "state": state,
        "attempt": 0,
        "submitted_s": 0.0,
        "queued_s": 0.0,
        "started_s": None,
        "finished_s": None,
        "attained_gpu_s": 0.0,
        "last_checkpoint_s": None,
        "flavor": None,
        "placement": [],
        "reason": "queued" if state == "pending" else "",
        "exit_code": None,
        "crashes": 0,
        "not_before_s": None,
        "stop_deadline_s": None,
        "stop_for": None,
        "version": 0,
    }


def _history_jobs(
    n: int, team_ids: Sequence[int], rng: np.random.Generator, now: float
) -> list[dict[str, Any]]:
    """Finished jobs of the last 30 days, oldest first."""
    states = [s for s, _ in HISTORY_STATES]
    picks = rng.choice(len(states), size=n, p=[w for _, w in HISTORY_STATES])
    shapes = rng.choice(len(PENDING_SHAPES), size=n, p=PENDING_WEIGHTS)
    starts = np.sort(rng.uniform(now - 30 * 86400, now - 86400, size=n))
    rows = []
    for i in range(n):
        gpus, workers = PENDING_SHAPES[int(shapes[i])]
        state = states[int(picks[i])]
        row = _job_row(team_ids[i % len(team_ids)], i, state, gpus, workers)
        submitted = float(starts[i])
        ran = state != "cancelled" or i % 2 == 0  # half the cancels never started
        runtime = float(rng.uniform(600, 8 * 3600))
        row.update(
            submitted_s=submitted,
            queued_s=submitted,
            attempt=1 if ran else 0,
            started_s=submitted + 300 if ran else None,
            finished_s=submitted + 300 + runtime if ran else submitted + 600,
            attained_gpu_s=gpus * workers * runtime if ran else 0.0,
            flavor=ACCELERATOR if ran else None,
            exit_code=0 if state == "succeeded" else 1 if state == "failed" else None,
            version=4 if ran else 1,
        )
        rows.append(row)
    return rows


def _running_jobs(
    cluster: Cluster,
    config: SeedConfig,
    team_ids: Sequence[int],
    rng: np.random.Generator,
    now: float,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Running jobs packed onto the nodes (`config.fill` of them full, the others partly
    used) and their allocation rows; 2-node gangs on some consecutive full nodes. Each
    allocation row carries `row`: the index of its job among the running jobs."""
    rows: list[dict[str, Any]] = []
    allocs: list[dict[str, Any]] = []
    names = [n.name for n in cluster.nodes]
    full = rng.uniform(size=len(names)) < config.fill
    used = [GPUS_PER_NODE if f else int(rng.integers(0, GPUS_PER_NODE)) for f in full]

    def add(gpus: int, placement: list[tuple[str, list[int]]]) -> None:
        team = team_ids[len(rows) % len(team_ids)]
        row = _job_row(team, len(rows), "running", gpus, len(placement))
        started = now - float(rng.uniform(60, 3600))
        row.update(
            submitted_s=started - 600,
            queued_s=started - 600,
            started_s=started,
            attempt=1,
            flavor=ACCELERATOR,
            placement=[{"node": node, "gpus": g} for node, g in placement],
            runtime_estimate_s=float(rng.uniform(8, 24)) * 3600,
            version=3,
        )
        for worker, (node, g) in enumerate(placement):
            for gpu in g:
                allocs.append(
                    {
                        "row": len(rows),
                        "attempt": 1,
                        "worker": worker,
                        "kind": "whole",
                        "node": node,
                        "gpu": gpu,
                        "slice_id": None,
                        "device": f"{node}/gpu{gpu}",
                        "milli": 1000,
                        "flavor": ACCELERATOR,
                        "allocated_s": started,
                        "released_s": None,
                    }
                )
        rows.append(row)

    i = 0
    while i < len(names):
        if i + 1 < len(names) and used[i] == used[i + 1] == GPUS_PER_NODE and rng.uniform() < 0.1:
            whole = list(range(GPUS_PER_NODE))
            add(GPUS_PER_NODE, [(names[i], whole), (names[i + 1], whole)])
            i += 2
            continue
        gpu = 0
        while gpu < used[i]:
            size = min(int(rng.choice((1, 2, 4, 8), p=(0.2, 0.2, 0.3, 0.3))), used[i] - gpu)
            add(size, [(names[i], list(range(gpu, gpu + size)))])
            gpu += size
        i += 1
    return rows, allocs


def _pending_jobs(
    n: int, team_ids: Sequence[int], rng: np.random.Generator, now: float
) -> list[dict[str, Any]]:
    shapes = rng.choice(len(PENDING_SHAPES), size=n, p=PENDING_WEIGHTS)
    queued = np.sort(rng.uniform(now - 6 * 3600, now - 60, size=n))
    rows = []
    for i in range(n):
        gpus, workers = PENDING_SHAPES[int(shapes[i])]
        row = _job_row(team_ids[int(rng.integers(0, len(team_ids)))], i, "pending", gpus, workers)
        row.update(
            submitted_s=float(queued[i]),
            queued_s=float(queued[i]),
            priority_class="opportunistic" if i % 5 == 0 else "standard",
            runtime_estimate_s=float(rng.choice((1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0))),
        )
        rows.append(row)
    return rows


def _insert_jobs(s: Session, rows: list[dict[str, Any]]) -> list[int]:
    """Bulk insert (no RETURNING: SQLAlchemy's ordered RETURNING is quadratic in the batch
    count); the new ids in the order of `rows`, read back by the unique seeded names."""
    for chunk in range(0, len(rows), 20_000):
        s.connection().execute(insert(Job), rows[chunk : chunk + 20_000])
    by_name = dict(s.execute(select(Job.name, Job.id)).all())
    return [by_name[row["name"]] for row in rows]


def _events(rows: Sequence[dict[str, Any]], ids: Sequence[int]) -> list[dict[str, Any]]:
    """The history a job of that state would have: submitted, starting, running, its end."""
    out: list[dict[str, Any]] = []
    for row, job_id in zip(rows, ids, strict=True):
        submitted = f"submitted by {row['user_name']}"
        out.append(_event(job_id, row["submitted_s"], "submitted", 0, submitted))
        if row["started_s"] is not None:
            at = row["started_s"]
            out.append(_event(job_id, at - 1, "starting", 1, f"placed on {row['flavor']}"))
            out.append(_event(job_id, at, "running", 1, "the executor reports it started"))
        if row["finished_s"] is not None:
            out.append(_event(job_id, row["finished_s"], row["state"], row["attempt"], ""))
    return out


def _event(job_id: int, at_s: float, kind: str, attempt: int, message: str) -> dict[str, Any]:
    return {"job_id": job_id, "at_s": at_s, "kind": kind, "attempt": attempt, "message": message}


def settle(url: str, nodes: int, *, max_cycles: int = 6) -> list[CycleReport]:
    """Real reconciler cycles (emulated executor, real clock) until one admits, preempts
    and finishes nothing; the queue snapshot then exists. Releases the lease after."""
    engine = make_engine(url)
    try:
        maker = sessions(engine)
        executor = EmulatedExecutor()
        reconciler = Reconciler(
            maker, bench_cluster(nodes), executor, ReconcilerConfig(holder=HOLDER)
        )
        reports: list[CycleReport] = []
        for _ in range(max_cycles):
            report = reconciler.cycle()
            reports.append(report)
            if len(reports) > 1 and not (report.admitted or report.preempted or report.finished):
                break
        with maker.begin() as s:
            release(s, "reconciler", HOLDER)
        _quiesce(engine)
    finally:
        engine.dispose()
    return reports


def _quiesce(engine: Engine) -> None:
    """Leave a freshly bulk-loaded store as a long-running one is: PostgreSQL vacuumed,
    analysed and checkpointed (else autovacuum and the checkpointer start on the 100,000
    new rows in the middle of the timed load), SQLite's WAL folded into the database
    (SQLite is not analysed: a served store never is)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE")
            with contextlib.suppress(DBAPIError):  # needs a superuser or pg_checkpoint
                conn.exec_driver_sql("CHECKPOINT")
        elif engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def load_targets(seeded: Seeded) -> None:
    """Fill `seeded.jobs` / `seeded.pending` from the store (after `settle`)."""
    engine = make_engine(seeded.url)
    try:
        with sessions(engine)() as s:
            rows = s.execute(select(Job.id, Job.team_id, Job.state)).all()
    finally:
        engine.dispose()
    seeded.jobs = [(i, t) for i, t, _ in rows]
    seeded.pending = [(i, t) for i, t, st in rows if st == "pending"]
    seeded.states = dict(Counter(st for _, _, st in rows))


# -- scratch databases ----------------------------------------------------------------------


def pg_available(admin_url: str = PG_ADMIN_URL) -> str | None:
    """None if a PostgreSQL server answers at `admin_url`, else why not."""
    engine = create_engine(admin_url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        return str(exc.orig).strip().splitlines()[0]
    finally:
        engine.dispose()
    return None


@contextlib.contextmanager
def scratch_db(kind: str) -> Iterator[str]:
    """A fresh empty store: `sqlite` (a temporary file), `postgresql` (a new database on
    the server at $GPUFLEET_BENCH_PG, dropped afterwards) or a URL used as it is."""
    if kind == "sqlite":
        tmp = Path(tempfile.mkdtemp(prefix="gpufleet-bench-"))
        try:
            yield f"sqlite:///{tmp / 'bench.db'}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    if kind != "postgresql":
        yield kind
        return
    name = f"gpufleet_bench_{uuid.uuid4().hex[:12]}"
    root = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with root.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with root.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        root.dispose()


# -- (b) the reconciler cycle -------------------------------------------------------------


@dataclass
class CycleResult:
    nodes: int
    pending: int  # pending jobs in the steady cycles
    running: int
    burst_s: float  # the first cycle: admits onto the free GPUs, writes, launches
    burst_admitted: int
    observe_s: float  # the second: records the burst's "started" events
    steady_s: list[float]  # cycles with nothing to do but decide (warm caches)
    eta_s: float | None  # one queue-ETA re-simulation (off the cycle, on its own thread)
    seed_s: float

    @property
    def steady_median_s(self) -> float:
        return statistics.median(self.steady_s)

    @property
    def ok(self) -> bool:
        return self.steady_median_s < CYCLE_TARGET_S


def reconciler_cycle(
    url: str,
    *,
    nodes: int = 1000,
    pending: int = 10_000,
    jobs: int = 100_000,
    steady: int = 5,
    seed: int = 0,
    etas: bool = False,
) -> CycleResult:
    """Seed a fresh store at `url`, then time cycles: the burst, the one observing its
    starts and `steady` steady ones; with `etas`, also one queue-ETA re-simulation (the
    server runs it on its own thread every 30 s, off the cycle)."""
    seeded = seed_store(url, SeedConfig(jobs=jobs, pending=pending, nodes=nodes, seed=seed))
    engine = make_engine(url)
    try:
        maker = sessions(engine)
        reconciler = Reconciler(maker, bench_cluster(nodes), EmulatedExecutor(), ReconcilerConfig())
        burst = _timed(reconciler)
        observe = _timed(reconciler)
        steady_runs = [_timed(reconciler) for _ in range(steady)]
        eta: float | None = None
        estimate = getattr(reconciler, "estimate_etas", None)
        if etas and estimate is not None:
            t0 = time.perf_counter()
            estimate()
            eta = time.perf_counter() - t0
    finally:
        engine.dispose()
    last = steady_runs[-1][1]
    return CycleResult(
        nodes=nodes,
        pending=last.pending,
        running=last.running,
        burst_s=burst[0],
        burst_admitted=len(burst[1].admitted),
        observe_s=observe[0],
        steady_s=[t for t, _ in steady_runs],
        eta_s=eta,
        seed_s=seeded.seed_s,
    )


def _timed(reconciler: Reconciler) -> tuple[float, CycleReport]:
    t0 = time.perf_counter()
    report = reconciler.cycle()
    return time.perf_counter() - t0, report


# -- (a) API latency under an open-loop load ----------------------------------------------


@dataclass
class LoadResult:
    rate_per_s: float  # asked
    sent: int
    achieved_per_s: float  # answered (HTTP 200) / (last answer - first scheduled send)
    samples: list[tuple[float, float]]  # (scheduled send, s after the window's start; latency)
    errors: Counter[str]
    with_position: int  # answers that carried a queue position (pending jobs)
    late_sends: int  # sends the generator itself issued > 5 ms after their scheduled time

    @property
    def latencies_s(self) -> list[float]:
        return [latency for _, latency in self.samples]

    def pct(self, q: float, latencies: Sequence[float] | None = None) -> float:
        ordered = sorted(self.latencies_s if latencies is None else latencies)
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]

    def windows(self, width_s: float) -> list[tuple[float, int, float, float]]:
        """(window start s, requests, p50 s, p99 s) per `width_s` of scheduled send times."""
        buckets: dict[int, list[float]] = {}
        for at, latency in self.samples:
            buckets.setdefault(int(at // width_s), []).append(latency)
        return [
            (k * width_s, len(v), self.pct(50, v), self.pct(99, v))
            for k, v in sorted(buckets.items())
        ]

    @property
    def ok(self) -> bool:
        """p99 under the target at the asked rate, every request answered."""
        return (
            not self.errors
            and self.pct(99) < API_P99_TARGET_S
            and self.achieved_per_s >= 0.97 * self.rate_per_s
        )

    @property
    def target_met(self) -> bool:
        """Issue 8's target: `ok` at 200 requests/s or more."""
        return self.ok and self.rate_per_s >= API_RATE_TARGET


@dataclass
class ServerProc:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(
    url: str,
    nodes: int,
    workdir: Path,
    *,
    cycle_s: float = 2.0,
    cpus: str | None = None,
    ready_timeout_s: float = 120.0,
    workers: int | None = None,
) -> Iterator[ServerProc]:
    """A real `gpufleet serve --executor emulated` on the store, pinned to `cpus` (taskset
    list) if given; yields once it answers and its reconciler holds the lease."""
    cluster = workdir / "cluster.yaml"
    cluster.write_text(json.dumps(cluster_spec(nodes)))  # JSON is YAML
    port = _free_port()
    log = workdir / f"server-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "gpufleet.cli.main",
        "serve",
        "--cluster",
        str(cluster),
        "--db",
        url,
        "--executor",
        "emulated",
        "--port",
        str(port),
        "--cycle",
        str(cycle_s),
        "--runs",
        str(workdir / "runs"),
        *(("--workers", str(workers)) if workers else ()),
    ]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    server = ServerProc(proc, f"http://127.0.0.1:{port}", log)
    try:
        _wait_ready(server, ready_timeout_s)
        yield server
    finally:
        server.stop()


def _wait_ready(server: ServerProc, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"server exited {server.proc.returncode}:\n{server.log.read_text()[-3000:]}"
            )
        try:
            r = httpx.get(f"{server.url}/readyz", timeout=2.0)
            if r.status_code == 200 and r.json().get("leader"):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready in {timeout_s:.0f} s:\n{server.log.read_text()[-3000:]}")


def drive(
    base_url: str,
    targets: Sequence[tuple[int, str]],
    *,
    rate_per_s: float,
    duration_s: float,
    warmup_s: float = 0.0,
    timeout_s: float = 10.0,
    seed: int = 0,
    max_in_flight: int = 256,
) -> LoadResult:
    """Open-loop GETs of /api/v1/jobs/{id}: request i is sent at start + i / rate (the
    warm-up's requests first, not counted) and timed from that scheduled instant."""
    load = Load("get", get_jobs(targets, seed), rate_per_s)
    return drive_loads(
        base_url,
        [load],
        duration_s=duration_s,
        warmup_s=warmup_s,
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
    )["get"]


def drive_loads(
    base_url: str,
    loads: Sequence[Load],
    *,
    duration_s: float,
    warmup_s: float = 0.0,
    timeout_s: float = 10.0,
    max_in_flight: int = 256,
) -> dict[str, LoadResult]:
    """Several open-loop loads at once (GETs beside submits), each timed on its own."""
    coro = _drive(
        base_url,
        loads,
        duration_s=duration_s,
        warmup_s=warmup_s,
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
    )
    # The generator is this process, which in `make bench` also holds the earlier entries'
    # seeded stores and reconcilers: a full collection of that heap paused the sends for up
    # to a second (late sends, and every request's time from its scheduled instant grew:
    # 0.2-1.0 s p99 on both stores in the whole control-plane sequence, 15-30 ms alone).
    # What exists now is frozen out of the collector's reach for the run.
    gc.collect()
    gc.freeze()
    try:
        # a caller with an event loop already running in this thread (Playwright's sync API
        # in the same test process) cannot asyncio.run here: drive the load from a fresh thread
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coro).result()
    finally:
        gc.unfreeze()


@dataclass(frozen=True, slots=True)
class Call:
    """One request of a load: `headers` are whole lines, each ending in CRLF."""

    method: str
    path: str
    headers: str
    body: bytes = b""
    expect: int = 200


class _Http:
    """A minimal HTTP/1.1 keep-alive client for one server.

    The generator's own cost per request has to stay far below the server's: httpx's async
    client costs about a millisecond of CPU a request here and more as connections pile up,
    which made the generator, not the server, the bottleneck above ~120 requests/s. This
    reads a status line, headers and a Content-Length body (what uvicorn sends)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        # oldest first: requests rotate over every open connection, as many clients' would
        # (reusing the last one sent nearly everything over one or two connections, which a
        # server with several worker processes cannot spread)
        self.idle: collections.deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            collections.deque()
        )

    async def open(self, connections: int) -> None:
        """Open `connections` kept-alive connections before the first request."""
        for _ in range(connections):
            self.idle.append(await asyncio.open_connection(self.host, self.port))

    async def send(self, call: Call) -> tuple[int, bytes]:
        if self.idle:  # a kept-alive connection the server may have closed meanwhile
            try:
                return await self._send(self.idle.popleft(), call)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
        conn = await asyncio.open_connection(self.host, self.port)
        return await self._send(conn, call)

    async def _send(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], call: Call
    ) -> tuple[int, bytes]:
        reader, writer = conn
        try:
            head = f"{call.method} {call.path} HTTP/1.1\r\nHost: {self.host}\r\n{call.headers}"
            if call.body:
                head += f"Content-Type: application/json\r\nContent-Length: {len(call.body)}\r\n"
            writer.write(head.encode() + b"\r\n" + call.body)
            head_bytes = await reader.readuntil(b"\r\n\r\n")
            status, length, keep = int(head_bytes[9:12]), 0, True
            for line in head_bytes.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                key = name.strip().lower()
                if key == b"content-length":
                    length = int(value)
                elif key == b"connection" and value.strip().lower() == b"close":
                    keep = False
                elif key == b"transfer-encoding":
                    raise ConnectionError("chunked responses are not supported")
            body = await reader.readexactly(length)
        except BaseException:
            writer.close()
            raise
        if keep:
            self.idle.append(conn)
        else:
            writer.close()
        return status, body

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


class _OpenLoop:
    """The load generator's state: request i is due at `start + i / rate`; what it measures
    is counted only after the warm-up's requests."""

    def __init__(self, http: _Http, rate: float, warm: int, timeout_s: float, limit: int) -> None:
        self.http, self.rate, self.warm = http, rate, warm
        self.timeout_s, self.limit = timeout_s, limit
        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time() + 0.05
        self.measured_from = self.start + warm / rate
        self.samples: list[tuple[float, float]] = []
        self.errors: Counter[str] = Counter()
        self.positions = self.late = self.in_flight = 0
        self.done_at = self.measured_from
        self.tasks: dict[asyncio.Task[None], int] = {}

    def due(self, i: int) -> float:
        return self.start + i / self.rate

    def record(self, i: int, end: float, error: str | None) -> None:
        if i < self.warm:
            return
        self.samples.append((self.due(i) - self.measured_from, end - self.due(i)))
        self.done_at = max(self.done_at, end)
        if error is not None:
            self.errors[error] += 1

    async def one(self, i: int, call: Call) -> None:
        self.in_flight += 1
        error: str | None = None
        try:
            status, body = await asyncio.wait_for(self.http.send(call), self.timeout_s)
            if status != call.expect:
                error = f"HTTP {status}"
            elif i >= self.warm and b'"queue_position":{' in body:
                self.positions += 1
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
            error = type(exc).__name__
        finally:
            self.in_flight -= 1
        self.record(i, self.loop.time(), error)

    async def run(self, calls: Callable[[int], Call], n: int) -> None:
        for i in range(self.warm + n):
            delay = self.due(i) - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif i >= self.warm and -delay > 0.005:
                self.late += 1
            if self.in_flight >= self.limit:  # a stalled server: do not pile up more
                self.record(i, self.due(i) + self.timeout_s, "not sent (in-flight limit)")
                continue
            self.tasks[asyncio.create_task(self.one(i, calls(i)))] = i
        if self.tasks:
            await asyncio.wait(self.tasks)  # each request times out on its own

    def result(self, n: int) -> LoadResult:
        span = max(self.done_at - self.measured_from, 1e-9)
        answered = len(self.samples) - sum(self.errors.values())
        return LoadResult(
            self.rate, n, answered / span, self.samples, self.errors, self.positions, self.late
        )


@dataclass(frozen=True)
class Load:
    """One open-loop stream of a run: `calls(i)` is request i, sent at start + i / rate."""

    name: str
    calls: Callable[[int], Call]
    rate_per_s: float


async def _drive(
    base_url: str,
    loads: Sequence[Load],
    *,
    duration_s: float,
    warmup_s: float,
    timeout_s: float,
    max_in_flight: int,
    connections: int = 16,
) -> dict[str, LoadResult]:
    """Every load at once, each on its own `connections` (more open when all are busy),
    from one start time."""
    url = httpx.URL(base_url)
    https = [_Http(url.host, url.port or 80) for _ in loads]
    gens = []
    try:
        for load, http in zip(loads, https, strict=True):
            await http.open(connections)
            warm = int(warmup_s * load.rate_per_s)
            gens.append(_OpenLoop(http, load.rate_per_s, warm, timeout_s, max_in_flight))
        ns = [max(1, int(duration_s * load.rate_per_s)) for load in loads]
        await asyncio.gather(
            *(g.run(load.calls, n) for g, load, n in zip(gens, loads, ns, strict=True))
        )
    finally:
        for http in https:
            http.close()
    return {load.name: g.result(n) for load, g, n in zip(loads, gens, ns, strict=True)}


def get_jobs(targets: Sequence[tuple[int, str]], seed: int = 0) -> Callable[[int], Call]:
    """GET /api/v1/jobs/{id} of a random (job, token of its team) of `targets`."""
    rng = random.Random(seed)

    def call(_: int) -> Call:
        job_id, token = targets[rng.randrange(len(targets))]
        return Call("GET", f"/api/v1/jobs/{job_id}", f"Authorization: Bearer {token}\r\n")

    return call


def submit_jobs(tokens: Sequence[str], seed: int = 0) -> Callable[[int], Call]:
    """POST /api/v1/jobs: a one-to-eight-GPU batch job with a command and an environment, as
    a training script or a CI pipeline submits it, from a random member token."""
    rng = random.Random(seed)

    def call(i: int) -> Call:
        body = {
            "name": f"load-{i}",
            "gpus": rng.choice((1, 1, 2, 4, 8)),
            "command": ["python", "train.py", f"--run={i}"],
            "env": {"RUN": str(i)},
            "runtime_estimate_s": 3600.0,
            "checkpoint_interval_s": 900.0,
        }
        token = tokens[rng.randrange(len(tokens))]
        return Call(
            "POST",
            "/api/v1/jobs",
            f"Authorization: Bearer {token}\r\n",
            json.dumps(body).encode(),
            expect=201,
        )

    return call


def request_targets(
    seeded: Seeded, *, pending_share: float = 0.5, seed: int = 0, size: int = 20_000
) -> list[tuple[int, str]]:
    """(job id, a token of its team): `pending_share` of them pending jobs (the answer
    carries a queue position), the rest drawn from all jobs (mostly history)."""
    rng = random.Random(seed)
    out = []
    for _ in range(size):
        pool = seeded.pending if seeded.pending and rng.random() < pending_share else seeded.jobs
        job_id, team_id = pool[rng.randrange(len(pool))]
        tokens = seeded.tokens[team_id]
        out.append((job_id, tokens[rng.randrange(len(tokens))]))
    return out


@dataclass
class ApiResult:
    db: str
    jobs: int
    load: LoadResult
    seed_s: float
    server_cpus: str | None
    client_cpus: str | None
    pool_timeouts: int = 0  # "QueuePool limit ... reached" errors in the server's log


def seeded_and_settled(url: str, config: SeedConfig) -> Seeded:
    """`seed_store`, then `settle`: the store as a live server would have it."""
    _progress(f"seeding {config.jobs:,} jobs")
    seeded = seed_store(url, config)
    _progress(f"seeded in {seeded.seed_s:.1f} s; settling (reconciler cycles)")
    seeded.settle = settle(url, config.nodes)
    _progress("settled: " + ", ".join(f"{r.wall_s:.2f} s" for r in seeded.settle))
    return seeded


def api_latency(
    url: str,
    *,
    jobs: int = 100_000,
    rate_per_s: float = API_RATE_TARGET,
    duration_s: float = 20.0,
    warmup_s: float = 5.0,
    cycle_s: float = 2.0,
    server_cpus: str | None = None,
    client_cpus: str | None = None,
    seeded: Seeded | None = None,
    nodes: int = 1000,
    pending: int = 10_000,
) -> ApiResult:
    """Seed `url` (unless `seeded` is given: a store already seeded and settled), serve it
    and drive it at `rate_per_s` for `warmup_s` + `duration_s` seconds."""
    if seeded is None:
        seeded = seeded_and_settled(url, SeedConfig(jobs=jobs, pending=pending, nodes=nodes))
    if not seeded.jobs:
        load_targets(seeded)
    targets = request_targets(seeded)
    previous = os.sched_getaffinity(0) if client_cpus else None
    with (
        tempfile.TemporaryDirectory(prefix="gpufleet-bench-serve-") as tmp,
        serve(seeded.url, seeded.nodes, Path(tmp), cycle_s=cycle_s, cpus=server_cpus) as srv,
    ):
        _progress(f"server up at {srv.url}; driving {rate_per_s:.0f} req/s")
        if client_cpus:
            os.sched_setaffinity(0, _cpu_list(client_cpus))
        try:
            load = drive(
                srv.url, targets, rate_per_s=rate_per_s, duration_s=duration_s, warmup_s=warmup_s
            )
        finally:
            if previous is not None:
                os.sched_setaffinity(0, previous)
        pool_timeouts = srv.log.read_text(errors="replace").count("QueuePool limit")
    db = url.split(":", 1)[0].split("+", 1)[0]
    return ApiResult(
        db, len(seeded.jobs), load, seeded.seed_s, server_cpus, client_cpus, pool_timeouts
    )


@dataclass
class MixedResult:
    db: str
    jobs: int
    submits: LoadResult
    gets: LoadResult
    server_cpu_s: dict[str, float]  # by process role, over the run (warm-up included)
    pool_timeouts: int = 0

    def ok(self, load: LoadResult, p99_target_s: float) -> bool:
        return (
            not load.errors
            and load.pct(99) < p99_target_s
            and load.achieved_per_s >= 0.97 * load.rate_per_s
        )

    @property
    def target_met(self) -> bool:
        """Issue 23's target: both loads at their rates, each under its p99."""
        return (
            self.ok(self.submits, SUBMIT_P99_TARGET_S)
            and self.ok(self.gets, API_P99_TARGET_S)
            and self.submits.rate_per_s >= SUBMIT_RATE_TARGET
            and self.gets.rate_per_s >= API_RATE_TARGET
        )


def mixed_load(
    seeded: Seeded,
    *,
    submit_rate_per_s: float = SUBMIT_RATE_TARGET,
    get_rate_per_s: float = API_RATE_TARGET,
    duration_s: float = 20.0,
    warmup_s: float = 5.0,
    cycle_s: float = 2.0,
    workers: int | None = None,
) -> MixedResult:
    """Serve a seeded, settled store and drive submits and GETs at once (issue 23's (c)).
    Nothing is pinned: the server's processes and the generator share every CPU, as they
    would on one small machine; the server's CPU time is read from /proc per process."""
    if not seeded.jobs:
        load_targets(seeded)
    targets = request_targets(seeded)
    tokens = [t for team in seeded.tokens.values() for t in team]
    loads = [
        Load("submit", submit_jobs(tokens), submit_rate_per_s),
        Load("get", get_jobs(targets), get_rate_per_s),
    ]
    with (
        tempfile.TemporaryDirectory(prefix="gpufleet-bench-serve-") as tmp,
        serve(seeded.url, seeded.nodes, Path(tmp), cycle_s=cycle_s, workers=workers) as srv,
    ):
        _progress(
            f"server up at {srv.url}; driving {submit_rate_per_s:.0f} submits/s and "
            f"{get_rate_per_s:.0f} GETs/s"
        )
        before = _cpu_by_role(srv.proc.pid)
        results = drive_loads(srv.url, loads, duration_s=duration_s, warmup_s=warmup_s)
        after = _cpu_by_role(srv.proc.pid)
        pool_timeouts = srv.log.read_text(errors="replace").count("QueuePool limit")
    db = seeded.url.split(":", 1)[0].split("+", 1)[0]
    used = {role: after[role] - before.get(role, 0.0) for role in after}
    return MixedResult(db, len(seeded.jobs), results["submit"], results["get"], used, pool_timeouts)


def _cpu_by_role(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a server's processes, summed by role: supervisor,
    api (every worker), reconciler, eta. Linux /proc; empty elsewhere."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat[1])
        if int(entry.name) != pid and ppid != pid:
            continue
        role = "supervisor"
        for name in ("api_main", "reconciler_main", "eta_main"):
            if name in cmdline:
                role = name.removesuffix("_main")
        out[role] = out.get(role, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return out


def _cpu_list(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


# -- `make bench` entries (benchmarks/__main__.py) -----------------------------------------


class SteadyCycle:
    """One steady reconciler cycle per call, on a store seeded once (at the first call:
    100,000 jobs, 10,000 pending, 1,000 nodes; then the burst and its starts are cycled
    through so that every timed cycle is a steady one). Returns seconds."""

    def __init__(self, kind: str = "sqlite", config: SeedConfig = SeedConfig()) -> None:
        self.kind, self.config = kind, config
        self._stack = contextlib.ExitStack()
        self._reconciler: Reconciler | None = None

    def __call__(self) -> float:
        if self._reconciler is None:
            url = self._stack.enter_context(scratch_db(self.kind))
            seed_store(url, self.config)
            engine = make_engine(url)
            self._stack.callback(engine.dispose)
            self._reconciler = Reconciler(
                sessions(engine),
                bench_cluster(self.config.nodes),
                EmulatedExecutor(),
                ReconcilerConfig(holder="bench-steady"),
            )
            _timed(self._reconciler)  # the burst
            _timed(self._reconciler)  # its starts
        return _timed(self._reconciler)[0]

    def close(self) -> None:
        self._stack.close()


class _SeededOnce:
    """A `make bench` entry on one store: seeded and settled at the first call (the runner's
    warm-up), served by each later call; `close` drops the scratch database."""

    def __init__(self, kind: str, config: SeedConfig) -> None:
        self.kind, self.config = kind, config
        self._stack = contextlib.ExitStack()
        self._seeded: Seeded | None = None

    def _seeded_store(self) -> Seeded | None:
        """The store, or None at the first call, which seeds it."""
        if self._seeded is not None:
            return self._seeded
        url = self._stack.enter_context(scratch_db(self.kind))
        self._seeded = seeded_and_settled(url, self.config)
        load_targets(self._seeded)
        return None

    def close(self) -> None:
        self._stack.close()


class ApiP99(_SeededOnce):
    """The API's p99 in seconds at `rate_per_s`: the first call seeds and settles the store
    (the runner's warm-up), each later call serves it and drives the load."""

    def __init__(
        self,
        kind: str = "sqlite",
        *,
        rate_per_s: float = API_RATE_TARGET,
        duration_s: float = 20.0,
        warmup_s: float = 5.0,
        config: SeedConfig = SeedConfig(),
        server_cpus: str | None = None,
        client_cpus: str | None = None,
    ) -> None:
        super().__init__(kind, config)
        self.server_cpus, self.client_cpus = server_cpus, client_cpus
        self.rate_per_s, self.duration_s, self.warmup_s = rate_per_s, duration_s, warmup_s
        self.last: ApiResult | None = None

    def __call__(self) -> float:
        seeded = self._seeded_store()
        if seeded is None:
            return 0.0
        self.last = api_latency(
            seeded.url,
            rate_per_s=self.rate_per_s,
            duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            seeded=seeded,
            server_cpus=self.server_cpus,
            client_cpus=self.client_cpus,
        )
        load = self.last.load
        errors = sum(load.errors.values())
        print(
            f"  {self.kind}: {load.achieved_per_s:.0f} of {load.rate_per_s:.0f} req/s answered, "
            f"p50 {load.pct(50) * 1000:.1f} ms, p99 {load.pct(99) * 1000:.1f} ms, "
            f"{errors} errors, {self.last.pool_timeouts} pool timeouts in the server log",
            flush=True,
        )
        return load.pct(99) if not errors else max(load.pct(99), 1.0)


class MixedP99(_SeededOnce):
    """Issue 23's mixed load: the first call seeds and settles the store (the runner's
    warm-up), each later call serves it, drives 200 submits/s and 200 GETs/s at once, and
    returns the submits' p99 (at least 1 s when a rate was not met or a request failed);
    `get_p99` returns the GETs' of the same run."""

    def __init__(self, kind: str = "sqlite", config: SeedConfig = SeedConfig()) -> None:
        super().__init__(kind, config)
        self.last: MixedResult | None = None

    def __call__(self) -> float:
        seeded = self._seeded_store()
        if seeded is None:
            return 0.0
        self.last = result = mixed_load(seeded)
        for label, load in (("submits", result.submits), ("GETs", result.gets)):
            print(
                f"  {self.kind} {label}: {load.achieved_per_s:.0f} of {load.rate_per_s:.0f}/s "
                f"answered, p50 {load.pct(50) * 1000:.1f} ms, p99 {load.pct(99) * 1000:.1f} ms, "
                f"{sum(load.errors.values())} errors, {load.late_sends} late sends",
                flush=True,
            )
        cpu = ", ".join(f"{role} {s:.1f} s" for role, s in sorted(result.server_cpu_s.items()))
        print(f"  {self.kind} server CPU over the run: {cpu}", flush=True)
        return self._judged(result.submits)

    def get_p99(self) -> float:
        if self.last is None:
            return math.inf
        return self._judged(self.last.gets)

    @staticmethod
    def _judged(load: LoadResult) -> float:
        """The p99 the budget judges; 1 s at least when a request failed or the rate was not
        answered (a p99 of what was answered would hide those)."""
        served = not load.errors and load.achieved_per_s >= 0.97 * load.rate_per_s
        return load.pct(99) if served else max(load.pct(99), 1.0)


# -- the command line -----------------------------------------------------------------------


def _print_api(result: ApiResult) -> None:
    from rich.console import Console
    from rich.table import Table

    load = result.load
    verdict = "met" if load.target_met else "NOT met"
    table = Table(title=f"GET /api/v1/jobs/{{id}} on {result.db}, {result.jobs:,} jobs stored")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("asked rate, requests/s", f"{load.rate_per_s:.0f}"),
        ("answered (HTTP 200) per s", f"{load.achieved_per_s:.1f}"),
        ("requests timed", f"{load.sent:,}"),
        *((f"p{q} ms", f"{load.pct(q) * 1000:.1f}") for q in (50, 95, 99)),
        ("max ms", f"{max(load.latencies_s, default=math.nan) * 1000:.1f}"),
        ("errors", ", ".join(f"{k}: {v}" for k, v in load.errors.items()) or "0"),
        ("server log: pool timeouts", str(result.pool_timeouts)),
        ("target: p99 < 50 ms at >= 200/s, no errors", verdict),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console = Console(width=120)
    console.print(table)
    per = " ".join(f"{p99 * 1000:.0f}" for _, _, _, p99 in load.windows(5.0))
    console.print(f"p99 ms per 5 s window: {per}")
    console.print(
        f"{load.with_position:,} answers carried a queue position; generator late sends "
        f"(> 5 ms): {load.late_sends}; server CPUs: {result.server_cpus or 'any'}, "
        f"client CPUs: {result.client_cpus or 'any'}; seeding took {result.seed_s:.1f} s"
    )


def _print_mixed(result: MixedResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"submits and GETs at once on {result.db}, {result.jobs:,} jobs stored")
    table.add_column("measure")
    table.add_column("POST /api/v1/jobs", justify="right")
    table.add_column("GET /api/v1/jobs/{id}", justify="right")
    loads = (result.submits, result.gets)
    rows = [
        ("asked rate, requests/s", [f"{x.rate_per_s:.0f}" for x in loads]),
        ("answered per s", [f"{x.achieved_per_s:.1f}" for x in loads]),
        *((f"p{q} ms", [f"{x.pct(q) * 1000:.1f}" for x in loads]) for q in (50, 95, 99)),
        ("errors", [str(sum(x.errors.values())) for x in loads]),
        ("generator late sends (> 5 ms)", [str(x.late_sends) for x in loads]),
        (
            "target",
            [
                "met" if result.ok(result.submits, SUBMIT_P99_TARGET_S) else "NOT met",
                "met" if result.ok(result.gets, API_P99_TARGET_S) else "NOT met",
            ],
        ),
    ]
    for label, (a, b) in rows:
        table.add_row(label, a, b)
    console = Console(width=120)
    console.print(table)
    cpu = ", ".join(f"{role} {s:.1f} s" for role, s in sorted(result.server_cpu_s.items()))
    console.print(f"server CPU over the run: {cpu}; pool timeouts: {result.pool_timeouts}")


def _print_cycle(result: CycleResult, db: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"reconciler cycle on {db}: {result.nodes:,} nodes, "
        f"{result.pending:,} pending, {result.running:,} running"
    )
    table.add_column("cycle")
    table.add_column("seconds", justify="right")
    table.add_column("target < 1 s")
    rows = [
        (f"first (admits a burst of {result.burst_admitted:,})", result.burst_s),
        ("second (records the burst's starts)", result.observe_s),
        (f"steady, median of {len(result.steady_s)}", result.steady_median_s),
        ("steady, worst", max(result.steady_s)),
    ]
    if result.eta_s is not None:
        rows.append(("queue ETAs (own thread, not a cycle)", result.eta_s))
    for label, seconds in rows:
        verdict = "met" if seconds < CYCLE_TARGET_S else "NOT met"
        table.add_row(label, f"{seconds:.3f}", "-" if label.startswith("queue") else verdict)
    console = Console()
    console.print(table)
    console.print(f"seeding took {result.seed_s:.1f} s; the target is judged on the steady median")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.control_plane", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("what", choices=("api", "reconciler", "mixed"))
    parser.add_argument("--db", default="sqlite", help="sqlite, postgresql or a store URL")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=API_RATE_TARGET)
    parser.add_argument("--submit-rate", type=float, default=SUBMIT_RATE_TARGET, help="mixed")
    parser.add_argument("--workers", type=int, help="the server's API workers (default: auto)")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--cycle", type=float, default=2.0, help="server's reconciler period")
    parser.add_argument("--server-cpus", help="taskset CPU list for the server, e.g. 0")
    parser.add_argument("--client-cpus", help="CPU list for the load generator, e.g. 1")
    parser.add_argument("--steady", type=int, default=5, help="steady cycles to time")
    parser.add_argument(
        "--etas", action="store_true", help="also time one queue-ETA simulation (slow)"
    )
    args = parser.parse_args(argv)
    global VERBOSE  # noqa: PLW0603 - the command line's switch for progress lines
    VERBOSE = True
    if args.db == "postgresql" and (why := pg_available()) is not None:
        print(f"no PostgreSQL server at {PG_ADMIN_URL}: {why}", file=sys.stderr)
        return 2
    with scratch_db(args.db) as url:
        if args.what == "reconciler":
            cycle = reconciler_cycle(
                url,
                nodes=args.nodes,
                pending=args.pending,
                jobs=args.jobs,
                steady=args.steady,
                etas=args.etas,
            )
            _print_cycle(cycle, args.db)
            return 0 if cycle.ok else 1
        if args.what == "mixed":
            config = SeedConfig(jobs=args.jobs, pending=args.pending, nodes=args.nodes)
            mixed = mixed_load(
                seeded_and_settled(url, config),
                submit_rate_per_s=args.submit_rate,
                get_rate_per_s=args.rate,
                duration_s=args.duration,
                warmup_s=args.warmup,
                cycle_s=args.cycle,
                workers=args.workers,
            )
            _print_mixed(mixed)
            return 0 if mixed.target_met else 1
        api = api_latency(
            url,
            jobs=args.jobs,
            rate_per_s=args.rate,
            duration_s=args.duration,
            warmup_s=args.warmup,
            cycle_s=args.cycle,
            server_cpus=args.server_cpus,
            client_cpus=args.client_cpus,
            nodes=args.nodes,
            pending=args.pending,
        )
        _print_api(api)
        return 0 if api.load.target_met else 1


if __name__ == "__main__":
    sys.exit(main())
