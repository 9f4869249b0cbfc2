"""The FGD paper's baseline placement heuristics, as placement plugins, for `sim.experiments`.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC '23, compare FGD against five
heuristics on the openb trace; four are here (GPU Clustering is not), so the
fragmentation experiment can put them next to gpufleet's own placements:

- `random-fit` (`RandomFit(seed)`) — a uniformly random node among those that can
  hold the task, then a uniformly random GPU (or GPUs) on it that can. Drawn from
  a `numpy.random.Generator` seeded at construction, so a run is reproducible.
- `best-fit` (`BestFit`) — the task goes where the least GPU capacity is left
  after it lands: gpufleet's `binpack` (kube-scheduler's MostAllocated): whole
  GPUs on the node with the fewest free GPUs that holds them, a fraction on the
  fullest GPU that still has room.
- `dot-product` (`DotProduct`) — Tetris' alignment score: the node (and GPU)
  maximising the dot product of the task's request vector and the free-resource
  vector. See "What is simplified" for what that becomes with GPUs only.
- `gpu-packing` (`GpuPacking`) — a fraction goes to a GPU that is already shared
  when one has room (the fullest such GPU), else to an idle GPU of a node that
  is already in use (some GPU held whole or shared; the node with the fewest
  free GPUs), else to an idle GPU of an idle node (again the one with the fewest
  GPUs); whole-GPU tasks go to the node with the fewest free GPUs (as `best-fit`).

What is simplified against the paper, and what it implies:

- **GPUs only.** The paper's nodes and tasks also have CPU and memory; a task
  fits only where all three fit, and best-fit and dot-product score all three.
  gpufleet models no CPU or memory, so "fits" means the GPUs fit and every score
  is over GPU capacity alone. Fragmentation that comes from CPU or memory
  running out before GPUs (a node with idle GPUs but no free CPU) does not exist
  here, so every policy looks better than in the paper, and the differences
  between policies that come from the other dimensions vanish.
- **Dot-product degenerates.** With one dimension the request and free vectors
  are scalars r and f, and maximising r·f over candidates is maximising f: the
  node with the most free GPUs for a whole-GPU task, the GPU with the most free
  share for a fraction (a share lives on one GPU, so that GPU's free share is
  the capacity it aligns with). That is worst fit, kube-scheduler's
  LeastAllocated, which is exactly gpufleet's `spread`; `DotProduct` reuses it.
  Tetris normalises each dimension by the machine's capacity; with one
  dimension that would only rank nodes of different sizes differently (small
  nodes first) and is not done. Expect dot-product to spread load and fragment
  more than in the paper, where the CPU and memory terms pull it towards fit.
- **Best-fit is per GPU for fractions.** The paper scores a node's remaining
  resources; `binpack` picks the fullest GPU that fits a share, and the node
  with the fewest free whole GPUs for a whole-GPU task. Both are best fit; they
  differ where a node's free capacity is split over several partly used GPUs.
- **GPU types.** The paper's tasks may name GPU models; so may ours (a request
  is per accelerator), and the experiment keeps that constraint. Scores are not
  compared across accelerator types: `sim.experiments` pools the types when no
  task names one (the bundled openb pod list names none).
- **Fractions in eighths.** gpufleet places GPU shares in steps of 1/8 of a GPU
  (`sched.requests.FRACTION_STEPS`); the paper uses thousandths.
- **One task at a time.** The paper's tasks are single pods. Multi-worker
  requests are handled (each worker on one node, a `required` topology level
  keeping them in one group) for completeness, not as a paper baseline.

`observe` returns the plugin itself: none of these heuristics learns the workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final

import numpy as np

from gpufleet.cluster import MILLI, Cluster, Node, StateView
from gpufleet.sched.framework import Placed, Placement, PlacementPlugin, Status, spot_rule
from gpufleet.sched.requests import Request
from gpufleet.sched.scoring import BinPack, Spread
from gpufleet.sched.scoring_frame import MILLI_PER_EIGHTH
from gpufleet.specs.jobs import JobSpec

# Random draws tried before the candidates are listed in full: each draw is uniform over all
# nodes of the type, so a hit is uniform over the candidates, and so is the full list.
_RANDOM_TRIES: Final = 16


def _wait(name: str, reason: str) -> Placed:
    return Placed(status=Status("wait", reason, name))


def _renamed(name: str, placed: Placed) -> Placed:
    """A delegate's answer, its status credited to this plugin."""
    if placed.status.ok or placed.status.plugin == name:
        return placed
    return Placed(placed.placements, replace(placed.status, plugin=name))


class _Facts:
    """What never changes about one cluster: its nodes per accelerator (all, and those that
    share GPUs by fraction) and the members of each topology group per accelerator."""

    __slots__ = ("cluster", "fraction_nodes", "members", "nodes", "whole_capacity")

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        nodes: dict[str, list[Node]] = {}
        shared: dict[str, list[Node]] = {}
        members: dict[tuple[str, str, str], list[str]] = {}
        self.whole_capacity: dict[str, int] = {}
        for node in cluster.nodes:
            nodes.setdefault(node.accelerator, []).append(node)
            if node.fractions:
                shared.setdefault(node.accelerator, []).append(node)
            self.whole_capacity[node.name] = sum(1 for g in range(node.gpus) if not node.layout(g))
            for level in cluster.levels:
                group = cluster.group_of(node.name, level)
                members.setdefault((level, group, node.accelerator), []).append(node.name)
        self.nodes = {acc: tuple(v) for acc, v in nodes.items()}
        self.fraction_nodes = {acc: tuple(v) for acc, v in shared.items()}
        self.members = {k: tuple(v) for k, v in members.items()}


def _facts(cluster: Cluster) -> _Facts:
    return cluster.derived(_Facts)


# -- random-fit -------------------------------------------------------------------------


class RandomFit:
    """A uniformly random node that can hold the task, then uniformly random GPUs on it.

    The generator is the plugin's own, seeded at construction: the same seed and the same
    sequence of `place` calls give the same placements. `place` reads the view only; the
    generator advances with every call, including calls that find no room.
    """

    name = "random-fit"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def observe(self, requests: Sequence[Request]) -> RandomFit:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        return spot_rule(self.name, job, node)

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        if request.kind == "gpus":
            return self._gang(view, job, request)
        if request.kind == "mig":
            return self._slice(view, job, request)
        return self._share(view, job, request)

    # -- helpers ------------------------------------------------------------------------

    def _pick(self, items: Sequence[str]) -> str:
        return items[int(self._rng.integers(len(items)))]

    def _gpus(self, free: Sequence[int], count: int) -> tuple[int, ...]:
        chosen = self._rng.choice(len(free), size=count, replace=False)
        return tuple(sorted(free[int(i)] for i in chosen))

    def _allowed(self, view: StateView, job: JobSpec, name: str) -> bool:
        return self.filter_node(job, view.cluster.node(name)).ok

    # -- whole GPUs ---------------------------------------------------------------------

    def _gang(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        required = job.topology.required
        cluster = view.cluster
        if required is not None and required not in cluster.levels:
            known = ", ".join(cluster.levels)
            return Placed(
                status=Status(
                    "unschedulable",
                    f"cannot run: topology level '{required}' is not in this cluster ({known})",
                    self.name,
                )
            )
        if view.worker_room(acc, per) < workers:
            return _wait(
                self.name,
                f"waiting: room for {view.worker_room(acc, per)} of {workers} workers of {per} "
                f"{acc} GPUs on single nodes",
            )
        if required is None and workers == 1:
            name = self._one_node(view, job, acc, per)
            if name is None:
                return _wait(self.name, f"waiting: no {acc} node this job may use has {per} free")
            return Placed((Placement(name, self._gpus(view.free_gpu_ids(name), per)),))
        if required is None:
            groups: list[tuple[str, ...]] = [
                tuple(n for n in view.nodes_with_free(acc, per) if self._allowed(view, job, n))
            ]
        else:
            facts = _facts(cluster)
            groups = []
            for group in view.groups_with_free(required, acc, workers * per):
                members = facts.members.get((required, group, acc), ())
                names = tuple(
                    n for n in members if view.free_gpus(n) >= per and self._allowed(view, job, n)
                )
                if sum(view.free_gpus(n) // per for n in names) >= workers:
                    groups.append(names)
        groups = [g for g in groups if sum(view.free_gpus(n) // per for n in g) >= workers]
        if not groups:
            where = f"one {required}" if required else "nodes this job may use"
            return _wait(self.name, f"waiting: no room for {workers}×{per} {acc} GPUs in {where}")
        names = groups[int(self._rng.integers(len(groups)))]
        return Placed(self._workers(view, names, workers, per))

    def _one_node(self, view: StateView, job: JobSpec, acc: str, per: int) -> str | None:
        """A uniformly random node of `acc` this job may use with `per` free GPUs."""
        nodes = _facts(view.cluster).nodes.get(acc, ())
        if not nodes:
            return None
        for _ in range(_RANDOM_TRIES):
            node = nodes[int(self._rng.integers(len(nodes)))]
            if view.free_gpus(node.name) >= per and self.filter_node(job, node).ok:
                return node.name
        found = [n for n in view.nodes_with_free(acc, per) if self._allowed(view, job, n)]
        return self._pick(found) if found else None

    def _workers(
        self, view: StateView, names: Sequence[str], workers: int, per: int
    ) -> tuple[Placement, ...]:
        """Each worker on a uniformly random node of `names` that still holds one (the caller
        checked that they hold all)."""
        free = {n: list(view.free_gpu_ids(n)) for n in names}
        out: list[Placement] = []
        for _ in range(workers):
            name = self._pick([n for n in names if len(free[n]) >= per])
            gpus = self._gpus(free[name], per)
            free[name] = [g for g in free[name] if g not in gpus]
            out.append(Placement(name, gpus))
        return tuple(out)

    # -- fractions and MIG slices -------------------------------------------------------

    def _share(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, milli = request.accelerator, request.eighths * MILLI_PER_EIGHTH
        if next(iter(view.gpus_with_free_milli(acc, milli)), None) is None:
            return _wait(self.name, f"waiting: no {acc} GPU has {milli}/{MILLI} free to share")
        nodes = _facts(view.cluster).fraction_nodes.get(acc, ())
        for _ in range(_RANDOM_TRIES):
            node = nodes[int(self._rng.integers(len(nodes)))]
            gpus = [g for g in range(node.gpus) if view.free_milli(node.name, g) >= milli]
            if gpus and self.filter_node(job, node).ok:
                return Placed((Placement(node.name, gpu=self._pick_int(gpus), milli=milli),))
        by_node: dict[str, list[int]] = {}
        for name, gpu in view.gpus_with_free_milli(acc, milli):
            by_node.setdefault(name, []).append(gpu)
        names = sorted((n for n in by_node if self._allowed(view, job, n)), key=_order(view))
        if not names:
            return _wait(
                self.name,
                f"waiting: the {acc} GPUs with {milli}/{MILLI} free to share are spot capacity, "
                "which this job may not use",
            )
        name = self._pick(names)
        return Placed((Placement(name, gpu=self._pick_int(sorted(by_node[name])), milli=milli),))

    def _pick_int(self, items: Sequence[int]) -> int:
        return items[int(self._rng.integers(len(items)))]

    def _slice(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, profile = request.accelerator, request.mig_profile or ""
        cluster = view.cluster
        on: dict[str, dict[int, str]] = {}  # node -> GPU -> its first free slice of the profile
        for sid in view.free_slices(acc, profile):
            info = cluster.slice_info(sid)
            on.setdefault(info.node, {}).setdefault(info.gpu, sid)
        names = [n for n in on if self._allowed(view, job, n)]
        if not names:
            return _wait(self.name, f"waiting: no free {profile} MIG slice on {acc}")
        gpus = on[self._pick(names)]
        sid = gpus[self._pick_int(sorted(gpus))]
        return Placed((Placement(cluster.slice_info(sid).node, mig_slices=(sid,)),))


def _order(view: StateView) -> Callable[[str], int]:
    return view.cluster.node_index


# -- best-fit, dot-product: gpufleet's binpack and spread under the paper's names --------


class _Renamed:
    """A gpufleet scoring plugin under a paper baseline's name (statuses credited to it)."""

    name = ""

    def __init__(self, inner: PlacementPlugin) -> None:
        self._inner = inner

    def observe(self, requests: Sequence[Request]) -> _Renamed:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        return spot_rule(self.name, job, node)

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        return _renamed(self.name, self._inner.place(view, job, request))


class BestFit(_Renamed):
    """Least GPU capacity left after placement: gpufleet's `binpack` (see the module doc)."""

    name = "best-fit"

    def __init__(self) -> None:
        super().__init__(BinPack())


class DotProduct(_Renamed):
    """Tetris' alignment score with GPUs as the only dimension: worst fit, gpufleet's `spread`
    (see the module doc for why the dot product degenerates to that)."""

    name = "dot-product"

    def __init__(self) -> None:
        super().__init__(Spread())


# -- gpu-packing ------------------------------------------------------------------------


class GpuPacking:
    """Shares on already shared GPUs first, then on nodes already in use, then on idle nodes;
    whole GPUs on the node with the fewest free (`binpack`). MIG slices as `binpack`.

    A fraction costs O(1) index reads when a shared GPU has room; otherwise one pass over
    the nodes with a free GPU, tightest first, up to the first one in use.
    """

    name = "gpu-packing"

    def __init__(self) -> None:
        self._whole = BinPack()

    def observe(self, requests: Sequence[Request]) -> GpuPacking:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        return spot_rule(self.name, job, node)

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        if request.kind != "fraction":
            return _renamed(self.name, self._whole.place(view, job, request))
        acc, milli = request.accelerator, request.eighths * MILLI_PER_EIGHTH
        cluster = view.cluster
        for name, gpu in view.gpus_with_free_milli(acc, milli):  # fullest first
            if view.free_milli(name, gpu) == MILLI:
                break  # only idle GPUs are left
            if self.filter_node(job, cluster.node(name)).ok:
                return Placed((Placement(name, gpu=gpu, milli=milli),))
        capacity = _facts(cluster).whole_capacity
        idle: str | None = None
        for name in view.nodes_with_free(acc, 1):  # fewest free GPUs first
            node = cluster.node(name)
            if not node.fractions or not self.filter_node(job, node).ok:
                continue
            if view.free_gpus(name) < capacity[name]:  # in use: the tier we want
                return Placed((Placement(name, gpu=view.free_gpu_ids(name)[0], milli=milli),))
            if idle is None:
                idle = name
        if idle is not None:
            return Placed((Placement(idle, gpu=view.free_gpu_ids(idle)[0], milli=milli),))
        return _wait(self.name, f"waiting: no {acc} GPU this job may use has {milli}/{MILLI} free")


# -- the registry of baselines ----------------------------------------------------------

BASELINES: Mapping[str, Callable[[int], PlacementPlugin]] = {
    RandomFit.name: RandomFit,
    BestFit.name: lambda seed: BestFit(),
    DotProduct.name: lambda seed: DotProduct(),
    GpuPacking.name: lambda seed: GpuPacking(),
}


def baseline(name: str, seed: int = 0) -> PlacementPlugin:
    """A fresh baseline plugin by name (`seed` drives random-fit only); KeyError if unknown."""
    return BASELINES[name](seed)


__all__ = [
    "BASELINES",
    "BestFit",
    "DotProduct",
    "GpuPacking",
    "RandomFit",
    "baseline",
]
