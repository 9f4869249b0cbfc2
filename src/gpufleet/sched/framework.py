"""The scheduling framework's types: statuses, placements, decisions, plugin protocols, profiles.

A policy is a set of plugins, one per extension point, chosen by name through a
`Profile` (design 0009). This first slice has two extension points: queue order
(which pending job is looked at first) and placement (filter nodes, then pick
the best-fitting ones). Registries and profiles live in `sched.plugins`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gpufleet.cluster import Claim, MigSlice, Node, Share, StateView, Whole
from gpufleet.errors import UserError
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec

StatusCode = Literal["ok", "unschedulable", "wait"]

# The cycle's phases, in order; `Decisions.timings_s` is keyed by these names.
PHASES = ("snapshot", "order", "nominate", "place", "commit")


class InvalidPlacementError(UserError):
    """A running job's placement (from JOBS.yaml) names GPUs it cannot hold."""


@dataclass(frozen=True, slots=True)
class Status:
    """What a plugin says about a job (or a node): ok, never here, or not yet — and why."""

    code: StatusCode = "ok"
    reason: str = ""
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == "ok"


OK = Status()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one worker (or a slice or fraction) lands: one node, and what on it."""

    node: str
    gpus: tuple[int, ...] = ()  # whole GPU indices
    mig_slices: tuple[str, ...] = ()  # MIG slice ids
    gpu: int | None = None  # the GPU a share is on
    milli: int = 0  # the share, in thousandths of a GPU

    def claims(self) -> tuple[Claim, ...]:
        out: list[Claim] = []
        if self.gpus:
            out.append(Whole(self.node, self.gpus))
        out.extend(MigSlice(s) for s in self.mig_slices)
        if self.milli and self.gpu is not None:
            out.append(Share(self.node, self.gpu, self.milli))
        return tuple(out)


@dataclass(frozen=True)
class Decisions:
    """The output of one `decide()` cycle, as data; nothing has been applied to the state.

    `preempted` maps each victim of priority preemption to its reason; the admitted
    preemptor starts once the victims' grace period is over (`sched.preempt`).
    `reserved` stays empty in this slice (no backfill reservations yet); it is part of
    the contract so callers need not change.
    """

    admitted: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    preempted: Mapping[str, str] = field(default_factory=dict)  # victim -> reason
    reserved: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    pending_reasons: Mapping[str, str] = field(default_factory=dict)
    flavors: Mapping[str, str] = field(default_factory=dict)  # admitted job -> accelerator
    timings_s: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class OrderContext:
    """What a queue-order plugin may look at besides the job."""

    priority: Mapping[str, int]  # job -> priority class value
    now_s: float = 0.0


class QueueOrder(Protocol):
    """Sorts pending jobs: smaller keys are looked at first."""

    name: str

    def key(self, job: JobSpec, ctx: OrderContext) -> tuple[float | str, ...]: ...


@dataclass(frozen=True, slots=True)
class Placed:
    """A placement plugin's answer: where every worker goes, or a status saying why not."""

    placements: tuple[Placement, ...] = ()
    status: Status = OK


class PlacementPlugin(Protocol):
    """Filters nodes for a job and picks a complete placement for one request.

    `place` only reads `view`; the caller allocates the answer on a branch, so a
    gang lands whole or not at all.
    """

    name: str

    def filter_node(self, job: JobSpec, node: Node) -> Status: ...

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed: ...


@dataclass(frozen=True, slots=True)
class Profile:
    """Which plugin runs at each extension point, by registry name."""

    queue_order: str
    placement: str
    preemption: bool = True  # may evict lower-priority running jobs (`sched.preempt`)
