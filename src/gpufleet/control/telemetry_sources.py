"""Which telemetry source `gpufleet serve` reads, and the loop that feeds the store from it.

The source follows the executor unless `--telemetry` names one: the emulated cluster
reads its jobs' declared busy profiles, a local host its GPUs through NVML, a Slurm
cluster its jobs' TRES usage (or, with `--dcgm-url`, the DCGM exporters most sites
run). The loop runs beside the reconciler, in its process, and reads only while that
server leads, so two servers never store the same reading twice.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.cluster import MILLI, Cluster
from gpufleet.control.executors.base import Executor
from gpufleet.control.models import Allocation, Job
from gpufleet.control.periodic import Periodic
from gpufleet.control.telemetry_rollup import roll_up
from gpufleet.control.telemetry_store import (
    IdleNotice,
    IngestReport,
    TelemetryConfig,
    gpu_index,
    ingest,
)
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.telemetry.emulated import PROFILES, EmulatedCollector, EmulatedGpu, EmulatedJob
from gpufleet.telemetry.samples import Collector, TelemetryError

log = logging.getLogger("gpufleet.telemetry")
SOURCES = ("auto", "emulated", "nvml", "dcgm", "slurm", "off")
# a job's declared busy profile on the emulated executor (its `env`), as the other test hooks
BUSY_PROFILE_ENV = "GPUFLEET_EMULATE_BUSY"


def busy_profile(env: dict[str, Any] | None, kind: str) -> str:
    """The profile an emulated job runs with: its env's, else by kind (a server serves, a
    notebook mostly waits for its user, the rest compute)."""
    declared = str(env.get(BUSY_PROFILE_ENV, "")) if env else ""
    if declared in PROFILES:
        return declared
    return {"inference": "inference", "interactive": "notebook"}.get(kind, "training")


def emulated_jobs(
    sessions: sessionmaker[Session], cluster: Cluster
) -> Callable[[], list[EmulatedJob]]:
    """The store's running jobs as the emulated collector wants them: one entry per node,
    with the memory each holds on each of its GPUs (`held_bytes`). Without it the collector
    split a shared GPU evenly, so a 1g.10gb slice's job read 35.2 GB used (88 % of half an
    80 GB A100) and a quarter share held as much as the half share beside it."""

    def read() -> list[EmulatedJob]:
        a = Allocation
        running = Job.state == "running"
        with sessions() as s:  # columns, not jobs: a job's JSON fields are many reads
            # each job's env once (a JSON decode), not once per GPU it holds
            jobs = {
                job_id: (busy_profile(env, kind), started_s or 0.0)
                for job_id, kind, env, started_s in s.execute(
                    select(Job.id, Job.kind, Job.env, Job.started_s).where(running)
                )
            }
            rows = s.execute(
                select(a.job_id, a.node, a.gpu, a.slice_id, a.kind, a.milli)
                .join(Job, a.job_id == Job.id)
                .where(a.released_s.is_(None), running)
            ).all()
        by: dict[tuple[int, str], tuple[EmulatedJob, dict[int, int | None]]] = {}
        for job_id, node, on, slice_id, kind, milli in rows:
            gpu = gpu_index(on, slice_id)
            if gpu is None or job_id not in jobs:
                continue
            if (job_id, node) not in by:
                profile, started_s = jobs[job_id]
                by[(job_id, node)] = (EmulatedJob(str(job_id), profile, node, (), started_s), {})
            held = by[(job_id, node)][1]
            size = held_bytes(cluster, node, kind, slice_id, milli)
            # two slices (or shares) of one GPU add up; one part unknown leaves it unknown
            before = held.get(gpu, 0)
            held[gpu] = None if size is None or before is None else before + size
        return [
            replace(
                job,
                gpu_indices=tuple(sorted(held)),
                mem_held_bytes=tuple((g, b) for g, b in sorted(held.items()) if b is not None),
            )
            for _, (job, held) in sorted(by.items())
        ]

    return read


def held_bytes(
    cluster: Cluster, node: str, kind: str, slice_id: str | None, milli: int
) -> int | None:
    """The GPU memory one allocation row holds, from the catalog: a MIG slice its profile's
    memory (1g.10gb: 10 GB), a share its thousandths of the GPU's memory (rounded down, so
    a GPU's shares never add up to more than it has), a whole GPU all of it. None where the
    cluster of now no longer has the node or slice (the collector then splits what is left)."""
    from gpufleet.catalog.accelerators import get_accelerator  # the catalog loads on first use

    try:
        if kind == "slice" and slice_id:
            return cluster.slice_info(slice_id).memory_bytes
        total = get_accelerator(cluster.node(node).accelerator).memory_bytes
    except UnknownNameError:
        return None
    if kind == "share":
        return total * min(max(milli, 0), MILLI) // MILLI
    return total


def free_gpus(
    sessions: sessionmaker[Session], cluster: Cluster
) -> Callable[[], list[tuple[str, int]]]:
    """Every GPU of the cluster that no allocation holds (they read 0 %, as idle GPUs do)."""

    def read() -> list[tuple[str, int]]:
        with sessions() as s:
            a = Allocation
            held = {
                (node, gpu_index(on, slice_id))
                for node, on, slice_id in s.execute(
                    select(a.node, a.gpu, a.slice_id).where(a.released_s.is_(None))
                )
            }
        return [
            (n.name, g) for n in cluster.nodes for g in range(n.gpus) if (n.name, g) not in held
        ]

    return read


@dataclass(frozen=True)
class TelemetryOptions:
    """`gpufleet serve --telemetry ... --dcgm-url ... --idle-*`."""

    source: str = "auto"
    dcgm_urls: tuple[str, ...] = ()
    config: TelemetryConfig = field(default_factory=TelemetryConfig)
    idle_webhook: str | None = None  # POSTed a JSON notice per job flagged idle

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise UserError(f"--telemetry {self.source!r}: use one of {', '.join(SOURCES)}")
        if self.source == "dcgm" and not self.dcgm_urls:
            raise UserError("--telemetry dcgm needs --dcgm-url (each exporter's /metrics URL)")
        if self.idle_webhook is not None and not self.idle_webhook.startswith(
            ("http://", "https://")
        ):
            raise UserError(f"--idle-webhook {self.idle_webhook!r}: give an http(s) URL")


def make_collector(
    options: TelemetryOptions,
    executor_name: str,
    sessions: sessionmaker[Session],
    cluster: Cluster,
    executor: Executor | None = None,
) -> Collector | None:
    """The source `options` names, or the executor's natural one for `auto`; None: off (or,
    for `auto`, nothing to read here: logged once)."""
    source = options.source
    if source == "auto":
        if options.dcgm_urls:
            source = "dcgm"
        else:
            source = {"emulated": "emulated", "local": "nvml", "slurm": "slurm"}[executor_name]
    if source == "off":
        return None
    if source == "emulated":
        gpu = _emulated_gpu(cluster)
        return EmulatedCollector(
            emulated_jobs(sessions, cluster), free_gpus=free_gpus(sessions, cluster), gpu=gpu
        )
    if source == "dcgm":
        from gpufleet.telemetry.dcgm import DcgmCollector

        # readings are attributed by node and GPU index to the store's allocations, so the
        # exporter's pod or Slurm labels are not needed (its Hostname must be the node's name)
        return DcgmCollector(options.dcgm_urls)
    if source == "nvml":
        return _nvml(options, cluster)
    return _slurm(executor, sessions)


def _emulated_gpu(cluster: Cluster) -> EmulatedGpu:
    """The emulated GPUs' memory and power, from the catalog row of the cluster's first
    accelerator (a mixed cluster reads every GPU as that one: it is a demo)."""
    from gpufleet.catalog.accelerators import get_accelerator

    acc = get_accelerator(cluster.nodes[0].accelerator)
    tdp_w = acc.tdp_w or EmulatedGpu().max_w
    # idle power ~10 % of the limit: an H200 read 79 W of 700 W idle (benchmarks/device)
    return EmulatedGpu(
        mem_total_bytes=acc.memory_bytes, idle_w=0.1 * tdp_w, max_w=tdp_w, model=acc.display_name
    )


def _nvml(options: TelemetryOptions, cluster: Cluster) -> Collector | None:
    from gpufleet.telemetry.nvml import NvmlCollector
    from gpufleet.telemetry.nvml_api import NvmlUnavailable

    node = cluster.nodes[0].name if len(cluster.nodes) == 1 else None
    try:
        return NvmlCollector(node)
    except NvmlUnavailable as exc:
        if options.source == "nvml":
            raise UserError(f"--telemetry nvml: {exc}") from None
        log.warning("no GPU telemetry: %s", exc)
        return None


def _slurm(executor: Executor | None, sessions: sessionmaker[Session]) -> Collector | None:
    from gpufleet.control.executors.slurm import SlurmExecutor
    from gpufleet.telemetry.slurm import SlurmCollector, SlurmJobRef

    if not isinstance(executor, SlurmExecutor):
        raise UserError("--telemetry slurm reads the Slurm executor's jobs: use --executor slurm")
    slurm = executor

    def refs() -> list[SlurmJobRef]:
        out = []
        for key in sorted(slurm.active()):
            slurm_id = slurm.slurm_job_id(key)
            if slurm_id:
                out.append(SlurmJobRef(slurm_id, str(key.job_id), _gpus(sessions, key.job_id)))
        return out

    return SlurmCollector(slurm.command, refs)


def _gpus(sessions: sessionmaker[Session], job_id: int) -> int:
    with sessions() as s:
        milli = s.scalars(
            select(Allocation.milli).where(
                Allocation.job_id == job_id, Allocation.released_s.is_(None)
            )
        ).all()
    return max(1, round(sum(milli) / 1000))


# GPUs' rows (and jobs' meters) per transaction of a reading round: ~5-10 ms of SQLite's
# write lock on the 2-vCPU VM (8,000 GPUs at once held it 0.2-0.5 s; docs/benchmarks.md)
WRITE_PIECE = 500


class TelemetryLoop(Periodic):
    """Reads the collector every `config.interval_s` while `leading()`, stores the readings,
    rolls up and prunes. A failing read is logged and retried next time; it never stops
    the reconciler beside it."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        collector: Collector,
        config: TelemetryConfig,
        leading: Callable[[], bool],
        clock: Callable[[], float] = time.time,
        *,
        webhook: str | None = None,
    ) -> None:
        super().__init__("telemetry")
        self.sessions = sessions
        self.collector = collector
        self.config = config
        self.leading = leading
        self.clock = clock
        self.webhook = webhook
        self._reason = ""

    def tick(self) -> IngestReport | None:
        """One read (the loop's body; tests call it directly)."""
        if not self.leading():
            return None
        now = self.clock()
        try:
            readings = self.collector.collect(now)
        except TelemetryError as exc:
            self.errors += 1
            log.warning("telemetry read failed (%s): %s", self.collector.name, exc)
            return None
        if self.collector.reason != self._reason:
            self._reason = self.collector.reason
            if self._reason:
                log.warning("telemetry (%s): %s", self.collector.name, self._reason)
        # the round committed every WRITE_PIECE GPUs and the roll-up in its own
        # transaction, so SQLite's one write lock (which every submit waits for) is held
        # a piece at a time; roll_up is idempotent, so a crash between loses nothing
        with self.sessions() as s:
            report = ingest(s, readings, now, self.config, commit_every=WRITE_PIECE)
        with self.sessions.begin() as s:
            roll_up(s, now)
        for notice in report.notices:
            log.info("job %d flagged idle: %s", notice.job_id, notice.text)
            if self.webhook is not None:
                self._notify(notice)
        return report

    def _notify(self, notice: IdleNotice) -> None:
        """POST the notice as JSON; `text` makes it a Slack/Mattermost incoming-webhook
        message as it is. A failure is logged and counted, never retried or raised."""
        assert self.webhook is not None
        event = "reclaimed" if notice.reclaimed else "idle"
        body = {
            "text": f"gpufleet: job #{notice.job_id} {notice.job_name} (team {notice.team}): "
            f"{notice.text}",
            "event": event,
            "job": notice.job_id,
            "team": notice.team,
        }
        request = urllib.request.Request(
            self.webhook,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            # the URL is checked to be http(s) in TelemetryOptions
            with urllib.request.urlopen(request, timeout=5) as answer:
                answer.read()
        except OSError as exc:
            self.errors += 1
            log.warning("idle webhook %s failed: %s", self.webhook, exc)

    def body(self) -> None:
        self.tick()

    def interval_s(self) -> float:
        return self.config.interval_s

    def stop(self) -> None:
        super().stop()
        close = getattr(self.collector, "close", None)
        if callable(close):
            close()
