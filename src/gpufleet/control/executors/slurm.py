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

Beside this module: `slurm_commands` (options, running the commands, the queries),
`slurm_batch` (the script), `slurm_attempt` (the run directory, how a job ended),
`slurm_cluster` (gpufleet's nodes against Slurm's) and `slurm_text` (reading the output).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

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
    ack_events,
    checkpoint_dir,
    read_json,
    signal_number,
    worker_env,
)
from gpufleet.control.executors.runner import write_atomic, write_json_atomic
from gpufleet.control.executors.slurm_attempt import (
    CHECKPOINT_JSON,
    FINAL_JSON,
    HOSTFILE,
    NOT_SUBMITTED_EXIT_CODE,
    RELEASED,
    REPORTED_STAGED,
    REPORTED_STARTED,
    SCRIPT,
    SLURM_JSON,
    STAGED_JSON,
    STOPPED,
    attempt_logs,
    end_event,
    launch_interval_s,
    read_final,
    recorded_job_id,
    workers_started,
    write_error_record,
    write_final,
    write_record,
)
from gpufleet.control.executors.slurm_batch import (
    PER_TASK_ENV,
    BatchPlan,
    UnsupportedLaunchError,
    check_launch,
    plan_batch_job,
)
from gpufleet.control.executors.slurm_cluster import match_nodes
from gpufleet.control.executors.slurm_commands import (
    ACCOUNTING,
    SIGNAL_SCOPES,
    Accounting,
    CommandResult,
    Runner,
    SlurmError,
    SlurmOptions,
    accounted_job,
    accounted_job_by_name,
    detect_accounting,
    find_attempt_job,
    missing_commands,
    run_command,
    scontrol_job,
)
from gpufleet.control.executors.slurm_text import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    SlurmJob,
    SlurmNode,
    by_name,
    config_value,
    job_name,
    parse_nodes,
    parse_sacct,
    parse_seconds,
    parse_squeue,
)
from gpufleet.errors import UserError

log = logging.getLogger(__name__)

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

_DEFAULT_OPTIONS = SlurmOptions()


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
        options: SlurmOptions = _DEFAULT_OPTIONS,
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
            self.accounting = detect_accounting(self._cmd)
        config = self._cmd(["scontrol", "show", "config"])
        if config.returncode == 0:
            self.kill_wait_s = parse_seconds(config_value(config.stdout, "KillWait") or "")
        return self

    def _cmd(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandResult:
        return self._run(argv, {**self._env, **(env or {})}, self.options.timeout_s)

    def command(self, argv: Sequence[str]) -> CommandResult:
        """A Slurm command with this executor's environment and timeout (telemetry's sstat)."""
        return self._cmd(argv)

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
            record = read_json(rd / SLURM_JSON)
            if record is not None:
                if record.get("slurm_job_id") and not (rd / RELEASED).exists():
                    self._release(rd, str(record["slurm_job_id"]))
                return
            rd.mkdir(parents=True, exist_ok=True)
            checkpoints = checkpoint_dir(self.root, key.job_id)
            checkpoints.mkdir(parents=True, exist_ok=True)
            now_s = self._clock()
            ack = checkpoints / ACK_FILE
            baseline_ns = ack.stat().st_mtime_ns if ack.exists() else -1
            write_json_atomic(rd / CHECKPOINT_JSON, {"acked_ns": baseline_ns, "signalled_s": now_s})
            ranks = [w.rank for w in launch.workers]
            interval = launch.checkpoint_interval_s
            existing = find_attempt_job(self._cmd, self.accounting, self.options.tag, key)
            if existing is not None:
                log.info("%s: adopting Slurm job %s", key.name, existing.job_id)
                write_record(rd, existing.job_id, now_s, ranks, interval, adopted=True)
                if existing.held:
                    self._release(rd, existing.job_id)
                else:
                    write_atomic(rd / RELEASED, "")
                return
            try:
                plan = self._plan(launch, rd, checkpoints)
            except UnsupportedLaunchError as exc:
                self._record_error(rd, now_s, ranks, str(exc))
                return
            write_atomic(rd / SCRIPT, plan.script)
            env: dict[str, str] = {}
            if plan.hostfile is not None:
                write_atomic(rd / HOSTFILE, plan.hostfile)
                env["SLURM_HOSTFILE"] = str(rd / HOSTFILE)
            argv = ["sbatch", "--hold", "--parsable", *self.options.sbatch_args, str(rd / SCRIPT)]
            done = self._cmd(argv, env)
            if done.returncode != 0:
                why = done.stderr.strip() or f"sbatch exited with {done.returncode}"
                if _TRANSIENT.search(why) or done.returncode < 0:
                    log.warning("%s: sbatch failed, retrying next cycle: %s", key.name, why)
                    return
                self._record_error(rd, now_s, ranks, f"sbatch refused the job: {why}")
                return
            job_id = done.stdout.strip().split(";", 1)[0]
            write_record(rd, job_id, now_s, ranks, interval)
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
            if not (rd / STOPPED).exists():
                write_atomic(rd / STOPPED, f"{self._clock()}\n")
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
            for record in self.root.glob(f"job-*/attempt-*/{SLURM_JSON}"):
                rd = record.parent
                if (rd / FINAL_JSON).exists():
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
                    if key in keys or (rd / SLURM_JSON).exists():
                        continue
                    rd.mkdir(parents=True, exist_ok=True)
                    write_record(rd, job.job_id, self._clock(), [], None, adopted=True)
                    if not job.held:
                        write_atomic(rd / RELEASED, "")
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
        saved = read_final(rd, key)
        if saved is not None:
            return saved
        if self.accounting not in ("sacct", "jobcomp"):
            return None
        found = accounted_job_by_name(self._cmd, self.accounting, job_name(self.options.tag, key))
        if found is None or not found.terminal:
            return None
        with self._lock:
            if not (rd / SLURM_JSON).exists():
                rd.mkdir(parents=True, exist_ok=True)
                write_record(rd, found.job_id, self._clock(), [], None, adopted=True)
            return write_final(rd, end_event(key, found, rd, self._clock(), self.gpufleet_name))

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """The batch output (Slurm's and the script's messages), the staging error if any,
        then each worker's output under a '[rank N]' header when there are several."""
        return attempt_logs(run_dir(self.root, key), tail_bytes)

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
        return recorded_job_id(run_dir(self.root, key))

    # -- internals: submission --------------------------------------------------------------

    def _plan(self, launch: Launch, rd: Path, checkpoints: Path) -> BatchPlan:
        check_launch(launch)
        nodes = {w.node: self.slurm_name(w.node) for w in launch.workers}
        known = {n.name: n for n in self.nodes()}
        if any(s not in known for s in nodes.values()):
            known = {n.name: n for n in self.nodes(refresh=True)}
        unknown = sorted(n for n, s in nodes.items() if s not in known)
        if unknown:
            raise UnsupportedLaunchError(f"node {', '.join(unknown)} is not a Slurm node")
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
            env={k: v for k, v in env.items() if k not in PER_TASK_ENV},
            options=self.options,
            data=data,
        )

    def _record_error(self, rd: Path, now_s: float, ranks: list[int], why: str) -> None:
        log.warning("%s: not submitted: %s", rd, why)
        write_error_record(rd, now_s, ranks, why)

    def _release(self, rd: Path, job_id: str) -> None:
        done = self._cmd(["scontrol", "release", job_id])
        # "already released", or it ended meanwhile: nothing is held either way
        if done.returncode == 0 or "not held" in done.stderr or "completed" in done.stderr:
            write_atomic(rd / RELEASED, "")
        else:
            log.warning("scontrol release %s failed, retrying: %s", job_id, done.stderr.strip())

    def _job_id(self, key: RunKey) -> str | None:
        rd = run_dir(self.root, key)
        if (rd / FINAL_JSON).exists():
            return None
        return self.slurm_job_id(key)

    # -- internals: observation -------------------------------------------------------------

    def _squeue(self) -> dict[str, SlurmJob] | None:
        done = self._cmd(["squeue", "--me", "-h", "-t", "all", "-o", SQUEUE_FORMAT])
        if done.returncode != 0:
            log.warning("squeue failed: %s", done.stderr.strip())
            return None
        return {j.job_id: j for j in parse_squeue(done.stdout)}

    def _poll_one(
        self, key: RunKey, now_s: float, queue: Mapping[str, SlurmJob] | None
    ) -> list[ExecEvent]:
        rd = run_dir(self.root, key)
        record = read_json(rd / SLURM_JSON) or {}
        if record.get("error"):
            event = ExecEvent(key, "exited", now_s, NOT_SUBMITTED_EXIT_CODE, record["error"])
            return [write_final(rd, event)]
        job_id = str(record.get("slurm_job_id"))
        events: list[ExecEvent] = []
        staged = read_json(rd / STAGED_JSON)
        if staged is not None and not (rd / REPORTED_STAGED).exists():
            write_atomic(rd / REPORTED_STAGED, "")
            events.append(
                ExecEvent(key, "staged", float(staged["at_s"]), seconds=float(staged["seconds"]))
            )
        checkpoint = read_json(rd / CHECKPOINT_JSON) or {"acked_ns": -1, "signalled_s": now_s}
        events.extend(ack_events(self.root, key, checkpoint))
        if queue is None:
            return events  # squeue failed: judge nothing this time
        job = queue.get(job_id)
        if job is None:
            job = accounted_job(self._cmd, self.accounting, job_id)
            if job is None:
                submitted_s = float(record.get("submitted_s", now_s))
                if now_s - submitted_s > LOST_AFTER_S:
                    detail = f"Slurm no longer knows job {job_id}"
                    events.append(write_final(rd, ExecEvent(key, "lost", now_s, detail=detail)))
                return events
        elif job.terminal:
            exact = scontrol_job(self._cmd, job_id) or accounted_job(
                self._cmd, self.accounting, job_id
            )
            if exact is not None and exact.terminal:
                job = exact
        if workers_started(rd, record, job) and not (rd / REPORTED_STARTED).exists():
            write_atomic(rd / REPORTED_STARTED, "")
            assert job.start_s is not None
            events.append(ExecEvent(key, "started", job.start_s))
        if job.terminal:
            events.append(write_final(rd, end_event(key, job, rd, now_s, self.gpufleet_name)))
            return events
        interval_s = launch_interval_s(rd)
        if (
            job.state == "RUNNING"
            and interval_s
            and now_s - float(checkpoint["signalled_s"]) >= interval_s
        ):
            checkpoint["signalled_s"] = now_s
            write_json_atomic(rd / CHECKPOINT_JSON, checkpoint)
            self.signal(key, self.options.checkpoint_signal)
        return events


def _signal_name(signal: str) -> str:
    """ "SIGUSR1" -> "USR1" (scancel's spelling), checked against this platform's signals."""
    signal_number(signal)
    upper = signal.upper()
    return upper.removeprefix("SIG")


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
