"""The frame every scoring placement plugin (`binpack`, `spread`, `fgd`) shares: request
shapes, per-node free counts read from the state view, the cluster facts they need, and the
common `place` logic (gangs all or nothing, required topology levels, spot, MIG), so each
plugin only says how it scores a candidate. See `sched.scoring` for the rules themselves.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Self

from gpufleet.cluster import MILLI, Cluster, StateView
from gpufleet.cluster.topology import Node
from gpufleet.sched.backfill import reserved_free
from gpufleet.sched.framework import (
    Placed,
    Placement,
    Status,
    missing_slice,
    slice_placed,
    spot_rule,
)
from gpufleet.sched.requests import FRACTION_STEPS, Request, RequestKind
from gpufleet.sched.waits import CapacityWait, ShareWait, SliceWait, UnknownLevel, Wait
from gpufleet.specs.jobs import JobSpec

# -- shared data ------------------------------------------------------------------------

MILLI_PER_EIGHTH = MILLI // FRACTION_STEPS  # a fraction request's step, in thousandths


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """One request shape of the workload distribution (`fgd`): what one task asks for.

    Exactly one size is set: `gpus` whole GPUs per worker, `milli` thousandths
    of one GPU for a fraction, or `mig_profile` for a MIG slice.
    """

    kind: RequestKind
    gpus: int = 0
    milli: int = 0
    mig_profile: str = ""

    @classmethod
    def of(cls, request: Request) -> Shape:
        """The shape of one worker of `request` (the accelerator is not part of it)."""
        if request.kind == "gpus":
            return cls("gpus", gpus=request.gpus_per_worker)
        if request.kind == "fraction":
            return cls("fraction", milli=request.eighths * MILLI_PER_EIGHTH)
        return cls("mig", mig_profile=request.mig_profile or "")

    def __str__(self) -> str:
        if self.kind == "gpus":
            return f"{self.gpus} GPU" + ("s" if self.gpus != 1 else "")
        if self.kind == "fraction":
            return f"{self.milli}/{MILLI} of a GPU"
        return f"MIG {self.mig_profile}"


PRIOR_GPUS = (1, 2, 4, 8)
# The workload `fgd` assumes before it has observed one: equally many 1, 2, 4 and 8 GPU tasks.
PRIOR: tuple[tuple[Shape, int], ...] = tuple((Shape("gpus", gpus=k), 1) for k in PRIOR_GPUS)


@dataclass(frozen=True, slots=True)
class NodeFree:
    """What one node has free for whole GPUs and fractions: a local, updatable copy.

    `partial_milli` lists the free thousandths of each partly shared GPU (sorted,
    so equal states are equal and memoise together); `fractions` says whether the
    node takes shares at all. MIG GPUs are not part of it.
    """

    whole: int
    partial_milli: tuple[int, ...] = ()
    fractions: bool = False

    def take_whole(self, gpus: int) -> NodeFree:
        return replace(self, whole=self.whole - gpus)

    def take_share(self, free_milli: int, milli: int) -> NodeFree:
        """The node after a share of `milli` lands on a GPU that had `free_milli` free."""
        partial = list(self.partial_milli)
        whole = self.whole
        if free_milli == MILLI:
            whole -= 1
        else:
            partial.remove(free_milli)
        if free_milli - milli > 0:
            partial.append(free_milli - milli)
        return NodeFree(whole, tuple(sorted(partial)), self.fractions)


class Reader:
    """Reads node states and their fragmentation for one `place` call; never kept longer.

    The partly shared GPUs of an accelerator come from one pass over the share
    index, which lists them before the idle GPUs (fullest first): O(partly shared
    GPUs) once, instead of O(GPUs) per node. F is computed once per distinct state.
    """

    __slots__ = ("_frag", "_partial", "_shapes", "_view")

    def __init__(self, view: StateView, shapes: tuple[tuple[Shape, int], ...] = ()) -> None:
        self._view = view
        self._shapes = shapes
        self._partial: dict[str, dict[str, list[tuple[int, int]]]] = {}
        self._frag: dict[NodeFree, int] = {}

    @property
    def view(self) -> StateView:
        return self._view

    def partial(self, acc: str) -> Mapping[str, list[tuple[int, int]]]:
        """Node -> (GPU, free thousandths) of each of its partly shared GPUs, for one
        accelerator, fullest first."""
        partial = self._partial.get(acc)
        if partial is None:
            partial = self._partial[acc] = {}
            for name, gpu, free in self._view.partly_shared(acc):
                partial.setdefault(name, []).append((gpu, free))
        return partial

    def state(self, node: Node) -> NodeFree:
        """What `node` has free now (this call's view), as an updatable local copy."""
        whole = self._view.free_gpus(node.name)
        if not node.fractions:
            return NodeFree(whole)
        shared = self.partial(node.accelerator).get(node.name, ())
        return NodeFree(whole, tuple(sorted(free for _, free in shared)), True)

    def frag(self, state: NodeFree) -> int:
        value = self._frag.get(state)
        if value is None:
            value = self._frag[state] = frag_milli(state, self._shapes)
        return value


@dataclass(frozen=True, slots=True)
class AccFacts:
    """What never changes about one accelerator's nodes: the most GPUs on one, and how
    many take fractions (all, none or some decides how far `fgd` can skip)."""

    max_gpus: int = 0
    nodes: int = 0
    fraction_nodes: int = 0

    @property
    def mixed(self) -> bool:
        return 0 < self.fraction_nodes < self.nodes


class ClusterFacts:
    """What never changes about one cluster, built in one O(nodes × levels) pass.

    Kept here rather than borrowed from `sched.plugins` so these plugins rest on
    the public `Cluster` API only. Members are per accelerator, in cluster order,
    so a group shared by two accelerators never offers the wrong one's nodes.
    """

    __slots__ = ("accelerators", "cluster", "members")

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.accelerators: dict[str, AccFacts] = {}
        members: dict[tuple[str, str, str], list[str]] = {}
        for node in cluster.nodes:
            acc = node.accelerator
            f = self.accelerators.get(acc, AccFacts())
            self.accelerators[acc] = AccFacts(
                max(f.max_gpus, node.gpus), f.nodes + 1, f.fraction_nodes + node.fractions
            )
            for level in cluster.levels:
                group = cluster.group_of(node.name, level)
                members.setdefault((level, group, acc), []).append(node.name)
        self.members = {k: tuple(v) for k, v in members.items()}


def cluster_facts(cluster: Cluster) -> ClusterFacts:
    return cluster.derived(ClusterFacts)


def accelerator_facts(view: StateView, acc: str) -> AccFacts:
    return cluster_facts(view.cluster).accelerators.get(acc, AccFacts())


def group_members(cluster: Cluster, level: str, group: str, acc: str) -> tuple[str, ...]:
    """The `acc` nodes of one group of a topology level, in cluster order."""
    return cluster_facts(cluster).members.get((level, group, acc), ())


@dataclass(frozen=True, slots=True)
class Fit:
    """A complete placement of a gang and its cost (`fgd`: the fragmentation it adds)."""

    placements: tuple[Placement, ...]
    cost: int = 0


@dataclass(frozen=True, slots=True)
class MigGpu:
    """A GPU with a free slice of the wanted profile, and what else it and its node have free.

    `free` lists (profile, compute slices) of every free slice on the GPU;
    `order` is the position of `slice` in cluster order, the tie-breaker.
    """

    node: str
    gpu: int
    slice: str
    order: int
    free: tuple[tuple[str, int], ...]
    total_slices: int
    node_free_slices: int

    @property
    def idle(self) -> bool:
        """No slice of this GPU is held, so it could still be re-laid out."""
        return len(self.free) == self.total_slices


# -- the common frame -------------------------------------------------------------------


class Scoring(ABC):
    """What the three plugins share: filtering, required levels, candidates and reasons.

    A subclass says how to pick: `_assign` (a gang on a set of candidate nodes),
    `_pick_slice` and `_pick_share`.
    """

    name = ""
    # Order of the groups of a required level: tightest first, or emptiest first.
    _emptiest_group_first = False
    # Take the first group that holds the gang, or compare every group's cost.
    _cheapest_group = False

    def observe(self, requests: Sequence[Request]) -> Self:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        return spot_rule(self.name, job, node)

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        if request.kind == "gpus":
            return self._gang(view, job, request)
        if request.kind == "mig":
            return self._mig(view, job, request)
        return self._fraction(view, job, request)

    # -- hooks --------------------------------------------------------------------------

    def _reader(self, view: StateView) -> Reader:
        """The per-call reader `_assign` gets (`fgd` gives it the workload's shapes)."""
        return Reader(view)

    @abstractmethod
    def _assign(
        self, reader: Reader, nodes: Iterable[Node], workers: int, per: int, tightest: bool
    ) -> Fit | None:
        """Place `workers` × `per` GPUs on `nodes` (each can hold one worker; `tightest`:
        they come tightest first); None when they cannot hold them all."""

    @abstractmethod
    def _pick_slice(self, gpus: list[MigGpu], profile: str) -> MigGpu:
        """The GPU whose free slice of `profile` to take."""

    @abstractmethod
    def _pick_share(
        self, view: StateView, job: JobSpec, acc: str, milli: int
    ) -> tuple[Node, int] | None:
        """A GPU with room for the share on a node this job may use; None if there is none."""

    def _unconstrained(
        self, reader: Reader, job: JobSpec, acc: str, workers: int, per: int
    ) -> Iterable[Node]:
        """The nodes `_assign` needs to see for a gang without a required level; by default
        every candidate, tightest first. A subclass may pass fewer when it can prove the
        rest would never be chosen."""
        view = reader.view
        return self._candidates(view, job, acc, per, view.nodes_with_free(acc, per))

    def _first_of_bucket(
        self,
        view: StateView,
        job: JobSpec,
        acc: str,
        per: int,
        *,
        free: int,
        count: int,
        skip: Container[str] = (),
    ) -> Iterator[Node]:
        """Up to `count` nodes not in `skip` with exactly `free` free GPUs that may take this
        job, in node order: one index seek, then O(answer + nodes skipped)."""
        taken = 0
        for name in view.nodes_with_free(acc, free):
            if taken == count or view.free_gpus(name) != free:
                return  # the bucket ended (or is empty and a fuller one began)
            if name in skip:
                continue
            for node in self._candidates(view, job, acc, per, (name,)):
                taken += 1
                yield node

    # -- whole-GPU gangs ----------------------------------------------------------------

    def _wait(self, wait: Wait) -> Placed:
        return Placed(status=Status("wait", wait.text(), self.name, wait))

    def _candidates(
        self, view: StateView, job: JobSpec, acc: str, per: int, names: Iterable[str]
    ) -> Iterator[Node]:
        """The nodes among `names` of `acc` that may take this job and hold one worker."""
        cluster = view.cluster
        for name in names:
            node = cluster.node(name)
            if (
                node.accelerator == acc
                and view.free_gpus(name) >= per
                and self.filter_node(job, node).ok
            ):
                yield node

    def _spot_excluded(self, view: StateView, job: JobSpec, acc: str) -> bool:
        """Whether free GPUs of `acc` lie on spot nodes this job may not use."""
        if job.spot_ok:
            return False
        cluster = view.cluster
        return any(cluster.node(n).capacity == "spot" for n in view.nodes_with_free(acc, 1))

    def _gang(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        cluster = view.cluster
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        required = job.topology.required
        reader = self._reader(view)
        if required is None:
            nodes = self._unconstrained(reader, job, acc, workers, per)
            fit = self._assign(reader, nodes, workers, per, tightest=True)
            if fit is not None:
                return Placed(fit.placements)
            room = sum(
                view.free_gpus(n.name) // per
                for n in self._candidates(view, job, acc, per, view.nodes_with_free(acc, per))
            )
            reserved = reserved_free(view, acc)
            return self._wait(
                CapacityWait(
                    "single-nodes",
                    acc,
                    workers,
                    per,
                    room_workers=room,
                    free_gpus=view.free_total(acc) + reserved,
                    spot_excluded=self._spot_excluded(view, job, acc),
                    reserved_gpus=reserved,
                )
            )
        if required not in cluster.levels:
            unknown = UnknownLevel(required, tuple(cluster.levels))
            return Placed(status=Status("unschedulable", unknown.text(), self.name, unknown))
        groups = list(view.groups_with_free(required, acc, workers * per))
        if self._emptiest_group_first:  # stable: equal groups keep tree order
            groups.sort(key=lambda g: -view.free_in_group(required, g, acc))
        best: Fit | None = None
        for group in groups:
            members = group_members(cluster, required, group, acc)
            nodes = self._candidates(view, job, acc, per, members)
            fit = self._assign(reader, nodes, workers, per, tightest=False)
            if fit is None:
                continue
            if not self._cheapest_group:
                return Placed(fit.placements)
            if best is None or fit.cost < best.cost:
                best = fit
        if best is not None:
            return Placed(best.placements)
        return self._wait(self._required_reason(view, job, request, required))

    def _required_reason(
        self, view: StateView, job: JobSpec, request: Request, required: str
    ) -> CapacityWait:
        """Why no group of the required level holds the gang, and how close the best came."""
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        total = workers * per
        most_free = most_room = 0
        fragmented = False
        for group in view.groups_with_free(required, acc, 1):
            free = view.free_in_group(required, group, acc)
            most_free = max(most_free, free)
            fragmented = fragmented or free >= total
            if free >= per:
                members = group_members(view.cluster, required, group, acc)
                room = sum(
                    view.free_gpus(n.name) // per
                    for n in self._candidates(view, job, acc, per, members)
                )
                most_room = max(most_room, room)
        return CapacityWait(
            "fragmented" if fragmented else "group-short",
            acc,
            workers,
            per,
            level=required,
            most_free_in_level=most_free,
            most_room_in_level=most_room,
            spot_excluded=self._spot_excluded(view, job, acc),
            reserved_gpus=reserved_free(view, acc),
        )

    def _heap_assign(
        self,
        view: StateView,
        nodes: Iterable[Node],
        workers: int,
        per: int,
        *,
        state_of: Callable[[Node], NodeFree],
        key: Callable[[NodeFree], int],
    ) -> Fit | None:
        """Greedy one worker at a time: each to the node of smallest `key(state)`, ties by
        node order, re-keying only the node just used (a local copy; the view is not touched).

        Whether the gang fits does not depend on the order (a node holds
        free // per workers whatever else lands), so it is checked first.
        """
        cluster = view.cluster
        heap: list[tuple[int, int, str]] = []
        states: dict[str, NodeFree] = {}
        room = 0
        for node in nodes:
            state = state_of(node)
            states[node.name] = state
            room += state.whole // per
            heap.append((key(state), cluster.node_index(node.name), node.name))
        if room < workers:
            return None
        heapq.heapify(heap)
        ids: dict[str, tuple[int, ...]] = {}  # free GPU ids of the nodes used
        used: dict[str, int] = {}  # workers placed per node
        out: list[Placement] = []
        cost = 0
        for _ in range(workers):
            score, index, name = heapq.heappop(heap)
            cost += score
            j = used.get(name, 0)
            used[name] = j + 1
            free = ids.get(name)
            if free is None:
                free = ids[name] = view.free_gpu_ids(name)
            out.append(Placement(name, free[j * per : (j + 1) * per]))
            state = states[name] = states[name].take_whole(per)
            if state.whole >= per:
                heapq.heappush(heap, (key(state), index, name))
        return Fit(tuple(out), cost)

    # -- MIG slices ---------------------------------------------------------------------

    def _mig(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, profile = request.accelerator, request.mig_profile or ""
        gpus = self._mig_candidates(view, job, acc, profile)
        if gpus:
            pick = self._pick_slice(gpus, profile)
            return Placed((Placement(pick.node, mig_slices=(pick.slice,)),))
        if next(iter(view.free_slices(acc, profile)), None) is not None:
            return self._wait(SliceWait("spot-only", acc, profile))
        return slice_placed(self.name, missing_slice(view, acc, profile))

    def _mig_candidates(
        self, view: StateView, job: JobSpec, acc: str, profile: str
    ) -> list[MigGpu]:
        """Each GPU with a free `profile` slice on a node this job may use, in cluster order,
        with its first such slice: O(free slices of the profile + slices on their nodes)."""
        cluster = view.cluster
        allowed: dict[str, bool] = {}
        on_node: dict[str, dict[int, list[tuple[str, int]]]] = {}
        seen: set[tuple[str, int]] = set()
        out: list[MigGpu] = []
        for order, sid in enumerate(view.free_slices(acc, profile)):
            info = cluster.slice_info(sid)
            if (info.node, info.gpu) in seen:
                continue
            seen.add((info.node, info.gpu))
            node = cluster.node(info.node)
            ok = allowed.get(node.name)
            if ok is None:
                ok = allowed[node.name] = self.filter_node(job, node).ok
            if not ok:
                continue
            free = on_node.get(node.name)
            if free is None:
                free = on_node[node.name] = {}
                for other in view.free_slices_on(node.name):
                    o = cluster.slice_info(other)
                    free.setdefault(o.gpu, []).append((o.profile, o.compute_slices))
            out.append(
                MigGpu(
                    node.name,
                    info.gpu,
                    sid,
                    order,
                    tuple(free[info.gpu]),
                    sum(count for _, count in node.layout(info.gpu)),
                    sum(len(v) for v in free.values()),
                )
            )
        return out

    # -- fractions ----------------------------------------------------------------------

    def _fraction(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, milli = request.accelerator, request.eighths * MILLI_PER_EIGHTH
        pick = self._pick_share(view, job, acc, milli)
        if pick is not None:
            node, gpu = pick
            return Placed((Placement(node.name, gpu=gpu, milli=milli),))
        spot_only = next(iter(view.gpus_with_free_milli(acc, milli)), None) is not None
        if not spot_only and not view.takes_fractions(acc):
            never = ShareWait(acc, milli, unshared=True)
            return Placed(status=Status("unschedulable", never.text(), self.name, never))
        return self._wait(ShareWait(acc, milli, spot_only=spot_only))

    def _share_candidates(
        self, view: StateView, job: JobSpec, acc: str, milli: int
    ) -> Iterator[tuple[Node, int]]:
        """GPUs with room for the share on nodes this job may use, fullest first (lazy)."""
        cluster = view.cluster
        allowed: dict[str, bool] = {}
        for name, gpu in view.gpus_with_free_milli(acc, milli):
            node = cluster.node(name)
            ok = allowed.get(name)
            if ok is None:
                ok = allowed[name] = self.filter_node(job, node).ok
            if ok:
                yield node, gpu


def frag_milli(state: NodeFree, shapes: Sequence[tuple[Shape, int]]) -> int:
    """Σ_m w_m · F_n(m) in thousandths of a GPU, for whole-GPU and fraction shapes.

    F_n(m) is all free capacity when m fits nowhere on the node; otherwise the
    free capacity on GPUs m cannot use: partly shared GPUs for whole-GPU shapes,
    GPUs with less free than m's share for fractions.
    """
    partial = state.partial_milli
    partial_sum = sum(partial)
    total = state.whole * MILLI + partial_sum
    out = 0
    for shape, weight in shapes:
        if shape.kind == "gpus":
            out += weight * (partial_sum if state.whole >= shape.gpus else total)
        elif shape.kind == "fraction":
            need = shape.milli
            fits = state.fractions and (state.whole > 0 or (bool(partial) and partial[-1] >= need))
            out += weight * (sum(v for v in partial if v < need) if fits else total)
    return out
