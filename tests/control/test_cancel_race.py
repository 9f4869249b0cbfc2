"""A cancel decides on the job's state as the store has it at the write, not as it was read.

The kill -9 test once ended with three 2 x 8-GPU gangs pending for ever on an empty cluster:
a cancel had read job 32 as pending (event "cancelled", attempt 0) while the scheduler
placed it ("starting", attempt 1), and wrote "cancelled" over "starting". Its 4 GPUs stayed
allocated to a cancelled job, and no gang of the whole cluster could start again."""

from __future__ import annotations

from sqlalchemy import Engine, select

from gpufleet.control import admin, jobs
from gpufleet.control.db import sessions
from gpufleet.control.models import Allocation, Job

from .test_grace_preemption import live_plane


def test_a_cancel_read_while_pending_stops_the_job_the_scheduler_just_placed(
    sqlite_engine: Engine,
) -> None:
    live = live_plane(sqlite_engine)
    job_id = live.submit("research", "j", gpus=4)
    stale = sessions(sqlite_engine)()
    try:
        seen = stale.get(Job, job_id)  # held: the session's identity map keeps what it read
        assert seen is not None
        assert seen.state == "pending"
        live.cycle()  # the scheduler places it (another session, committed)
        assert live.rows()[job_id].state == "starting"
        jobs.cancel(stale, admin.cli_principal(), job_id, live.clock())
        stale.commit()
    finally:
        stale.close()
    row = live.rows()[job_id]
    assert row.state == "stopping"  # its process is stopped and its GPUs come back
    assert row.stop_for == "cancel"
    with sessions(sqlite_engine)() as s:
        held = s.scalars(
            select(Allocation).where(Allocation.job_id == job_id, Allocation.released_s.is_(None))
        ).all()
    assert held  # released when it has stopped, not left to a cancelled job
    for _ in range(40):  # the stop and its grace period pass
        live.clock.advance(5)
        live.cycle()
    assert live.rows()[job_id].state == "cancelled"
    with sessions(sqlite_engine)() as s:
        assert not s.scalars(
            select(Allocation).where(Allocation.job_id == job_id, Allocation.released_s.is_(None))
        ).all()
