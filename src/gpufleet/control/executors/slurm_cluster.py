"""gpufleet's cluster against Slurm's nodes: which node is which, and a spec to start from.

Apart from the executor because these are pure functions of the node list `scontrol show
node` prints: the CLI builds a cluster spec from it, and the server checks its spec against
it once, before it starts (`slurm.prepare`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.cluster import Cluster
from gpufleet.control.executors.slurm_text import SlurmNode, group_prefix, natural_key
from gpufleet.errors import UserError


@dataclass(frozen=True)
class NodeMatch:
    """gpufleet's nodes against Slurm's: the name map and what does not fit."""

    names: tuple[tuple[str, str], ...] = ()  # (gpufleet node, Slurm node) where they differ
    problems: tuple[str, ...] = field(default=())


def match_nodes(cluster: Cluster, slurm: Sequence[SlurmNode]) -> NodeMatch:
    """Map each gpufleet node to a Slurm node and check that it has the GPUs gpufleet counts.

    A gpufleet node whose name Slurm has keeps it. Otherwise node ``<group>-<i>`` (how
    gpufleet names the nodes of a group) is the i-th Slurm node, in natural order, whose
    name is ``<group>`` followed by an index (``n-0`` -> ``n1``, ``gpu-3`` -> ``gpu004``).
    """
    by_name = {n.name: n for n in slurm}
    groups: dict[str, list[SlurmNode]] = defaultdict(list)
    for n in sorted(slurm, key=lambda n: natural_key(n.name)):
        groups[group_prefix(n.name)].append(n)
    names: list[tuple[str, str]] = []
    problems: list[str] = []
    used: set[str] = set()
    for node in cluster.nodes:
        target = by_name.get(node.name)
        if target is None:
            group, _, index = node.name.rpartition("-")
            members = groups.get(group, [])
            if index.isdigit() and int(index) < len(members):
                target = members[int(index)]
                names.append((node.name, target.name))
        if target is None:
            problems.append(f"node {node.name}: no Slurm node of that name or group")
            continue
        if target.name in used:
            problems.append(f"node {node.name}: Slurm node {target.name} is already mapped")
            continue
        used.add(target.name)
        if target.gpus < node.gpus:
            problems.append(
                f"node {node.name}: Slurm node {target.name} has {target.gpus} GPUs (GRES), "
                f"gpufleet counts {node.gpus}"
            )
    return NodeMatch(tuple(names), tuple(problems))


def cluster_spec_from_slurm(
    slurm: Sequence[SlurmNode],
    accelerators: Mapping[str, str],
    *,
    name: str = "slurm",
    partition: str | None = None,
) -> dict[str, Any]:
    """A cluster spec (as a mapping, for YAML) with one node group per Slurm name prefix,
    GRES type and GPU count, so that `match_nodes` maps it back onto the same nodes.

    `accelerators` maps a GRES type (or "" for untyped GPUs) to a catalog accelerator.
    Nodes without GPUs, or outside `partition`, are left out.
    """

    chosen = [n for n in slurm if n.gpus > 0 and (partition is None or partition in n.partitions)]
    groups: dict[tuple[str, str, int], list[SlurmNode]] = defaultdict(list)
    for n in sorted(chosen, key=lambda n: natural_key(n.name)):
        groups[(group_prefix(n.name), n.gpu_type or "", n.gpus)].append(n)
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for (prefix, gres, gpus), members in groups.items():
        accelerator = accelerators.get(gres)
        if accelerator is None:
            raise UserError(
                f"GRES type {gres or '(untyped gpu)'} of {members[0].name}: say which "
                f"accelerator it is (--accelerator {gres or 'gpu'}=NAME)"
            )
        group = prefix
        if group in taken:
            raise UserError(
                f"Slurm nodes named {prefix}N have different GPUs ({gres}:{gpus} and others); "
                "gpufleet needs one node group per name prefix"
            )
        taken.add(group)
        out.append(
            {
                "name": group,
                "count": len(members),
                "accelerator": get_accelerator(accelerator).name,
                "gpus_per_node": gpus,
            }
        )
    if not out:
        raise UserError(
            "Slurm reports no node with GPUs (GRES gpu)"
            + (f" in partition {partition}" if partition else "")
        )
    return {"kind": "cluster", "name": name, "nodes": out}
