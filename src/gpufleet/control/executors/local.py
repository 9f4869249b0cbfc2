"""Run attempts as processes on this host, surviving a restart of the server that started them.

Single host: every worker of a launch runs here, whatever `Worker.node` says; node
names only shape the distributed environment (NODE_RANK, LOCAL_RANK, ...), so a
multi-node job can be rehearsed on one machine. Slurm (issue 10) is the executor
for real multi-node runs.

Everything the executor knows lives in the attempt's run directory, never only in
memory, so a new `LocalExecutor` on the same root (after a crash) answers exactly
as the old one would have:

* ``launch.json``      what `poll` needs later: ranks, checkpoint interval, start time;
* ``launched``         written (atomically) *before* any process is spawned: its
  presence makes `start` a no-op, so an attempt is started at most once;
* ``spawn-<rank>.json`` the runner's pid and start time, written right after spawning;
* ``pid-<rank>.json`` / ``exit-<rank>.json`` / ``error-<rank>.txt``  written by the runner
  (`gpufleet.control.executors.runner`), which outlives the server and records how its
  child ended;
* ``worker-<rank>.log`` each worker's stdout and stderr;
* ``staged.json`` / ``staging-error.txt``  how data staging went;
* ``stopped``          `stop` was asked (a missing exit record then means "killed");
* ``reported-started``, ``reported-staged``, ``checkpoint.json`` and ``final.json``:
  what `poll` already reported. Each is written before `poll` returns the event, so
  an event is reported at most once even across restarts; ``final.json`` keeps the
  final event (`final_event`) for a reconciler that crashed before recording it.

Checkpoints: a job acknowledges one by writing or touching
``$GPUFLEET_CHECKPOINT_DIR/gpufleet.ack`` (the directory is per job, shared by its
attempts so that a restart finds the last checkpoint); every new mtime is one
``checkpointed`` event. When the launch has a checkpoint interval, `poll` sends the
checkpoint signal to every worker that often.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal as _signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from gpufleet.control.executors import runner
from gpufleet.control.executors.base import (
    CHECKPOINT_SIGNAL,
    STOP_SIGNAL,
    DataInput,
    ExecEvent,
    Launch,
    RunKey,
    Worker,
    run_dir,
)
from gpufleet.control.executors.runner import (
    exit_record_path,
    pid_record_path,
    process_alive,
    write_atomic,
    write_json_atomic,
)

ACK_FILE = "gpufleet.ack"
STAGING_FAILED_EXIT_CODE = 125  # no worker ran: a data input could not be staged
KILLED_EXIT_CODE = -int(_signal.SIGKILL)
# A rank with neither a spawn nor a pid record this long after `launched` was written
# was never spawned (the server died mid-start); before that, a start may be under way.
SPAWN_GRACE_S = 10.0
STOP_WAIT_S = 1.0  # how long `stop` waits for the runners it killed to be gone

_LAUNCHED = "launched"
_LAUNCH_JSON = "launch.json"
_STAGED_JSON = "staged.json"
_STAGING_ERROR = "staging-error.txt"
_STOPPED = "stopped"
_REPORTED_STARTED = "reported-started"
_REPORTED_STAGED = "reported-staged"
_CHECKPOINT_JSON = "checkpoint.json"
_FINAL_JSON = "final.json"
# Signals the runner forwards to its child; any other goes to the child directly.
_FORWARDED = frozenset(int(s) for s in runner.FORWARDED_SIGNALS)


def checkpoint_dir(root: Path, job_id: int) -> Path:
    """The job's checkpoint directory: shared by all its attempts, so a retry resumes."""
    return root / f"job-{job_id}" / "checkpoints"


def signal_number(name: str) -> int:
    """The number of a signal named like "SIGUSR1" (or "USR1"); ValueError if unknown."""
    full = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
    try:
        return int(_signal.Signals[full])
    except KeyError:
        raise ValueError(f"unknown signal {name!r}") from None


# what a job inherits from the server's environment: the basics a program needs and the
# GPU stack's settings, never the server's own configuration (GPUFLEET_DB may hold a
# password) or credentials it happens to have
INHERITED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "TZ",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "HF_HOME",
        "TRANSFORMERS_CACHE",
        "TORCH_HOME",
    }
)
INHERITED_PREFIXES = ("LC_", "NCCL_", "CUDA_MODULE_", "OMP_", "UCX_", "FI_")


def inherited_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)
    }


def _free_port(host: str) -> int:
    """A TCP port free on `host` now, for a job's torch.distributed rendezvous."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def worker_env(
    launch: Launch,
    worker: Worker,
    *,
    host: str,
    checkpoints: Path,
    rundir: Path,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one worker: `base` (default: a few of the server's variables, see
    `INHERITED`), the launch's, then ours on top.

    The executor's variables win over the launch's because they encode the
    placement: a job must not be able to name GPUs it was not given.
    """
    nodes = list(dict.fromkeys(w.node for w in launch.workers))  # order of first appearance
    per_node = Counter(w.node for w in launch.workers)
    visible = ",".join(worker.devices) if worker.devices else ",".join(map(str, worker.gpus))
    env = inherited_env() if base is None else dict(base)
    env.update(launch.env)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": visible,
            "NVIDIA_VISIBLE_DEVICES": visible,
            "GPUFLEET_JOB_ID": str(launch.key.job_id),
            "GPUFLEET_ATTEMPT": str(launch.key.attempt),
            "GPUFLEET_CHECKPOINT_DIR": str(checkpoints),
            "GPUFLEET_RUN_DIR": str(rundir),
            "MASTER_ADDR": host,
            "MASTER_PORT": str(launch.master_port),
            "WORLD_SIZE": str(launch.world_size),
            "RANK": str(worker.rank),
            "NODE_RANK": str(nodes.index(worker.node)),
            "LOCAL_RANK": str(worker.local_rank),
            "LOCAL_WORLD_SIZE": str(per_node[worker.node]),
            "PET_NNODES": str(len(nodes)),
            "PET_NODE_RANK": str(nodes.index(worker.node)),
            "PET_MASTER_ADDR": host,
            "PET_MASTER_PORT": str(launch.master_port),
        }
    )
    if worker.gpu_fraction is not None:
        env["GPUFLEET_GPU_FRACTION"] = repr(worker.gpu_fraction)
    return env


def read_json(path: Path) -> Any:
    """The JSON in `path`; None when there is no such file (yet)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def read_tail(path: Path, tail_bytes: int) -> bytes:
    """The last `tail_bytes` of `path`; nothing when there is no such file (yet)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - tail_bytes))
            return handle.read()
    except FileNotFoundError:
        return b""


class LocalExecutor:
    """Runs each worker of an attempt as a process group on this host (see the module doc).

    `clock` stamps what the executor itself does (start, stop); exit records carry
    the runner's wall-clock end time. `checkpoint_signal` is what `poll` sends every
    `Launch.checkpoint_interval_s`.
    """

    name = "local"

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        clock: Callable[[], float] = time.time,
        checkpoint_signal: str = CHECKPOINT_SIGNAL,
    ) -> None:
        self.root = Path(root)
        self.host = host
        self._clock = clock
        self.checkpoint_signal = checkpoint_signal
        self._checkpoint_signum = signal_number(checkpoint_signal)
        # One daemon thread per runner this instance spawned, blocked in wait(): it
        # reaps the runner the moment it ends (an unreaped one stays a zombie), even
        # if this instance is dropped. Nothing else depends on them: the state is on disk.
        self._reapers: dict[RunKey, list[threading.Thread]] = {}
        # The reconciler and an API thread may share one executor: `poll` must never
        # see an attempt halfway through `start`.
        self._lock = threading.RLock()

    # -- orders ---------------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Stage data, mark the attempt launched, then spawn one runner per worker.

        A no-op if the attempt was launched before, by this instance or an earlier
        one. A data input that cannot be staged does not raise: no worker is
        spawned and `poll` reports `exited` with `STAGING_FAILED_EXIT_CODE`.
        """
        key = launch.key
        rd = run_dir(self.root, key)
        with self._lock:
            if (rd / _LAUNCHED).exists():
                return
            ranks = [w.rank for w in launch.workers]
            if not ranks or len(set(ranks)) != len(ranks):
                raise ValueError(f"{key.name}: workers need distinct ranks, got {ranks}")
            rd.mkdir(parents=True, exist_ok=True)
            checkpoints = checkpoint_dir(self.root, key.job_id)
            checkpoints.mkdir(parents=True, exist_ok=True)
            staging_error = self._stage(launch.data, rd) if launch.data else None
            started_s = self._clock()
            write_json_atomic(
                rd / _LAUNCH_JSON,
                {
                    "job_id": key.job_id,
                    "attempt": key.attempt,
                    "job_name": launch.job_name,
                    "team": launch.team,
                    "command": list(launch.command),
                    "workers": [asdict(w) for w in launch.workers],
                    "ranks": ranks,
                    "checkpoint_interval_s": launch.checkpoint_interval_s,
                    "started_s": started_s,
                },
            )
            ack = checkpoints / ACK_FILE
            # an ack left by an earlier attempt is not a checkpoint of this one
            baseline_ns = ack.stat().st_mtime_ns if ack.exists() else -1
            write_json_atomic(
                rd / _CHECKPOINT_JSON, {"acked_ns": baseline_ns, "signalled_s": started_s}
            )
            write_atomic(rd / _LAUNCHED, f"{started_s}\n")
            if staging_error is not None:
                return
            if launch.master_port == 0:  # pick a port free on this host now
                launch = replace(launch, master_port=_free_port(self.host))
            for worker in launch.workers:
                self._spawn(launch, worker, rd, checkpoints)

    def signal(self, key: RunKey, signal: str = CHECKPOINT_SIGNAL) -> None:
        """Send `signal` to every live worker of the attempt; a no-op if none runs.

        Signals the runner forwards (SIGUSR1, SIGTERM, SIGINT) go to the runner, so
        that it keeps waiting and records the child's exit; any other goes straight
        to the child (a SIGKILL to the runner would lose the exit record). A worker
        whose runner has not yet started the job (a few milliseconds after `start`)
        does not get it.
        """
        signum = signal_number(signal)
        with self._lock:
            rd = run_dir(self.root, key)
            if not self._is_active(rd):
                return
            for rank in self._ranks(rd):
                self._send(rd, rank, signum)

    def ask_to_stop(self, key: RunKey, checkpoint_signal: str | None) -> None:
        """The checkpoint signal (when given), then SIGTERM, to every live worker."""
        if checkpoint_signal is not None:
            self.signal(key, checkpoint_signal)
        self.signal(key, STOP_SIGNAL)

    def stop(self, key: RunKey) -> None:
        """SIGKILL every worker's process group (runner, job and its children).

        The ``stopped`` marker is written first, so that `poll` (also after a
        restart) reports the missing exit records as `exited` -9, not `lost`.
        """
        with self._lock:
            rd = run_dir(self.root, key)
            if not self._is_active(rd):
                return
            if not (rd / _STOPPED).exists():
                write_atomic(rd / _STOPPED, f"{self._clock()}\n")
            for rank in self._ranks(rd):
                self._kill_rank(rd, rank)
            # SIGKILL takes effect within milliseconds; wait for it so that the caller
            # may hand the devices to the next job as soon as this returns.
            deadline_s = time.monotonic() + STOP_WAIT_S
            for reaper in self._reapers.pop(key, []):
                reaper.join(max(0.0, deadline_s - time.monotonic()))

    # -- observation -----------------------------------------------------------------------

    def poll(self, now_s: float) -> Sequence[ExecEvent]:
        """New events of every active attempt; also sends the periodic checkpoint signals."""
        with self._lock:
            events: list[ExecEvent] = []
            for key in sorted(self.active()):
                events.extend(self._poll_one(key, now_s))
            return events

    def active(self) -> set[RunKey]:
        """Launched attempts whose final event (`exited` or `lost`) is not reported yet."""
        keys: set[RunKey] = set()
        for marker in self.root.glob(f"job-*/attempt-*/{_LAUNCHED}"):
            rd = marker.parent
            if (rd / _FINAL_JSON).exists():
                continue
            try:
                job_id = int(rd.parent.name.removeprefix("job-"))
                attempt = int(rd.name.removeprefix("attempt-"))
            except ValueError:
                continue
            keys.add(RunKey(job_id, attempt))
        return keys

    def final_event(self, key: RunKey) -> ExecEvent | None:
        """The `exited` or `lost` event `poll` reported for the attempt, if it did.

        For a reconciler that crashed after `poll` returned the event but before it
        recorded it: the attempt is no longer `active`, and this tells how it ended.
        """
        data = read_json(run_dir(self.root, key) / _FINAL_JSON)
        if data is None:
            return None
        return ExecEvent(key=key, **{k: v for k, v in data.items() if k != "key"})

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """The workers' output, at most the last `tail_bytes` bytes; '[rank N]' headers if > 1."""
        if tail_bytes <= 0:
            return ""
        rd = run_dir(self.root, key)
        ranks = self._ranks(rd) or sorted(
            int(p.stem.removeprefix("worker-")) for p in rd.glob("worker-*.log")
        )
        parts: list[bytes] = []
        staging = rd / _STAGING_ERROR
        if staging.exists():
            parts.append(staging.read_bytes())
        for rank in ranks:
            text = read_tail(rd / f"worker-{rank}.log", tail_bytes)
            if len(ranks) > 1:
                if text and not text.endswith(b"\n"):
                    text += b"\n"
                text = f"[rank {rank}]\n".encode() + text
            parts.append(text)
        return b"".join(parts)[-tail_bytes:].decode("utf-8", errors="replace")

    # -- internals -------------------------------------------------------------------------

    def _stage(self, data: Sequence[DataInput], rd: Path) -> str | None:
        """Copy the data inputs into place; None when done, else the reason it failed.

        Copies rather than links so that a job cannot modify its source data, and a
        retried start simply copies again over a half-finished copy.
        """
        began = time.monotonic()
        try:
            for item in data:
                source = Path(item.source)
                target = Path(item.target)
                target = target if target.is_absolute() else rd / target
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir():
                    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
                elif source.exists():
                    shutil.copy2(source, target)
                else:
                    raise FileNotFoundError(f"data source {source} does not exist")
        except OSError as exc:
            reason = f"staging failed: {exc}"
            write_atomic(rd / _STAGING_ERROR, reason + "\n")
            return reason
        seconds = time.monotonic() - began
        write_json_atomic(rd / _STAGED_JSON, {"seconds": seconds, "at_s": self._clock()})
        return None

    def _spawn(self, launch: Launch, worker: Worker, rd: Path, checkpoints: Path) -> None:
        env = worker_env(launch, worker, host=self.host, checkpoints=checkpoints, rundir=rd)
        argv = [
            sys.executable,
            "-I",  # isolated: the job's PYTHONPATH and friends cannot break the runner
            runner.__file__,
            "--dir",
            str(rd),
            "--rank",
            str(worker.rank),
            "--",
            *launch.command,
        ]
        with (rd / f"worker-{worker.rank}.log").open("ab") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills it whole
            )
        stat = runner.read_proc_stat(proc.pid)
        write_json_atomic(
            rd / f"spawn-{worker.rank}.json",
            {
                "runner_pid": proc.pid,
                "runner_start_ticks": stat.start_ticks if stat else None,
                "spawned_s": self._clock(),
            },
        )
        reaper = threading.Thread(
            target=proc.wait, name=f"reap-{launch.key.name}-{worker.rank}", daemon=True
        )
        reaper.start()
        self._reapers.setdefault(launch.key, []).append(reaper)

    def _is_active(self, rd: Path) -> bool:
        return (rd / _LAUNCHED).exists() and not (rd / _FINAL_JSON).exists()

    def _ranks(self, rd: Path) -> list[int]:
        meta = read_json(rd / _LAUNCH_JSON)
        return [int(r) for r in meta["ranks"]] if meta else []

    def _runner_ident(self, rd: Path, rank: int) -> tuple[int, int | None] | None:
        """(pid, start ticks) of the rank's runner, from the spawn record or the runner's own."""
        spawn = read_json(rd / f"spawn-{rank}.json")
        if spawn is not None:
            return int(spawn["runner_pid"]), spawn["runner_start_ticks"]
        pid = read_json(pid_record_path(rd, rank))
        if pid is not None:
            return int(pid["runner_pid"]), pid["runner_start_ticks"]
        return None

    def _child_ident(self, rd: Path, rank: int) -> tuple[int, int | None] | None:
        pid = read_json(pid_record_path(rd, rank))
        if pid is None:
            return None
        return int(pid["child_pid"]), pid["child_start_ticks"]

    def _send(self, rd: Path, rank: int, signum: int) -> None:
        child_id = self._child_ident(rd, rank)
        if child_id is None:
            # The runner writes its pid record only after installing its handlers and
            # starting the job; before that, SIGUSR1 or SIGTERM would kill the runner
            # itself and lose the exit record. So the signal is dropped (stop() works).
            return
        runner_id = self._runner_ident(rd, rank)
        target = runner_id if signum in _FORWARDED else child_id
        if target is not None and process_alive(*target):
            with contextlib.suppress(ProcessLookupError):
                os.kill(target[0], signum)

    def _kill_rank(self, rd: Path, rank: int) -> None:
        """SIGKILL the rank's process group, and its child even if the runner is gone."""
        runner_id = self._runner_ident(rd, rank)
        if runner_id is not None and process_alive(*runner_id):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner_id[0], _signal.SIGKILL)
        child_id = self._child_ident(rd, rank)
        if child_id is not None and process_alive(*child_id):
            with contextlib.suppress(ProcessLookupError):
                if runner_id is not None and os.getpgid(child_id[0]) == runner_id[0]:
                    os.killpg(runner_id[0], _signal.SIGKILL)  # the job's own children too
                os.kill(child_id[0], _signal.SIGKILL)

    def _rank_state(self, rd: Path, rank: int, launched_s: float) -> tuple[str, Any]:
        """("exited", record) | ("running", None) | ("gone", reason) for one rank."""
        record = read_json(exit_record_path(rd, rank))
        if record is not None:
            return "exited", record
        runner_id = self._runner_ident(rd, rank)
        if runner_id is None:
            if time.time() - launched_s < SPAWN_GRACE_S:
                return "running", None
            return "gone", f"rank {rank} was never spawned"
        if process_alive(*runner_id):
            return "running", None
        record = read_json(exit_record_path(rd, rank))  # it may have exited just now
        if record is not None:
            return "exited", record
        return "gone", f"rank {rank}: its processes vanished without an exit record"

    def _finish(self, rd: Path, event: ExecEvent) -> ExecEvent:
        data = asdict(event)
        del data["key"]
        write_json_atomic(rd / _FINAL_JSON, data)
        self._reapers.pop(event.key, None)
        return event

    def _poll_one(self, key: RunKey, now_s: float) -> list[ExecEvent]:
        rd = run_dir(self.root, key)
        events: list[ExecEvent] = []
        meta = read_json(rd / _LAUNCH_JSON)
        if meta is None:  # cannot happen with launch.json written before `launched`
            return [self._finish(rd, ExecEvent(key, "lost", now_s, detail="no launch.json"))]
        ranks = [int(r) for r in meta["ranks"]]
        staging_error = rd / _STAGING_ERROR
        if staging_error.exists():
            detail = staging_error.read_text(encoding="utf-8").strip()
            event = ExecEvent(key, "exited", now_s, STAGING_FAILED_EXIT_CODE, detail)
            return [self._finish(rd, event)]

        spawns = [read_json(rd / f"spawn-{rank}.json") for rank in ranks]
        if not (rd / _REPORTED_STARTED).exists() and all(s is not None for s in spawns):
            write_atomic(rd / _REPORTED_STARTED, "")
            at_s = min(float(s["spawned_s"]) for s in spawns if s is not None)
            events.append(ExecEvent(key, "started", at_s))
        staged = read_json(rd / _STAGED_JSON)
        if staged is not None and not (rd / _REPORTED_STAGED).exists():
            write_atomic(rd / _REPORTED_STAGED, "")
            events.append(
                ExecEvent(key, "staged", float(staged["at_s"]), seconds=float(staged["seconds"]))
            )

        checkpoint = read_json(rd / _CHECKPOINT_JSON) or {"acked_ns": -1, "signalled_s": now_s}
        events.extend(self._acks(key, checkpoint))

        launched_s = (rd / _LAUNCHED).stat().st_mtime
        states = {rank: self._rank_state(rd, rank, launched_s) for rank in ranks}
        codes = {r: int(v["exit_code"]) for r, (s, v) in states.items() if s == "exited"}
        ended = {r: float(v["ended_s"]) for r, (s, v) in states.items() if s == "exited"}
        unfinished = [r for r in ranks if r not in codes]
        failed = [r for r in ranks if codes.get(r, 0) != 0]
        gone = [r for r in ranks if states[r][0] == "gone"]
        final: ExecEvent | None = None
        if failed:
            # gang semantics: one failed worker fails the attempt; the others are killed
            first = failed[0]
            detail = f"rank {first} exited with {codes[first]}"
            if unfinished:
                detail += f"; killed ranks {', '.join(map(str, unfinished))}"
            final = ExecEvent(key, "exited", ended[first], codes[first], detail)
        elif not unfinished:
            final = ExecEvent(key, "exited", max(ended.values()), 0)
        elif (rd / _STOPPED).exists():
            stopped_s = float((rd / _STOPPED).read_text(encoding="utf-8").strip())
            final = ExecEvent(key, "exited", stopped_s, KILLED_EXIT_CODE, "stopped")
        elif gone:
            final = ExecEvent(key, "lost", now_s, detail="; ".join(str(states[r][1]) for r in gone))
        if final is not None:
            for rank in unfinished:
                self._kill_rank(rd, rank)
            events.append(self._finish(rd, final))
            return events

        interval_s = meta.get("checkpoint_interval_s")
        if interval_s and now_s - float(checkpoint["signalled_s"]) >= float(interval_s):
            checkpoint["signalled_s"] = now_s
            write_json_atomic(rd / _CHECKPOINT_JSON, checkpoint)
            for rank in ranks:
                self._send(rd, rank, self._checkpoint_signum)
        return events

    def _acks(self, key: RunKey, checkpoint: dict[str, Any]) -> list[ExecEvent]:
        return ack_events(self.root, key, checkpoint)


def ack_events(root: Path, key: RunKey, checkpoint: dict[str, Any]) -> list[ExecEvent]:
    """A `checkpointed` event if the ack marker has a new mtime since the one in `checkpoint`
    (the attempt's ``checkpoint.json``, updated on disk before the event is returned, so it
    is reported once). Shared with the slurm executor, whose run root is shared the same way."""
    ack = checkpoint_dir(root, key.job_id) / ACK_FILE
    try:
        mtime_ns = ack.stat().st_mtime_ns
    except FileNotFoundError:
        return []
    if mtime_ns <= int(checkpoint["acked_ns"]):
        return []
    checkpoint["acked_ns"] = mtime_ns
    write_json_atomic(run_dir(root, key) / _CHECKPOINT_JSON, checkpoint)
    return [ExecEvent(key, "checkpointed", mtime_ns / 1e9)]
