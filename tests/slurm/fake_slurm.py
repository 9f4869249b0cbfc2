"""A real Slurm on one host for the integration tests: munge, slurmdbd, slurmctld, N slurmd.

Every file lives under one directory, every port is picked free at start, and munge
runs with its own key on its own socket (``AuthInfo=socket=``), so two test sessions
(two xdist workers, or two checkouts) can each run one at the same time, beside a
system munged if there is one. The fake GPUs are GRES with ``File=`` pointing at
character devices made with ``mknod`` (major 195, as NVIDIA's): slurmd drops file-less
GPUs when ``AutoDetect=off``, and refuses plain files.

Accounting (``sacct``) needs slurmdbd, which needs MySQL/MariaDB. The server at
127.0.0.1:3306 (user root, no password; ``GPUFLEET_TEST_MYSQL=host:port:user`` to
change it) is used when it answers; otherwise a private ``mariadbd`` is started under
the directory. Either way the cluster's accounting lives in a database of its own,
created here and dropped by `stop`, so runs never see each other's jobs.

Provenance: the configuration and the order of the steps are adapted from a recipe
written for this project ("A real Slurm cluster on one machine", tried on Debian 12
with Debian's slurm-wlm 22.05.8), which listed the errors met without each setting.
Slurm and munge are GPL software run as installed binaries; nothing of theirs is
copied here.

Run by hand: ``python tests/slurm/fake_slurm.py DIR`` starts one and prints the
``SLURM_CONF`` to export; Ctrl-C stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# what a test session needs on PATH; absent ones make the tests skip (or fail under
# GPUFLEET_REQUIRE_SLURM=1)
REQUIRED_BINARIES = (
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "sbatch",
    "squeue",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "munged",
    "mungekey",
    "mariadb",
)
NVIDIA_MAJOR = 195


def missing_binaries() -> list[str]:
    return [b for b in REQUIRED_BINARIES if shutil.which(b) is None]


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports free on 127.0.0.1 now (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait(what: str, cond: object, timeout_s: float, log: Path | None = None) -> None:
    assert callable(cond)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    tail = ""
    if log is not None and log.exists():
        tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise RuntimeError(f"fake slurm: {what} not ready after {timeout_s:g} s{tail}")


@dataclass
class Mysql:
    """Where slurmdbd keeps its tables: a server reached over TCP with the `mariadb` client."""

    host: str
    port: int
    user: str
    private_pid: int | None = None  # a mariadbd started by us

    def sql(self, statement: str) -> subprocess.CompletedProcess[str]:
        argv = ["mariadb", "--no-defaults", "-h", self.host, "-P", str(self.port)]
        argv += ["-u", self.user, "-e", statement]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    def answers(self) -> bool:
        try:
            return self.sql("SELECT 1").returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


def _shared_mysql() -> Mysql | None:
    host, port, user = (os.environ.get("GPUFLEET_TEST_MYSQL") or "127.0.0.1:3306:root").split(":")
    db = Mysql(host, int(port), user)
    return db if db.answers() else None


def _private_mysql(root: Path) -> Mysql:
    """A mariadbd of our own on a free port (when no shared server answers)."""
    if shutil.which("mariadbd") is None or shutil.which("mariadb-install-db") is None:
        raise RuntimeError("no MySQL server at 127.0.0.1:3306 and no mariadb-server to start one")
    data, run = root / "mysql", root / "mysqlrun"
    data.mkdir()
    run.mkdir()
    shutil.chown(data, "mysql", "mysql")
    shutil.chown(run, "mysql", "mysql")
    subprocess.run(
        [
            "mariadb-install-db",
            "--user=mysql",
            f"--datadir={data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )
    (port,) = free_ports(1)
    proc = subprocess.Popen(
        [
            "mariadbd",
            "--no-defaults",
            "--user=mysql",
            f"--datadir={data}",
            f"--socket={run / 'mysql.sock'}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--log-error={run / 'mysql.err'}",
            "--innodb-buffer-pool-size=64M",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    db = Mysql("127.0.0.1", port, "root", private_pid=proc.pid)
    _wait("mariadbd", db.answers, 60, run / "mysql.err")
    return db


@dataclass
class FakeSlurm:
    """One Slurm cluster under `root`; `start` it, use `env` for the commands, then `stop`."""

    root: Path
    nodes: Sequence[str] = ("n1", "n2", "n3", "n4")
    gpus_per_node: int = 8
    gres_type: str = "h100"
    cluster_name: str = "fake"
    partition: str = "gpu"
    pids: dict[str, int] = field(default_factory=dict)
    mysql: Mysql | None = None
    database: str = ""
    started_s: float = 0.0
    socket_dir: Path = Path("/nonexistent")
    # `gpufleet export slurm`'s files (name -> text), to run this cluster on them instead
    # of its own scheduling settings, nodes, partitions and gres.conf (see `_exported`)
    exported: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.exported is not None:
            conf = self.exported["slurm.conf"]
            from gpufleet.control.executors.slurm_text import config_value

            self.cluster_name = config_value(conf, "ClusterName") or self.cluster_name
            self.nodes = [
                node
                for line in conf.splitlines()
                if line.startswith("NodeName=")
                for node in _expand(line.split()[0].removeprefix("NodeName="))
            ]

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm commands: this cluster's configuration, epoch times."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(
        self, *argv: str, check: bool = True, timeout_s: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: rc {done.returncode}: {done.stderr.strip()}")
        return done

    # -- start ----------------------------------------------------------------------------

    def start(self) -> FakeSlurm:
        began = time.monotonic()
        for sub in ("etc", "state", "log", "run", "dev", "jobs", "munge/key"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            (self.root / "spool" / node).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        for i in range(self.gpus_per_node):
            dev = self.root / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, i))  # S_IFCHR
        self._start_munge()
        ctld, dbd, *slurmd = free_ports(2 + len(self.nodes))
        self.mysql = _shared_mysql() or _private_mysql(self.root)
        self.database = f"gpufleet_slurm_{uuid.uuid4().hex[:12]}"
        done = self.mysql.sql(f"CREATE DATABASE `{self.database}`")
        if done.returncode != 0:
            raise RuntimeError(f"cannot create the accounting database: {done.stderr.strip()}")
        self._write_config(ctld, dbd, dict(zip(self.nodes, slurmd, strict=True)))
        self._start_slurmdbd()
        self._start_slurmctld()
        self.started_s = time.monotonic() - began
        return self

    @property
    def munge_socket(self) -> Path:
        return self.socket_dir / "munge.socket"

    def _start_munge(self) -> None:
        munge = self.root / "munge"
        (munge / "key").chmod(0o700)
        # munged wants every directory above its socket world-executable, which a pytest
        # temporary directory (0700) is not: the socket gets a directory of its own in /tmp
        self.socket_dir = Path(tempfile.mkdtemp(prefix="gpufleet-munge-"))
        self.socket_dir.chmod(0o755)
        key = munge / "key" / "munge.key"
        if not key.exists():
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, timeout=30)
        subprocess.run(
            [
                "munged",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
            check=True,
            timeout=30,
            capture_output=True,
        )
        self.pids["munged"] = int((munge / "munged.pid").read_text().strip())

    def _write_config(self, ctld_port: int, dbd_port: int, slurmd_ports: Mapping[str, int]) -> None:
        r = self.root
        socket_path = self.munge_socket
        nodes = "\n".join(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=16 "
            f"RealMemory=4000 Gres=gpu:{self.gres_type}:{self.gpus_per_node}"
            for n, p in slurmd_ports.items()
        )
        names = ",".join(self.nodes)
        site = f"""\
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket_path}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd_port}
AccountingStoragePass={socket_path}
# the typed TRES too: the exported QOS script sets GrpTRES on it (tests/slurm/test_slurm_qos.py)
AccountingStorageTRES=gres/gpu,gres/gpu:h100_sxm5_80gb
JobCompType=jobcomp/filetxt
JobCompLoc={r}/log/jobcomp.txt
SchedulerParameters=sched_interval=1,bf_interval=1
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=1
SlurmdTimeout=10
MinJobAge=300
MpiDefault=none
"""
        if self.exported is not None:
            self._exported(site, slurmd_ports)
        else:
            (r / "etc" / "slurm.conf").write_text(
                f"""\
ClusterName={self.cluster_name}
{site}PreemptType=preempt/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
KillWait=2
GresTypes=gpu
{nodes}
PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""
            )
            (r / "etc" / "gres.conf").write_text(
                "AutoDetect=off\n"
                f"NodeName={names} Name=gpu Type={self.gres_type} "
                f"File={r}/dev/nvidia[0-{self.gpus_per_node - 1}]\n"
            )
        assert self.mysql is not None
        dbd = r / "etc" / "slurmdbd.conf"
        dbd.write_text(
            f"""\
AuthType=auth/munge
AuthInfo=socket={socket_path}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost={self.mysql.host}
StoragePort={self.mysql.port}
StorageUser={self.mysql.user}
StorageLoc={self.database}
"""
        )
        dbd.chmod(0o600)

    def _exported(self, site: str, slurmd_ports: Mapping[str, int]) -> None:
        """The exported files as a site would install them: its slurm.conf after this
        host's own settings (paths, ports, accounting; none the export sets), each node with
        what the export says to add (address, CPUs, memory: here one slurmd per node, all
        on this host), gres.conf's device files under this cluster's fake /dev, and
        topology.conf as it is."""
        assert self.exported is not None
        r = self.root
        conf = self.exported["slurm.conf"]
        theirs = {line.split("=", 1)[0] for line in conf.splitlines() if "=" in line}
        lines = [line for line in site.splitlines() if line.split("=", 1)[0] not in theirs]
        for line in conf.splitlines():
            if line.startswith("NodeName="):
                first, _, rest = line.partition(" ")
                for node in _expand(first.removeprefix("NodeName=")):
                    lines.append(
                        f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 "
                        f"Port={slurmd_ports[node]} CPUs=16 RealMemory=4000 {rest}"
                    )
            else:
                lines.append(line)
        (r / "etc" / "slurm.conf").write_text("\n".join(lines) + "\n")
        gres = self.exported["gres.conf"].replace("File=/dev/", f"File={r}/dev/")
        (r / "etc" / "gres.conf").write_text(gres)
        if "topology.conf" in self.exported:
            (r / "etc" / "topology.conf").write_text(self.exported["topology.conf"])

    def _start_slurmdbd(self) -> None:
        self.run("slurmdbd")
        log = self.root / "log" / "slurmdbd.log"
        self.pids["slurmdbd"] = _read_pid(self.root / "run" / "slurmdbd.pid", log)
        _wait(
            "slurmdbd",
            lambda: self.run("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0,
            30,
            log,
        )
        self.run("sacctmgr", "-i", "add", "cluster", self.cluster_name)
        self.run("sacctmgr", "-i", "add", "account", "research")
        self.run("sacctmgr", "-i", "add", "user", "root", "account=research")

    def _start_slurmctld(self) -> None:
        self.run("slurmctld")
        log = self.root / "log" / "slurmctld.log"
        self.pids["slurmctld"] = _read_pid(self.root / "run" / "slurmctld.pid", log)
        for node in self.nodes:
            self.run("slurmd", "-N", node)
        _wait("the nodes", self.all_idle, 60, self.root / "log" / "slurmctld.log")

    def node_states(self) -> dict[str, str]:
        done = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        out: dict[str, str] = {}
        for line in done.stdout.splitlines():
            name, _, state = line.partition(" ")
            out[name] = state.strip()
        return out

    def all_idle(self) -> bool:
        states = self.node_states()
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    # -- stop -----------------------------------------------------------------------------

    def _stepds(self) -> list[int]:
        """This cluster's slurmstepd processes: started by its slurmd, so their environment
        names its slurm.conf (other clusters' and the system's do not)."""
        mine = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                comm = (proc / "comm").read_text().strip()
            except OSError:
                continue
            if comm == "slurmstepd" and _environ_has(int(proc.name), mine):
                pids.append(int(proc.name))
        return pids

    def stop(self) -> None:
        """Cancel every job, stop the daemons by their pids, drop the accounting database."""
        if "slurmctld" in self.pids:
            with contextlib.suppress(Exception):
                self.run("scancel", "--full", "--user=root", check=False, timeout_s=10)
                _wait(
                    "the jobs to end",
                    lambda: not self.run("squeue", "-h", timeout_s=5).stdout.strip(),
                    15,
                )
            with contextlib.suppress(Exception):
                self.run("scontrol", "shutdown", check=False, timeout_s=10)
        for name in ("slurmctld", *(f"slurmd-{n}" for n in self.nodes)):
            pidfile = self.root / "run" / f"{name}.pid"
            if pidfile.exists():
                with contextlib.suppress(ValueError):
                    self.pids[name] = int(pidfile.read_text().strip())
        order = ["slurmctld", *(f"slurmd-{n}" for n in self.nodes), "slurmdbd", "munged"]
        for name in order:
            pid = self.pids.get(name)
            if pid is not None:
                _terminate(pid)
        for pid in self._stepds():  # a step daemon outlives slurmd when its job would not end
            _terminate(pid, timeout_s=2)
        if self.mysql is not None:
            if self.database:
                self.mysql.sql(f"DROP DATABASE IF EXISTS `{self.database}`")
            if self.mysql.private_pid is not None:
                _terminate(self.mysql.private_pid)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def _expand(hostlist: str) -> list[str]:
    """A Slurm hostlist (``dgx-[0-3,7]``) as node names; the executor's own parser."""
    from gpufleet.control.executors.slurm_text import expand_hostlist

    return expand_hostlist(hostlist)


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _read_pid(pidfile: Path, log: Path) -> int:
    """The pid a daemon wrote (it writes the file after forking: wait for the content)."""

    def written() -> bool:
        return pidfile.exists() and pidfile.read_text().strip().isdigit()

    _wait(f"{pidfile.name}", written, 10, log)
    return int(pidfile.read_text().strip())


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _terminate(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it lingers: a daemon we started, by its pid only."""
    if not _alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/slurm/fake_slurm.py DIR", file=sys.stderr)
        return 2

    def stopped(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    # SIGTERM and SIGHUP stop the daemons too, not only Ctrl-C: run in the background and
    # killed, it must not leave munged, slurmdbd, slurmctld and the slurmds behind
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stopped)
    cluster = FakeSlurm(Path(argv[0]).resolve())
    try:
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}   # started in {cluster.started_s:.1f} s")
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
