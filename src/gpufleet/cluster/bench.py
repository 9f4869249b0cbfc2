"""Micro-benchmark of the state's hot path: allocate + release on a large cluster.

Issue 6 asks for >= 1,000 placement decisions/s at 5,000 nodes x 8 GPUs with a
cost per decision that grows sub-linearly in node count. A decision does at
least one allocate (and, in what-ifs, a release), so this measures that floor
on its own, apart from any policy. Not a test: `python -m gpufleet.cluster.bench`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from gpufleet.cluster.claims import Whole
from gpufleet.cluster.state import State
from gpufleet.cluster.topology import Cluster, Node, expand_group

ACCELERATOR = "h100-sxm5-80gb"


@dataclass(frozen=True)
class BenchResult:
    nodes: int
    pairs: int
    pairs_per_s: float  # allocate + release of pre-drawn claims
    placed_pairs_per_s: float  # best-fit lookup + allocate + release

    @property
    def ops_per_s(self) -> float:
        return 2 * self.pairs_per_s


def bench_cluster(nodes: int, gpus_per_node: int = 8, nodes_per_leaf: int = 32) -> Cluster:
    """`nodes` H100 nodes, 32 per leaf, 16 leaves per block: a typical fat-tree cut."""
    paths = [(f"b{i // (nodes_per_leaf * 16)}", f"l{i // nodes_per_leaf}") for i in range(nodes)]
    built: list[Node] = expand_group("h100", ACCELERATOR, gpus_per_node, paths, domain_gpus=8)
    return Cluster(("block", "leaf", "node"), tuple(built))


def bench_allocate_release(
    nodes: int = 5000, gpus_per_node: int = 8, pairs: int = 10_000, seed: int = 0
) -> BenchResult:
    """Time `pairs` allocate+release pairs on a half-full cluster (so buckets are mixed)."""
    rng = np.random.default_rng(seed)
    cluster = bench_cluster(nodes, gpus_per_node)
    state = State(cluster)
    names = [node.name for node in cluster.nodes]
    for i, name in enumerate(names):  # fill about half, unevenly
        used = int(rng.integers(0, gpus_per_node + 1))
        if used:
            state.allocate(f"bg-{i}", Whole(name, tuple(range(used))))

    claims: list[Whole] = []
    while len(claims) < pairs:
        name = names[int(rng.integers(0, nodes))]
        free = state.free_gpu_ids(name)
        if free:
            claims.append(Whole(name, free[: int(rng.integers(1, len(free) + 1))]))
    start = time.perf_counter()
    for claim in claims:
        state.allocate("job", claim)
        state.release("job", claim)
    pairs_s = time.perf_counter() - start

    sizes = [int(k) for k in rng.integers(1, gpus_per_node + 1, size=pairs)]
    start = time.perf_counter()
    for k in sizes:
        node = next(state.nodes_with_free(ACCELERATOR, k))  # best fit: tightest node first
        claim = Whole(node, state.free_gpu_ids(node)[:k])
        state.allocate("job", claim)
        state.release("job", claim)
    placed_s = time.perf_counter() - start
    return BenchResult(nodes, pairs, pairs / pairs_s, pairs / placed_s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="*", default=[500, 5000, 20000])
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args(argv)
    for nodes in args.nodes:
        r = bench_allocate_release(nodes=nodes, pairs=args.pairs)
        print(
            f"{r.nodes:>6} nodes x 8 GPUs: {r.pairs_per_s:>9,.0f} allocate+release pairs/s "
            f"({r.ops_per_s:,.0f} ops/s); with best-fit lookup {r.placed_pairs_per_s:,.0f} pairs/s"
        )


if __name__ == "__main__":
    main()
