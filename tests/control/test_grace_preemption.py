"""Live preemption when victims take their grace period (issue 24): an admitted preemptor
counts as its team's usage until it starts, a victim's GPUs count once (for the preemptor),
no job is preempted before it starts, and an attempt the engine never ran is not billed."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from gpufleet.api.context import AppContext, RateLimiter
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.db import sessions
from gpufleet.control.executors.base import Executor
from gpufleet.control.executors.local import LocalExecutor
from gpufleet.control.ledger import UNBILLED, balance_problems
from gpufleet.control.models import Job, JobEvent, Team, UsageEntry
from gpufleet.control.reconciler import Reconciler, ReconcilerConfig
from gpufleet.control.server import sync_nodes
from gpufleet.server.app import create_app
from gpufleet.specs.cluster import ClusterSpec

from .conftest import Clock
from .grace_executor import GraceExecutor

H100 = "h100-sxm5-80gb"
CYCLE_S = 10.0
GRACE_S = 30.0  # three cycles: the victim keeps its GPUs that long


def four_nodes() -> Cluster:
    return Cluster.from_spec(
        ClusterSpec.model_validate(
            {
                "kind": "cluster",
                "name": "four",
                "topology_levels": ["block", "leaf", "node"],
                "nodes": [
                    {
                        "name": "h",
                        "count": 4,
                        "accelerator": H100,
                        "gpus_per_node": 8,
                        "topology": {"block": "b", "leaf": "l"},
                    }
                ],
            }
        )
    )


@dataclass
class Live:
    """A control plane on the grace executor, with its cycle history."""

    client: TestClient
    reconciler: Reconciler
    executor: Executor
    clock: Clock
    tokens: dict[str, str]
    engine: Engine
    preempted: Counter[int] = field(default_factory=Counter)

    def submit(self, team: str, name: str, gpus: int, workers: int = 1, **kw: Any) -> int:
        body = {"name": name, "gpus": gpus, "workers": workers, "accelerator": H100,
                "command": kw.pop("command", ["train"]), **kw}  # fmt: skip
        r = self.client.post(
            "/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {self.tokens[team]}"}
        )
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def cycle(self) -> None:
        self.clock.advance(CYCLE_S)
        report = self.reconciler.cycle()
        self.preempted.update(report.preempted)

    def rows(self) -> dict[int, Job]:
        with sessions(self.engine)() as s:
            return {j.id: j for j in s.scalars(select(Job))}

    def committed(self, team: str) -> int:
        """GPUs the team's admitted, starting and running jobs hold or are promised."""
        with sessions(self.engine)() as s:
            team_id = s.scalar(select(Team.id).where(Team.name == team))
            jobs = s.scalars(
                select(Job).where(
                    Job.team_id == team_id, Job.state.in_(("admitted", "starting", "running"))
                )
            )
            return sum(j.request["gpus"] * j.request["workers"] for j in jobs)


def live_plane(engine: Engine, executor_of: Any = None) -> Live:
    """research: 16 guaranteed, may borrow 16; prod: 16 guaranteed, lends up to 16; one
    cohort; 4 x 8 H100 (the issue's scenario)."""
    clock = Clock()
    cluster = four_nodes()
    maker = sessions(engine)
    tokens: dict[str, str] = {}
    with maker.begin() as s:
        admin.init(s, clock())
        actor = admin.cli_principal()
        for team in ("research", "prod"):
            admin.create_team(s, actor, team, clock(), cohort="ml")
            s.flush()
        admin.set_quota(s, actor, "research", H100, clock(), guaranteed_gpus=16,
                        borrowing_limit_gpus=16)  # fmt: skip
        admin.set_quota(s, actor, "prod", H100, clock(), guaranteed_gpus=16,
                        lending_limit_gpus=16)  # fmt: skip
        for team in ("research", "prod"):
            tokens[team] = admin.create_token(
                s, actor, clock(), role="member", team=team, user=f"{team}-u", expires_s=None
            ).token
    executor = (executor_of or (lambda c: GraceExecutor(c, start_s=5.0)))(clock)
    sync_nodes(maker, cluster, clock(), None)
    reconciler = Reconciler(
        maker,
        cluster,
        executor,
        ReconcilerConfig(grace_s=GRACE_S, holder="t"),
        clock=clock,
    )
    ctx = AppContext(
        maker,
        cluster,
        clock=clock,
        executor=executor,
        limiter=RateLimiter(rate_per_s=1e6, burst=1e6),
        leader=lambda: reconciler.leading,
    )
    return Live(TestClient(create_app(ctx)), reconciler, executor, clock, tokens, engine)


def test_a_reclaim_waiting_for_its_victim_does_not_reclaim_again(engine: Engine) -> None:
    """The issue's thrash: prod's 8-GPU job reclaims research's 1-GPU job; while that victim
    takes its grace period, prod's 2x8 gang must not preempt research's 16-GPU gang to
    'reclaim its guaranteed 16' (prod would hold 24 of 16), and nothing is preempted twice."""
    live = live_plane(engine)
    gang = live.submit("research", "gang16", 8, workers=2, runtime_estimate_s=86_400)
    one = live.submit("research", "one", 1, runtime_estimate_s=86_400)
    gang8 = live.submit("research", "gang8", 4, workers=2, runtime_estimate_s=86_400)
    for _ in range(2):
        live.cycle()
    assert {live.rows()[j].state for j in (gang, one, gang8)} == {"running"}
    p8 = live.submit("prod", "p8", 8, runtime_estimate_s=3600)
    p16 = live.submit("prod", "p16", 8, workers=2, runtime_estimate_s=3600)
    seen_prod: list[int] = []
    for _ in range(12):
        live.cycle()
        seen_prod.append(live.committed("prod"))
    rows = live.rows()
    assert live.preempted[gang] == 0, "research's 16-GPU gang was preempted"
    assert max(live.preempted.values()) == 1, live.preempted
    assert live.preempted[one] == 1  # the one reclaim the guarantee justified
    assert max(seen_prod) <= 16, seen_prod  # prod's guarantee; research lends nothing
    assert rows[p8].state == "running"
    assert rows[p16].state == "pending"
    assert rows[gang].state == rows[gang8].state == "running"
    with sessions(engine)() as s:
        assert not balance_problems(s)


def test_an_attempt_the_engine_never_ran_is_not_billed(engine: Engine) -> None:
    """Cancelled while the engine was still starting it: its GPUs were held (allocation rows,
    released), but no GPU-second is billed, and the job's history says so."""
    live = live_plane(engine, lambda c: GraceExecutor(c, start_s=3600.0))  # slow to start
    j = live.submit("research", "slow", 8, runtime_estimate_s=600)
    live.cycle()
    live.cycle()
    assert live.rows()[j].state == "starting"
    r = live.client.post(
        f"/api/v1/jobs/{j}/cancel", headers={"Authorization": f"Bearer {live.tokens['research']}"}
    )
    assert r.status_code == 200, r.text
    for _ in range(5):
        live.cycle()
    job = live.rows()[j]
    assert job.state == "cancelled"
    assert job.attained_gpu_s == 0.0
    with sessions(engine)() as s:
        assert not s.scalars(select(UsageEntry).where(UsageEntry.job_id == j)).all()
        kinds = [e.kind for e in s.scalars(select(JobEvent).where(JobEvent.job_id == j))]
        assert UNBILLED in kinds
        assert not balance_problems(s)
    assert isinstance(live.executor, GraceExecutor)
    assert not live.executor.ran


def test_an_attempt_that_ran_is_billed_from_allocation_to_exit(engine: Engine) -> None:
    live = live_plane(engine, lambda c: GraceExecutor(c, start_s=5.0, term_s=12.0))
    j = live.submit("research", "ran", 8, runtime_estimate_s=600)
    for _ in range(3):
        live.cycle()
    assert live.rows()[j].state == "running"
    r = live.client.post(
        f"/api/v1/jobs/{j}/cancel", headers={"Authorization": f"Bearer {live.tokens['research']}"}
    )
    assert r.status_code == 200, r.text
    for _ in range(4):
        live.cycle()
    job = live.rows()[j]
    assert job.state == "cancelled"
    with sessions(engine)() as s:
        billed = sum(
            u.gpu_milli / 1000 * (u.end_s - u.start_s)
            for u in s.scalars(select(UsageEntry).where(UsageEntry.job_id == j))
        )
        assert not balance_problems(s)
    assert billed == job.attained_gpu_s > 0


def test_the_same_on_the_local_executor_with_real_processes(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    """The thrash scenario with real processes that take a second to exit on SIGTERM, on
    the real clock: one reclaim, research's gang untouched, prod's gang waits."""
    live = live_plane(sqlite_engine, lambda c: LocalExecutor(tmp_path / "runs"))
    slow = ["/bin/sh", "-c", "trap 'sleep 1; exit 143' TERM; while :; do sleep 0.1; done"]

    def cycles(n: int) -> None:
        for _ in range(n):
            live.clock.now_s = time.time()
            live.preempted.update(live.reconciler.cycle().preempted)
            time.sleep(0.2)

    try:
        gang = live.submit("research", "gang16", 8, workers=2, command=slow)
        one = live.submit("research", "one", 1, command=slow)
        gang8 = live.submit("research", "gang8", 4, workers=2, command=slow)
        for _ in range(50):
            cycles(1)
            if {live.rows()[j].state for j in (gang, one, gang8)} == {"running"}:
                break
        p8 = live.submit("prod", "p8", 8, command=slow)
        p16 = live.submit("prod", "p16", 8, workers=2, command=slow)
        for _ in range(50):
            cycles(1)
            if live.rows()[p8].state == "running":
                break
        cycles(5)
        rows = live.rows()
        assert rows[p8].state == "running"
        assert rows[p16].state == "pending"
        assert rows[gang].state == rows[gang8].state == "running"
        assert dict(live.preempted) == {one: 1}
    finally:
        for key in list(live.executor.active()):
            live.executor.stop(key)
