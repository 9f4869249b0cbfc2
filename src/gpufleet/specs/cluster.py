"""Cluster spec: node groups with their accelerators, topology position and MIG layout.

The scheduler, simulator and config exporters all read this one description
of a cluster, so its checks (topology depth, MIG layouts that fit the GPU)
guard every face at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, PositiveInt, field_validator, model_validator

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import check_layout, get_mig_layout
from gpufleet.errors import UnknownNameError
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.names import AcceleratorName

Capacity = Literal["reserved", "on-demand", "spot"]
DEFAULT_LEVELS = ("block", "leaf", "node")


class NodeGroup(Spec):
    name: str = Field(min_length=1)
    count: PositiveInt = Field(description="Nodes in this group.")
    accelerator: AcceleratorName
    gpus_per_node: PositiveInt = 8
    labels: dict[str, str] = Field(default_factory=dict)
    topology: str | dict[str, str | list[str]] | None = Field(
        default=None,
        description="Place in the topology tree above the nodes: a path 'block-a/leaf-3', or "
        "a mapping per level, e.g. {block: b1, leaf: [l1, l2]} (nodes spread over the listed "
        "groups in order).",
    )
    mig_layout: str | dict[str, PositiveInt] | None = Field(
        default=None,
        description="Catalog layout name (e.g. all-1g.10gb, all-balanced) or {profile: count}.",
    )
    capacity: Capacity = "on-demand"
    fractions: bool = Field(default=False, description="GPUs may be shared by fraction.")

    @field_validator("topology")
    @classmethod
    def _clean_path(
        cls, value: str | dict[str, str | list[str]] | None
    ) -> str | dict[str, str | list[str]] | None:
        if value is None or isinstance(value, dict):
            if isinstance(value, dict):
                for level, names in value.items():
                    if isinstance(names, list) and not names:
                        raise ValueError(f"topology.{level}: list of groups is empty")
            return value
        parts = value.strip("/").split("/")
        if any(not p.strip() for p in parts):
            raise ValueError(f"topology path '{value}' has an empty component")
        return "/".join(p.strip() for p in parts)

    def node_paths(self, levels: tuple[str, ...]) -> list[tuple[str, ...]]:
        """Each node's groups, top level first (levels above 'node'); a listed level spreads
        the nodes over its groups in order, in equal contiguous runs."""
        above = levels[:-1]
        if self.topology is None:
            return [tuple("-" for _ in above)] * self.count
        if isinstance(self.topology, str):
            return [tuple(self.topology.split("/"))] * self.count
        paths: list[tuple[str, ...]] = []
        for i in range(self.count):
            path = []
            for level in above:
                names = self.topology.get(level, "-")
                if isinstance(names, list):
                    per = -(-self.count // len(names))
                    path.append(names[min(i // per, len(names) - 1)])
                else:
                    path.append(names)
            paths.append(tuple(path))
        return paths

    def mig_instances(self) -> dict[str, int] | None:
        """The MIG layout as {profile: count}, resolving a catalog layout name."""
        if self.mig_layout is None:
            return None
        if isinstance(self.mig_layout, Mapping):
            return dict(self.mig_layout)

        return dict(get_mig_layout(self.accelerator, self.mig_layout).instances)


def _cluster_schema(schema: dict[str, Any]) -> None:
    """Files may say `nodes:` for `node_groups:`; the schema accepts either, one required."""
    kind_required(schema)
    props = schema.setdefault("properties", {})
    props["nodes"] = {**props["node_groups"], "description": "Same as node_groups."}
    schema["required"] = [r for r in schema.get("required", []) if r != "node_groups"]
    schema["anyOf"] = [{"required": ["node_groups"]}, {"required": ["nodes"]}]


class ClusterSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=_cluster_schema)

    @model_validator(mode="before")
    @classmethod
    def _nodes_alias(cls, data: Any) -> Any:
        """`nodes:` (the scheduler's cluster files) is another name for `node_groups:`."""
        if isinstance(data, Mapping) and "nodes" in data and "node_groups" not in data:
            out = dict(data)
            out["node_groups"] = out.pop("nodes")
            return out
        return data

    kind: Literal["cluster"] = "cluster"
    name: str = "cluster"
    topology_levels: tuple[str, ...] = Field(
        default=DEFAULT_LEVELS,
        description="Named levels from the top of the tree down to 'node'.",
    )
    node_groups: list[NodeGroup] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = cluster_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def total_gpus(self) -> int:
        return sum(g.count * g.gpus_per_node for g in self.node_groups)


def cluster_problems(spec: ClusterSpec) -> list[str]:

    out: list[str] = []
    if not spec.topology_levels or spec.topology_levels[-1] != "node":
        out.append("topology_levels: the last level must be 'node'")
    seen: set[str] = set()
    depth = len(spec.topology_levels) - 1
    for i, group in enumerate(spec.node_groups):
        where = f"node_groups[{i}]"
        if group.name in seen:
            out.append(f"{where}.name: '{group.name}' is used by another node group")
        seen.add(group.name)
        if isinstance(group.topology, dict):
            unknown = [k for k in group.topology if k not in spec.topology_levels[:-1]]
            if unknown:
                out.append(
                    f"{where}.topology: unknown level {', '.join(unknown)}; levels are "
                    f"{', '.join(spec.topology_levels[:-1])}"
                )
        elif group.topology is not None and len(group.topology.split("/")) != depth:
            levels = "/".join(spec.topology_levels[:-1])
            given = len(group.topology.split("/"))
            out.append(
                f"{where}.topology: '{group.topology}' has {given} level{'s' * (given != 1)}; "
                f"expected {depth} ({levels})"
            )
        if group.mig_layout is None:
            continue
        device = get_accelerator(group.accelerator)
        if not device.supports_mig:
            out.append(f"{where}.mig_layout: {device.name} does not support MIG")
            continue
        try:
            instances = group.mig_instances() or {}
        except UnknownNameError as exc:
            out.append(f"{where}.mig_layout: {exc}")
            continue
        out.extend(f"{where}.mig_layout: {p}" for p in check_layout(device.name, instances))
    return out
