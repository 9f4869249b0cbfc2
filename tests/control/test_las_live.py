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
