"""Small clusters, teams and jobs for the scheduler's scenario and property tests."""

from __future__ import annotations

from typing import Any

from gpufleet.cluster import Capacity, Cluster, Node, State, expand_group
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def leaves(
    *per_leaf: int,
    gpus: int = 8,
    acc: str = H100,
    capacity: Capacity = "on-demand",
    group: str = "h",
    fractions: bool = False,
) -> list[Node]:
    """Nodes spread over leaves l1, l2, ... of block b1 (`per_leaf` nodes each)."""
    paths = [("b1", f"l{i + 1}") for i, n in enumerate(per_leaf) for _ in range(n)]
    return expand_group(group, acc, gpus, paths, capacity=capacity, fractions=fractions)


def cluster(*nodes: Node) -> tuple[Cluster, State]:
    c = Cluster(("block", "leaf", "node"), tuple(nodes))
    return c, State(c)


def job(name: str, **kw: Any) -> JobSpec:
    kw.setdefault("team", "research")
    return JobSpec.model_validate({"name": name, **kw})


def running(name: str, node: str, gpus: list[int], **kw: Any) -> JobSpec:
    kw.setdefault("gpus", len(gpus))
    return job(name, state="running", placement=[{"node": node, "gpus": gpus}], **kw)


def teams(*entries: dict[str, Any]) -> TeamsSpec:
    return TeamsSpec.model_validate({"kind": "teams", "teams": list(entries)})


def team(name: str, quota: dict[str, int], cohort: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "quota": quota, "cohort": cohort, **kw}


PLENTY = teams(team("research", {H100: 1000, A100: 1000}), team("prod", {H100: 1000, A100: 1000}))
