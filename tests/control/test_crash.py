"""Crash safety: kill -9 a real server under load, 20 times, and check the invariants.

Each job records every process it runs in its attempt's run directory, so "started
twice" is read from what actually ran, not from what the store believes.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.control import admin
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.ledger import balance_problems, double_allocations
from gpufleet.control.lifecycle import FINAL
from gpufleet.control.models import Allocation, Job

from .serverproc import start_server, wait_for_reconciler

JOB = (
    "import os, time; "
    "open(os.path.join(os.environ['GPUFLEET_RUN_DIR'], 'ran-%d' % os.getpid()), 'w').close(); "
    "time.sleep(float(os.environ.get('SLEEP', '0.4')))"
)


class Load:
    """Submits and cancels jobs through the API while the server lives and dies."""

    def __init__(self, token: str, seed: int) -> None:
        self.token = token
        self.url = ""
        self.accepted: list[int] = []
        self.cancelled: set[int] = set()
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        n = 0
        while not self.stop.is_set():
            if not self.url:
                time.sleep(0.02)
                continue
            try:
                if self.accepted and self.rng.random() < 0.2:
                    victim = self.rng.choice(self.accepted)
                    r = httpx.post(
                        f"{self.url}/api/v1/jobs/{victim}/cancel", headers=headers, timeout=2
                    )
                    if r.status_code == 200:
                        self.cancelled.add(victim)
                else:
                    n += 1
                    body = {
                        "name": f"j{n}",
                        "gpus": self.rng.choice([1, 2, 4, 8]),
                        "workers": self.rng.choice([1, 1, 1, 2]),
                        "command": ["python3", "-c", JOB],
                        "env": {"SLEEP": str(self.rng.choice([0.2, 0.5, 1.5]))},
                        "preemptible": True,
                    }
                    r = httpx.post(f"{self.url}/api/v1/jobs", json=body, headers=headers, timeout=2)
                    if r.status_code == 201:
                        self.accepted.append(r.json()["id"])
            except httpx.HTTPError:
                pass  # the server is down: the client retries later, as a real one would
            time.sleep(0.03)


@pytest.mark.slow
def test_kill_9_twenty_times_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    engine = make_engine(url)
    upgrade(engine)
    maker = sessions(engine)
    with maker.begin() as s:
        admin.init(s, time.time())
        admin.create_team(s, admin.cli_principal(), "a", time.time())
        s.flush()
        admin.set_quota(
            s, admin.cli_principal(), "a", "h100-sxm5-80gb", time.time(), guaranteed_gpus=16
        )
        token = admin.create_token(
            s, admin.cli_principal(), time.time(), role="member", team="a", user="u", expires_s=None
        ).token
    rng = random.Random(7)
    load = Load(token, seed=7)
    load.thread.start()
    try:
        for _ in range(20):
            server = start_server(tmp_path, url)
            wait_for_reconciler(server)  # so the kill lands in the reconciler's work too
            load.url = server.url
            time.sleep(rng.uniform(0.2, 1.2))
            load.url = ""
            server.kill9()
    finally:
        load.stop.set()
        load.thread.join(timeout=5)
    assert len(load.accepted) >= 20, "the load generator got too few jobs in"
    # a last, clean life: every job must settle
    server = start_server(tmp_path, url)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with maker() as s:
                open_jobs = s.scalar(
                    select(func.count()).select_from(Job).where(Job.state.not_in(FINAL))
                )
            if not open_jobs:
                break
            time.sleep(0.5)
    finally:
        server.terminate()
    check_invariants(maker, tmp_path, load)
    for log in tmp_path.glob("server-*.log"):
        assert "gpf_" not in log.read_text(), f"a token was logged in {log.name}"


def check_invariants(maker: sessionmaker[Session], tmp_path: Path, load: Load) -> None:
    """No accepted job lost or left open, no device held twice, the ledger balanced, and
    no attempt run twice (from the run directories: what really ran)."""
    with maker() as s:
        jobs = {j.id: j for j in s.scalars(select(Job))}
        assert set(load.accepted) <= set(jobs), "an accepted job was lost"
        unsettled = {j.id: j.state for j in jobs.values() if j.state not in FINAL}
        assert not unsettled, unsettled
        assert not double_allocations(s)
        assert not balance_problems(s)
        live = s.scalar(
            select(func.count()).select_from(Allocation).where(Allocation.released_s.is_(None))
        )
        assert live == 0
        for job_id in load.cancelled:
            assert jobs[job_id].state in ("cancelled", "succeeded", "failed"), jobs[job_id].state
        attempts = {(j.id, a) for j in jobs.values() for a in range(1, j.attempt + 1)}
    # what really ran: each attempt's workers ran once (one ran-<pid> file per worker)
    for job_id, attempt in sorted(attempts):
        run_dir = tmp_path / "runs" / f"job-{job_id}" / f"attempt-{attempt}"
        if not run_dir.exists():
            continue  # allocated, then cancelled before the start order went out
        ran = list(run_dir.glob("ran-*"))
        workers = jobs[job_id].request.get("workers", 1)
        assert len(ran) <= workers, f"job {job_id} attempt {attempt} started twice: {ran}"
