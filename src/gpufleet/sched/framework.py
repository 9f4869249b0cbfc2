"""The scheduling framework's types: statuses, placements, decisions, plugin protocols, profiles.

A policy is a set of plugins, one per extension point, chosen by name through a
`Profile` (design 0009): queue order (which pending job is looked at first),
placement (filter nodes, score and pick a complete placement), preemption (who
may be evicted for whom), and the head-of-line rule (best effort, strict, or
EASY backfill with a reservation). Registries and profiles live in
`sched.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gpufleet.cluster import Claim, MigSlice, Node, Share, StateView, Whole
from gpufleet.errors import UserError
from gpufleet.sched.requests import Request
from gpufleet.sched.waits import SliceWait, Wait
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
    # the numbers `reason` was written from, where the plugin gives them (`sched.waits`)
    detail: Wait | None = None

    @property
    def ok(self) -> bool:
        return self.code == "ok"


OK = Status()


def missing_slice(view: StateView, accelerator: str, profile: str) -> SliceWait:
    """Why no `profile` slice of `accelerator` is free, where none is on spot: none free
    now, no GPU cut into it (a re-layout of a MIG GPU may cut one), or no GPU of the
    accelerator MIG-enabled at all: then the job never runs here (it read as a wait)."""
    if view.has_slices(accelerator, profile):
        return SliceWait("none-free", accelerator, profile)
    mig = any(n.accelerator == accelerator and any(n.mig) for n in view.cluster.nodes)
    return SliceWait("not-cut" if mig else "no-mig", accelerator, profile)


def spot_rule(plugin: str, job: JobSpec, node: Node) -> Status:
    """Every placement's node filter: spot nodes only for jobs that accept spot capacity
    (latency-sensitive serving never; checkpointed training and batch may)."""
    if node.capacity == "spot" and not job.spot_ok:
        return Status("unschedulable", f"{node.name} is spot capacity", plugin)
    return OK


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one worker (or a slice or fraction) lands: one node, and what on it."""

    node: str
    gpus: tuple[int, ...] = ()  # whole GPU indices
    mig_slices: tuple[str, ...] = ()  # MIG slice ids
    gpu: int | None = None  # the GPU a share is on
    milli: int = 0  # the share, in thousandths of a GPU

    def claims(self) -> tuple[Claim, ...]:
        if self.gpus and not self.mig_slices and not self.milli:  # whole GPUs alone, the commonest
            gpus = self.gpus
            return (
                whole_claims(self.node, gpus) if type(gpus) is tuple else (Whole(self.node, gpus),)
            )
        out: list[Claim] = []
        if self.gpus:
            out.append(Whole(self.node, self.gpus))
        out.extend(MigSlice(s) for s in self.mig_slices)
        if self.milli and self.gpu is not None:
            out.append(Share(self.node, self.gpu, self.milli))
        return tuple(out)


# Whole-GPU placements, their claims and a one-worker answer, shared: they are immutable
# values, a scheduler (a simulator above all) asks for the same (node, GPUs) pairs over and
# over, and building frozen dataclasses costs several times a lookup. Bounded: cleared
# when full.
_MEMO_MAX = 1 << 16
_WHOLE: dict[tuple[str, tuple[int, ...]], tuple[Placement, tuple[Claim, ...], Placed]] = {}


def _whole(node: str, gpus: tuple[int, ...]) -> tuple[Placement, tuple[Claim, ...], Placed]:
    key = (node, gpus)
    found = _WHOLE.get(key)
    if found is None:
        if len(_WHOLE) >= _MEMO_MAX:
            _WHOLE.clear()
        placement = Placement(node, gpus)
        found = _WHOLE[key] = (placement, (Whole(node, gpus),), Placed((placement,)))
    return found


def whole_placement(node: str, gpus: tuple[int, ...]) -> Placement:
    """`Placement(node, gpus)` for whole GPUs (a tuple of indices), shared."""
    return _whole(node, gpus)[0]


def whole_claims(node: str, gpus: tuple[int, ...]) -> tuple[Claim, ...]:
    """`(Whole(node, gpus),)`, shared (what `Placement.claims` gives for whole GPUs)."""
    return _whole(node, gpus)[1]


def whole_placed(node: str, gpus: tuple[int, ...]) -> Placed:
    """`Placed((Placement(node, gpus),))`: a one-worker answer, shared."""
    return _whole(node, gpus)[2]


@dataclass(frozen=True, slots=True)
class Relayout:
    """A proposal to repartition one MIG GPU so that pending slice requests can run.

    `current` and `proposed` are (profile, count) layouts; `drain` lists the running
    jobs holding slices of this GPU that must stop first (empty: the GPU is idle and
    can be repartitioned now), `drain_s` the estimated wait for them (their remaining
    runtime estimates; None when one has no estimate), `serves` the pending jobs
    the new layout would let run, and `reason` one sentence for the operator.
    """

    node: str
    gpu: int
    accelerator: str
    current: tuple[tuple[str, int], ...]
    proposed: tuple[tuple[str, int], ...]
    drain: tuple[str, ...] = ()
    drain_s: float | None = 0.0
    serves: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Eviction:
    """Why one running job is evicted and what that costs, as data.

    The core words the full sentence (`text`) for the simulator, the CLI and the admins'
    audit log; a driver that must say less — the victim's team may not learn the
    preemptor's id, team or guarantee — uses `public_text`, and a driver with its own grace
    setting passes it: neither has to parse the sentence back.
    """

    preemptor: str
    kind: Literal["priority", "quota-reclaim", "las"]
    cause: str  # "priority 1000 > 100" / "team a reclaims its guaranteed 8 H100 GPUs, ..."
    frees: str  # "8 h100-sxm5-80gb GPUs"
    lost_gpu_s: float  # GPU-seconds of work since the victim's last checkpoint (or start)
    since_checkpoint: bool  # False: lost since start (the victim never checkpoints)
    grace_s: float  # the core's default grace: max(GRACE_PERIOD_S, the victim's checkpoint time)

    def _costs(self, grace_s: float | None) -> str:
        since = "since last checkpoint" if self.since_checkpoint else "since start"
        grace = self.grace_s if grace_s is None else grace_s
        return (
            f"frees {self.frees}; lost work {self.lost_gpu_s / 3600:.3g} GPU-h {since}; "
            f"grace period {grace:g} s"
        )

    def text(self, *, grace_s: float | None = None) -> str:
        """The full reason; `grace_s` replaces the core's default grace with the driver's."""
        costs = self._costs(grace_s)
        if self.kind in ("priority", "las"):
            return f"preempted by job '{self.preemptor}' ({self.cause}): {costs}"
        return f"preempted by job '{self.preemptor}': {self.cause}; {costs}"

    def public_text(self, *, grace_s: float | None = None) -> str:
        """The reason as the victim's team may read it: why in general terms and what it
        costs, never who preempted it."""
        if self.kind == "quota-reclaim":
            head = "preempted: another team of its cohort reclaims the guaranteed GPUs it borrowed"
        elif self.kind == "las":
            head = "preempted by a job that has had less GPU time (least attained service)"
        else:
            head = "preempted by a higher-priority job"
        return f"{head}; {self._costs(grace_s)}"

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Decisions:
    """The output of one `decide()` cycle, as data; nothing has been applied to the state.

    `preempted` maps each victim (of priority preemption or quota reclaim) to its
    `Eviction`; the admitted preemptor starts once the victims' grace period is over
    (`sched.preempt`). `reserved` holds the backfill reservation of a blocked
    head-of-line gang (where it will run) and `reserved_start_s` when, estimated
    from the running jobs' runtime estimates. `relayouts` are MIG re-layout
    proposals for the operator (or simulator) to apply; the cycle itself never
    changes a layout.
    """

    admitted: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    preempted: Mapping[str, Eviction] = field(default_factory=dict)  # victim -> why
    reserved: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    reserved_start_s: Mapping[str, float] = field(default_factory=dict)
    pending_reasons: Mapping[str, str] = field(default_factory=dict)
    flavors: Mapping[str, str] = field(default_factory=dict)  # admitted job -> accelerator
    relayouts: tuple[Relayout, ...] = ()
    cycle: int = 0
    timings_s: Mapping[str, float] = field(default_factory=dict)
    # pending jobs in the order the cycle looked at them (the profile's queue order, jobs
    # that would borrow after those within their guarantee): queue positions follow it
    considered: tuple[str, ...] = ()


@dataclass(frozen=True)
class OrderContext:
    """What a queue-order plugin may look at besides the job.

    `share` gives a team's current weighted dominant share (its use of each flavor
    plus its decayed past use, over the cluster's capacity of that flavor, the
    largest over flavors, divided by its fair-share weight); it is live: it
    changes as the cycle admits jobs, so a fair-share order can interleave teams.

    `cluster_gpus` (the cluster's GPUs, all flavors) and `max_priority` (the
    highest priority class value the teams define) let an order normalise a
    job's size and class as Slurm's multifactor priority does; both default to
    "unknown" (0 and None), and an order that reads them then falls back to the
    largest job and class in the queue it is ordering.
    """

    priority: Mapping[str, int]  # job -> priority class value
    now_s: float = 0.0
    share: Callable[[str], float] = lambda team: 0.0
    cluster_gpus: int = 0  # 0: unknown
    max_priority: int | None = None  # None: unknown


class QueueOrder(Protocol):
    """Yields pending jobs in the order the cycle looks at them.

    `order` is lazy: the cycle admits (or not) each job before asking for the
    next, so an order may depend on what was admitted (fair share).
    """

    name: str
    uses_share: bool  # whether `order` reads `ctx.share` (a simulator keeps history only then)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]: ...


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

    def observe(self, requests: Sequence[Request]) -> PlacementPlugin:
        """The plugin to use this cycle, given the pending requests (FGD learns the
        request distribution from them); most plugins return themselves."""
        ...


def slice_placed(plugin: str, wait: SliceWait) -> Placed:
    """A failed slice placement: "unschedulable" where no GPU is MIG-enabled, else a wait."""
    code: StatusCode = "unschedulable" if wait.case == "no-mig" else "wait"
    return Placed(status=Status(code, wait.text(), plugin, wait))
