"""`gpufleet serve`'s parts: executors, the node inventory, the reconciler loop.

Several servers may share one PostgreSQL store: each serves the API; the one
holding the lease (`control.leader`) runs the reconciler, and a standby takes
over when the lease lapses. On SIGTERM/SIGINT the loop stops after its cycle
and the lease is released, so a standby takes over at once.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import Cluster
from gpufleet.control.executors.base import CHECKPOINT_SIGNAL, Executor, ExecutorView, Inventory
from gpufleet.control.executors.emulated import EmulatedExecutor, EmulatedLogView
from gpufleet.control.executors.inventory import inventory_from_nvidia_smi
from gpufleet.control.executors.local import LocalExecutor
from gpufleet.control.executors.slurm import SlurmExecutor
from gpufleet.control.executors.slurm_commands import SlurmOptions
from gpufleet.control.leader import release
from gpufleet.control.models import Device, NodeRecord
from gpufleet.control.periodic import Periodic
from gpufleet.control.reconciler import Reconciler, ReconcilerConfig
from gpufleet.control.telemetry_sources import TelemetryLoop, TelemetryOptions, make_collector
from gpufleet.errors import UserError
from gpufleet.sched.preempt import GRACE_PERIOD_S

log = logging.getLogger("gpufleet.server")
EXECUTORS = ("local", "emulated", "slurm")


@dataclass(frozen=True)
class ServeOptions:
    executor: str = "emulated"
    profile: str = "default"
    cycle_interval_s: float = 2.0
    access_log: bool = False  # a line per request from every API worker (uvicorn's)
    grace_s: float = GRACE_PERIOD_S
    speed: float = 1.0  # emulated executor: emulated seconds per real second
    run_root: Path = Path("gpufleet-runs")
    holder: str = ""
    slurm: SlurmOptions | None = None  # the slurm executor's settings (`--slurm-*` options)
    telemetry: TelemetryOptions = field(default_factory=TelemetryOptions)  # `--telemetry` ...


def make_executor(
    options: ServeOptions, clock: Callable[[], float]
) -> tuple[Executor, Inventory | None]:
    if options.executor == "emulated":
        return EmulatedExecutor(speed=options.speed, clock=clock), None
    if options.executor == "local":
        return LocalExecutor(options.run_root, clock=clock), inventory_from_nvidia_smi()
    if options.executor == "slurm":
        # check() fails early (UserError) when sbatch/squeue are missing or slurmctld is down
        executor = SlurmExecutor(options.run_root, options.slurm or SlurmOptions(), clock=clock)
        executor.check()
        if executor.kill_wait_s is not None and executor.kill_wait_s < options.grace_s:
            log.warning(
                "Slurm's KillWait is %g s, shorter than the grace period (%g s): a stopped "
                "job gets SIGKILL after %g s; set KillWait=%d in slurm.conf (gpufleet export "
                "slurm does)",
                executor.kill_wait_s,
                options.grace_s,
                executor.kill_wait_s,
                round(options.grace_s),
            )
        return executor, None  # Slurm sets CUDA_VISIBLE_DEVICES itself: no inventory
    raise UserError(f"executor {options.executor!r}: use one of {', '.join(EXECUTORS)}")


def api_view(options: ServeOptions, sessions: sessionmaker[Session]) -> ExecutorView:
    """What an API worker shows of the executor: its name and its logs, built without
    starting or checking anything (the reconciler's process owns the executor). The emulated
    executor keeps its log lines in the reconciler's process, so the API reads the
    attempt's events from the store; the others read files any process can (run
    directories, Slurm's output files)."""
    if options.executor == "emulated":
        return EmulatedLogView(sessions)
    if options.executor == "local":
        return LocalExecutor(options.run_root)
    if options.executor == "slurm":
        return SlurmExecutor(options.run_root, options.slurm or SlurmOptions())
    raise UserError(f"executor {options.executor!r}: use one of {', '.join(EXECUTORS)}")


def sync_nodes(
    sessions: sessionmaker[Session], cluster: Cluster, now_s: float, inventory: Inventory | None
) -> None:
    """Record the cluster's nodes and devices (new ones up; states of known ones kept)."""
    with sessions.begin() as s:
        known = {n.name: n for n in s.scalars(select(NodeRecord))}
        devices = {(d.node, d.index) for d in s.scalars(select(Device))}
        for node in cluster.nodes:
            if node.name not in known:
                s.add(
                    NodeRecord(
                        name=node.name,
                        accelerator=node.accelerator,
                        gpus=node.gpus,
                        state="up",
                        reason="",
                        updated_s=now_s,
                        created_s=now_s,
                    )
                )
        s.flush()
        for node in cluster.nodes:
            uuids = inventory.gpu_uuids.get(node.name, ()) if inventory else ()
            for g in range(node.gpus):
                if (node.name, g) not in devices:
                    uuid_ = uuids[g] if g < len(uuids) else f"{node.name}/gpu{g}"
                    s.add(Device(node=node.name, index=g, uuid=uuid_, mig=[]))


class ReconcileLoop(Periodic):
    """The reconciler on a background thread, one cycle every `interval_s` (the queue ETAs
    run elsewhere: `control.service` gives them their own process)."""

    def __init__(self, reconciler: Reconciler, interval_s: float) -> None:
        super().__init__("reconciler")
        self.reconciler = reconciler
        self.cycle_interval_s = interval_s

    def body(self) -> None:
        report = self.reconciler.cycle()
        if report.admitted or report.preempted or report.finished:
            log.info(
                "cycle %d: %d admitted, %d preempted, %d finished, %d pending (%.3f s)",
                report.cycle,
                len(report.admitted),
                len(report.preempted),
                len(report.finished),
                report.pending,
                report.wall_s,
            )

    def interval_s(self) -> float:
        # a standby checks the lease twice a cycle, so it takes over within two cycles of
        # the leader's death (the lease lasts 1.5 cycles)
        every = self.cycle_interval_s
        return every if self.reconciler.leading else every / 2

    def stop(self) -> None:
        super().stop()
        with self.reconciler.sessions.begin() as s:
            release(s, "reconciler", self.reconciler.config.holder)


def telemetry_loop(
    options: ServeOptions, reconciler: Reconciler, executor: Executor
) -> TelemetryLoop | None:
    """The telemetry reader beside the reconciler (None: `--telemetry off`, or nothing to
    read on this host); it reads only while this server leads."""
    collector = make_collector(
        options.telemetry, options.executor, reconciler.sessions, reconciler.cluster, executor
    )
    if collector is None:
        return None
    return TelemetryLoop(
        reconciler.sessions,
        collector,
        options.telemetry.config,
        lambda: reconciler.leading,
        webhook=options.telemetry.idle_webhook,
    )


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def reconciler_config(options: ServeOptions) -> ReconcilerConfig:
    return ReconcilerConfig(
        profile=options.profile,
        grace_s=options.grace_s,
        lease_s=1.5 * options.cycle_interval_s,
        holder=options.holder or default_holder(),
        # the signal a job gets before a stop is the engine's checkpoint signal (--slurm-signal)
        checkpoint_signal=options.slurm.checkpoint_signal if options.slurm else CHECKPOINT_SIGNAL,
    )
