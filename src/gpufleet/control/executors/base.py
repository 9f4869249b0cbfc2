"""The executor interface: small on purpose, so Slurm (issue 10) fits it as well as a subprocess.

The reconciler owns every decision and the store; an executor only carries out
orders and reports what it observed. Every order names a job *attempt*
(`RunKey`), and every order is idempotent per attempt: starting an attempt that
already started (say the server died between asking and recording) does
nothing, which is how "started at most once per attempt, even across crashes"
holds. Executors keep what they need to answer after a restart on disk (the local
executor's run directories) or derive it (the emulated one), never only in memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

CHECKPOINT_SIGNAL = "SIGUSR1"  # the default checkpoint request, as Slurm's --signal uses
STOP_SIGNAL = "SIGTERM"


@dataclass(frozen=True, slots=True, order=True)
class RunKey:
    """One attempt of one job: the unit every executor order and report is about."""

    job_id: int
    attempt: int

    @property
    def name(self) -> str:
        return f"job-{self.job_id}-{self.attempt}"


@dataclass(frozen=True, slots=True)
class Worker:
    """One process of a (possibly distributed) job: where it runs and on which devices."""

    rank: int
    node: str
    local_rank: int  # rank among this job's workers on the same node
    gpus: tuple[int, ...] = ()  # GPU indices on the node
    devices: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES entries: indices, GPU or MIG UUIDs
    gpu_fraction: float | None = None


@dataclass(frozen=True, slots=True)
class DataInput:
    source: str
    target: str  # relative to the run directory unless absolute


@dataclass(frozen=True, slots=True)
class Launch:
    """Everything needed to start one attempt; built by the reconciler from the store."""

    key: RunKey
    job_name: str
    team: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    workers: tuple[Worker, ...]
    duration_s: float | None = None  # the emulated executor runs for this long
    checkpoint_interval_s: float | None = None
    data: tuple[DataInput, ...] = ()
    master_port: int = 29500

    @property
    def world_size(self) -> int:
        return len(self.workers)


EventKind = Literal["started", "staged", "checkpointed", "exited", "lost"]


@dataclass(frozen=True, slots=True)
class ExecEvent:
    """Something an executor observed about one attempt.

    `exited` carries `exit_code` (0: success; a negative code: killed by that signal);
    `lost` means the executor no longer knows the attempt (its processes vanished
    without an exit record, or a node died); `checkpointed` carries the time of the
    checkpoint the job acknowledged; `staged` the seconds data staging took.
    """

    key: RunKey
    kind: EventKind
    at_s: float
    exit_code: int | None = None
    detail: str = ""
    seconds: float | None = None


class Executor(Protocol):
    """What the reconciler needs from an engine. All methods are idempotent per `RunKey`."""

    name: str

    def start(self, launch: Launch) -> None:
        """Start the attempt unless it already started (then do nothing)."""

    def signal(self, key: RunKey, signal: str = CHECKPOINT_SIGNAL) -> None:
        """Send a signal (checkpoint request, SIGTERM) to every worker; no-op if not running."""

    def ask_to_stop(self, key: RunKey, checkpoint_signal: str | None) -> None:
        """Begin the attempt's grace period: the checkpoint signal first (when given), then
        the engine's own way of ending a job (SIGTERM to the workers; on Slurm ``scancel``,
        so its accounting says CANCELLED rather than FAILED). `stop` follows when the grace
        period is over."""

    def stop(self, key: RunKey) -> None:
        """Kill every worker of the attempt now; no-op if it is not running."""

    def poll(self, now_s: float) -> Sequence[ExecEvent]:
        """Events since the last poll (each reported once, also across server restarts)."""

    def active(self) -> set[RunKey]:
        """Attempts the executor believes are running (for reconciliation after a restart)."""

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """The attempt's combined output, at most the last `tail_bytes` bytes ('' if none)."""


class ExecutorView(Protocol):
    """What the API needs of an executor: its name and the logs of an attempt. The API runs
    in another process than the reconciler's executor (`control.service`), so a view
    answers from what any process can read: run directories, the store."""

    name: str

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        """The attempt's combined output, at most the last `tail_bytes` bytes ('' if none)."""


@dataclass(frozen=True, slots=True)
class Inventory:
    """Devices an executor found: node -> GPU UUIDs in index order (and MIG UUIDs by slice)."""

    gpu_uuids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    mig_uuids: Mapping[str, str] = field(default_factory=dict)  # slice id -> MIG UUID


def run_dir(root: Path, key: RunKey) -> Path:
    """Where the attempt's files live: logs, exit record, checkpoints, staged data."""
    return root / f"job-{key.job_id}" / f"attempt-{key.attempt}"
