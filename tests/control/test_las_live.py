"""Issue 29: Tiresias runs in the live service too (the same `decide()`): a job that has had
little GPU time evicts one that has had a lot, its own team's included, and the victim's
events say why."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Engine, select

from gpufleet.control.db import sessions
from gpufleet.control.models import JobEvent

from .test_grace_preemption import live_plane


def test_a_newcomer_evicts_a_long_runner_under_tiresias(sqlite_engine: Engine) -> None:
    live = live_plane(sqlite_engine)
    live.reconciler.config = replace(live.reconciler.config, profile="tiresias")
    long_run = live.submit("research", "long", gpus=8, workers=4)  # the whole cluster
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
