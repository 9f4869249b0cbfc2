"""Real `gpufleet serve` processes for crash and failover tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

CLUSTER_YAML = """\
kind: cluster
name: crash
topology_levels: [block, leaf, node]
nodes:
  - {name: h100, count: 2, accelerator: h100-sxm5-80gb, gpus_per_node: 8,
     topology: {block: b1, leaf: l1}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                # the supervisor gives its children up to 30 s (+5 s for its thread) before it
                # kills them; waiting less kills a server that was stopping as promised (seen
                # under load: an ETA child at SCHED_IDLE on a machine busy with other tests)
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.kill9()


def start_server(
    tmp: Path,
    db_url: str,
    *,
    executor: str = "local",
    cycle_s: float = 0.2,
    grace_s: float = 0.5,
    port: int | None = None,
    name: str = "server",
    workers: int | None = None,
) -> Server:
    cluster = tmp / "cluster.yaml"
    if not cluster.exists():
        cluster.write_text(CLUSTER_YAML)
    port = port or free_port()
    log = tmp / f"{name}-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "gpufleet.cli.main",
        "serve",
        "--cluster",
        str(cluster),
        "--db",
        db_url,
        "--executor",
        executor,
        "--port",
        str(port),
        "--cycle",
        str(cycle_s),
        "--grace",
        str(grace_s),
        "--runs",
        str(tmp / "runs"),
        *(("--workers", str(workers)) if workers else ()),
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
    server = Server(proc, port, log)
    deadline = time.monotonic() + 90  # several interpreters import at once on two cores
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=0.5).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.kill9()
    raise RuntimeError(f"server did not come up:\n{log.read_text()[-3000:]}")


def wait_for_reconciler(server: Server, timeout_s: float = 90.0) -> None:
    """Until the server's reconciler process runs (it starts beside the API: seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.url}/readyz", timeout=2).json().get("reconciler"):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the reconciler did not start:\n{server.log.read_text()[-3000:]}")
