"""The `slurm` executor: each attempt is one Slurm batch job on the nodes gpufleet chose.

gpufleet stays the scheduler: it decides who runs where, preempts and requeues, and
Slurm carries the decision out. So the executor pins everything:

* **start** writes a batch script and submits it *held* (``sbatch --hold``) with
  ``--nodelist`` (gpufleet's nodes), ``--gres=gpu[:TYPE]:N`` per node and one task per
  worker, ``--no-requeue`` (a requeue is a new gpufleet attempt, never Slurm's own) and
  ``--export=NONE`` (the server's environment, its database URL included, stays out),
  records the Slurm job id, then ``scontrol release``-s it. The job name encodes the
  attempt (``<tag>-job-<id>-<attempt>``), so `start` is idempotent even across a crash
  between submitting and recording: it first looks the name up in squeue (and sacct),
  adopts a job it finds, and releases it if it is still held.
* the **batch script** starts one ``srun`` step per node, one task per worker, each with
  ``RANK``/``LOCAL_RANK`` (from ``SLURM_LOCALID``), ``NODE_RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR`` (worker 0's node address) and ``MASTER_PORT`` (from ``SLURM_JOB_ID``),
  and its share of the node's GPUs in ``CUDA_VISIBLE_DEVICES``. Ranks follow gpufleet's
  placement exactly. When one step fails the script stops the others (gang semantics,
  like ``--kill-on-bad-exit`` across steps) and exits with the failing code.
* **signal** is ``scancel --signal=NAME`` to the job's steps (the workers), or to the
  batch shell (``--batch``, which passes it on to the steps) or to both (``--full``):
  `SlurmOptions.signal_scope`. **ask_to_stop** (a preemption, a cancel: the grace period
  begins) sends the checkpoint signal, then ``scancel``s the job: Slurm sends SIGTERM to
  every step and SIGKILL after its ``KillWait``, and its accounting says CANCELLED (a
  SIGTERM of gpufleet's own would end the job FAILED, exit 143). **stop** (the grace is
  over) is ``scancel`` again. The grace a job gets is therefore the shorter of gpufleet's
  and Slurm's KillWait; `check` reads KillWait (`kill_wait_s`), the server warns when it is
  the shorter, and the exported slurm.conf sets it to the profile's grace.
* **poll** reads ``squeue`` for live states, ``scontrol show job`` for exact exit codes,
  and ``sacct`` (slurmdbd) or ``sacct -c`` (jobcomp/filetxt) for jobs slurmctld has
  forgotten. Checkpoints use the local executor's ack marker
  (``$GPUFLEET_CHECKPOINT_DIR/gpufleet.ack``), which needs the run root on a file system
  the nodes share with the server.
* **node_states** reads ``scontrol show node`` each cycle: DOWN and DRAIN reach the
  scheduler as gpufleet node states (`control.engine_nodes`).

Everything the executor knows about an attempt is in its run directory (as for the local
executor) or in Slurm, never only in memory: ``slurm.json`` (the Slurm job id),
``job.sbatch``, ``released``, ``stopped``, ``reported-started``, ``checkpoint.json``,
``final.json``, and what the job writes there itself (``output.log``,
``worker-<rank>.log``, ``staged.json``).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.cluster import Cluster
from gpufleet.control.engine_nodes import NodeStatus
from gpufleet.control.executors.base import (
    CHECKPOINT_SIGNAL,
    ExecEvent,
    Launch,
    RunKey,
    run_dir,
)
from gpufleet.control.executors.local import (  # the same files, read the same way
    ACK_FILE,
    KILLED_EXIT_CODE,
    _read_json,
    _tail,
    ack_events,
    checkpoint_dir,
    signal_number,
    worker_env,
)
from gpufleet.control.executors.runner import write_atomic, write_json_atomic
from gpufleet.control.executors.slurm_text import (
    JOBCOMP_FIELDS,
    NODE_LOSS_STATES,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    SlurmJob,
    SlurmNode,
    by_name,
    config_value,
    group_prefix,
    job_name,
    natural_key,
    parse_nodes,
    parse_sacct,
    parse_scontrol_job,
    parse_seconds,
    parse_squeue,
)
from gpufleet.errors import UserError

log = logging.getLogger(__name__)

SignalScope = Literal["steps", "batch", "full"]
Accounting = Literal["auto", "sacct", "jobcomp", "none"]
SIGNAL_SCOPES: tuple[SignalScope, ...] = ("steps", "batch", "full")
ACCOUNTING: tuple[Accounting, ...] = ("auto", "sacct", "jobcomp", "none")
COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
# an attempt Slurm refused (or gpufleet could not express): no worker ran, as the local
# executor's failed staging
NOT_SUBMITTED_EXIT_CODE = 125
STAGING_FAILED_EXIT_CODE = 125
# a submitted job that neither squeue nor accounting knows this long after its submission
# is lost (slurmctld lost its state, or the job was purged and there is no accounting)
LOST_AFTER_S = 60.0
# sbatch errors that say "try again", not "this request is wrong"
_TRANSIENT = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Zero Bytes were transmitted|"
    r"Connection refused|temporarily unable|Resource temporarily unavailable|"
    r"Communication connection failure",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# set per task by the batch script, not once for the job
_PER_TASK = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "RANK",
        "NODE_RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "PET_NODE_RANK",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "GPUFLEET_GPU_FRACTION",
    }
)

_SLURM_JSON = "slurm.json"
_SCRIPT = "job.sbatch"
_HOSTFILE = "hostfile"
_RELEASED = "released"
_STOPPED = "stopped"
_REPORTED_STARTED = "reported-started"
_REPORTED_STAGED = "reported-staged"
_CHECKPOINT_JSON = "checkpoint.json"
_FINAL_JSON = "final.json"
_OUTPUT = "output.log"
_STAGED_JSON = "staged.json"
_STAGING_ERROR = "staging-error.txt"


@dataclass(frozen=True)
class SlurmOptions:
    """How the executor talks to one Slurm cluster (frozen and picklable: `ServeOptions` carries
    it into the reconciler's process)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    tag: str = "gpufleet"  # job names are <tag>-job-<id>-<attempt>; one tag per gpufleet store
    checkpoint_signal: str = CHECKPOINT_SIGNAL
    signal_scope: SignalScope = "steps"
    accounting: Accounting = "auto"
    sbatch_args: tuple[str, ...] = ()  # anything else the site needs (--mem, --time, ...)
    # (gpufleet node, Slurm node) for the nodes whose names differ (`match_nodes`)
    node_names: tuple[tuple[str, str], ...] = ()
    slurm_conf: str | None = None  # else $SLURM_CONF or Slurm's default
    timeout_s: float = 30.0  # per command


@dataclass(frozen=True, slots=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], Mapping[str, str], float], CommandResult]


class SlurmError(RuntimeError):
    """A Slurm command failed (or could not be run)."""


def run_command(
    argv: Sequence[str], extra_env: Mapping[str, str], timeout_s: float
) -> CommandResult:
    """Run one Slurm command with the server's environment plus `extra_env`."""
    try:
        done = subprocess.run(
            list(argv),
            env={**os.environ, **extra_env},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return CommandResult(-1, "", f"{argv[0]}: {exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


def missing_commands(accounting: Accounting = "auto") -> list[str]:
    needed = [*COMMANDS, *(("sacct",) if accounting in ("sacct", "jobcomp") else ())]
    return [c for c in needed if shutil.which(c) is None]


class SlurmExecutor:
    """Runs attempts as Slurm batch jobs (see the module doc); thread-safe.

    `root` is the run root: batch scripts, outputs and checkpoints live under it, so it
    must be on a file system the Slurm nodes share with the server. `run` is injectable
    so that the command lines can be tested without Slurm.
    """

    name = "slurm"

    def __init__(
        self,
        root: Path,
        options: SlurmOptions = SlurmOptions(),
        clock: Callable[[], float] = time.time,
        *,
        run: Runner = run_command,
    ) -> None:
        if options.signal_scope not in SIGNAL_SCOPES:
            raise UserError(
                f"signal scope {options.signal_scope!r}: use {', '.join(SIGNAL_SCOPES)}"
            )
        if options.accounting not in ACCOUNTING:
            raise UserError(f"accounting {options.accounting!r}: use {', '.join(ACCOUNTING)}")
        try:
            signal_number(options.checkpoint_signal)
        except ValueError as exc:
            raise UserError(f"checkpoint signal: {exc}") from None
        self.root = Path(root)
        self.options = options
        self._clock = clock
        self._run = run
        self._env = {"SLURM_TIME_FORMAT": "%s"}
        if options.slurm_conf:
            self._env["SLURM_CONF"] = options.slurm_conf
        self._to_slurm = dict(options.node_names)
        self._from_slurm = {v: k for k, v in self._to_slurm.items()}
        self._nodes: dict[str, SlurmNode] = {}  # by Slurm name
        self._lock = threading.RLock()
        self.accounting: Accounting = options.accounting
        self._queue: dict[str, SlurmJob] | None = None  # squeue of the last `active()`
        # Slurm's KillWait, read by `check` (None: unknown): SIGTERM to SIGKILL of a scancel
        self.kill_wait_s: float | None = None

    # -- set-up ---------------------------------------------------------------------------

    def check(self) -> SlurmExecutor:
        """Fail early with one clear message: commands missing, slurmctld not answering.
        Also settles `accounting` when it is "auto" (sacct if slurmdbd answers, else the
        jobcomp file if Slurm writes one, else none)."""
        missing = missing_commands(self.options.accounting)
        if missing:
            raise UserError(
                f"the slurm executor needs {', '.join(missing)} on PATH (Debian: apt-get "
                "install slurm-client; sacct needs slurmdbd on the cluster)"
            )
        try:
            self.nodes(refresh=True)
        except SlurmError as exc:
            raise UserError(f"cannot read Slurm's nodes (is slurmctld up?): {exc}") from None
        if self.accounting == "auto":
            self.accounting = self._detect_accounting()
        config = self._cmd(["scontrol", "show", "config"])
        if config.returncode == 0:
            self.kill_wait_s = parse_seconds(config_value(config.stdout, "KillWait") or "")
        return self

    def _detect_accounting(self) -> Accounting:
        probe = self._cmd(["sacct", "-n", "-X", "-P", "-S", "now", "-E", "now", "-o", "JobIDRaw"])
        if probe.returncode == 0:
            return "sacct"
        done = self._cmd(["scontrol", "show", "config"])
        if done.returncode == 0 and (config_value(done.stdout, "JobCompType") or "").endswith(
            "filetxt"
        ):
            return "jobcomp"
        return "none"

    def _cmd(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandResult:
        return self._run(argv, {**self._env, **(env or {})}, self.options.timeout_s)

    def _ok(self, argv: Sequence[str]) -> str:
        done = self._cmd(argv)
        if done.returncode != 0:
            raise SlurmError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    # -- inventory --------------------------------------------------------------------------

    def nodes(self, refresh: bool = False) -> list[SlurmNode]:
        """Slurm's nodes (`scontrol show node -o`), by Slurm name; cached until `refresh`."""
        with self._lock:
            if refresh or not self._nodes:
                found = parse_nodes(self._ok(["scontrol", "show", "node", "-o"]))
                self._nodes = {n.name: n for n in found}
            return list(self._nodes.values())

    def slurm_name(self, node: str) -> str:
        return self._to_slurm.get(node, node)

    def gpufleet_name(self, node: str) -> str:
        return self._from_slurm.get(node, node)

    def node_states(self) -> dict[str, NodeStatus]:
        """Every node's health by gpufleet name ({} when slurmctld does not answer: then
        nothing changes, rather than every node going down)."""
        try:
            nodes = self.nodes(refresh=True)
        except SlurmError as exc:
            log.warning("cannot read Slurm's node states: %s", exc)
            return {}
        return {self.gpufleet_name(n.name): NodeStatus(n.state, n.reason) for n in nodes}

    # -- orders -----------------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Submit the attempt held, record its Slurm job id, release it; a no-op if done before.

        A Slurm job already named for this attempt (a crash after sbatch, before the
        record) is adopted instead of submitting a second one. An attempt that cannot be
        expressed (MIG slices, GPU fractions) or that sbatch refuses is recorded as failed,
        and `poll` reports it exited with `NOT_SUBMITTED_EXIT_CODE`; an sbatch that could
        not reach slurmctld records nothing, so the reconciler's next `start` retries.
        """
        key = launch.key
        rd = run_dir(self.root, key)
        with self._lock:
            record = _read_json(rd / _SLURM_JSON)
            if record is not None:
                if record.get("slurm_job_id") and not (rd / _RELEASED).exists():
                    self._release(rd, str(record["slurm_job_id"]))
                return
            rd.mkdir(parents=True, exist_ok=True)
            checkpoints = checkpoint_dir(self.root, key.job_id)
            checkpoints.mkdir(parents=True, exist_ok=True)
            now_s = self._clock()
            ack = checkpoints / ACK_FILE
            baseline_ns = ack.stat().st_mtime_ns if ack.exists() else -1
            write_json_atomic(
                rd / _CHECKPOINT_JSON, {"acked_ns": baseline_ns, "signalled_s": now_s}
            )
            ranks = [w.rank for w in launch.workers]
            interval = launch.checkpoint_interval_s
            existing = self._find(key)
            if existing is not None:
                log.info("%s: adopting Slurm job %s", key.name, existing.job_id)
                self._record(rd, existing.job_id, now_s, ranks, interval, adopted=True)
                if existing.held:
                    self._release(rd, existing.job_id)
                else:
                    write_atomic(rd / _RELEASED, "")
                return
            try:
                plan = self._plan(launch, rd, checkpoints)
            except _UnsupportedError as exc:
                self._record_error(rd, now_s, ranks, str(exc))
                return
            write_atomic(rd / _SCRIPT, plan.script)
            env: dict[str, str] = {}
            if plan.hostfile is not None:
                write_atomic(rd / _HOSTFILE, plan.hostfile)
                env["SLURM_HOSTFILE"] = str(rd / _HOSTFILE)
            argv = ["sbatch", "--hold", "--parsable", *self.options.sbatch_args, str(rd / _SCRIPT)]
            done = self._cmd(argv, env)
            if done.returncode != 0:
                why = done.stderr.strip() or f"sbatch exited with {done.returncode}"
                if _TRANSIENT.search(why) or done.returncode < 0:
                    log.warning("%s: sbatch failed, retrying next cycle: %s", key.name, why)
                    return
                self._record_error(rd, now_s, ranks, f"sbatch refused the job: {why}")
                return
            job_id = done.stdout.strip().split(";", 1)[0]
            self._record(rd, job_id, now_s, ranks, interval)
            self._release(rd, job_id)

    def signal(self, key: RunKey, signal: str = CHECKPOINT_SIGNAL) -> None:
        """``scancel --signal`` to the attempt's workers (see `SlurmOptions.signal_scope`);
        a no-op if it is not running (a held or pending job has no process to signal)."""
        name = _signal_name(signal)
        with self._lock:
            job_id = self._job_id(key)
            if job_id is None:
                return
            scope = {"steps": [], "batch": ["--batch"], "full": ["--full"]}[
                self.options.signal_scope
            ]
            done = self._cmd(["scancel", f"--signal={name}", *scope, job_id])
            if done.returncode != 0:
                log.info("%s: scancel --signal=%s: %s", key.name, name, done.stderr.strip())

    def ask_to_stop(self, key: RunKey, checkpoint_signal: str | None) -> None:
        """The checkpoint signal to the workers (when given), then ``scancel`` (see the
        module doc: Slurm's own SIGTERM, KillWait and CANCELLED state)."""
        if checkpoint_signal is not None:
            self.signal(key, checkpoint_signal)
        self.stop(key)

    def stop(self, key: RunKey) -> None:
        """``scancel`` the job (Slurm sends SIGTERM, then SIGKILL after its KillWait); the
        ``stopped`` marker first, so that the end is reported as a stop."""
        with self._lock:
            job_id = self._job_id(key)
            if job_id is None:
                return
            rd = run_dir(self.root, key)
            if not (rd / _STOPPED).exists():
                write_atomic(rd / _STOPPED, f"{self._clock()}\n")
            done = self._cmd(["scancel", job_id])
            if done.returncode != 0:
                log.info("%s: scancel: %s", key.name, done.stderr.strip())

    # -- observation ------------------------------------------------------------------------

    def active(self) -> set[RunKey]:
        """Attempts submitted and not yet reported ended: the run directories', plus any job
        squeue shows under this tag without one (adopted: a restarted server, or one on
        another host with the same run root missing, finds its jobs again)."""
        with self._lock:
            keys: set[RunKey] = set()
            for record in self.root.glob(f"job-*/attempt-*/{_SLURM_JSON}"):
                rd = record.parent
                if (rd / _FINAL_JSON).exists():
                    continue
                try:
                    keys.add(
                        RunKey(
                            int(rd.parent.name.removeprefix("job-")),
                            int(rd.name.removeprefix("attempt-")),
                        )
                    )
                except ValueError:
                    continue
            self._queue = self._squeue()
            if self._queue is not None:
                for key, job in by_name(list(self._queue.values()), self.options.tag).items():
                    rd = run_dir(self.root, key)
                    if key in keys or (rd / _SLURM_JSON).exists():
                        continue
                    rd.mkdir(parents=True, exist_ok=True)
                    self._record(rd, job.job_id, self._clock(), [], None, adopted=True)
                    if not job.held:
                        write_atomic(rd / _RELEASED, "")
                    keys.add(key)
            return keys

    def poll(self, now_s: float) -> Sequence[ExecEvent]:
        """started / staged / checkpointed / exited / lost events, each reported once (also
        across restarts); sends the periodic checkpoint signals."""
        with self._lock:
            keys = self.active()
            queue = self._queue
            events: list[ExecEvent] = []
            for key in sorted(keys):
                events.extend(self._poll_one(key, now_s, queue))
            return events

    def final_event(self, key: RunKey) -> ExecEvent | None:
        """How the attempt ended, for a reconciler that did not record it: the saved report,
        else accounting's record of a job by the attempt's name (a server that was down
        longer than slurmctld keeps finished jobs)."""
        rd = run_dir(self.root, key)
        data = _read_json(rd / _FINAL_JSON)
        if data is not None:
            return ExecEvent(key=key, **{k: v for k, v in data.items() if k != "key"})
        if self.accounting not in ("sacct", "jobcomp"):
            return None
        found = self._accounted_by_name(job_name(self.options.tag, key))
        if found is None or not found.terminal:
            return None
        with self._lock:
            if not (rd / _SLURM_JSON).exists():
                rd.mkdir(parents=True, exist_ok=True)
                self._record(rd, found.job_id, self._clock(), [], None, adopted=True)
            return self._finish(rd, self._end_event(key, found, rd, self._clock()))

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """The batch output (Slurm's and the script's messages), the staging error if any,
        then each worker's output under a '[rank N]' header when there are several."""
        if tail_bytes <= 0:
            return ""
        rd = run_dir(self.root, key)
        record = _read_json(rd / _SLURM_JSON) or {}
        ranks = [int(r) for r in record.get("ranks", [])] or sorted(
            int(p.stem.removeprefix("worker-")) for p in rd.glob("worker-*.log")
        )
        parts = [_tail(rd / _OUTPUT, tail_bytes)]
        if record.get("error"):
            parts.insert(0, f"{record['error']}\n".encode())
        for rank in ranks:
            text = _tail(rd / f"worker-{rank}.log", tail_bytes)
            if len(ranks) > 1:
                if text and not text.endswith(b"\n"):
                    text += b"\n"
                text = f"[rank {rank}]\n".encode() + text
            parts.append(text)
        return b"".join(parts)[-tail_bytes:].decode("utf-8", errors="replace")

    def accounted_jobs(self, since_s: float, until_s: float | None = None) -> list[SlurmJob]:
        """This tag's jobs in accounting (sacct, slurmdbd) that ran or ended in the window:
        what `control.slurm_usage` compares with the ledger."""
        if self.accounting != "sacct":
            raise UserError(
                "comparing the ledger with Slurm needs sacct with slurmdbd "
                f"(accounting here: {self.accounting})"
            )

        def stamp(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))

        window = ["-S", stamp(since_s), "-E", stamp(until_s) if until_s else "now"]
        out = self._ok(["sacct", "-X", "-n", "-P", *window, "-o", SACCT_FIELDS])
        return [j for j in parse_sacct(out) if by_name([j], self.options.tag)]

    def slurm_job_id(self, key: RunKey) -> str | None:
        """The Slurm job id of an attempt, if it was submitted."""
        record = _read_json(run_dir(self.root, key) / _SLURM_JSON)
        job_id = record.get("slurm_job_id") if record else None
        return str(job_id) if job_id else None

    # -- internals: submission --------------------------------------------------------------

    def _plan(self, launch: Launch, rd: Path, checkpoints: Path) -> _Plan:
        for w in launch.workers:
            if w.gpu_fraction is not None:
                raise _UnsupportedError("GPU fractions are not supported by the slurm executor yet")
            if w.devices and not w.gpus:
                raise _UnsupportedError("MIG slices are not supported by the slurm executor yet")
        if not launch.workers:
            raise _UnsupportedError("a launch without workers")
        if len({len(w.gpus) for w in launch.workers}) != 1:
            raise _UnsupportedError("workers with different GPU counts")
        nodes = {w.node: self.slurm_name(w.node) for w in launch.workers}
        known = {n.name: n for n in self.nodes()}
        if any(s not in known for s in nodes.values()):
            known = {n.name: n for n in self.nodes(refresh=True)}
        unknown = sorted(n for n, s in nodes.items() if s not in known)
        if unknown:
            raise _UnsupportedError(f"node {', '.join(unknown)} is not a Slurm node")
        master = known[nodes[launch.workers[0].node]].addr
        env = worker_env(launch, launch.workers[0], host=master, checkpoints=checkpoints, rundir=rd)
        data = [
            (d.source, str(Path(d.target) if Path(d.target).is_absolute() else rd / d.target))
            for d in launch.data
        ]
        return plan_batch_job(
            launch,
            name=job_name(self.options.tag, launch.key),
            run_dir=rd,
            slurm_nodes=nodes,
            gpu_types={s: known[s].gpu_type for s in nodes.values()},
            env={k: v for k, v in env.items() if k not in _PER_TASK},
            options=self.options,
            data=data,
        )

    def _find(self, key: RunKey) -> SlurmJob | None:
        """A Slurm job already submitted for this attempt (by its name), if any."""
        name = job_name(self.options.tag, key)
        done = self._cmd(["squeue", "--me", "-h", "-t", "all", "-n", name, "-o", SQUEUE_FORMAT])
        if done.returncode == 0:
            jobs = parse_squeue(done.stdout)
            if jobs:
                return by_name(jobs, self.options.tag).get(key)
        if self.accounting in ("sacct", "jobcomp"):
            return self._accounted_by_name(name)
        return None

    def _record(
        self,
        rd: Path,
        job_id: str,
        now_s: float,
        ranks: list[int],
        interval_s: float | None,
        *,
        adopted: bool = False,
    ) -> None:
        write_json_atomic(
            rd / _SLURM_JSON,
            {
                "slurm_job_id": job_id,
                "submitted_s": now_s,
                "ranks": ranks,
                "checkpoint_interval_s": interval_s,
                "adopted": adopted,
            },
        )

    def _record_error(self, rd: Path, now_s: float, ranks: list[int], why: str) -> None:
        log.warning("%s: not submitted: %s", rd, why)
        write_json_atomic(
            rd / _SLURM_JSON,
            {"slurm_job_id": None, "submitted_s": now_s, "ranks": ranks, "error": why},
        )

    def _release(self, rd: Path, job_id: str) -> None:
        done = self._cmd(["scontrol", "release", job_id])
        # "already released", or it ended meanwhile: nothing is held either way
        if done.returncode == 0 or "not held" in done.stderr or "completed" in done.stderr:
            write_atomic(rd / _RELEASED, "")
        else:
            log.warning("scontrol release %s failed, retrying: %s", job_id, done.stderr.strip())

    def _job_id(self, key: RunKey) -> str | None:
        rd = run_dir(self.root, key)
        if (rd / _FINAL_JSON).exists():
            return None
        return self.slurm_job_id(key)

    # -- internals: observation -------------------------------------------------------------

    def _squeue(self) -> dict[str, SlurmJob] | None:
        done = self._cmd(["squeue", "--me", "-h", "-t", "all", "-o", SQUEUE_FORMAT])
        if done.returncode != 0:
            log.warning("squeue failed: %s", done.stderr.strip())
            return None
        return {j.job_id: j for j in parse_squeue(done.stdout)}

    def _scontrol_job(self, job_id: str) -> SlurmJob | None:
        done = self._cmd(["scontrol", "show", "job", "-o", job_id])
        return parse_scontrol_job(done.stdout) if done.returncode == 0 else None

    def _accounted(self, job_id: str) -> SlurmJob | None:
        if self.accounting == "sacct":
            argv = ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", SACCT_FIELDS]
        elif self.accounting == "jobcomp":
            argv = ["sacct", "-c", "-n", "-P", "-j", job_id, "-o", JOBCOMP_FIELDS]
        else:
            return None
        done = self._cmd(argv)
        if done.returncode != 0:
            return None
        return next((j for j in parse_sacct(done.stdout) if j.job_id == job_id), None)

    def _accounted_by_name(self, name: str) -> SlurmJob | None:
        fields = SACCT_FIELDS if self.accounting == "sacct" else JOBCOMP_FIELDS
        mode = "-X" if self.accounting == "sacct" else "-c"
        argv = ["sacct", mode, "-n", "-P", "--name", name, "-S", "now-30days", "-o", fields]
        done = self._cmd(argv)
        if done.returncode != 0:
            return None
        jobs = [j for j in parse_sacct(done.stdout) if j.name == name]
        return max(jobs, key=lambda j: natural_key(j.job_id)) if jobs else None

    def _poll_one(
        self, key: RunKey, now_s: float, queue: Mapping[str, SlurmJob] | None
    ) -> list[ExecEvent]:
        rd = run_dir(self.root, key)
        record = _read_json(rd / _SLURM_JSON) or {}
        if record.get("error"):
            event = ExecEvent(key, "exited", now_s, NOT_SUBMITTED_EXIT_CODE, record["error"])
            return [self._finish(rd, event)]
        job_id = str(record.get("slurm_job_id"))
        events: list[ExecEvent] = []
        staged = _read_json(rd / _STAGED_JSON)
        if staged is not None and not (rd / _REPORTED_STAGED).exists():
            write_atomic(rd / _REPORTED_STAGED, "")
            events.append(
                ExecEvent(key, "staged", float(staged["at_s"]), seconds=float(staged["seconds"]))
            )
        checkpoint = _read_json(rd / _CHECKPOINT_JSON) or {"acked_ns": -1, "signalled_s": now_s}
        events.extend(ack_events(self.root, key, checkpoint))
        if queue is None:
            return events  # squeue failed: judge nothing this time
        job = queue.get(job_id)
        if job is None:
            job = self._accounted(job_id)
            if job is None:
                submitted_s = float(record.get("submitted_s", now_s))
                if now_s - submitted_s > LOST_AFTER_S:
                    detail = f"Slurm no longer knows job {job_id}"
                    events.append(self._finish(rd, ExecEvent(key, "lost", now_s, detail=detail)))
                return events
        elif job.terminal:
            exact = self._scontrol_job(job_id) or self._accounted(job_id)
            if exact is not None and exact.terminal:
                job = exact
        if self._started(rd, record, job) and not (rd / _REPORTED_STARTED).exists():
            write_atomic(rd / _REPORTED_STARTED, "")
            assert job.start_s is not None
            events.append(ExecEvent(key, "started", job.start_s))
        if job.terminal:
            events.append(self._finish(rd, self._end_event(key, job, rd, now_s)))
            return events
        interval_s = _launch_interval(rd)
        if (
            job.state == "RUNNING"
            and interval_s
            and now_s - float(checkpoint["signalled_s"]) >= interval_s
        ):
            checkpoint["signalled_s"] = now_s
            write_json_atomic(rd / _CHECKPOINT_JSON, checkpoint)
            self.signal(key, self.options.checkpoint_signal)
        return events

    def _started(self, rd: Path, record: Mapping[str, Any], job: SlurmJob) -> bool:
        """The workers run: every rank wrote its ``started-<rank>`` marker (Slurm's RUNNING
        alone only means the batch script started; a signal sent before the srun steps exist
        reaches nobody). An ended job that ran counts as started, markers or not."""
        if not job.ran:
            return False
        ranks = record.get("ranks") or []
        return job.terminal or all((rd / f"started-{r}").exists() for r in ranks)

    def _end_event(self, key: RunKey, job: SlurmJob, rd: Path, now_s: float) -> ExecEvent:
        code = job.exit_code
        if code is None:
            code = 0 if job.state == "COMPLETED" else 1
        if job.state != "COMPLETED" and code == 0:
            code = KILLED_EXIT_CODE  # cancelled or timed out without an exit status of its own
        where = ",".join(self.gpufleet_name(n) for n in job.nodes) or "no node"
        at_s = job.end_s or now_s
        detail = f"Slurm job {job.job_id} {job.state} on {where}"
        if (rd / _STOPPED).exists():
            detail += " (stopped)"
        elif job.state in NODE_LOSS_STATES:
            return ExecEvent(key, "lost", at_s, detail=detail)
        staging = rd / _STAGING_ERROR
        if code == STAGING_FAILED_EXIT_CODE and staging.exists():
            detail += f": {staging.read_text(encoding='utf-8', errors='replace').strip()}"
        return ExecEvent(key, "exited", at_s, code, detail)

    def _finish(self, rd: Path, event: ExecEvent) -> ExecEvent:
        data = asdict(event)
        del data["key"]
        write_json_atomic(rd / _FINAL_JSON, data)
        return event


class _UnsupportedError(Exception):
    """A launch the executor cannot express as a Slurm job."""


def _signal_name(signal: str) -> str:
    """ "SIGUSR1" -> "USR1" (scancel's spelling), checked against this platform's signals."""
    signal_number(signal)
    upper = signal.upper()
    return upper.removeprefix("SIG")


def _launch_interval(rd: Path) -> float | None:
    record = _read_json(rd / _SLURM_JSON) or {}
    value = record.get("checkpoint_interval_s")
    return float(value) if value else None


# -- the batch script ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    script: str
    hostfile: str | None  # SLURM_HOSTFILE for an uneven placement


# Run by each srun task: its rank from the node's rank list, its share of the node's GPUs,
# its output into worker-<rank>.log, then the job's command.
TASK_PRELUDE = r"""set -u
IFS=, read -r -a gpufleet_ranks <<<"$GPUFLEET_RANKS"
export RANK=${gpufleet_ranks[$SLURM_LOCALID]} LOCAL_RANK=$SLURM_LOCALID
gpufleet_g=${GPUFLEET_GPUS_PER_TASK:-0}
if ((gpufleet_g == 0)); then
  export CUDA_VISIBLE_DEVICES= NVIDIA_VISIBLE_DEVICES=
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a gpufleet_d <<<"$CUDA_VISIBLE_DEVICES"
  gpufleet_n=${#gpufleet_d[@]}
  if ((gpufleet_n > gpufleet_g && gpufleet_n >= (SLURM_LOCALID + 1) * gpufleet_g)); then
    gpufleet_v=$(IFS=,; echo "${gpufleet_d[*]:$((SLURM_LOCALID * gpufleet_g)):$gpufleet_g}")
    export CUDA_VISIBLE_DEVICES=$gpufleet_v NVIDIA_VISIBLE_DEVICES=$gpufleet_v
  else
    export NVIDIA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES
  fi
fi
exec >>"$GPUFLEET_RUN_DIR/worker-$RANK.log" 2>&1
: >"$GPUFLEET_RUN_DIR/started-$RANK"
exec "$@"
"""

# How the batch shell treats the signals it gets: with scope "batch" it is the only one
# signalled and passes the signal on to the steps (scancel without --batch reaches every
# task once; srun itself would end its step on SIGTERM instead of passing it on); with
# "full" the steps get it directly too, so the shell only survives it.
_SIGNAL_HANDLERS = {
    "steps": "",
    "batch": (
        'gpufleet_pass_on() { scancel --signal="$1" "$SLURM_JOB_ID" || true; }\n'
        + "".join(
            f"trap 'gpufleet_pass_on {s}' {s}\n" for s in ("USR1", "USR2", "TERM", "INT", "HUP")
        )
    ),
    "full": "".join(f"trap ':' {s}\n" for s in ("USR1", "USR2", "TERM", "INT", "HUP")),
}

_WAIT_FOR_STEPS = r"""gpufleet_running() {  # is any of these pids running (not gone, not a zombie)?
  local p st
  for p in "$@"; do
    read -r _ _ st _ 2>/dev/null <"/proc/$p/stat" || continue
    [ "$st" = Z ] || return 0
  done
  return 1
}
gpufleet_rc=0
while ((${#gpufleet_pids[@]})); do
  gpufleet_done=
  wait -n -p gpufleet_done "${gpufleet_pids[@]}"
  gpufleet_status=$?
  [ -n "${gpufleet_done:-}" ] || continue  # a signal interrupted the wait
  gpufleet_left=()
  for gpufleet_p in "${gpufleet_pids[@]}"; do
    [ "$gpufleet_p" = "$gpufleet_done" ] || gpufleet_left+=("$gpufleet_p")
  done
  gpufleet_pids=("${gpufleet_left[@]}")
  if ((gpufleet_status != 0 && gpufleet_rc == 0)); then
    gpufleet_rc=$gpufleet_status
    # 143 is a worker that ended on SIGTERM: a stop, which the others got too (and the
    # kill follows the grace period); any other failure stops the gang after a moment
    for _ in $(seq 20); do
      ((gpufleet_status != 143)) && gpufleet_running "${gpufleet_pids[@]}" || break
      sleep 0.1
    done
    if ((gpufleet_status != 143)) && gpufleet_running "${gpufleet_pids[@]}"; then
      echo "gpufleet: a worker step exited with $gpufleet_status; stopping the others" >&2
      kill -TERM "${gpufleet_pids[@]}" 2>/dev/null
    fi
  fi
done
exit "$gpufleet_rc"
"""

_STAGE = r"""gpufleet_stage() {
  mkdir -p -- "$(dirname -- "$2")" || return 1
  if [ -d "$1" ]; then
    mkdir -p -- "$2" && cp -a -- "$1/." "$2/"
  elif [ -e "$1" ]; then
    cp -a -- "$1" "$2"
  else
    echo "data source $1 does not exist" >&2
    return 1
  fi
}
gpufleet_t0=$(date +%s%N)
if ! { @STEPS@; } 2>.staging.err; then
  { printf 'staging failed: '; cat .staging.err; } >.staging.tmp
  mv -f .staging.tmp staging-error.txt
  exit @CODE@
fi
gpufleet_t1=$(date +%s%N)
printf '{"at_s": %d.%09d, "seconds": %d.%09d}\n' \
  $((gpufleet_t1 / 1000000000)) $((gpufleet_t1 % 1000000000)) \
  $(((gpufleet_t1 - gpufleet_t0) / 1000000000)) $(((gpufleet_t1 - gpufleet_t0) % 1000000000)) \
  >.staged.tmp
mv -f .staged.tmp staged.json
"""


def plan_batch_job(
    launch: Launch,
    *,
    name: str,
    run_dir: Path,
    slurm_nodes: Mapping[str, str],
    gpu_types: Mapping[str, str | None],
    env: Mapping[str, str],
    options: SlurmOptions,
    data: Sequence[tuple[str, str]] = (),
) -> _Plan:
    """The batch script (and host file) for one attempt: a pure function of its inputs.

    `slurm_nodes` maps each worker's gpufleet node to its Slurm node; `gpu_types` gives
    each Slurm node's GRES type (None: untyped ``gpu:N``). Nodes appear in the order of
    their first worker, so node rank 0 holds rank 0 and ``MASTER_ADDR`` points there.
    """
    workers = launch.workers
    per_task = len(workers[0].gpus)
    order = list(dict.fromkeys(w.node for w in workers))
    ranks: dict[str, list[int]] = defaultdict(list)
    for w in workers:
        ranks[w.node].append(w.rank)
    counts = Counter(len(r) for r in ranks.values())
    even = len(counts) == 1
    types = {gpu_types.get(slurm_nodes[n]) for n in order}
    gpu_type = next(iter(types)) if len(types) == 1 else None
    typed = f"{gpu_type}:" if gpu_type else ""
    directives = [
        f"--job-name={name}",
        f"--output={run_dir / _OUTPUT}",
        "--open-mode=append",
        "--no-requeue",
        "--export=NONE",
        f"--nodes={len(order)}",
        f"--nodelist={','.join(slurm_nodes[n] for n in order)}",
    ]
    hostfile = None
    if even:
        per_node = len(ranks[order[0]])
        directives.append(f"--ntasks-per-node={per_node}")
        if per_task:
            directives.append(f"--gres=gpu:{typed}{per_node * per_task}")
    else:
        # an uneven placement (2 workers here, 1 there): tasks laid out by a host file
        directives += [f"--ntasks={len(workers)}", "--distribution=arbitrary"]
        if per_task:
            directives.append(f"--gpus-per-task={typed}{per_task}")
        hostfile = "".join(f"{slurm_nodes[w.node]}\n" for w in workers)
    for flag, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
    ):
        if value:
            directives.append(f"--{flag}={value}")
    lines = [
        "#!/bin/bash",
        f"# gpufleet job {launch.key.job_id} attempt {launch.key.attempt} "
        f"({launch.team}/{_one_line(launch.job_name)}), written by gpufleet's slurm executor",
        *(f"#SBATCH {d}" for d in directives),
        "set -u",
        "# each step below takes its node's share of the allocation, placed by gpufleet",
        "unset SLURM_HOSTFILE SLURM_DISTRIBUTION SLURM_GPUS_PER_TASK SLURM_TRES_PER_TASK",
    ]
    for k, v in sorted(env.items()):
        if _ENV_NAME.match(k):
            lines.append(f"export {k}={shlex.quote(v)}")
    port = str(launch.master_port) if launch.master_port else "$((29500 + SLURM_JOB_ID % 30000))"
    lines += [
        f"export MASTER_PORT={port} PET_MASTER_PORT={port}",
        f"export GPUFLEET_GPUS_PER_TASK={per_task}",
        f"cd {shlex.quote(str(run_dir))}",
    ]
    if data:
        steps = " && ".join(
            f"gpufleet_stage {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in data
        )
        lines.append(
            _STAGE.replace("@STEPS@", steps).replace("@CODE@", str(STAGING_FAILED_EXIT_CODE))
        )
    lines.append(_SIGNAL_HANDLERS[options.signal_scope].rstrip("\n"))
    lines.append(f"GPUFLEET_TASK={shlex.quote(TASK_PRELUDE)}")
    lines.append(f"gpufleet_command=({' '.join(shlex.quote(c) for c in launch.command)})")
    lines.append("gpufleet_pids=()")
    for node_rank, node in enumerate(order):
        node_ranks = ranks[node]
        lines.append(
            f"GPUFLEET_RANKS={','.join(map(str, node_ranks))} NODE_RANK={node_rank} "
            f"PET_NODE_RANK={node_rank} LOCAL_WORLD_SIZE={len(node_ranks)} "
            f"srun --export=ALL --nodes=1 --ntasks={len(node_ranks)} "
            f"--nodelist={slurm_nodes[node]} --distribution=block --kill-on-bad-exit=1 "
            f'/bin/bash -c "$GPUFLEET_TASK" gpufleet-task "${{gpufleet_command[@]}}" &'
        )
        lines.append("gpufleet_pids+=($!)")
    lines.append(_WAIT_FOR_STEPS.rstrip("\n"))
    script = "\n".join(line for line in lines if line) + "\n"
    return _Plan(script=script, hostfile=hostfile)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:80]


# -- the cluster as Slurm describes it --------------------------------------------------------


@dataclass(frozen=True)
class NodeMatch:
    """gpufleet's nodes against Slurm's: the name map and what does not fit."""

    names: tuple[tuple[str, str], ...] = ()  # (gpufleet node, Slurm node) where they differ
    problems: tuple[str, ...] = field(default=())


def match_nodes(cluster: Cluster, slurm: Sequence[SlurmNode]) -> NodeMatch:
    """Map each gpufleet node to a Slurm node and check that it has the GPUs gpufleet counts.

    A gpufleet node whose name Slurm has keeps it. Otherwise node ``<group>-<i>`` (how
    gpufleet names the nodes of a group) is the i-th Slurm node, in natural order, whose
    name is ``<group>`` followed by an index (``n-0`` -> ``n1``, ``gpu-3`` -> ``gpu004``).
    """
    by_name = {n.name: n for n in slurm}
    groups: dict[str, list[SlurmNode]] = defaultdict(list)
    for n in sorted(slurm, key=lambda n: natural_key(n.name)):
        groups[group_prefix(n.name)].append(n)
    names: list[tuple[str, str]] = []
    problems: list[str] = []
    used: set[str] = set()
    for node in cluster.nodes:
        target = by_name.get(node.name)
        if target is None:
            group, _, index = node.name.rpartition("-")
            members = groups.get(group, [])
            if index.isdigit() and int(index) < len(members):
                target = members[int(index)]
                names.append((node.name, target.name))
        if target is None:
            problems.append(f"node {node.name}: no Slurm node of that name or group")
            continue
        if target.name in used:
            problems.append(f"node {node.name}: Slurm node {target.name} is already mapped")
            continue
        used.add(target.name)
        if target.gpus < node.gpus:
            problems.append(
                f"node {node.name}: Slurm node {target.name} has {target.gpus} GPUs (GRES), "
                f"gpufleet counts {node.gpus}"
            )
    return NodeMatch(tuple(names), tuple(problems))


def cluster_spec_from_slurm(
    slurm: Sequence[SlurmNode],
    accelerators: Mapping[str, str],
    *,
    name: str = "slurm",
    partition: str | None = None,
) -> dict[str, Any]:
    """A cluster spec (as a mapping, for YAML) with one node group per Slurm name prefix,
    GRES type and GPU count, so that `match_nodes` maps it back onto the same nodes.

    `accelerators` maps a GRES type (or "" for untyped GPUs) to a catalog accelerator.
    Nodes without GPUs, or outside `partition`, are left out.
    """

    chosen = [n for n in slurm if n.gpus > 0 and (partition is None or partition in n.partitions)]
    groups: dict[tuple[str, str, int], list[SlurmNode]] = defaultdict(list)
    for n in sorted(chosen, key=lambda n: natural_key(n.name)):
        groups[(group_prefix(n.name), n.gpu_type or "", n.gpus)].append(n)
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for (prefix, gres, gpus), members in groups.items():
        accelerator = accelerators.get(gres)
        if accelerator is None:
            raise UserError(
                f"GRES type {gres or '(untyped gpu)'} of {members[0].name}: say which "
                f"accelerator it is (--accelerator {gres or 'gpu'}=NAME)"
            )
        group = prefix
        if group in taken:
            raise UserError(
                f"Slurm nodes named {prefix}N have different GPUs ({gres}:{gpus} and others); "
                "gpufleet needs one node group per name prefix"
            )
        taken.add(group)
        out.append(
            {
                "name": group,
                "count": len(members),
                "accelerator": get_accelerator(accelerator).name,
                "gpus_per_node": gpus,
            }
        )
    if not out:
        raise UserError(
            "Slurm reports no node with GPUs (GRES gpu)"
            + (f" in partition {partition}" if partition else "")
        )
    return {"kind": "cluster", "name": name, "nodes": out}


def prepare(cluster: Cluster, options: SlurmOptions, run_root: Path) -> SlurmOptions:
    """`options` with the node name map for `cluster`, after checking it against Slurm:
    the commands exist, slurmctld answers, and every gpufleet node is a Slurm node with at
    least its GPUs. Raises UserError with every problem at once (`gpufleet serve` exits 2)."""
    executor = SlurmExecutor(run_root, options).check()
    found = match_nodes(cluster, executor.nodes())
    if found.problems:
        raise UserError(
            "the cluster spec does not match Slurm's nodes (scontrol show node):\n  "
            + "\n  ".join(found.problems)
        )
    if options.partition is not None:
        renamed = dict(found.names)
        partitions = {n.name: n.partitions for n in executor.nodes()}
        outside = [
            node.name
            for node in cluster.nodes
            if options.partition not in partitions[renamed.get(node.name, node.name)]
        ]
        if outside:
            raise UserError(f"nodes not in partition {options.partition}: {', '.join(outside)}")
    return replace(options, node_names=found.names)
