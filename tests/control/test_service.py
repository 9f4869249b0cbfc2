"""`gpufleet serve`'s process layout: the supervisor, children that die with the server, the
API's early release of store connections, the token cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest
import uvicorn
from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from gpufleet.api.context import AppContext, RateLimiter
from gpufleet.api.deps import Db
from gpufleet.api.routing import ReleasingRoute
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.auth import AuthError, PrincipalCache, authenticate_cached
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.service import ChildConfig, Supervisor, holds_lease
from gpufleet.server.app import create_app

from .conftest import Plane
from .serverproc import free_port

CHILDREN = "tests.control.service_children"  # run from the repository root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def _config(path: Path) -> ChildConfig:
    return ChildConfig("sqlite://", path, None, os.getpid())


def test_the_supervisor_restarts_a_child_that_exits(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    sup = Supervisor(_config(starts), targets=(("flaky", f"{CHILDREN}:exits_at_once"),))
    sup.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if starts.exists() and len(starts.read_text().split()) >= 2:
                break
            time.sleep(0.2)
    finally:
        sup.stop()
    pids = starts.read_text().split()
    assert len(pids) >= 2, "the child was not restarted"
    assert len(set(pids)) == len(pids)  # a new process each time


def test_stop_terminates_the_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sup = Supervisor(_config(pidfile), targets=(("sleeper", f"{CHILDREN}:sleeps"),))
    sup.start()
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    assert _alive(pid)
    sup.stop(timeout_s=20)
    assert not _alive(pid)


def test_children_die_with_a_server_killed_by_sigkill(tmp_path: Path) -> None:
    """A server killed with SIGKILL takes its reconciler down with it, as one process did."""
    pidfile = tmp_path / "pid"
    script = textwrap.dedent(
        f"""
        import os, time
        from pathlib import Path
        from gpufleet.control.service import ChildConfig, Supervisor
        from tests.control import service_children
        sup = Supervisor(ChildConfig("sqlite://", Path({str(pidfile)!r}), None, os.getpid()),
                         targets=(("sleeper", f"{CHILDREN}:sleeps"),))
        sup.start()
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int(pidfile.read_text())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_holds_lease_reads_the_lease_row(sqlite_engine: Engine) -> None:
    from gpufleet.control.leader import renew

    maker = sessions(sqlite_engine)
    assert not holds_lease(maker, "me", 100.0)
    with maker.begin() as s:
        assert renew(s, "reconciler", "me", 100.0, 3.0)
    assert holds_lease(maker, "me", 101.0)
    assert not holds_lease(maker, "other", 101.0)
    assert not holds_lease(maker, "me", 104.0)  # expired


# -- the API's store connections ---------------------------------------------------------------


class _Out(BaseModel):
    value: int


def test_a_route_gives_its_connection_back_before_the_response_is_serialised(
    sqlite_engine: Engine,
) -> None:
    seen: list[int] = []
    router = APIRouter(route_class=ReleasingRoute)

    @router.get("/x", response_model=_Out)
    def endpoint(s: Db) -> _Out:
        s.execute(text("SELECT 1"))
        seen.append(sqlite_engine.pool.checkedout())  # type: ignore[attr-defined]
        return _Out(value=7)

    route = next(r for r in router.routes if getattr(r, "path", "") == "/x")
    with Session(sqlite_engine) as s:
        response = route.endpoint(s=s)  # type: ignore[attr-defined]
        assert seen == [1]
        assert sqlite_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    assert response.body == b'{"value":7}'
    assert response.media_type == "application/json"


def test_many_concurrent_requests_on_one_connection_do_not_deadlock(
    tmp_path: Path, cluster: Cluster
) -> None:
    """The deadlock the API benchmark found: requests holding pooled connections while they
    waited for a worker thread to serialise their responses. With one connection and four
    worker threads, 40 concurrent reads must all answer (they queued forever before)."""
    url = f"sqlite:///{tmp_path}/store.db"
    setup = make_engine(url)
    upgrade(setup)
    with sessions(setup).begin() as s:
        token = admin.init(s, 0.0).token
    setup.dispose()
    engine = make_engine(url, pool_size=1, max_overflow=0, pool_timeout=5)
    ctx = AppContext(sessions(engine), cluster, limiter=RateLimiter(1e6, 1e6))
    api = create_app(ctx)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # in the server's event loop: four worker threads
            anyio.to_thread.current_default_thread_limiter().total_tokens = 4
        await api(scope, receive, send)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        statuses: list[int] = []

        def get(i: int) -> None:
            path = "/api/v1/teams" if i % 2 else "/api/v1/jobs"
            r = httpx.get(
                f"http://127.0.0.1:{port}{path}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=20,
            )
            statuses.append(r.status_code)

        workers = [threading.Thread(target=get, args=(i,)) for i in range(40)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
        assert statuses == [200] * 40
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        engine.dispose()


# -- the token cache ---------------------------------------------------------------------------


def test_the_token_cache_answers_without_the_store_and_expires(lite: Plane) -> None:
    cache = PrincipalCache(ttl_s=5.0)
    token = lite.tokens["vision-member"]
    with lite.sessions() as s:
        who = authenticate_cached(cache, s, token, 100.0)
    with lite.sessions.begin() as s:  # revoked elsewhere (the CLI): the cache does not know
        admin.revoke_token(s, admin.cli_principal(), who.token_id, 101.0)
    with lite.sessions() as s:
        assert authenticate_cached(cache, s, token, 102.0) == who  # within the TTL
        with pytest.raises(AuthError, match="revoked"):
            authenticate_cached(cache, s, token, 105.5)  # the TTL is over: asked again


def test_a_token_revoked_through_the_api_is_refused_at_once(lite: Plane) -> None:
    headers = lite.auth("vision-member")
    assert lite.client.get("/api/v1/jobs", headers=headers).status_code == 200  # now cached
    me = next(
        t
        for t in lite.client.get("/api/v1/admin/tokens", headers=lite.auth("admin")).json()
        if t["user"] == "vision-member"
    )
    r = lite.client.delete(f"/api/v1/admin/tokens/{me['id']}", headers=lite.auth("admin"))
    assert r.status_code == 204
    assert lite.client.get("/api/v1/jobs", headers=headers).status_code == 401


def test_an_expired_token_is_refused_even_when_cached(lite: Plane) -> None:
    with lite.sessions.begin() as s:
        issued = admin.create_token(
            s,
            admin.cli_principal(),
            lite.clock(),
            role="member",
            team="vision",
            user="short",
            expires_s=lite.clock() + 2,
        )
    headers = {"Authorization": f"Bearer {issued.token}"}
    assert lite.client.get("/api/v1/jobs", headers=headers).status_code == 200
    lite.clock.advance(3)  # past its expiry, within the cache's TTL
    assert lite.client.get("/api/v1/jobs", headers=headers).status_code == 401


# -- finished jobs' bodies -------------------------------------------------------------------


def test_a_finished_job_is_answered_from_memory_with_the_same_body_and_isolation(
    lite: Plane,
) -> None:
    from gpufleet.api.views import final_jobs

    headers = lite.auth("vision-member")
    r = lite.client.post(
        "/api/v1/jobs",
        json={"name": "done", "gpus": 1, "runtime_estimate_s": 60, "command": ["x"]},
        headers=headers,
    )
    job_id = r.json()["id"]
    lite.cycle()
    lite.cycle(1)
    lite.cycle(120)
    first = lite.client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
    assert first["state"] == "succeeded"
    with lite.sessions() as s:
        assert final_jobs.get(s, job_id) is not None  # kept: it cannot change any more
        s.execute(
            text("UPDATE jobs SET reason = 'changed behind the cache' WHERE id = :i"), {"i": job_id}
        )
        s.commit()
    again = lite.client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
    assert again == first  # from memory, not the store
    other = lite.client.get(f"/api/v1/jobs/{job_id}", headers=lite.auth("nlp-member"))
    assert other.status_code == 404


def test_a_waiting_job_is_never_kept(lite: Plane) -> None:
    from gpufleet.api.views import final_jobs

    headers = lite.auth("vision-member")
    ids = [
        lite.client.post(
            "/api/v1/jobs",
            json={"name": f"w{i}", "gpus": 8, "workers": 2, "command": ["x"]},
            headers=headers,
        ).json()["id"]
        for i in range(2)
    ]
    lite.cycle()
    body = lite.client.get(f"/api/v1/jobs/{ids[1]}", headers=headers).json()
    assert body["state"] == "pending"
    with lite.sessions() as s:
        assert final_jobs.get(s, ids[1]) is None


# -- read-only sessions ----------------------------------------------------------------------


def _in_one_transaction(s: Session) -> bool:
    """PostgreSQL's now() is the start of the transaction: the same for two statements in
    one, later for the second in autocommit."""
    first = s.execute(text("SELECT now()")).scalar_one()
    s.execute(text("SELECT pg_sleep(0.01)"))
    return bool(s.execute(text("SELECT now()")).scalar_one() == first)


def test_read_sessions_skip_begin_and_rollback_on_postgresql_only(engine: Engine) -> None:
    from gpufleet.control.db import read_sessions

    if engine.dialect.name != "postgresql":  # SQLite: the ordinary sessions
        assert read_sessions(engine).kw["bind"] is engine
        return
    with read_sessions(engine)() as s:
        assert not _in_one_transaction(s)
    with sessions(engine)() as s:  # the pooled connection is back to transactions
        assert _in_one_transaction(s)


def test_after_a_database_restart_the_api_fails_once_then_reconnects(
    engine: Engine, cluster: Cluster
) -> None:
    """The API's pool does not pre-ping: a request on a connection the server dropped gets a
    503 (retry), SQLAlchemy invalidates the pool, and the next request reconnects."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no server connection to lose")
    from fastapi.testclient import TestClient

    from .conftest import build_plane

    plane = build_plane(engine, cluster)
    api_engine = make_engine(engine.url.render_as_string(hide_password=False), pre_ping=False)
    try:
        ctx = AppContext(sessions(api_engine), cluster, limiter=RateLimiter(1e6, 1e6))
        client = TestClient(create_app(ctx))
        headers = plane.auth("vision-member")
        r = client.post(
            "/api/v1/jobs", json={"name": "kept", "gpus": 1, "command": ["x"]}, headers=headers
        )
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        with engine.connect() as conn:  # what a restart does to the API's pooled connections
            dropped = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        assert dropped >= 1
        first = client.get(f"/api/v1/jobs/{job_id}", headers=headers)
        assert first.status_code == 503, first.text
        assert "retry" in first.json()["detail"]
        again = client.get(f"/api/v1/jobs/{job_id}", headers=headers)
        assert again.status_code == 200
        assert again.json()["name"] == "kept"
    finally:
        api_engine.dispose()


def test_api_workers_share_the_port_and_a_revocation_reaches_all_at_once(tmp_path: Path) -> None:
    """`serve --workers 3`: three processes answer on one port (each connection goes to
    one of them), every worker caches the token, and one revocation through the API is
    refused by all of them from the next request."""
    from gpufleet.control import admin
    from gpufleet.control.db import make_engine, sessions, upgrade

    from .serverproc import start_server

    url = f"sqlite:///{tmp_path}/store.db"
    engine = make_engine(url)
    upgrade(engine)
    with sessions(engine).begin() as s:
        root = admin.init(s, time.time()).token
        admin.create_team(s, admin.cli_principal(), "a", time.time())
        s.flush()
        token = admin.create_token(
            s, admin.cli_principal(), time.time(), role="member", team="a", user="u", expires_s=None
        )
    engine.dispose()
    server = start_server(tmp_path, url, executor="emulated", workers=3)
    member = {"Authorization": f"Bearer {token.token}"}
    try:
        pids = set()
        for _ in range(60):  # a fresh connection each: the kernel spreads them
            with httpx.Client(base_url=server.url, timeout=5) as c:
                r = c.get("/api/v1/jobs", headers=member)
                assert r.status_code == 200, r.text
                pids.add(c.get("/healthz").json()["pid"])
        assert len(pids) == 3, pids  # every worker answered, so every worker cached it
        r = httpx.delete(
            f"{server.url}/api/v1/admin/tokens/{token.token_id}",
            headers={"Authorization": f"Bearer {root}"},
        )
        assert r.status_code == 204
        for _ in range(30):
            with httpx.Client(base_url=server.url, timeout=5) as c:
                assert c.get("/api/v1/jobs", headers=member).status_code == 401
    finally:
        server.terminate()
    assert server.proc.returncode == 0, server.log.read_text()[-2000:]


def test_serve_on_a_taken_port_fails_before_taking_the_lease(tmp_path: Path) -> None:
    """Exit 2 with what to change, before any child starts: no reconciler ran, so the lease
    is free for the server that does listen (issue 24)."""
    import socket

    from .serverproc import CLUSTER_YAML

    url = f"sqlite:///{tmp_path / 'taken.db'}"
    engine = make_engine(url)
    upgrade(engine)
    (tmp_path / "cluster.yaml").write_text(CLUSTER_YAML)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpufleet.cli.main",
                "serve",
                "--cluster",
                str(tmp_path / "cluster.yaml"),
                "--db",
                url,
                "--executor",
                "emulated",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM leases")).scalar_one() == 0
    engine.dispose()
