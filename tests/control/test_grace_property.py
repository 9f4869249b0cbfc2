"""Issue 24's property: over random event sequences in which jobs take a while to start and
victims take their grace period (0 to several cycles), the live scheduler never

- admits a job by reclaim beyond its team's guarantee (the team's committed GPUs before the
  cycle plus the preemptor's stay within it),
- preempts a job that preempted another before it started,
- bills a GPU-second to an attempt the engine never ran,
- leaves the ledger out of balance with the allocations, or double-books a device.

`make test` runs a few dozen sequences; GPUFLEET_GRACE_EXAMPLES=2000 runs the long check
(docs/benchmarks.md records its last run)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control import admin, jobs
from gpufleet.control.auth import Principal
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.ledger import balance_problems, double_allocations
from gpufleet.control.lifecycle import PREEMPTED_AUDIT
from gpufleet.control.models import AuditEntry, Job, Team, UsageEntry
from gpufleet.control.reconciler import Reconciler, ReconcilerConfig
from gpufleet.control.server import sync_nodes
from gpufleet.errors import UserError

from .conftest import Clock
from .grace_executor import GraceExecutor
from .test_grace_preemption import CYCLE_S, H100, four_nodes

EXAMPLES = int(os.environ.get("GPUFLEET_GRACE_EXAMPLES", "40"))
TEAMS = ("research", "prod", "infer")
CYCLES = 14


@dataclass(frozen=True)
class Submit:
    cycle: int
    team: int
    gpus: int
    workers: int
    priority: str
    runtime_cycles: int


@dataclass(frozen=True)
class Scenario:
    guaranteed: tuple[int, ...]  # per team, summing to at most the cluster's 32
    borrowing: tuple[int | None, ...]
    start_cycles: int  # how long the engine takes to start an attempt
    term_cycles: int | None  # how long a job takes to exit after SIGTERM (None: the kill)
    grace_cycles: int
    submits: tuple[Submit, ...]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    split = sorted(draw(st.lists(st.integers(0, 32), min_size=2, max_size=2)))
    guaranteed = (split[0], split[1] - split[0], 32 - split[1])
    borrowing = tuple(draw(st.sampled_from([None, 0, 8, 16])) for _ in TEAMS)
    submit = st.builds(
        Submit,
        cycle=st.integers(0, CYCLES - 4),
        team=st.integers(0, len(TEAMS) - 1),
        gpus=st.sampled_from([1, 2, 4, 8]),
        workers=st.sampled_from([1, 1, 1, 2]),
        priority=st.sampled_from(["standard", "standard", "production", "opportunistic"]),
        runtime_cycles=st.integers(1, 12),
    ).filter(lambda s: s.workers == 1 or s.gpus == 8)
    return Scenario(
        guaranteed,
        borrowing,
        draw(st.integers(0, 2)),
        draw(st.sampled_from([None, 0, 1, 3])),
        draw(st.integers(0, 4)),
        tuple(draw(st.lists(submit, min_size=1, max_size=12))),
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated empty store, copied for each sequence (migrating costs more than a run)."""
    path = tmp_path_factory.mktemp("grace") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture
def stores(tmp_path: Path, template: Path) -> Iterator[Iterator[str]]:
    def fresh() -> Iterator[str]:
        n = 0
        while True:
            n += 1
            path = tmp_path / f"run{n}.db"
            shutil.copy(template, path)
            yield f"sqlite:///{path}"

    return fresh()


def _run(url: str, sc: Scenario) -> None:
    clock = Clock()
    cluster: Cluster = four_nodes()
    engine = make_engine(url)
    try:
        maker = sessions(engine)
        members: list[Principal] = []
        with maker.begin() as s:
            admin.init(s, clock())
            actor = admin.cli_principal()
            for i, team in enumerate(TEAMS):
                admin.create_team(
                    s, actor, team, clock(), cohort="ml", max_priority_class="production"
                )
                s.flush()
                admin.set_quota(
                    s,
                    actor,
                    team,
                    H100,
                    clock(),
                    guaranteed_gpus=sc.guaranteed[i],
                    borrowing_limit_gpus=sc.borrowing[i],
                )
            ids = {t.name: t.id for t in s.scalars(select(Team))}
            members = [
                Principal(user=f"{t}-u", role="member", team_id=ids[t], team=t, token_id=0)
                for t in TEAMS
            ]
        executor = GraceExecutor(
            clock,
            start_s=sc.start_cycles * CYCLE_S,
            term_s=None if sc.term_cycles is None else sc.term_cycles * CYCLE_S,
        )
        sync_nodes(maker, cluster, clock(), None)
        reconciler = Reconciler(
            maker,
            cluster,
            executor,
            ReconcilerConfig(grace_s=sc.grace_cycles * CYCLE_S, holder="p"),
            clock=clock,
        )
        for cycle in range(CYCLES):
            with maker.begin() as s:
                for n, sub in enumerate(sc.submits):
                    if sub.cycle == cycle:
                        request = jobs.JobRequest(
                            name=f"j{n}",
                            gpus=sub.gpus,
                            workers=sub.workers,
                            accelerator=H100,
                            priority_class=sub.priority,
                            runtime_estimate_s=sub.runtime_cycles * CYCLE_S,
                        )
                        # a job that can never run under these quotas is refused at submit
                        with contextlib.suppress(UserError):
                            jobs.submit(s, members[sub.team], request, cluster, clock())
            before = _committed(maker)
            clock.advance(CYCLE_S)
            report = reconciler.cycle()
            _check_reclaims(maker, sc, before, set(report.admitted), clock())
        _check_ledger(maker, executor)
    finally:
        engine.dispose()


def _committed(maker: sessionmaker[Session]) -> dict[str, int]:
    out = dict.fromkeys(TEAMS, 0)
    with maker() as s:
        rows = s.execute(
            select(Team.name, Job.request)
            .join(Team, Team.id == Job.team_id)
            .where(Job.state.in_(("admitted", "starting", "running")))
        )
        for team, request in rows:
            out[team] += request["gpus"] * request["workers"]
    return out


def _check_reclaims(
    maker: sessionmaker[Session],
    sc: Scenario,
    before: dict[str, int],
    admitted: set[int],
    now_s: float,
) -> None:
    with maker() as s:
        entries = s.scalars(
            select(AuditEntry).where(AuditEntry.action == PREEMPTED_AUDIT, AuditEntry.at_s == now_s)
        ).all()
        for entry in entries:
            victim = s.get(Job, int(entry.target.split("/")[1]))
            assert victim is not None
            preemptor_id = entry.detail.get("preemptor")
            # never stopped before it started, so never before it ran what it preempted for
            assert victim.started_s is not None, entry.detail
            if preemptor_id is None or "reclaims its guaranteed" not in entry.detail["message"]:
                continue
            preemptor = s.get(Job, preemptor_id)
            assert preemptor is not None
            assert preemptor.id in admitted
            team = entry.detail["preemptor_team"]
            size = preemptor.request["gpus"] * preemptor.request["workers"]
            assert before[team] + size <= sc.guaranteed[TEAMS.index(team)], (
                f"{team} reclaimed to {before[team] + size} of {sc.guaranteed}",
                entry.detail["message"],
            )


def _check_ledger(maker: sessionmaker[Session], executor: GraceExecutor) -> None:
    with maker() as s:
        assert not balance_problems(s)
        assert not double_allocations(s)
        billed = {(u.job_id, u.attempt) for u in s.scalars(select(UsageEntry))}
    ran = {(k.job_id, k.attempt) for k in executor.ran}
    assert billed <= ran, f"billed but never ran on the engine: {sorted(billed - ran)}"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sc=scenarios())
def test_grace_periods_never_cause_thrash_or_unearned_bills(
    stores: Iterator[str], sc: Scenario
) -> None:
    _run(next(stores), sc)
