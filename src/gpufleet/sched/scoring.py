"""Scoring placement plugins: `binpack`, `spread` and `fgd` (register them in `sched.registry`).

They answer the same questions as `topology-best-fit` (gangs all or nothing, each
worker on one node, a `required` topology level keeps every worker inside one
group of that level, spot only for jobs whose `spot_ok`) but pick by a score
instead of topology tiers, so a policy study can compare packing rules:

- `binpack` — kube-scheduler's MostAllocated: each worker to the node with the
  fewest free GPUs that still holds it; fractions to the fullest GPU with room;
  MIG slices to the GPU (then node) with the fewest free slices left. Large holes
  stay free for large jobs.
- `spread` — LeastAllocated, kube-scheduler's default with the NVIDIA device
  plugin: each worker to the node with the most free GPUs; fractions to the
  emptiest GPU with room; MIG to the node (then GPU) with the most free slices.
  A required group is tried emptiest first, in the same spirit.
- `fgd` — Fragmentation Gradient Descent, after Weng et al., "Beware of
  Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
  Descent", USENIX ATC '23. `observe(requests)` learns the target workload: the
  popularity p_m of each request shape m among the pending requests (whole GPUs
  per worker, a fraction's share, or a MIG profile), each request weighted by its
  workers since every worker is one task in the paper's sense; with no requests a
  uniform prior over 1, 2, 4 and 8 GPUs. A node's fragmentation for one shape,
  F_n(m), is the free GPU capacity on it that m cannot use: all of it when m does
  not fit on the node at all; otherwise, for a fraction, the free share on GPUs
  whose free share is below m's, and for whole GPUs, the free share on partly
  used GPUs. F_n = Σ_m p_m · F_n(m); each worker goes where the increase ΔF_n is
  smallest (ties by node order), so capacity is left in shapes the workload can
  still use.

What `fgd` simplifies from the paper, and why:

- GPUs only: the paper's "fits" also checks CPU and memory; gpufleet nodes carry
  no CPU model, so a shape fits when its GPUs do.
- The target distribution is the pending queue of this cycle (the paper uses
  the observed workload), weighted by workers; it needs no history.
- MIG capacity is its own pool, since slices are fixed until an operator
  re-lays a GPU out. Shapes of the other pool (MIG shapes when placing whole
  GPUs or fractions, and the reverse) cannot use any candidate's capacity, so
  they shift every candidate's ΔF by the same amount and are left out. When the
  observed workload has no shape of the pool being placed, whole GPUs and
  fractions fall back to the prior and a MIG slice to its own profile.
- MIG uses the same idea on slice counts, in compute slices: an idle MIG GPU can
  still be re-laid out for any profile, so it holds no fragments; on a partly
  used GPU the free slices of other profiles are fragments for a profile. Taking
  a slice of a partly used GPU therefore never adds fragmentation, and among idle
  GPUs the one whose leftover slices the workload wants is preferred.
- Gangs: the paper places one task at a time; a gang's workers are placed one
  after another on a local copy of the free counts, and with a `required` level
  the group whose whole gang adds the least fragmentation wins (ties tightest
  group first).
- Weights are integer counts, not normalised probabilities, and capacity is in
  thousandths of a GPU, so every ΔF is an exact integer and ties are exact;
  dividing by the total weight would not change any choice.

Complexity (W workers, G the most GPUs on one node, S observed shapes, P partly
shared GPUs of the accelerator, F GPUs with room for a share, "seek" one index
lookup, O(log n)):

- `binpack`: a gang reads the tightest-first index until it holds the gang,
  O(answer); a share takes the head of the fullest-first index, O(1).
- `spread`: only the W emptiest candidates can ever be chosen, so a gang costs
  O(G seeks + W log W); a share bisects the share index for the emptiest GPU,
  O(log² 1000 seeks). GPUs skipped for spot come on top.
- `fgd`: where an accelerator's nodes all take fractions or none do, nodes with
  no shared GPU and equal free counts have equal states, so only the first W of
  each count can be chosen: a gang costs O(G seeks + G·W + P + states·S +
  W·(S + log)), a share O(P + G seeks). Where the two kinds mix, every
  candidate is scored: O(candidate nodes) for a gang, O(F) for a share.
- A required level: `binpack` and `spread` stop at the first group that holds
  the gang (sorting its members); `fgd` scores every group with room, O(their
  members).
- MIG, all three: O(free slices of the profile + slices on the nodes holding
  them).

`place` only reads the view.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpufleet.cluster import MILLI, StateView
from gpufleet.cluster.topology import Node
from gpufleet.sched.framework import Placement
from gpufleet.sched.scoring_frame import (
    Fit,
    MigGpu,
    NodeFree,
    Reader,
    Scoring,
    accelerator_facts,
)
from gpufleet.specs.jobs import JobSpec

# -- binpack ----------------------------------------------------------------------------


class BinPack(Scoring):
    """MostAllocated: the fullest node, GPU or MIG GPU that still fits, so big holes stay big."""

    name = "binpack"

    def _assign(
        self, reader: Reader, nodes: Iterable[Node], workers: int, per: int, tightest: bool
    ) -> Fit | None:
        view = reader.view
        # Filling the tightest node until it no longer holds a worker is the same as
        # choosing the tightest node per worker: a node just used only gets tighter.
        if not tightest:
            cluster = view.cluster
            nodes = sorted(
                nodes, key=lambda n: (view.free_gpus(n.name), cluster.node_index(n.name))
            )
        out: list[Placement] = []
        for node in nodes:
            ids = view.free_gpu_ids(node.name)
            for j in range(min(len(ids) // per, workers - len(out))):
                out.append(Placement(node.name, ids[j * per : (j + 1) * per]))
            if len(out) == workers:
                return Fit(tuple(out))
        return None

    def _pick_slice(self, gpus: list[MigGpu], profile: str) -> MigGpu:
        return min(gpus, key=lambda g: (len(g.free), g.node_free_slices, g.order))

    def _pick_share(
        self, view: StateView, job: JobSpec, acc: str, milli: int
    ) -> tuple[Node, int] | None:
        return next(self._share_candidates(view, job, acc, milli), None)  # fullest first


# -- spread -----------------------------------------------------------------------------


class Spread(Scoring):
    """LeastAllocated: the emptiest node, GPU or MIG node, spreading load (and heat) out."""

    name = "spread"
    _emptiest_group_first = True

    def _unconstrained(
        self, reader: Reader, job: JobSpec, acc: str, workers: int, per: int
    ) -> Iterable[Node]:
        # The first `workers` candidates, emptiest first: a node is first used only once
        # every emptier one has been, so no later node is ever chosen, and each of these
        # holds a worker, so they hold the gang. O(GPUs per node) seeks + O(workers).
        view = reader.view
        out: list[Node] = []
        for free in range(accelerator_facts(view, acc).max_gpus, per - 1, -1):
            out.extend(
                self._first_of_bucket(view, job, acc, per, free=free, count=workers - len(out))
            )
            if len(out) == workers:
                break
        return out

    def _assign(
        self, reader: Reader, nodes: Iterable[Node], workers: int, per: int, tightest: bool
    ) -> Fit | None:
        view = reader.view
        return self._heap_assign(
            view,
            nodes,
            workers,
            per,
            state_of=lambda n: NodeFree(view.free_gpus(n.name)),
            key=lambda s: -s.whole,
        )

    def _pick_slice(self, gpus: list[MigGpu], profile: str) -> MigGpu:
        return min(gpus, key=lambda g: (-g.node_free_slices, -len(g.free), g.order))

    def _pick_share(
        self, view: StateView, job: JobSpec, acc: str, milli: int
    ) -> tuple[Node, int] | None:
        # The emptiest GPU is the last in the fullest-first index, which has no reverse
        # iterator; instead find the largest free value below `top` by bisection (the
        # first answer of "at least v" is the smallest value >= v), then read that
        # bucket in node order. O(log² 1000) seeks + the GPUs skipped for spot.
        def smallest_at_least(v: int) -> int:
            first = next(iter(view.gpus_with_free_milli(acc, v)), None)
            return MILLI + 1 if first is None else view.free_milli(*first)

        cluster = view.cluster
        top = MILLI + 1  # values >= top are done (their GPUs were all excluded)
        while (low := smallest_at_least(milli)) < top:
            high = top - 1
            while low < high:  # invariant: `low` is a free value present below `top`
                mid = (low + high + 1) // 2
                found = smallest_at_least(mid)
                if found < top:
                    low = found
                else:
                    high = mid - 1
            for name, gpu in view.gpus_with_free_milli(acc, low):
                if view.free_milli(name, gpu) != low:
                    break
                node = cluster.node(name)
                if self.filter_node(job, node).ok:
                    return node, gpu
            top = low
        return None


__all__ = ["BinPack", "Spread"]
