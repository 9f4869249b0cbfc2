"""Per-job GPU utilisation from Slurm's own accounting (`sstat` while a job runs, `sacct`
after), for sites that gather it.

Slurm records GPU use per job step when its GPU plugin is built with NVML (gres.conf
``AutoDetect=nvml``), a job accounting gatherer runs (``JobAcctGatherType``), and the
TRES are tracked (``AccountingStorageTRES=gres/gpu,gres/gpumem,gres/gpuutil``): each task's
``gres/gpuutil`` is the summed SM utilisation (%) of its processes on the GPUs it sees, and
``gres/gpumem`` their memory in bytes. ``TRESUsageInTot`` sums the tasks, so a step's
``gpuutil`` total over the job's GPU count is its mean per-GPU utilisation.

Slurm gives no per-device reading, no power, temperature or health, and a job's figure only
at the gatherer's interval (``JobAcctGatherFrequency``, 30 s by default); sites without the
TRES print none and this source says so ("use DCGM"). The commands run through the
executor's own `Command` (`control.executors.slurm_commands`: its environment, timeout and
test runner), typed here by shape since this package sits below `control`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpufleet.telemetry.samples import GpuSample

SOURCE = "slurm"
NO_ACCOUNTING = "site has no GPU accounting (no gres/gpuutil in Slurm's TRES usage); use DCGM"
SSTAT_FIELDS = "JobID,NodeList,TRESUsageInAve,TRESUsageInTot"
SACCT_FIELDS = "JobID,NodeList,ElapsedRaw,AllocTRES,TRESUsageInAve,TRESUsageInTot"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_AMOUNT = re.compile(r"^(?P<number>[0-9.]+)(?P<unit>[KMGTP]?)$")


class CommandResult(Protocol):
    @property
    def returncode(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...


# argv in, result out: `control.executors.slurm_commands.Command` has this shape
Command = Callable[[Sequence[str]], CommandResult]


def parse_tres(text: str) -> dict[str, str]:
    """A TRES string as a mapping: ``cpu=00:01:02,gres/gpuutil=87`` -> {"cpu": "00:01:02",
    "gres/gpuutil": "87"} (``gres/gpu:h100=4``'s typed name kept whole)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep and name:
            out[name.strip()] = value.strip()
    return out


def amount(text: str) -> float | None:
    """A TRES amount: ``87``, ``17179869184``, or with sacct's unit suffix ``16G`` (binary
    prefixes, as Slurm prints them without ``--noconvert``); None if it is neither."""
    m = _AMOUNT.match(text.strip())
    if m is None:
        return None
    try:
        return float(m["number"]) * _UNITS[m["unit"]]
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class StepUsage:
    """One job step's GPU use as `sstat`/`sacct` print it (None: the site does not track it)."""

    job: str  # the job id without the step (``12345`` of ``12345.batch``)
    step: str  # ``batch``, ``extern``, ``0``...; "" for the allocation's own row
    nodes: str  # Slurm's host-list expression, as printed
    gpuutil_pct: float | None  # summed over the step's tasks and GPUs
    gpumem_bytes: float | None
    alloc_gpus: int | None = None  # sacct's allocation row only
    elapsed_s: float | None = None


def _usage(ave: str, tot: str) -> tuple[float | None, float | None]:
    """(gpuutil, gpumem) from the total over tasks, else the average (one task)."""
    tot_items, ave_items = parse_tres(tot), parse_tres(ave)

    def pick(name: str) -> float | None:
        value = tot_items.get(name) or ave_items.get(name)
        return amount(value) if value else None

    return pick("gres/gpuutil"), pick("gres/gpumem")


def _gpus(alloc: str) -> int | None:
    value = parse_tres(alloc).get("gres/gpu")
    count = amount(value) if value else None
    return int(count) if count is not None else None


def parse_steps(text: str, fields: str) -> list[StepUsage]:
    """`sstat`/`sacct` ``-n -P -o FIELDS`` lines (SSTAT_FIELDS or SACCT_FIELDS), read by the
    names of the fields asked for: sacct's allocation row carries AllocTRES and no usage,
    its steps the reverse."""
    names = fields.split(",")
    steps = []
    for line in text.splitlines():
        values = line.split("|")
        if len(values) < len(names) or not values[0].strip():
            continue
        row = dict(zip(names, values, strict=False))
        job, _, step = row["JobID"].strip().partition(".")
        util, mem = _usage(row["TRESUsageInAve"], row["TRESUsageInTot"])
        gpus, elapsed = _gpus(row.get("AllocTRES", "")), amount(row.get("ElapsedRaw", ""))
        steps.append(StepUsage(job, step, row["NodeList"].strip(), util, mem, gpus, elapsed))
    return steps


@dataclass(frozen=True, slots=True)
class SlurmJobRef:
    """A Slurm job the executor runs for gpufleet: its Slurm id, gpufleet's id, its GPUs."""

    slurm_job_id: str
    job_id: str | None
    gpus: int


def job_samples(
    steps: Iterable[StepUsage], refs: Iterable[SlurmJobRef], now_s: float
) -> tuple[list[GpuSample], str]:
    """One job-level sample per job whose steps report GPU use, and the reason when none
    do. Steps of one job run on its GPUs side by side, so their totals add up."""
    by_job: dict[str, list[StepUsage]] = defaultdict(list)
    for s in steps:
        by_job[s.job].append(s)
    out: list[GpuSample] = []
    tracked = False
    for ref in refs:
        rows = [s for s in by_job.get(ref.slurm_job_id, []) if s.gpuutil_pct is not None]
        tracked = tracked or bool(rows)
        if not rows or ref.gpus < 1:
            continue
        util = sum(s.gpuutil_pct or 0.0 for s in rows) / ref.gpus
        mems = [s.gpumem_bytes for s in rows if s.gpumem_bytes is not None]
        out.append(
            GpuSample(
                time_s=now_s,
                node=max(rows, key=lambda s: len(s.nodes)).nodes,
                gpu_index=None,
                source=SOURCE,
                sm_util_pct=min(max(util, 0.0), 100.0),
                mem_used_bytes=round(sum(mems)) if mems else None,
                job_id=ref.job_id,
                holder=f"slurm job {ref.slurm_job_id}",
                gpu_count=ref.gpus,
            )
        )
    return out, "" if tracked or not by_job else NO_ACCOUNTING


class SlurmCollector:
    """The `Collector` over `sstat` for the running Slurm jobs `jobs()` names.

    A job-level source: each sample covers one job's GPUs (`gpu_index` None, `gpu_count`
    its GPUs, `node` its node list), so the portal's per-GPU views need NVML or DCGM."""

    name = SOURCE

    def __init__(self, cmd: Command, jobs: Callable[[], Iterable[SlurmJobRef]]) -> None:
        self._cmd = cmd
        self._jobs = jobs
        self.reason = ""

    def collect(self, now_s: float) -> list[GpuSample]:
        refs = [r for r in self._jobs() if r.gpus > 0]
        if not refs:
            self.reason = ""
            return []
        ids = ",".join(r.slurm_job_id for r in refs)
        done = self._cmd(["sstat", "-a", "-n", "-P", "--noconvert", "-o", SSTAT_FIELDS, "-j", ids])
        steps = parse_steps(done.stdout, SSTAT_FIELDS)
        if not steps and done.returncode != 0:
            self.reason = f"sstat failed: {done.stderr.strip() or done.returncode}"
            return []
        samples, self.reason = job_samples(steps, refs, now_s)
        return samples


@dataclass(frozen=True, slots=True)
class JobGpuUsage:
    """A finished job's GPU use over its whole run, from `sacct`."""

    slurm_job_id: str
    gpus: int
    elapsed_s: float
    sm_util_pct: float  # mean per GPU over the job's elapsed time
    gpu_mem_bytes: float | None  # the largest of its steps'


def finished_usage(
    cmd: Command, slurm_job_ids: Sequence[str]
) -> tuple[dict[str, JobGpuUsage], str]:
    """Accounting's GPU use of finished jobs by Slurm id, and why there is none (no
    accounting, or no GPU TRES).

    Steps may run one after another or side by side, so each step's total counts for its
    own elapsed time: utilisation-seconds summed over steps, over the job's GPUs and
    elapsed time. Slurm's documentation does not say whether a finished step's
    ``gres/gpuutil`` is an average over the step or its last reading, so treat the figure
    as indicative; `sstat` readings over the run (`SlurmCollector`) are the better meter."""
    if not slurm_job_ids:
        return {}, ""
    argv = ["sacct", "-n", "-P", "--noconvert", "-o", SACCT_FIELDS, "-j", ",".join(slurm_job_ids)]
    done = cmd(argv)
    if done.returncode != 0:
        return {}, f"sacct failed: {done.stderr.strip() or done.returncode}"
    rows = parse_steps(done.stdout, SACCT_FIELDS)
    out: dict[str, JobGpuUsage] = {}
    tracked = False
    for alloc in (r for r in rows if not r.step):
        steps = [r for r in rows if r.job == alloc.job and r.step and r.gpuutil_pct is not None]
        tracked = tracked or bool(steps)
        if not steps or not alloc.alloc_gpus or not alloc.elapsed_s:
            continue
        pct_s = sum((s.gpuutil_pct or 0.0) * (s.elapsed_s or 0.0) for s in steps)
        mems = [s.gpumem_bytes for s in steps if s.gpumem_bytes is not None]
        out[alloc.job] = JobGpuUsage(
            slurm_job_id=alloc.job,
            gpus=alloc.alloc_gpus,
            elapsed_s=alloc.elapsed_s,
            sm_util_pct=min(pct_s / (alloc.alloc_gpus * alloc.elapsed_s), 100.0),
            gpu_mem_bytes=max(mems) if mems else None,
        )
    return out, "" if tracked or not rows else NO_ACCOUNTING
