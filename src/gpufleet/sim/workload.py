"""What a simulation replays: jobs with their request, arrival and true duration.

Every workload source — the trace readers in `sim.traces`, the synthetic
generator in `sim.generate` — produces the same `Workload`: a tuple of
`TraceJob`s (frozen, cheap to build in bulk) and a `CleaningReport` that says
what was changed or dropped and why, so nothing is dropped silently. Optional
`nodes` carry a cluster the trace itself describes (openb's node list).

A `TraceJob` becomes a scheduler `JobSpec` at arrival (`to_job_spec`); the
simulator, not the scheduler, knows `duration_s` (how long it really runs when
not interrupted) and `busy_fraction` (how busy its GPUs are while it runs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from gpufleet.catalog.mig import mig_profiles_for
from gpufleet.specs.jobs import JobKind, JobSpec

Capacity = Literal["reserved", "on-demand", "spot"]


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a workload. Exactly one of `gpus` (per worker), `gpu_fraction`,
    `mig_profile` is set, as in `JobSpec`."""

    name: str
    team: str
    submit_s: float  # arrival, seconds from the start of the workload
    duration_s: float  # run time when never interrupted (> 0)
    gpus: int | None = None  # whole GPUs per worker
    workers: int = 1
    gpu_fraction: float | None = None
    mig_profile: str | None = None
    accelerators: tuple[str, ...] = ()  # acceptable types; () = any
    kind: JobKind = "batch"
    priority_class: str | None = None
    user: str | None = None
    project: str | None = None
    runtime_estimate_s: float | None = None  # what the user declared (may differ from duration)
    checkpoint_interval_s: float | None = None
    preemptible: bool = True
    busy_fraction: float | None = None  # mean GPU busy share while running, if known
    slo_ttft_ms: float | None = None  # inference: latency target, if any

    @property
    def total_gpus(self) -> float:
        """GPUs it holds while running: whole GPUs × workers, or its fraction (MIG: unknown, 0)."""
        if self.gpus:
            return float(self.gpus * self.workers)
        return float(self.gpu_fraction or 0.0)

    def requested_gpus(self, accelerator: str | None) -> float | None:
        """GPUs it asked for, whatever a profile gave it: whole GPUs × workers, its fraction,
        or its MIG slice's compute slices of the GPU's on `accelerator` (None: sized from a
        workload, or a slice with no accelerator known). A whole-GPU profile (`k8s-default`)
        runs a 0.25-GPU job on one GPU; its size class is still under one GPU."""
        if self.gpus or self.gpu_fraction:
            return self.total_gpus
        if self.mig_profile is None or accelerator is None:
            return None
        slices = {p.profile: p.compute_slices for p in mig_profiles_for(accelerator)}
        own = slices.get(self.mig_profile)
        return None if own is None else own / max(slices.values())

    def to_job_spec(self, submitted_s: float | None = None) -> JobSpec:
        """The scheduler's view of this job: validated, except the accelerator names.

        A trace's accelerator names (openb's "openb-V100M32") are the trace's own, not
        catalog names, which `JobSpec` validation would refuse; they are set after
        validation, and only need to match the simulated cluster's node types.
        """
        data: dict[str, object] = {
            "name": self.name,
            "team": self.team,
            "kind": self.kind,
            "workers": self.workers,
            "preemptible": self.preemptible,
            "submitted_s": self.submit_s if submitted_s is None else submitted_s,
        }
        if self.gpus:
            data["gpus"] = self.gpus
        elif self.gpu_fraction is not None:
            data["gpu_fraction"] = self.gpu_fraction
        elif self.mig_profile is not None:
            data["mig_profile"] = self.mig_profile
        for key in (
            "priority_class",
            "user",
            "project",
            "runtime_estimate_s",
            "checkpoint_interval_s",
        ):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        spec = JobSpec.model_validate(data)
        if self.accelerators:
            spec = spec.model_copy(update={"accelerators": list(self.accelerators)})
        return spec


@dataclass(frozen=True, slots=True)
class TraceNode:
    """A node a trace describes (openb): name, accelerator type, GPU count."""

    name: str
    accelerator: str
    gpus: int
    capacity: Capacity = "on-demand"


@dataclass(frozen=True)
class CleaningReport:
    """What a reader kept, changed and dropped, with counts per reason (shown to the user)."""

    source: str
    rows: int  # rows (or records) read
    kept: int
    dropped: Mapping[str, int] = field(default_factory=dict)  # reason -> rows
    cleaned: Mapping[str, int] = field(default_factory=dict)  # what was changed -> rows

    def __post_init__(self) -> None:
        object.__setattr__(self, "dropped", MappingProxyType(dict(self.dropped)))
        object.__setattr__(self, "cleaned", MappingProxyType(dict(self.cleaned)))
        if self.kept + sum(self.dropped.values()) != self.rows:
            raise ValueError(
                f"{self.source}: kept {self.kept} + dropped {sum(self.dropped.values())} "
                f"!= rows {self.rows}: every row must be accounted for"
            )

    def lines(self) -> list[str]:
        out = [f"{self.source}: read {self.rows:,} rows, kept {self.kept:,}"]
        out += [f"  dropped {n:,}: {why}" for why, n in sorted(self.dropped.items())]
        out += [f"  changed {n:,}: {what}" for what, n in sorted(self.cleaned.items())]
        return out


@dataclass(frozen=True)
class Workload:
    """Jobs sorted by arrival (then name), the reader's report, and the trace's own nodes."""

    jobs: tuple[TraceJob, ...]
    report: CleaningReport
    nodes: tuple[TraceNode, ...] = ()
    # the accelerator its durations were measured on (sim.speed); None: unknown, so a job
    # takes as long on every accelerator
    reference_accelerator: str | None = None

    def __post_init__(self) -> None:
        jobs = tuple(sorted(self.jobs, key=lambda j: (j.submit_s, j.name)))
        object.__setattr__(self, "jobs", jobs)
        names = Counter(j.name for j in jobs)
        dupes = [n for n, k in names.items() if k > 1]
        if dupes:
            raise ValueError(f"workload job names repeat: {', '.join(sorted(dupes)[:5])}")
