"""Fixtures for the Slurm tests: one real Slurm per test session, a control plane on it.

The cluster (`fake_slurm.FakeSlurm`: munge, slurmdbd, slurmctld, 4 slurmd x 8 GRES GPUs)
starts once per session (per xdist worker) under a temporary directory with ports of its
own, and is torn down at the end. Without Slurm's binaries the tests that need it are
skipped with the reason, unless ``GPUFLEET_REQUIRE_SLURM`` is set (CI sets it), where
they fail instead: a CI machine that lost its packages must not go green by skipping.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.db import make_engine, upgrade
from gpufleet.control.executors.slurm import SlurmExecutor, prepare
from gpufleet.control.executors.slurm_commands import SlurmOptions
from gpufleet.control.models import Job
from gpufleet.specs.cluster import ClusterSpec

from .fake_slurm import FakeSlurm, missing_binaries

# gpufleet's nodes n-0..n-3 are Slurm's n1..n4 (the executor maps the names)
CLUSTER = {
    "kind": "cluster",
    "name": "slurm",
    "topology_levels": ["block", "leaf", "node"],
    "nodes": [
        {
            "name": "n",
            "count": 4,
            "accelerator": "h100-sxm5-80gb",
            "gpus_per_node": 8,
            "topology": {"block": "b1", "leaf": "l1"},
        }
    ],
}
CYCLE_S = 0.3


def running_slurm(cluster: FakeSlurm) -> Iterator[FakeSlurm]:
    """Start `cluster`, yield it, stop it (also when the start fails); skip, or fail under
    GPUFLEET_REQUIRE_SLURM, where Slurm is not installed."""
    missing = missing_binaries()
    if missing:
        reason = f"Slurm is not installed here (missing {', '.join(missing)})"
        if os.environ.get("GPUFLEET_REQUIRE_SLURM"):
            pytest.fail(f"{reason}, and GPUFLEET_REQUIRE_SLURM is set", pytrace=False)
        pytest.skip(f"{reason}; .ci/run installs it (set GPUFLEET_REQUIRE_SLURM=1 to require)")
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeSlurm]:
    yield from running_slurm(FakeSlurm(tmp_path_factory.mktemp("slurm")))


@pytest.fixture
def cluster() -> Cluster:
    return Cluster.from_spec(ClusterSpec.model_validate(CLUSTER))


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    eng = make_engine(f"sqlite:///{tmp_path}/gpufleet.db")
    upgrade(eng)
    yield eng
    eng.dispose()


def options_for(slurm: FakeSlurm, **kw: Any) -> SlurmOptions:
    """Options with a tag of their own: every test's job ids start at 1, and a shared tag
    would make one test adopt another's Slurm job of the same name."""
    kw.setdefault("tag", f"t{uuid.uuid4().hex[:8]}")
    return SlurmOptions(slurm_conf=str(slurm.conf), partition=slurm.partition, **kw)


@pytest.fixture
def executor_for(
    slurm: FakeSlurm, cluster: Cluster, tmp_path: Path
) -> Callable[..., SlurmExecutor]:
    def make(**kw: Any) -> SlurmExecutor:
        runs = tmp_path / "runs"
        options = prepare(cluster, options_for(slurm, **kw), runs)
        return SlurmExecutor(runs, options).check()

    return make


@dataclass
class Waiter:
    """Cycles a real-time control plane until a condition holds (or fails the test)."""

    cycle: Callable[[], None]
    show: Callable[[], object] = lambda: ""  # what to print when the wait fails

    def until(self, what: str, cond: Callable[[], bool], timeout_s: float = 30.0) -> float:
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            self.cycle()
            if cond():
                return time.monotonic() - began
            time.sleep(CYCLE_S)
        raise AssertionError(f"not within {timeout_s:g} s: {what}\n{self.show()}")


def age_job(sessions: sessionmaker[Session], job_id: int, seconds: float) -> None:
    """Make a running job look `seconds` older to the scheduler (its start moved back), so
    that priority preemption's minimum runtime (10 min) is met without waiting for it. The
    version bump is what any write to a field the scheduler reads must do."""
    with sessions.begin() as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(started_s=Job.started_s - seconds, version=Job.version + 1)
        )
