"""Smoke test of the control-plane benchmark code (`benchmarks.control_plane`) at toy sizes:
the seeder writes a consistent store, the reconciler timing runs, and the open-loop load
generator measures a real server. The numbers themselves are checked by `make bench`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from benchmarks import control_plane as bench
from sqlalchemy import func, select

from gpufleet.control.auth import authenticate
from gpufleet.control.db import make_engine, sessions
from gpufleet.control.models import Allocation, Job, JobEvent, QueueSnapshot

SMALL = bench.SeedConfig(jobs=400, pending=40, nodes=16, teams=2, tokens_per_team=2)


def test_seeded_store_is_consistent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    seeded = bench.seed_store(url, SMALL)
    assert seeded.states["pending"] >= SMALL.pending
    assert {"succeeded", "running", "pending"} <= set(seeded.states)
    assert sum(seeded.states.values()) == SMALL.jobs
    engine = make_engine(url)
    try:
        with sessions(engine)() as s:
            live = s.scalars(select(Allocation).where(Allocation.released_s.is_(None))).all()
            assert len({a.device for a in live}) == len(live) == seeded.allocations
            assert len(live) <= SMALL.nodes * bench.GPUS_PER_NODE
            by_job = Counter(a.job_id for a in live)
            for job in s.scalars(select(Job).where(Job.state == "running")):
                placed = sum(len(p["gpus"]) for p in job.placement)
                assert by_job[job.id] == placed == job.request["gpus"] * job.request["workers"]
            events = s.scalar(select(func.count()).select_from(JobEvent))
            assert events == seeded.events > SMALL.jobs
            for team_id, tokens in seeded.tokens.items():
                assert [authenticate(s, t, 0.0).team_id for t in tokens] == [team_id] * 2
        reports = bench.settle(url, SMALL.nodes)
        with sessions(engine)() as s:
            snapshot = s.get(QueueSnapshot, "main")
            assert snapshot is not None
            assert snapshot.order["jobs"]
    finally:
        engine.dispose()
    assert reports[0].running > 0
    assert reports[-1].pending > 0
    bench.load_targets(seeded)
    pending = {job_id for job_id, _ in seeded.pending}
    targets = bench.request_targets(seeded, size=200)
    assert sum(job_id in pending for job_id, _ in targets) > 50
    team_of = dict(seeded.jobs)
    assert all(token in seeded.tokens[team_of[job_id]] for job_id, token in targets)


def test_reconciler_cycle_times_burst_and_steady_cycles(tmp_path: Path) -> None:
    result = bench.reconciler_cycle(
        f"sqlite:///{tmp_path / 'b.db'}", nodes=16, pending=30, jobs=300, steady=2
    )
    assert result.pending >= 30
    assert result.running > 0
    assert len(result.steady_s) == 2
    assert result.burst_s > 0
    assert result.observe_s > 0
    assert result.ok == (result.steady_median_s < bench.CYCLE_TARGET_S)


def test_load_result_percentiles_and_windows() -> None:
    samples = [(i / 10, (i % 100 + 1) / 1000) for i in range(1000)]  # 1..100 ms, 100 s
    result = bench.LoadResult(10.0, 1000, 10.0, samples, Counter(), 0, 0)
    assert result.pct(50) == pytest.approx(0.050)
    assert result.pct(99) == pytest.approx(0.099)
    windows = result.windows(50.0)
    assert [w[:2] for w in windows] == [(0.0, 500), (50.0, 500)]
    assert not result.ok  # p99 99 ms > 50 ms
    fast = bench.LoadResult(10.0, 3, 10.0, [(0, 0.001)] * 3, Counter(), 0, 0)
    assert fast.ok
    assert not bench.LoadResult(10.0, 3, 10.0, [(0, 0.001)] * 3, Counter(x=1), 0, 0).ok


@pytest.mark.slow
def test_api_latency_against_a_real_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    seeded = bench.seed_store(url, SMALL)
    seeded.settle = bench.settle(url, SMALL.nodes)
    result = bench.api_latency(url, rate_per_s=20, duration_s=1.5, warmup_s=0.5, seeded=seeded)
    load = result.load
    assert load.sent == 30
    assert len(load.samples) == 30
    assert not load.errors, load.errors
    assert load.with_position > 0  # pending jobs answered with their queue position
    assert 0 < load.pct(50) <= load.pct(99) < 10
