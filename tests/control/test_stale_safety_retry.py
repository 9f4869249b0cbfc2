"""Transactions that lose a race are done again, not dropped: a deadlock (SQLSTATE 40P01) or a
serialization failure (40001) aborts a transaction as StaleDataError does, and the
reconciler's steps and the telemetry round's pieces retry all three alike (bounded, logged,
the failed try rolled back whole), so nothing is skipped and nothing written twice.

Before, only StaleDataError was retried: a deadlock escaped `Reconciler.cycle` (the executor
events it had polled were dropped with the rest of the cycle) and the telemetry round (its
remaining pieces unwritten), and the loop logged a traceback.

The first test makes a real deadlock on PostgreSQL, deterministically: another writer holds
job b and waits for job a, which the cycle's flush has written, before the cycle writes b.
The others inject the driver's error (psycopg's own classes) on a first try, on both stores."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self

import psycopg.errors
import pytest
from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.exc import OperationalError

from gpufleet.control import admin, jobs, periodic
from gpufleet.control import telemetry_store as ts
from gpufleet.control.db import sessions, upgrade
from gpufleet.control.models import (
    Allocation,
    GpuSample,
    GpuTeamSample,
    Job,
    JobEvent,
    JobUtilization,
    UsageEntry,
)
from gpufleet.control.reconciler import Reconciler

from .conftest import Plane, _pg_engine
from .test_flow import job, submit
from .test_grace_preemption import live_plane
from .test_telemetry_store import CONFIG, _all_gpus, _idle_job, _placed


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    for eng in _pg_engine():
        upgrade(eng)
        yield eng


def deadlock() -> OperationalError:
    """What SQLAlchemy raises when PostgreSQL breaks a deadlock by aborting this side."""
    return OperationalError("UPDATE jobs ...", {}, psycopg.errors.DeadlockDetected("deadlock"))


def serialization_failure() -> OperationalError:
    orig = psycopg.errors.SerializationFailure("could not serialize access")
    return OperationalError("UPDATE jobs ...", {}, orig)


def count(engine_or_plane: Engine | Plane, what: Any, *where: Any) -> int:
    maker = (
        engine_or_plane.sessions
        if isinstance(engine_or_plane, Plane)
        else sessions(engine_or_plane)
    )
    with maker() as s:
        return int(s.scalar(select(func.count()).select_from(what).where(*where)) or 0)


# -- a real deadlock in the cycle's flush (PostgreSQL) --------------------------------------


class OppositeOrder:
    """Another writer, an admin raising jobs b and then a to "production" in one transaction:
    the order opposite to the cycle's flush, which writes a, then b (by primary key). The
    writer takes b, then the cycle's flush, just before it writes b (holding a), lets the
    writer ask for a and waits until it waits: each side then waits for the other. The
    writer waits a minute before it looks for a deadlock, so the cycle, which waits a
    second, is the side PostgreSQL aborts; the cycle's retry starts once the writer has
    committed, so it reads the writer's change (the order of the test, not of the code)."""

    def __init__(self, engine: Engine, a: int, b: int, now_s: float) -> None:
        self.engine, self.a, self.b, self.now_s = engine, a, b, now_s
        self.main = threading.current_thread()
        self.holds_b, self.go = threading.Event(), threading.Event()
        self.failed: list[BaseException] = []
        self.fired: list[str] = []
        self.thread = threading.Thread(target=self.writer)

    def writer(self) -> None:
        try:
            with sessions(self.engine).begin() as s:
                s.execute(text("SET LOCAL deadlock_timeout = '60s'"))
                jobs.set_priority(s, admin.cli_principal(), self.b, "production", self.now_s)
                self.holds_b.set()
                assert self.go.wait(30)
                jobs.set_priority(s, admin.cli_principal(), self.a, "production", self.now_s)
        except BaseException as exc:  # reported by the test's thread
            self.failed.append(exc)
            self.holds_b.set()

    def waiting_on_a_lock(self) -> bool:
        with self.engine.connect() as conn:  # its statements are not the cycle's: `before`
            query = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
            return bool(conn.execute(text(query)).scalar())

    def before(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if threading.current_thread() is not self.main or statement.startswith("SELECT count"):
            return
        if self.fired == ["deadlock"]:  # the retry's first statement
            self.fired.append("retry")
            self.thread.join(30)
        is_b = isinstance(params, dict) and params.get("jobs_id") == self.b
        if self.fired or not (statement.startswith("UPDATE jobs SET") and is_b):
            return
        self.fired.append("deadlock")
        self.go.set()
        deadline = time.monotonic() + 30
        while not self.waiting_on_a_lock():
            assert time.monotonic() < deadline, "the writer never waited for job a"
            time.sleep(0.01)

    def __enter__(self) -> Self:
        self.thread.start()
        assert self.holds_b.wait(30)
        event.listen(self.engine, "before_cursor_execute", self.before)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self.before)
        self.go.set()
        self.thread.join(30)


def test_a_deadlock_in_the_cycles_flush_is_retried_and_places_each_job_once(
    pg_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    live = live_plane(pg_engine)
    a = live.submit("research", "a", gpus=4)
    b = live.submit("research", "b", gpus=4)
    assert a < b
    with (
        OppositeOrder(pg_engine, a, b, live.clock()) as race,
        caplog.at_level(logging.INFO, logger="gpufleet.control.periodic"),
    ):
        live.cycle()  # old code: OperationalError (DeadlockDetected) out of the cycle
    assert not race.failed, race.failed
    assert race.fired == ["deadlock", "retry"]
    assert "cycle 1, decide: a deadlock" in caplog.text
    assert "try 2 of 3" in caplog.text
    assert "try 3 of 3" not in caplog.text  # the retry read the writer's commit and won
    rows = live.rows()
    for job_id in (a, b):
        row = rows[job_id]
        # the writer's change stands (version 1), and the placement made over it (2)
        assert (row.state, row.attempt, row.priority_class) == ("starting", 1, "production")
        assert row.version == 2
        assert count(pg_engine, Allocation, Allocation.job_id == job_id) == 4
        for kind in ("starting", "priority"):
            assert count(pg_engine, JobEvent, JobEvent.job_id == job_id, JobEvent.kind == kind) == 1


# -- the reconciler's observe step: the polled events are recorded once ---------------------


def failing(real: Callable[..., Any], errors: list[Callable[[], Exception]]) -> Callable[..., Any]:
    """`real`, done, and then one of `errors` raised, while any are left: the try's writes
    are in its transaction when it aborts."""

    def call(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if errors:
            raise errors.pop(0)()
        return out

    return call


def ran_to_its_end(plane: Plane) -> int:
    """A job run to the cycle before the one that observes its exit (600 s)."""
    j = int(submit(plane, "vision-member", name="r", gpus=2, runtime_estimate_s=600)["id"])
    plane.cycle()
    plane.cycle(1)
    assert job(plane, "vision-member", j)["state"] == "running"
    plane.clock.advance(700)
    return j


def ended_once(plane: Plane, j: int) -> None:
    got = job(plane, "vision-member", j)
    assert got["state"] == "succeeded"
    kinds = [e["kind"] for e in got["events"]]
    assert kinds.count("succeeded") == 1, kinds
    assert count(plane, UsageEntry, UsageEntry.job_id == j) == 1  # billed once
    assert count(plane, Allocation, Allocation.job_id == j, Allocation.released_s.is_(None)) == 0


def test_a_deadlock_while_observing_is_retried_and_records_the_exit_once(
    plane: Plane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    j = ran_to_its_end(plane)
    errors: list[Callable[[], Exception]] = [deadlock, serialization_failure]
    monkeypatch.setattr(Reconciler, "_node_failures", failing(Reconciler._node_failures, errors))
    with caplog.at_level(logging.INFO, logger="gpufleet.control.periodic"):
        report = plane.reconciler.cycle()  # old code: OperationalError
    assert not errors
    assert report.finished == [j]
    assert "observe: a deadlock" in caplog.text
    assert "observe: a serialization failure" in caplog.text
    ended_once(plane, j)


def test_a_cycle_that_deadlocks_on_every_try_gives_up_and_the_next_records_the_exit(
    plane: Plane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    j = ran_to_its_end(plane)
    errors: list[Callable[[], Exception]] = [deadlock] * periodic.TRIES
    real = Reconciler._node_failures
    monkeypatch.setattr(Reconciler, "_node_failures", failing(real, errors))
    with caplog.at_level(logging.WARNING, logger="gpufleet.control.reconciler"):
        plane.reconciler.cycle()  # does not raise
    assert not errors
    assert "gave up" in caplog.text
    assert "a deadlock on each of 3 tries" in caplog.text
    assert job(plane, "vision-member", j)["state"] == "running"  # nothing written
    monkeypatch.setattr(Reconciler, "_node_failures", real)
    plane.cycle()
    ended_once(plane, j)


# -- the telemetry round: a piece is written again, once -------------------------------------


@pytest.mark.parametrize("policy", ["notify", "reclaim"])
def test_a_telemetry_piece_that_deadlocks_is_written_again_once(
    plane: Plane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, policy: str
) -> None:
    """The round that flags the job idle (or reclaims it): its second piece of raw rows and
    its meters' piece each abort once, after writing; each is written again, once."""
    j = _idle_job(plane, policy)
    gpu = _placed(plane, j)[0]
    rounds = 40  # 600 s at 15 s: the last round flags it

    def read(commit_every: int = 5) -> ts.IngestReport:
        plane.cycle(15)
        with plane.sessions() as s:
            return ts.ingest(
                s, _all_gpus(plane, {gpu: 1.0}), plane.clock(), CONFIG, commit_every=commit_every
            )

    for _ in range(rounds - 1):
        assert not read().notices
    team_rows = count(plane, GpuTeamSample) // (rounds - 1)
    calls: list[int] = []
    real = ts._write_samples

    def samples(*args: Any) -> None:
        calls.append(1)
        real(*args)
        if len(calls) == 2:  # the second piece, once
            raise deadlock()

    monkeypatch.setattr(ts, "_write_samples", samples)
    meters_errors: list[Callable[[], Exception]] = [serialization_failure]
    monkeypatch.setattr(ts, "_write_meters", failing(ts._write_meters, meters_errors))
    with caplog.at_level(logging.INFO, logger="gpufleet.control.periodic"):
        report = read()  # old code: OperationalError, the round's rest unwritten
    assert not meters_errors
    assert len(calls) == 5  # 16 GPUs in pieces of 5: four pieces, the second twice
    assert "telemetry round, one piece: a deadlock" in caplog.text
    assert "telemetry round, one piece: a serialization failure" in caplog.text
    assert [(n.job_id, n.reclaimed) for n in report.notices] == [(j, policy == "reclaim")]
    assert count(plane, GpuSample) == rounds * 16
    assert count(plane, GpuSample, GpuSample.time_s == plane.clock()) == 16
    assert count(plane, GpuTeamSample) == rounds * team_rows
    with plane.sessions() as s:
        meter = s.get(JobUtilization, j)
        assert meter is not None
        # one GPU read every 15 s since its first reading: counted once per round
        assert meter.sampled_gpu_s == pytest.approx(rounds * CONFIG.interval_s)
        assert meter.idle_flagged_s == plane.clock()
        row = s.get(Job, j)
        assert row is not None
        assert row.state == ("stopping" if policy == "reclaim" else "running")
    kinds = [e["kind"] for e in job(plane, "vision-member", j)["events"]]
    assert kinds.count("idle" if policy == "notify" else "stopping") == 1, kinds


# -- the loops: a race lost on every try is a warning, and the loop goes on ----------------


class Body(periodic.Periodic):
    def __init__(self, raises: Exception) -> None:
        super().__init__("test")
        self.raises = raises

    def body(self) -> None:
        raise self.raises

    def interval_s(self) -> float:
        return 1.0


@pytest.mark.parametrize(
    ("raises", "said"),
    [
        (periodic.RaceLostError("telemetry round: a deadlock on each of 3 tries"), "gave up"),
        (serialization_failure(), "lost a race, a serialization failure"),
        (deadlock(), "lost a race, a deadlock"),
    ],
)
def test_a_loop_that_lost_a_race_warns_without_a_traceback(
    raises: Exception, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    loop = Body(raises)
    with caplog.at_level(logging.INFO, logger="gpufleet.control.periodic"):
        loop.call()
        loop.call()
    assert loop.errors == 2  # counted, and the loop goes on
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 2
    assert said in caplog.text
    assert all(r.exc_info is None for r in caplog.records)


def test_a_loop_that_fails_otherwise_still_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = Body(OperationalError("SELECT 1", {}, psycopg.errors.AdminShutdown("gone")))
    with caplog.at_level(logging.INFO, logger="gpufleet.control.periodic"):
        loop.call()
    assert loop.errors == 1
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert caplog.records[0].exc_info is not None
