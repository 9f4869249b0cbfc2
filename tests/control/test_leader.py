"""Two servers on one PostgreSQL store: one reconciler at a time, and failover."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, select

from gpufleet.control import admin
from gpufleet.control.db import sessions
from gpufleet.control.leader import release, renew
from gpufleet.control.models import Lease

from .serverproc import start_server, wait_for_reconciler


def test_one_holder_at_a_time_and_expiry(engine: Engine) -> None:
    maker = sessions(engine)
    with maker.begin() as s:
        assert renew(s, "r", "a", 100.0, 3.0)
    with maker.begin() as s:
        assert not renew(s, "r", "b", 101.0, 3.0)  # a holds it until 103
        assert renew(s, "r", "a", 101.0, 3.0)  # a extends to 104
    with maker.begin() as s:
        assert not renew(s, "r", "b", 103.9, 3.0)
        assert renew(s, "r", "b", 104.1, 3.0)  # lapsed: b takes it
    with maker.begin() as s:
        release(s, "r", "b")
    with maker.begin() as s:
        assert renew(s, "r", "a", 104.2, 3.0)  # released: a at once
        assert s.scalar(select(Lease.holder)) == "a"


def _leader(url: str) -> bool:
    return bool(httpx.get(f"{url}/readyz", timeout=2).json().get("leader"))


@pytest.mark.slow
def test_standby_takes_over_within_two_cycles(engine: Engine, tmp_path: Path) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("two servers share a PostgreSQL store (SQLite is one machine's file)")
    url = engine.url.render_as_string(hide_password=False)
    maker = sessions(engine)
    with maker.begin() as s:
        admin.init(s, time.time())
    cycle_s = 1.0
    a = start_server(tmp_path, url, executor="emulated", cycle_s=cycle_s, name="a")
    b = start_server(tmp_path, url, executor="emulated", cycle_s=cycle_s, name="b")
    try:
        for srv in (a, b):  # both reconciler processes run (they start beside the API)
            wait_for_reconciler(srv)
        time.sleep(2.5 * cycle_s)
        leaders = [srv for srv in (a, b) if _leader(srv.url)]
        assert len(leaders) == 1, "exactly one server runs the reconciler"
        leader, standby = (a, b) if leaders[0] is a else (b, a)
        leader.kill9()
        died = time.monotonic()
        while not _leader(standby.url):
            assert time.monotonic() - died < 2 * cycle_s + 0.5, "no takeover within 2 cycles"
            time.sleep(0.05)
        took_s = time.monotonic() - died
        assert took_s <= 2 * cycle_s + 0.5
        # the standby always served the API
        assert httpx.get(f"{standby.url}/healthz", timeout=2).status_code == 200
    finally:
        a.terminate()
        b.terminate()
