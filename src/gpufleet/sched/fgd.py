"""`fgd`: Fragmentation Gradient Descent placement, after Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
USENIX ATC '23. What it does, what it simplifies from the paper and its complexity are in
`sched.scoring`'s docstring, beside `binpack` and `spread`, which share its frame
(`sched.scoring_frame`); it has a module of its own because the fragmentation measure is
its own piece of mathematics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Self

from gpufleet.cluster import MILLI, StateView
from gpufleet.cluster.topology import Node
from gpufleet.sched.requests import Request
from gpufleet.sched.scoring_frame import (
    PRIOR,
    Fit,
    MigGpu,
    NodeFree,
    Reader,
    Scoring,
    Shape,
    accelerator_facts,
)
from gpufleet.specs.jobs import JobSpec

# -- fgd --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fgd(Scoring):
    """Fragmentation Gradient Descent (Weng et al., ATC '23): least added fragmentation.

    `weights` counts tasks per shape (the unnormalised target distribution);
    `observe` returns a new instance learnt from the pending requests.
    """

    weights: tuple[tuple[Shape, int], ...] = PRIOR
    name = "fgd"
    _cheapest_group = True

    def observe(self, requests: Sequence[Request]) -> Self:
        # a queue repeats a few request objects (one per job shape, `job_facts`): count
        # them by identity first, so each distinct one is hashed and shaped once
        times: dict[int, int] = {}
        first: dict[int, Request] = {}
        for r in requests:
            key = id(r)
            n = times.get(key)
            if n is None:
                times[key] = 1
                first[key] = r
            else:
                times[key] = n + 1
        counts: Counter[Shape] = Counter()
        for key, r in first.items():
            counts[Shape.of(r)] += r.workers * times[key]
        weights = tuple(sorted(counts.items())) or PRIOR
        return self if weights == self.weights else type(self)(weights)

    @property
    def distribution(self) -> Mapping[Shape, float]:
        """The target workload as probabilities p_m (they sum to 1)."""
        total = sum(w for _, w in self.weights)
        return MappingProxyType({s: w / total for s, w in self.weights})

    def fragmentation_gpus(self, view: StateView, node: str) -> float:
        """F_n: the node's expected free GPU capacity (in GPUs) that a task drawn from the
        target workload could not use, for whole GPUs and fractions (MIG aside)."""
        shapes = self._dense_shapes()
        total = sum(w for _, w in shapes)
        reader = Reader(view, shapes)
        return reader.frag(reader.state(view.cluster.node(node))) / (total * MILLI)

    def _unconstrained(
        self, reader: Reader, job: JobSpec, acc: str, workers: int, per: int
    ) -> Iterable[Node]:
        view = reader.view
        facts = accelerator_facts(view, acc)
        if facts.mixed:  # equal free counts, two kinds of node: states differ
            return super()._unconstrained(reader, job, acc, workers, per)
        # Nodes with no partly shared GPU and equal free counts have equal states, so
        # they score alike and the lower index wins: at most the first `workers` of each
        # count can ever be chosen, and a count with that many already holds the gang,
        # so the fit check stays exact. Nodes with shared GPUs are all looked at.
        partial = reader.partial(acc) if facts.fraction_nodes else {}
        out: list[Node] = []
        for free in range(per, facts.max_gpus + 1):
            out.extend(
                self._first_of_bucket(view, job, acc, per, free=free, count=workers, skip=partial)
            )
        out.extend(self._candidates(view, job, acc, per, partial))
        return out

    def _dense_shapes(self) -> tuple[tuple[Shape, int], ...]:
        return tuple((s, w) for s, w in self.weights if s.kind != "mig") or PRIOR

    def _reader(self, view: StateView) -> Reader:
        return Reader(view, self._dense_shapes())

    def _assign(
        self, reader: Reader, nodes: Iterable[Node], workers: int, per: int, tightest: bool
    ) -> Fit | None:
        frag = reader.frag
        return self._heap_assign(
            reader.view,
            nodes,
            workers,
            per,
            state_of=reader.state,
            key=lambda s: frag(s.take_whole(per)) - frag(s),
        )

    def _pick_slice(self, gpus: list[MigGpu], profile: str) -> MigGpu:
        shapes = tuple((s, w) for s, w in self.weights if s.kind == "mig") or (
            (Shape("mig", mig_profile=profile), 1),
        )

        def added(g: MigGpu) -> int:
            after = list(g.free)
            after.remove(next(f for f in after if f[0] == profile))
            return _mig_frag(tuple(after), False, shapes) - _mig_frag(g.free, g.idle, shapes)

        return min(gpus, key=lambda g: (added(g), g.order))

    def _pick_share(
        self, view: StateView, job: JobSpec, acc: str, milli: int
    ) -> tuple[Node, int] | None:
        reader = self._reader(view)
        facts = accelerator_facts(view, acc)
        if facts.mixed or not facts.fraction_nodes:
            gpus = self._share_candidates(view, job, acc, milli)  # every GPU with room
        else:
            gpus = self._share_shortlist(reader, job, acc, milli)
        cluster = view.cluster
        states: dict[str, NodeFree] = {}
        added: dict[tuple[str, int], int] = {}  # (node, free milli of the GPU) -> ΔF
        best: tuple[int, int, int] | None = None
        pick: tuple[Node, int] | None = None
        for node, gpu in gpus:
            free = view.free_milli(node.name, gpu)
            delta = added.get((node.name, free))
            if delta is None:
                state = states.get(node.name)
                if state is None:
                    state = states[node.name] = reader.state(node)
                delta = reader.frag(state.take_share(free, milli)) - reader.frag(state)
                added[(node.name, free)] = delta
            key = (delta, cluster.node_index(node.name), gpu)
            if best is None or key < best:
                best, pick = key, (node, gpu)
        return pick

    def _share_shortlist(
        self, reader: Reader, job: JobSpec, acc: str, milli: int
    ) -> Iterator[tuple[Node, int]]:
        """The GPUs that can score best for a share when every node of `acc` takes them.

        Every partly shared GPU with room; an idle GPU only where it is the first idle
        one of a node with shared GPUs, or of the first node of each free count without
        any (those nodes' states are equal, so the lower index wins). Any other idle
        GPU scores exactly like one listed before it. O(partly shared GPUs + GPUs per
        node) seeks, not O(GPUs).
        """
        view = reader.view
        cluster = view.cluster
        partial = reader.partial(acc)
        for name, shared in partial.items():
            node = cluster.node(name)
            if not self.filter_node(job, node).ok:
                continue
            for gpu, free in shared:
                if free >= milli:
                    yield node, gpu
            if view.free_gpus(name):
                yield node, view.free_gpu_ids(name)[0]
        for free in range(1, accelerator_facts(view, acc).max_gpus + 1):
            for node in self._first_of_bucket(view, job, acc, 1, free=free, count=1, skip=partial):
                yield node, view.free_gpu_ids(node.name)[0]


def _mig_frag(
    free: tuple[tuple[str, int], ...], idle: bool, shapes: Sequence[tuple[Shape, int]]
) -> int:
    """Σ_m w_m · F(m) of one MIG GPU, in compute slices: an idle GPU can be re-laid out for
    any profile (no fragments); on a used one, free slices of other profiles are fragments."""
    if idle:
        return 0
    return sum(
        weight * sum(compute for profile, compute in free if profile != shape.mig_profile)
        for shape, weight in shapes
    )


__all__ = ["Fgd"]
