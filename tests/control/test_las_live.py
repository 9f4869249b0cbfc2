"""Issue 29: Tiresias runs in the live service too (the same `decide()`): a job that has had
little GPU time evicts one that has had a lot, its own team's included, and the victim's
events say why. Only a job that checkpoints is evicted: one that keeps nothing runs on."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Engine, select

from gpufleet.control.db import sessions
from gpufleet.control.models import JobEvent

from .test_grace_preemption import live_plane


def test_a_newcomer_evicts_a_long_runner_under_tiresias(sqlite_engine: Engine) -> None:
    live = live_plane(sqlite_engine)
    live.reconciler.config = replace(live.reconciler.config, profile="tiresias")
    # the whole cluster, saving its work every 10 minutes
    long_run = live.submit("research", "long", gpus=8, workers=4, checkpoint_interval_s=600)
    for _ in range(3):
        live.cycle()
    assert live.rows()[long_run].state == "running"
    live.clock.advance(2_000)  # 32 GPUs × 2,000 s: past the 16 GPU-hour threshold
    newcomer = live.submit("research", "new", gpus=8)
    live.cycle()
    rows = live.rows()
    assert rows[long_run].state == "stopping"
    assert rows[newcomer].state == "admitted"  # starts when the victim's GPUs are free
    assert live.preempted[long_run] == 1
    with sessions(sqlite_engine)() as s:
        messages = [
            e.message for e in s.scalars(select(JobEvent).where(JobEvent.job_id == long_run))
        ]
    # the same team: the full reason, with the preemptor and the attained service
    assert any("least attained service" in m for m in messages), messages


def test_a_long_runner_that_keeps_nothing_runs_on(sqlite_engine: Engine) -> None:
    live = live_plane(sqlite_engine)
    live.reconciler.config = replace(live.reconciler.config, profile="tiresias")
    long_run = live.submit("research", "long", gpus=8, workers=4)  # no checkpoints
    for _ in range(3):
        live.cycle()
    live.clock.advance(2_000)  # past the threshold, as above
    newcomer = live.submit("research", "new", gpus=8)
    live.cycle()
    rows = live.rows()
    assert (rows[long_run].state, rows[newcomer].state) == ("running", "pending")
    assert long_run not in live.preempted


def test_a_restarted_long_runner_counts_this_run_only(sqlite_engine: Engine) -> None:
    """Back on its GPUs after an eviction, the long runner sits in queue 0 again until this
    run crosses the threshold (`sched.las`), as the simulator counts it: with all its runs
    counted it would be evicted by the next newcomer at once, and a job promoted against
    starvation would be evicted as soon as it restarted."""
    live = live_plane(sqlite_engine)
    live.reconciler.config = replace(live.reconciler.config, profile="tiresias")
    long_run = live.submit("research", "long", gpus=8, workers=4, checkpoint_interval_s=600)
    for _ in range(3):
        live.cycle()
    live.clock.advance(2_000)
    first = live.submit("research", "first", gpus=8)
    for _ in range(6):  # the victim stops within its grace; the newcomer starts
        live.cycle()
    assert live.rows()[first].state == "running"
    r = live.client.post(
        f"/api/v1/jobs/{first}/cancel",
        headers={"Authorization": f"Bearer {live.tokens['research']}"},
    )
    assert r.status_code == 200, r.text
    for _ in range(6):
        live.cycle()
    rows = live.rows()
    assert rows[long_run].state == "running"
    assert rows[long_run].attained_gpu_s >= 57_600  # past the threshold over all its runs
    second = live.submit("research", "second", gpus=8)
    live.cycle()
    rows = live.rows()
    assert rows[long_run].state == "running", "evicted for service of an earlier run"
    assert rows[second].state == "pending"
    assert live.preempted[long_run] == 1
    live.clock.advance(2_000)  # this run crosses the threshold: evicted again
    live.cycle()
    assert live.rows()[long_run].state == "stopping"
