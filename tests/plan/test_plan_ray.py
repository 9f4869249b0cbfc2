"""`gpufleet plan --ray ADDRESS`: the simulations on a Ray cluster give the local pool's
plan.json byte for byte; a bad address is a user error (exit 2), not a hang or a traceback.

The cluster is a Ray head that a child process starts on this machine, as `ray start
--head` would on a real one, and that this test ends itself (no `ray stop`, which would end
every Ray on the machine). Token authentication is off for the head and for this process
alike, as for a `ray start --head` with no token: the test must not write ~/.ray.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.cli.main import main

from .fleet_cases import tiny, write_spec

# The head: a local Ray cluster of two CPUs that lives until its stdin closes, with its
# sessions and logs in the folder given (not /tmp/ray, where every run would leave one).
HEAD = """
import logging, sys, ray
ray.init(
    num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, _temp_dir=sys.argv[1]
)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
ray.shutdown()
"""
HEAD_START_S = 90  # ~12 s on a 2-core machine; generous for a loaded CI


@pytest.fixture
def ray_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The GCS address (HOST:PORT) of a Ray head this fixture starts and ends."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    # short: Ray's sockets live under it, and a socket's path has ~107 characters at most
    temp_dir = tempfile.mkdtemp(prefix="gpufleet-ray-")
    with (tmp_path / "ray-head.log").open("w") as log:
        head = subprocess.Popen(
            [sys.executable, "-c", HEAD, temp_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
    assert head.stdin is not None
    assert head.stdout is not None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(head.stdout, selectors.EVENT_READ)
            ready = sel.select(timeout=HEAD_START_S)
        address = head.stdout.readline().strip() if ready else ""
        log_text = (tmp_path / "ray-head.log").read_text(encoding="utf-8")
        assert address, f"the Ray head did not start:\n{log_text}"
        yield address
    finally:
        head.stdin.close()  # the head shuts its cluster down and exits
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_ray_gives_the_local_pools_plan_byte_for_byte(
    ray_head: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_spec(tmp_path, tiny(horizon="36h", warmup="4h"))
    pool, on_ray = tmp_path / "pool", tmp_path / "ray"
    args = ["plan", str(path), "--seeds", "2"]
    assert main([*args, "--out", str(pool), "--workers", "2"]) == 0
    assert "(2 seeds, 2 workers)" in capsys.readouterr().out
    assert main([*args, "--out", str(on_ray), "--ray", ray_head]) == 0
    printed = capsys.readouterr().out
    assert f"(2 seeds, on Ray at {ray_head})" in printed, printed
    assert (on_ray / "plan.json").read_bytes() == (pool / "plan.json").read_bytes()
    assert (on_ray / "plan.md").read_bytes() == (pool / "plan.md").read_bytes()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(["--ray", "127.0.0.1:1"], "--ray 127.0.0.1:1: no Ray head", id="refused"),
        pytest.param(["--ray", "head"], "not HOST:PORT, 'auto' or 'local'", id="no-port"),
        pytest.param(["--ray", "ray://head:10001"], "Ray Client (ray://)", id="ray-client"),
        pytest.param(["--ray", "local", "--workers", "2"], "--workers and --ray", id="workers"),
    ],
)
def test_a_bad_ray_address_exits_2_with_what_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    path = write_spec(tmp_path, tiny())
    out = tmp_path / "out"
    code = main(["plan", str(path), "--out", str(out), "--seeds", "2", *extra])
    captured = capsys.readouterr()
    assert code == 2
    assert message in " ".join(captured.err.split()), captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists()


def test_ray_is_only_for_multi_team_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = Path(__file__).parents[2] / "examples" / "plan-pretrain-70b.yaml"
    code = main(["plan", str(spec), "--out", str(tmp_path / "out"), "--ray", "local"])
    assert code == 2
    assert "--ray is for multi-team plans" in " ".join(capsys.readouterr().err.split())
