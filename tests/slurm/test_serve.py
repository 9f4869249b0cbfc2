"""`gpufleet serve --executor slurm` as a user runs it, and `gpufleet admin slurm ...`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpufleet.cli.main import main

from .conftest import CLUSTER
from .fake_slurm import FakeSlurm, free_ports

TEAMS = "kind: teams\nteams:\n  - {name: vision, quota: {h100-sxm5-80gb: 32}}\n"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def new_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], teams: str
) -> tuple[str, str, dict[str, str]]:
    """A store set up as a user would (`admin init`, `admin team import`), a Slurm tag of
    its own, and the admin's auth header; the cluster file beside it."""
    db = f"sqlite:///{tmp_path}/serve.db"
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(CLUSTER))
    (tmp_path / "teams.yaml").write_text(teams)
    code, out, _ = cli(capsys, "admin", "init", "--db", db)
    assert code == 0
    assert cli(capsys, "admin", "team", "import", str(tmp_path / "teams.yaml"), "--db", db)[0] == 0
    return (
        db,
        f"s{uuid.uuid4().hex[:8]}",
        {"Authorization": f"Bearer {out.strip().splitlines()[-1]}"},
    )


def start_serve(
    tmp_path: Path, db: str, slurm: FakeSlurm, tag: str
) -> tuple[subprocess.Popen[bytes], int]:
    """A real `gpufleet serve --executor slurm`, once its reconciler leads."""
    (port,) = free_ports(1)
    argv = [
        sys.executable, "-m", "gpufleet.cli.main", "serve",
        "--executor", "slurm", "--cluster", str(tmp_path / "cluster.yaml"), "--db", db,
        "--port", str(port), "--cycle", "0.3", "--grace", "5", "--runs", str(tmp_path / "runs"),
        "--slurm-partition", slurm.partition, "--slurm-tag", tag,
    ]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out_file:
        server = subprocess.Popen(
            argv, stdout=out_file, stderr=subprocess.STDOUT, cwd=tmp_path, env=os.environ.copy()
        )
    deadline = time.monotonic() + 120  # three processes to start: slow on a busy machine
    while True:
        assert server.poll() is None, log.read_text()
        try:
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
            if ready.status_code == 200 and ready.json().get("leader"):  # the reconciler runs
                return server, port
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.kill()
            raise AssertionError(log.read_text())
        time.sleep(0.2)


def stop_serve(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def test_serve_runs_a_job_on_slurm_and_the_ledger_matches_sacct(
    slurm: FakeSlurm,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    db, tag, headers = new_store(tmp_path, capsys, TEAMS)
    server, port = start_serve(tmp_path, db, slurm, tag)
    url = f"http://127.0.0.1:{port}/api/v1"
    try:
        body = {
            "name": "hello",
            "team": "vision",
            "gpus": 4,
            "workers": 2,
            "command": ["/bin/bash", "-c", 'echo "hello from rank $RANK on $SLURMD_NODENAME"'],
        }
        r = httpx.post(f"{url}/jobs", json=body, headers=headers)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 60
        while (job := httpx.get(f"{url}/jobs/{job_id}", headers=headers).json())[
            "state"
        ] != "succeeded":
            assert job["state"] not in ("failed", "cancelled"), job
            assert time.monotonic() < deadline, job
            time.sleep(0.3)
        logs = httpx.get(f"{url}/jobs/{job_id}/logs", headers=headers).text
        assert "hello from rank 0 on n" in logs
        assert "hello from rank 1 on n" in logs
    finally:
        stop_serve(server)
    # the attempt is the Slurm job of that name; the ledger matches sacct (which may lag)
    name = f"{tag}-job-{job_id}-1"
    for _ in range(20):
        states = slurm.run(
            "sacct", "-X", "-n", "-P", "-S", "now-1days", "--name", name, "-o", "State"
        )
        code, out, _ = cli(capsys, "admin", "slurm", "reconcile", "--db", db, "--tag", tag)
        if code == 0 and states.stdout.split() == ["COMPLETED"]:
            break
        time.sleep(0.25)
    assert states.stdout.split() == ["COMPLETED"]
    assert code == 0, out
    assert "1 attempts, 0 with differences" in out


def test_admin_slurm_cluster_prints_a_spec_that_serve_accepts(
    slurm: FakeSlurm, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    code, out, err = cli(capsys, "admin", "slurm", "cluster", "--partition", slurm.partition)
    assert code == 0, err
    spec = yaml.safe_load(out)
    assert spec["nodes"] == [
        {"name": "n", "count": 4, "accelerator": "h100-sxm5-80gb", "gpus_per_node": 8}
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            [], "the slurm executor needs sbatch, squeue, scontrol, scancel on PATH", id="no-slurm"
        ),
        pytest.param(
            ["--slurm-signal-scope", "everyone"],
            "signal scope 'everyone': use steps, batch, full",
            id="bad-scope",
        ),
    ],
)
def test_serve_without_slurm_is_a_clear_user_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, squeue, ... there
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(CLUSTER))
    code, out, err = cli(
        capsys,
        "serve",
        "--executor",
        "slurm",
        "--cluster",
        str(tmp_path / "cluster.yaml"),
        "--db",
        f"sqlite:///{tmp_path}/x.db",
        *args,
    )
    assert code == 2
    assert message in err
    assert "Traceback" not in err + out
    assert not (tmp_path / "x.db").exists()  # nothing written


COHORT = (
    "kind: teams\nteams:\n"
    "  - {name: vision, cohort: ml, quota: {h100-sxm5-80gb: 16}}\n"
    "  - {name: nlp, cohort: ml, quota: {h100-sxm5-80gb: 16}}\n"
)
# runs $RUN_S seconds; exits 143 a moment after SIGTERM (inside gpufleet's 5 s grace)
SLEEPER = "trap 'sleep 0.5; exit 143' TERM; end=$(( $(date +%s) + RUN_S )); "
SLEEPER += 'while [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done'


def test_reconcile_agrees_after_a_reclaim_a_server_kill_and_a_cancel(
    slurm: FakeSlurm,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 24: `admin slurm reconcile` exits 0 after a run with a preemption (a quota
    reclaim), a SIGKILL of the server mid-run and a cancel."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    db, tag, headers = new_store(tmp_path, capsys, COHORT)

    def submit(url: str, team: str, name: str, workers: int, run_s: int) -> int:
        body = {
            "name": name, "team": team, "gpus": 8, "workers": workers,
            "command": ["/bin/bash", "-c", SLEEPER], "env": {"RUN_S": str(run_s)},
        }  # fmt: skip
        r = httpx.post(f"{url}/jobs", json=body, headers=headers)
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def until(url: str, job_id: int, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + 90
        while not ok(job := httpx.get(f"{url}/jobs/{job_id}", headers=headers).json()):
            assert time.monotonic() < deadline, job
            time.sleep(0.3)
        return job

    server, port = start_serve(tmp_path, db, slurm, tag)
    url = f"http://127.0.0.1:{port}/api/v1"
    try:
        big = submit(url, "vision", "big", 4, 600)  # borrows nlp's 16
        until(url, big, lambda j: j["state"] == "running")
        mine = submit(url, "nlp", "mine", 2, 3)  # reclaims them
        until(url, mine, lambda j: j["state"] == "succeeded")
        until(url, big, lambda j: j["state"] == "running" and j["attempt"] == 2)
        server.kill()  # SIGKILL mid-run
        server.wait()
        server, port = start_serve(tmp_path, db, slurm, tag)
        url = f"http://127.0.0.1:{port}/api/v1"
        time.sleep(2)  # a few cycles of the new leader
        r = httpx.post(f"{url}/jobs/{big}/cancel", headers=headers)
        assert r.status_code == 200, r.text
        done = until(url, big, lambda j: j["state"] == "cancelled")
        assert done["attempt"] == 2
    finally:
        stop_serve(server)
    for _ in range(40):  # sacct may lag slurmctld
        code, out, _ = cli(capsys, "admin", "slurm", "reconcile", "--db", db, "--tag", tag)
        if code == 0:
            break
        time.sleep(0.25)
    assert code == 0, out
    assert "3 attempts, 0 with differences" in out  # big 1 (preempted), mine 1, big 2 (cancelled)
