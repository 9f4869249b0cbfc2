"""Optimistic concurrency on jobs: a write over a job that changed since it was read fails
(`Job.version` is SQLAlchemy's version counter) instead of overwriting the change.

PostgreSQL reads committed rows: the reconciler read job 32 as pending at the start of its
decide transaction, a cancel committed, and the reconciler's flush wrote "starting" and a
placement over "cancelled" (its UPDATE waited for the row's lock, then applied blindly): the
job's GPUs stayed allocated to a cancelled job. Every test here interleaves two writers
deterministically in one thread: the second runs, and commits, from inside the first's
transaction (through a patched function the first calls between its reads and its write)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm.exc import StaleDataError

from gpufleet.control import admin, jobs, lifecycle, queue_moves, reconciler
from gpufleet.control.db import sessions, upgrade
from gpufleet.control.models import Allocation, Job, JobEvent

from .conftest import Plane, _pg_engine
from .test_grace_preemption import Live, live_plane

H100 = "h100-sxm5-80gb"


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    """PostgreSQL only: there a reconciler's transaction keeps no other writer out until it
    writes the rows (on SQLite it begins with a write and holds the store's one write lock:
    a cancel run from inside it would wait for it, in the same thread, for ever)."""
    for eng in _pg_engine():
        upgrade(eng)
        yield eng


def held(engine: Engine, job_id: int) -> list[Allocation]:
    with sessions(engine)() as s:
        return list(
            s.scalars(
                select(Allocation).where(
                    Allocation.job_id == job_id, Allocation.released_s.is_(None)
                )
            )
        )


def events(engine: Engine, job_id: int, kind: str) -> int:
    with sessions(engine)() as s:
        return int(
            s.scalar(select(func.count()).where(JobEvent.job_id == job_id, JobEvent.kind == kind))
            or 0
        )


def cancel(live: Live, job_id: int) -> None:
    """The API's cancel (another session, committed)."""
    r = live.client.post(
        f"/api/v1/jobs/{job_id}/cancel",
        headers={"Authorization": f"Bearer {live.tokens['research']}"},
    )
    assert r.status_code == 200, r.text


def reprioritise(engine: Engine, job_id: int, to: str, now_s: float) -> None:
    with sessions(engine).begin() as s:
        jobs.set_priority(s, admin.cli_principal(), job_id, to, now_s)


def once(action: Any) -> Any:
    """A wrapper of `real` that runs `action` before its first call only."""

    def wrap(real: Any) -> Any:
        done: list[bool] = []

        def racing(*args: Any, **kw: Any) -> Any:
            if not done:
                done.append(True)
                action()
            return real(*args, **kw)

        return racing

    return wrap


# -- two sessions, the ORM alone (both stores) ----------------------------------------------


def test_a_write_over_a_job_cancelled_since_it_was_read_fails(engine: Engine) -> None:
    live = live_plane(engine)
    job_id = live.submit("research", "j", gpus=4)
    a = sessions(engine)()  # reconciler-like: reads, decides, writes
    try:
        job = a.get(Job, job_id)
        assert job is not None
        assert job.state == "pending"
        cancel(live, job_id)  # session B commits between A's read and A's write
        job.placement = [{"node": "h1", "gpus": [0, 1, 2, 3]}]
        lifecycle.move(a, job, "starting", live.clock(), "placed")
        with pytest.raises(StaleDataError):
            a.commit()
        a.rollback()
    finally:
        a.close()
    row = live.rows()[job_id]
    assert row.state == "cancelled"
    assert row.placement == []


def test_a_priority_change_read_before_a_placement_still_reaches_the_scheduler(
    engine: Engine,
) -> None:
    """The API read the job pending, the scheduler placed it (version + 1), then the change
    was written: it must move the version past the placement's, or the scheduler's view of
    the job, cached by (id, version), keeps the old class (and the old preemptibility)."""
    live = live_plane(engine)
    job_id = live.submit("research", "j", gpus=4)
    stale = sessions(engine)()
    try:
        seen = stale.get(Job, job_id)
        assert seen is not None
        assert seen.state == "pending"
        live.cycle()  # the scheduler places it (another session, committed)
        placed = live.rows()[job_id]
        assert placed.state == "starting"
        jobs.set_priority(stale, admin.cli_principal(), job_id, "production", live.clock())
        stale.commit()
    finally:
        stale.close()
    row = live.rows()[job_id]
    assert (row.state, row.attempt, row.placement) == ("starting", 1, placed.placement)
    assert (row.priority_class, row.preemptible) == ("production", False)
    assert row.version > placed.version


# -- the reconciler racing the API (PostgreSQL) ---------------------------------------------


def test_a_cancel_between_the_cycles_reads_and_its_commit_wins(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = live_plane(pg_engine)
    job_id = live.submit("research", "j", gpus=4)
    monkeypatch.setattr(reconciler, "decide", once(lambda: cancel(live, job_id))(reconciler.decide))
    live.cycle()  # decides on "pending"; the cancel commits before its own commit
    row = live.rows()[job_id]
    assert row.state == "cancelled"
    assert row.placement == []
    assert not held(pg_engine, job_id)
    for _ in range(3):
        live.cycle()
    assert live.rows()[job_id].state == "cancelled"
    assert not held(pg_engine, job_id)


def test_a_cancel_between_the_commits_read_and_its_flush_is_not_written_over(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The narrowest window: the cycle has loaded the jobs it places, the cancel commits,
    the cycle's flush follows. The other job placed in that cycle is placed once (the try
    that lost is rolled back whole, the retry writes it again)."""
    live = live_plane(pg_engine)
    job_id = live.submit("research", "j", gpus=4)
    other = live.submit("research", "other", gpus=2)
    monkeypatch.setattr(
        reconciler,
        "placement_spec",
        once(lambda: cancel(live, job_id))(reconciler.placement_spec),
    )
    live.cycle()
    rows = live.rows()
    assert rows[job_id].state == "cancelled"
    assert rows[job_id].placement == []
    assert not held(pg_engine, job_id)
    assert events(pg_engine, job_id, "starting") == 0
    assert (rows[other].state, rows[other].attempt) == ("starting", 1)
    assert len(held(pg_engine, other)) == 2
    assert events(pg_engine, other, "starting") == 1
    for _ in range(4):
        live.cycle()
    rows = live.rows()
    assert rows[job_id].state == "cancelled"
    assert not held(pg_engine, job_id)
    assert rows[other].state == "running"


def test_a_priority_change_during_the_cycles_flush_reaches_the_scheduler(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = live_plane(pg_engine)
    job_id = live.submit("research", "j", gpus=4)
    monkeypatch.setattr(
        reconciler,
        "placement_spec",
        once(lambda: reprioritise(pg_engine, job_id, "production", live.clock()))(
            reconciler.placement_spec
        ),
    )
    live.cycle()
    row = live.rows()[job_id]
    assert (row.state, row.attempt, row.priority_class) == ("starting", 1, "production")
    assert len(held(pg_engine, job_id)) == 4
    # submitted (0), reprioritised (1), placed on the retry (2): the placement did not reuse
    # the version the change had, so the scheduler's cached view of the job is refreshed
    assert row.version == 2
    assert events(pg_engine, job_id, "starting") == 1


def test_a_cycle_that_keeps_losing_gives_up_writes_nothing_and_the_next_one_places(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    live = live_plane(pg_engine)
    job_id = live.submit("research", "j", gpus=4)
    classes = itertools.cycle(["opportunistic", "standard"])
    real = reconciler.decide
    tries: list[int] = []

    def racing(*args: Any, **kw: Any) -> Any:
        tries.append(1)
        reprioritise(pg_engine, job_id, next(classes), live.clock())
        return real(*args, **kw)

    monkeypatch.setattr(reconciler, "decide", racing)
    live.clock.advance(10)
    with caplog.at_level(logging.INFO, logger="gpufleet.control.reconciler"):
        report = live.reconciler.cycle()  # does not raise
    assert len(tries) == reconciler.STALE_TRIES
    assert report.admitted == []
    assert "gave up" in caplog.text
    row = live.rows()[job_id]
    assert (row.state, row.attempt, row.placement) == ("pending", 0, [])
    assert not held(pg_engine, job_id)
    assert events(pg_engine, job_id, "starting") == 0
    monkeypatch.setattr(reconciler, "decide", real)
    live.cycle()
    assert live.rows()[job_id].state == "starting"
    assert len(held(pg_engine, job_id)) == 4


# -- the API's answer when a job changed under a request (SQLite) ---------------------------


def test_a_move_over_a_job_changed_since_it_was_read_is_a_409(
    lite: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite takes no row locks: the move reads its class's queue, a cancel commits, the
    move's write fails on the version and the caller is told to reload (not a 500, not a
    write over the cancel)."""
    hog = {"name": "hog", "gpus": 8, "workers": 2, "accelerator": H100, "preemptible": False}
    r = lite.client.post("/api/v1/jobs", json=hog, headers=lite.auth("vision-member"))
    assert r.status_code == 201, r.text
    lite.cycle()
    ids = []
    for name in "ab":
        body = {"name": name, "gpus": 8, "accelerator": H100}
        r = lite.client.post("/api/v1/jobs", json=body, headers=lite.auth("vision-member"))
        assert r.status_code == 201, r.text
        ids.append(int(r.json()["id"]))
    a, b = ids

    def cancel_a() -> None:
        with lite.sessions.begin() as s:
            jobs.cancel(s, admin.cli_principal(), a, lite.clock())

    monkeypatch.setattr(queue_moves, "ordered_places", once(cancel_a)(queue_moves.ordered_places))
    r = lite.client.post(
        f"/api/v1/jobs/{b}/move", json={"to": "top"}, headers=lite.auth("vision-lead")
    )
    assert r.status_code == 409, r.text
    assert r.json()["detail"] == (
        f"the waiting jobs of job {b}'s class changed while you acted; reload and retry"
    )
    with lite.sessions() as s:
        row = s.get(Job, a)
        assert row is not None
        assert row.state == "cancelled"
        assert row.queue_order_s is None
