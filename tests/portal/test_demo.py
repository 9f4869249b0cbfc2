"""`gpufleet demo`: a fresh store with people to log in as, a seeded stream of jobs the
cluster accepts, and the whole thing run as a user would (start, log in, see jobs, Ctrl-C)."""

from __future__ import annotations

import collections
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func
from sqlalchemy import select as sql_select

from gpufleet.cluster import Cluster
from gpufleet.control import jobs
from gpufleet.control.auth import authenticate
from gpufleet.control.db import make_engine, sessions
from gpufleet.control.jobs import JobRequest
from gpufleet.control.models import FlavorRate, Job
from gpufleet.portal.demo import PEOPLE, TEMPLATES, setup_store, workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load

from .conftest import csrf_of

ROOT = Path(__file__).resolve().parents[2]
DEMO_CLUSTER = ROOT / "examples" / "sched-cluster.yaml"


def _first(seed: int, n: int) -> list[dict[str, object]]:
    stream = workload(seed)
    return [next(stream).body for _ in range(n)]


def test_the_stream_is_seeded_and_every_body_is_a_valid_request() -> None:
    assert _first(7, 50) == _first(7, 50)
    assert _first(7, 50) != _first(8, 50)
    stream = workload(7)
    subs = [next(stream) for _ in range(300)]
    for sub in subs:
        JobRequest.model_validate(sub.body)  # raises on anything the API would refuse
        person = next(p for p in PEOPLE if p.key == sub.who)
        assert person.team == sub.team
    names = collections.Counter(str(s.body["name"]).rsplit("-", 1)[0] for s in subs)
    assert set(names) == set(TEMPLATES)  # every kind of job shows up
    assert any("env" in s.body for s in subs)  # some crash, to show restarts
    assert {s.team for s in subs} == {"research", "prod"}


def test_the_store_has_the_people_rates_and_accepts_the_stream(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/demo.db"
    now = 1_780_000_000.0
    tokens = setup_store(db, now)
    assert set(tokens) == {p.key for p in PEOPLE}
    cluster = Cluster.from_spec(load(ClusterSpec, DEMO_CLUSTER))
    engine = make_engine(db)
    try:
        with sessions(engine).begin() as s:
            for p in PEOPLE:
                who = authenticate(s, tokens[p.key], now)
                assert (who.user, who.role, who.team) == (p.user, p.role, p.team)
            assert s.scalar(sql_select(func.count()).select_from(FlavorRate)) == 2
            stream = workload(7)
            for _ in range(100):  # every job is accepted by the demo cluster and teams
                sub = next(stream)
                who = authenticate(s, tokens[sub.who], now)
                jobs.submit(s, who, JobRequest.model_validate(sub.body), cluster, now)
            assert s.scalar(sql_select(func.count()).select_from(Job)) == 100
    finally:
        engine.dispose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_until(proc: subprocess.Popen[str], pattern: str, timeout_s: float) -> list[str]:
    """Lines of the demo's output up to the first matching `pattern` (fails on timeout)."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not ready:
            assert proc.poll() is None, "the demo exited:\n" + "\n".join(lines)
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if re.search(pattern, line):
            return lines
    raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(lines))


@pytest.mark.skipif(sys.platform == "win32", reason="signals")
@pytest.mark.parametrize(
    ("presses", "ignored"),
    [(1, False), (2, False), (1, True)],
    ids=["ctrl-c", "ctrl-c-twice", "ctrl-c-started-with-sigint-ignored"],
)
def test_the_demo_starts_a_living_portal_and_stops_on_ctrl_c(
    tmp_path: Path, presses: int, ignored: bool
) -> None:
    """Ctrl-C stops the stream and the server; a second one while it stops kills the
    server rather than leaving it running (it is in a session of its own). A demo started
    with SIGINT ignored (a script's background job; stop 45's fresh-clone run) stops too."""
    port = _free_port()
    work = tmp_path / "demo"
    # `trap "" INT` leaves SIGINT ignored across the exec, as a background job inherits it
    shell = ["sh", "-c", 'trap "" INT; exec "$@"', "sh"] if ignored else []
    proc = subprocess.Popen(
        [
            *shell,
            sys.executable,
            "-m",
            "gpufleet.cli.main",
            "demo",
            "--cluster",
            str(DEMO_CLUSTER),
            "--port",
            str(port),
            "--interval",
            "0.5",
            "--dir",
            str(work),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = _read_until(proc, r"Ctrl-C stops the demo", 240)
        banner = "\n".join(lines)
        url = re.search(r"portal\s+(http://\S+)/portal/", banner)
        assert url, banner
        token = re.search(r"milo \(member, research\)\s+(gpf_\S+)", banner)
        assert token, banner
        lines += _read_until(proc, r"submitted #\d+", 60)

        with httpx.Client(base_url=url.group(1), timeout=30, follow_redirects=True) as client:
            form = client.get("/portal/login")
            r = client.post(
                "/portal/login",
                data={
                    "token": token.group(1),
                    "csrf_token": csrf_of(form.text),
                    "next": "/portal/jobs",
                },
            )
            assert r.status_code == 200
            assert "milo · member · research" in r.text
            deadline = time.monotonic() + 60
            while not re.search(r'<tr id="job-\d+">', r.text) and time.monotonic() < deadline:
                time.sleep(1)
                r = client.get("/portal/jobs")
            assert re.search(r'<tr id="job-\d+">', r.text), "no job on the member's page"

        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        if presses == 2:
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        if presses == 1:
            assert proc.returncode == 0, out
            assert re.search(r"demo stopped \(\d+ jobs submitted\)", out), out
        else:  # the second press may end the demo itself by SIGINT: fine, if nothing is left
            assert proc.returncode in (0, -signal.SIGINT), out
        with pytest.raises(httpx.ConnectError):  # the server is gone too
            httpx.get(f"{url.group(1)}/healthz", timeout=5)
        assert (work / "gpufleet.db").exists()  # kept: --dir was given
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_dir_that_cannot_be_made_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dir` under a file is the user's to change: exit 2 before any server starts."""
    from gpufleet.cli.main import main

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    cluster = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"
    assert main(["demo", "--cluster", str(cluster), "--dir", str(blocker / "d")]) == 2
    err = capsys.readouterr().err
    assert f"--dir {blocker / 'd'}: cannot create it (Not a directory:" in err
    assert "Traceback" not in err
