"""Fixtures for the control plane: a store on SQLite or PostgreSQL, a small cluster, a clock.

PostgreSQL tests create their own database on the server at 127.0.0.1:5432 (present on
the development and CI machines) and drop it afterwards; where no server answers they
are skipped with the reason, never silently passed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.api.context import AppContext, RateLimiter
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.executors.base import Executor
from gpufleet.control.executors.emulated import EmulatedExecutor
from gpufleet.control.reconciler import Reconciler, ReconcilerConfig
from gpufleet.control.server import sync_nodes
from gpufleet.server.app import create_app
from gpufleet.specs.cluster import ClusterSpec

PG_ADMIN_URL = os.environ.get(
    "GPUFLEET_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)

CLUSTER = {
    "kind": "cluster",
    "name": "lab",
    "topology_levels": ["block", "leaf", "node"],
    "nodes": [
        {
            "name": "h100",
            "count": 2,
            "accelerator": "h100-sxm5-80gb",
            "gpus_per_node": 8,
            "topology": {"block": "b1", "leaf": "l1"},
        },
        {
            "name": "a100",
            "count": 1,
            "accelerator": "a100-sxm4-80gb",
            "gpus_per_node": 8,
            "topology": {"block": "b2", "leaf": "l2"},
            "mig_layout": "all-balanced",
        },
    ],
}


class Clock:
    """A manual clock: tests move time, nothing sleeps."""

    def __init__(self, start_s: float = 1_780_000_000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


def _pg_engine() -> Iterator[Engine]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    name = f"gpufleet_test_{uuid.uuid4().hex[:12]}"
    root = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with root.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        root.dispose()
        pytest.skip(f"no PostgreSQL server at {PG_ADMIN_URL}: {exc.orig}")
    engine = make_engine(PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name)
    try:
        yield engine
    finally:
        engine.dispose()
        with root.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        root.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Engine]:
    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{tmp_path}/gpufleet.db")
        upgrade(eng)
        yield eng
        eng.dispose()
    else:
        for eng in _pg_engine():
            upgrade(eng)
            yield eng


@pytest.fixture
def sqlite_engine(tmp_path: object) -> Iterator[Engine]:
    eng = make_engine(f"sqlite:///{tmp_path}/gpufleet.db")
    upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def cluster() -> Cluster:
    return Cluster.from_spec(ClusterSpec.model_validate(CLUSTER))


@dataclass
class Plane:
    """A whole control plane in one test: store, API client, reconciler, executor, clock."""

    sessions: sessionmaker[Session]
    client: TestClient
    reconciler: Reconciler
    executor: Executor
    clock: Clock
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def cycle(self, advance_s: float = 0.0) -> None:
        self.clock.advance(advance_s)
        self.reconciler.cycle()


def build_plane(
    engine: Engine,
    cluster: Cluster,
    *,
    grace_s: float = 30.0,
    profile: str = "default",
    executor: Executor | None = None,
) -> Plane:
    clock = Clock()
    maker = sessions(engine)
    tokens: dict[str, str] = {}
    with maker.begin() as s:
        tokens["admin"] = admin.init(s, clock()).token
        actor = admin.cli_principal()
        for team in ("vision", "nlp"):
            # leads and members may use every class here (the cap is tested on its own)
            admin.create_team(
                s,
                actor,
                team,
                clock(),
                cohort="ml",
                projects=["p1", "p2"],
                max_priority_class="production",
            )
            s.flush()
            admin.set_quota(s, actor, team, "h100-sxm5-80gb", clock(), guaranteed_gpus=8)
            admin.set_quota(s, actor, team, "a100-sxm4-80gb", clock(), guaranteed_gpus=4)
        for team in ("vision", "nlp"):
            for role in ("lead", "member", "viewer"):
                issued = admin.create_token(
                    s, actor, clock(), role=role, team=team, user=f"{team}-{role}", expires_s=None
                )
                tokens[f"{team}-{role}"] = issued.token
    executor = executor or EmulatedExecutor(speed=1.0, clock=clock)
    sync_nodes(maker, cluster, clock(), None)
    reconciler = Reconciler(
        maker,
        cluster,
        executor,
        ReconcilerConfig(profile=profile, grace_s=grace_s, holder="t"),
        clock=clock,
    )
    ctx = AppContext(
        maker,
        cluster,
        clock=clock,
        executor=executor,
        limiter=RateLimiter(rate_per_s=1e6, burst=1e6),
        profile=profile,
        leader=lambda: reconciler.leading,
    )
    return Plane(maker, TestClient(create_app(ctx)), reconciler, executor, clock, tokens)


@pytest.fixture
def plane(engine: Engine, cluster: Cluster) -> Plane:
    return build_plane(engine, cluster)


@pytest.fixture
def lite(sqlite_engine: Engine, cluster: Cluster) -> Plane:
    """The plane on SQLite only, for tests about logic rather than the store."""
    return build_plane(sqlite_engine, cluster)
