"""`gpufleet serve` as processes: API workers, the reconciler and the queue-ETA simulation.

This module imports nothing heavy at its top: a child runs it before anything else, and
asks the kernel for its parent's death signal before it spends seconds importing.

Why not threads: all three are Python, and a thread that computes (a reconciler cycle
takes ~0.5 s on a 10,000-job queue; a forward simulation of that queue takes minutes)
holds the GIL in 5 ms slices, so every request thread waiting for the GIL after a
database round trip queues behind it. The API benchmark measured exactly that (p99 of
0.7-2.2 s at 50 requests/s with the ETA thread running, docs/benchmarks.md). In their own
processes the two computing loops cost the API only CPU time, which the kernel shares:
the reconciler runs at a slightly lower priority than the API (nice +5, SCHED_BATCH: a cycle
stretches a little while the API is busy rather than the other way round) and the ETA
process at the lowest (SCHED_IDLE), so it uses only what the API and the reconciler leave
idle.

The API itself runs in several worker processes (`--workers`, one per core by default, at
most four). On Linux each has a listening socket of its own on the same port
(`SO_REUSEPORT`), and the kernel spreads new connections over them evenly; elsewhere they
share one socket and whichever is idle accepts. The supervisor holds the sockets, so a
restarted worker finds the connections that queued on its socket meanwhile. One process
tops out at what one core does (about 75 submits/s when a submit cost 13 ms of CPU), and the
GIL keeps a process from using a second core.
Each worker has its own caches (principals, the queue index, finished jobs) and rate
limiters; a token revoked through one worker is refused by all at once (`shared.py`).

The processes coordinate only through the store, as several servers already did: the
reconciler child takes the lease under this server's `holder` name; the ETA child
simulates only while that lease is its server's (so a standby computes nothing) and writes
the queue snapshot's ETA columns; the API reads both. The main process only supervises: it
holds the listening sockets, restarts a child that dies (after a backoff), and each child
dies with it
(`PR_SET_PDEATHSIG`): a server killed with SIGKILL takes its reconciler down too, as one
process did, so a restarted or standby server takes over after the lease lapses.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import gc
import importlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("gpufleet.service")
# CPU priorities (niceness added to the server's, and a Linux scheduling policy): people
# waiting on the API come first, a cycle may stretch a little while the API is busy (batch),
# the ETAs use only idle CPU (idle)
RECONCILER_NICE = 5
ETA_NICE = 10
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildConfig:
    """What a child process needs to rebuild its part of the server (it must pickle)."""

    db_url: str
    cluster_path: Path
    options: Any  # ServeOptions (frozen, picklable); Any to keep this module import-light
    parent_pid: int
    log_level: int = logging.INFO
    listen_fd: int | None = None  # the API's listening socket (API workers only)
    shared_fd: int | None = None  # `shared.SharedState` of the server


# The API process's garbage collector: a young collection every 50,000 allocations rather than
# 700, and everything alive once the app is built frozen out of the old generation.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc_for_serving() -> None:
    """Keep the collector from pausing requests. Measured (docs/benchmarks.md): with the
    defaults, a full collection of the API process's heap (SQLAlchemy, pydantic, FastAPI, the
    catalog, the queue index) took 100-140 ms, several times a minute at 200 requests/s,
    and was most of the API's p99. After `gc.freeze()` a full collection scans only what was
    allocated since (4-17 ms), and a higher first threshold makes collections rarer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def holds_lease(sessions: Any, holder: str, now_s: float, name: str = "reconciler") -> bool:
    """True if `holder` holds the lease now: the reconciler of this server leads."""
    from sqlalchemy import select

    from gpufleet.control.models import Lease

    with sessions() as s:
        row = s.execute(select(Lease.holder, Lease.expires_s).where(Lease.name == name)).first()
    return row is not None and row.holder == holder and row.expires_s >= now_s


# -- children ---------------------------------------------------------------------------------


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); elsewhere, the
    loops check `os.getppid()` each turn. If the parent is already gone, exit now."""
    libc_name = ctypes.util.find_library("c")
    if libc_name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(libc_name, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(0)


def child_setup(config: ChildConfig, name: str) -> threading.Event:
    """Common start of a child: die with the parent, log like it, stop on SIGTERM/SIGINT."""
    _die_with_parent(config.parent_pid)
    logging.basicConfig(level=config.log_level, format=f"%(asctime)s {name} %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its import-time plugin lines
    stop = threading.Event()

    def on_signal(signum: int, _: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the parent leads
    return stop


def _lower_priority(nice: int, policy: str) -> None:
    """Niceness everywhere; on Linux also a scheduling policy: SCHED_BATCH (a computing loop
    that should not preempt a woken request handler) or SCHED_IDLE (run only on a CPU that
    has nothing else to do)."""
    with contextlib.suppress(OSError):
        os.nice(nice)
    number = getattr(os, policy, None)
    if number is not None and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, number, os.sched_param(0))


def _orphaned(config: ChildConfig) -> bool:
    return os.getppid() != config.parent_pid


def reconciler_main(config: ChildConfig, ready: Callable[[], None]) -> None:
    """The reconciler child: cycles every `cycle_interval_s` until SIGTERM (then releases the
    lease so a standby takes over at once)."""
    stop = child_setup(config, "reconciler")
    _lower_priority(RECONCILER_NICE, "SCHED_BATCH")
    from gpufleet.cluster import Cluster
    from gpufleet.control.db import make_engine, sessions
    from gpufleet.control.reconciler import Reconciler
    from gpufleet.control.server import (
        ReconcileLoop,
        make_executor,
        reconciler_config,
        telemetry_loop,
    )
    from gpufleet.specs.cluster import ClusterSpec
    from gpufleet.specs.load import load

    cluster = Cluster.from_spec(load(ClusterSpec, config.cluster_path))
    maker = sessions(make_engine(config.db_url))
    executor, inventory = make_executor(config.options, time.time)
    reconciler = Reconciler(
        maker, cluster, executor, reconciler_config(config.options), inventory=inventory
    )
    loop = ReconcileLoop(reconciler, config.options.cycle_interval_s)
    loop.start()
    telemetry = telemetry_loop(config.options, reconciler, executor)
    if telemetry is not None:
        telemetry.start()
    ready()
    while not stop.wait(1.0):
        if _orphaned(config):
            break
    if telemetry is not None:
        telemetry.stop()
    loop.stop()


def eta_main(config: ChildConfig, ready: Callable[[], None]) -> None:
    """The queue-ETA child: while this server's reconciler leads, re-simulate the queue every
    `eta_interval_s` (counted from the end of the last simulation), at a low CPU priority."""
    stop = child_setup(config, "eta")
    _lower_priority(ETA_NICE, "SCHED_IDLE")
    from gpufleet.cluster import Cluster
    from gpufleet.control.db import make_engine, sessions
    from gpufleet.control.eta_refresh import refresh_etas
    from gpufleet.control.server import reconciler_config
    from gpufleet.specs.cluster import ClusterSpec
    from gpufleet.specs.load import load

    cluster = Cluster.from_spec(load(ClusterSpec, config.cluster_path))
    maker = sessions(make_engine(config.db_url))
    rc = reconciler_config(config.options)
    wait_s = min(1.0, rc.eta_interval_s)
    ready()
    while not stop.wait(wait_s) and not _orphaned(config):
        if not holds_lease(maker, rc.holder, time.time()):
            wait_s = min(1.0, rc.eta_interval_s)
            continue
        try:
            refresh_etas(maker, cluster, rc.profile, time.time(), grace_s=rc.grace_s)
        except Exception:  # an ETA is a nicety: keep going, retry next time
            log.exception("queue ETA simulation failed")
        wait_s = rc.eta_interval_s


# -- the supervisor ---------------------------------------------------------------------------

# (config, ready): `ready()` tells the supervisor the child's loop runs
ChildTarget = Callable[[ChildConfig, Callable[[], None]], None]
READY = b"ready\n"


@dataclass
class _Child:
    name: str
    target: str  # "module:function", a ChildTarget the child imports
    fds: tuple[int, ...] = ()  # descriptors it inherits (`pass_fds`)
    process: subprocess.Popen[bytes] | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    restarts: int = 0
    started_at: float = 0.0


@dataclass
class Supervisor:
    """Starts the reconciler and ETA children, restarts one that dies, stops both.

    A child is a fresh interpreter (`python -m gpufleet.control.service TARGET`), not a fork:
    the parent holds database connections, sockets and threads a forked child must not
    share. It gets its `ChildConfig` pickled on stdin and answers `ready` on stdout once its
    loop runs; its log goes to the server's stderr. (multiprocessing's spawn would re-import
    the server's whole command line module in each child first: seconds at every start.)
    """

    config: ChildConfig
    targets: tuple[tuple[str, str], ...] = (
        ("reconciler", "gpufleet.control.service:reconciler_main"),
        ("eta", "gpufleet.control.service:eta_main"),
    )
    shared: Any = None  # `shared.SharedState`: where `/readyz` reads the reconciler's state
    listen_fds: tuple[int, ...] = ()  # API worker i listens on listen_fds[i % len]
    poll_s: float = 0.5
    _children: list[_Child] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # start vs stop

    def start(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            self._children = [
                _Child(name, target, self._fds(name)) for name, target in self.targets
            ]
            for child in self._children:
                self._spawn(child)
            self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)
            self._thread.start()

    def running(self, name: str) -> bool:
        """The child `name` is alive and its loop runs (it finished starting)."""
        child = next((c for c in self._children if c.name == name), None)
        return bool(
            child is not None
            and child.process is not None
            and child.process.poll() is None
            and child.ready.is_set()
        )

    def _fds(self, name: str) -> tuple[int, ...]:
        """The server's shared memory for every child; a listening socket only for API
        workers (a reconciler holding it would keep accepting connections nobody serves)."""
        fds = [self.config.shared_fd, self._listen_fd(name)]
        return tuple(fd for fd in fds if fd is not None)

    def _listen_fd(self, name: str) -> int | None:
        if not name.startswith("api-") or not self.listen_fds:
            return self.config.listen_fd if name.startswith("api") else None
        return self.listen_fds[int(name.removeprefix("api-")) % len(self.listen_fds)]

    def pids(self) -> dict[str, int | None]:
        return {c.name: c.process.pid if c.process else None for c in self._children}

    def _spawn(self, child: _Child) -> None:
        child.ready = threading.Event()
        process = subprocess.Popen(
            [sys.executable, "-m", "gpufleet.control.service", child.target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            pass_fds=child.fds,
            # API workers in a group of their own: uvicorn stops on SIGINT, and a Ctrl-C at
            # the terminal must reach only the supervisor, which then stops every child
            process_group=0 if child.name.startswith("api") else None,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        config = self.config
        if (fd := self._listen_fd(child.name)) is not None:
            config = dataclasses.replace(config, listen_fd=fd)
        process.stdin.write(pickle.dumps(config))
        process.stdin.close()
        child.process = process
        child.started_at = time.monotonic()
        threading.Thread(
            target=_await_ready, args=(process.stdout, child.ready), daemon=True
        ).start()
        log.info("started the %s process (pid %s)", child.name, process.pid)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.shared is not None:
                self.shared.reconciler_running = self.running("reconciler")
            for child in self._children:
                process = child.process
                if process is None or process.poll() is None or self._stop.is_set():
                    continue
                if time.monotonic() - child.started_at > 60:
                    child.restarts = 0  # it ran a while: a fresh failure, not a crash loop
                delay = RESTART_BACKOFF_S[min(child.restarts, len(RESTART_BACKOFF_S) - 1)]
                log.error(
                    "the %s process exited with code %s; restarting it in %.0f s",
                    child.name,
                    process.returncode,
                    delay,
                )
                child.restarts += 1
                if self._stop.wait(delay):
                    return
                self._spawn(child)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM both children (the reconciler finishes its cycle and releases the lease),
        then wait; a child still running after `timeout_s` is killed."""
        with self._lock:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for child in self._children:
            if child.process is not None and child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + timeout_s
        for child in self._children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("the %s process did not stop in time; killing it", child.name)
                child.process.kill()
                child.process.wait(timeout=5)


def server_targets(workers: int) -> tuple[tuple[str, str], ...]:
    """The children of `gpufleet serve`: the reconciler, the ETAs and `workers` API workers."""
    api = tuple((f"api-{i}", "gpufleet.server.worker:api_main") for i in range(workers))
    return (*Supervisor.targets, *api)


def listen(host: str, port: int, workers: int) -> list[Any]:
    """The API's listening sockets: one per worker with `SO_REUSEPORT` on Linux (the kernel
    balances connections across them), else one that every worker shares. A port in use is
    a `UserError`."""
    import socket

    from gpufleet.errors import UserError

    balanced = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
    try:
        first = socket.create_server((host, port), backlog=2048, reuse_port=balanced)
        port = first.getsockname()[1]  # port 0: the one the kernel chose, for all
        rest = [
            socket.create_server((host, port), backlog=2048, reuse_port=True)
            for _ in range(workers - 1 if balanced else 0)
        ]
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return [first, *rest]


def default_workers() -> int:
    """One API worker per core the server may use, at most four (`--workers 0`): more
    processes than cores only add memory and context switches."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


def _await_ready(stdout: IO[bytes], ready: threading.Event) -> None:
    """Read the child's stdout until it says `ready` (then until it closes)."""
    for line in stdout:
        if line == READY:
            ready.set()
    stdout.close()


def _child_main(argv: list[str]) -> None:
    """`python -m gpufleet.control.service module:function`: the config on stdin; `ready`
    written to stdout (then stdout goes to stderr, so nothing else can garble the pipe)."""
    config = pickle.loads(sys.stdin.buffer.read())
    _die_with_parent(config.parent_pid)  # before any heavy import
    module, _, function = argv[0].partition(":")
    target: ChildTarget = getattr(importlib.import_module(module), function)
    pipe = os.dup(1)
    os.dup2(2, 1)

    def ready() -> None:
        os.write(pipe, READY)
        os.close(pipe)

    target(config, ready)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
