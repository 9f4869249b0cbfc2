"""MIG quotas split over the cluster's resources add up to at most what it has (a review: 8
whole A100s and 16 cut all-1g.10gb, three teams guaranteed 8 A100s each, got nominalQuota
`nvidia.com/gpu: 3` each in Kueue and Volcano: 9 whole GPUs promised on 8, no warning).

Each team was rounded on its own; the guarantees of all teams are now apportioned together,
so per resource they fit the cluster whenever the GPUs do, each still weighing back its
guarantee (what `import kueue` reads), and a flavor whose resources weigh less than the
guarantees (MIG layouts that leave GPUs partly unused) is warned of."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.catalog.mig import layouts_for
from gpufleet.export.bundle import Bundle
from gpufleet.export.model import build_flavors, gpus_of
from gpufleet.sched.quota import slice_milli
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import validate

from .scenarios import documents, export, fleet_of

A100 = "a100-sxm4-80gb"
# the reviewer's case: 8 whole A100s and 16 cut all-1g.10gb (112 slices), 24 guaranteed
REVIEW_CLUSTER = {
    "name": "lab",
    "nodes": [
        {"name": "mig", "count": 2, "accelerator": A100, "mig_layout": "all-1g.10gb"},
        {"name": "whole", "count": 1, "accelerator": A100},
    ],
}
REVIEW_TEAMS = {
    "teams": [
        {"name": n, "cohort": "x", "quotas": [{"flavor": A100, "guaranteed_gpus": 8}]}
        for n in ("a", "b", "c")
    ]
}
MIG_1G = "nvidia.com/mig-1g.10gb"


def kueue_nominal(b: Bundle) -> dict[str, dict[str, int]]:
    """team -> resource name -> nominalQuota, from the ClusterQueues."""
    out: dict[str, dict[str, int]] = {}
    for _, o in documents(b):
        if o["kind"] == "ClusterQueue":
            team = out.setdefault(o["metadata"]["name"], {})
            for group in o["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for r in flavor["resources"]:
                        team[r["name"]] = team.get(r["name"], 0) + int(r["nominalQuota"])
    return out


def volcano_deserved(b: Bundle) -> dict[str, dict[str, int]]:
    return {
        o["metadata"]["name"]: {k: int(v) for k, v in o["spec"]["deserved"].items()}
        for _, o in documents(b)
        if o["kind"] == "Queue"
    }


def milli(resource: str) -> int:
    if resource == "nvidia.com/gpu":
        return 1000
    return slice_milli(A100, resource.removeprefix("nvidia.com/mig-").replace(".me", "+me"))


def test_the_reviewers_case_promises_no_more_than_the_cluster_has() -> None:
    fleet = fleet_of(REVIEW_CLUSTER, REVIEW_TEAMS)
    capacity = {"nvidia.com/gpu": 8, MIG_1G: 112}
    for target, quotas in (
        ("kueue", kueue_nominal(export(fleet, "kueue"))),
        ("volcano", volcano_deserved(export(fleet, "volcano"))),
    ):
        for resource, has in capacity.items():
            assert sum(q[resource] for q in quotas.values()) <= has, (target, resource, quotas)
        for team, q in quotas.items():  # and each still weighs back its 8 GPUs
            assert gpus_of(sum(n * milli(r) for r, n in q.items())) == 8, (target, team, q)
    assert fleet.overcommits == ()


def test_guarantees_past_what_mig_layouts_hold_are_warned_of_not_overpromised() -> None:
    """16 A100s holding one 4g.40gb slice each weigh 16 x 4/7 GPUs (9.15): guarantees of 12
    fit the GPUs but not the slices; the units stay within the 16 slices, with a warning."""
    cluster = {
        "name": "lab",
        "nodes": [{"name": "m", "count": 2, "accelerator": A100, "mig_layout": {"4g.40gb": 1}}],
    }
    teams = {
        "teams": [
            {"name": "a", "quotas": [{"flavor": A100, "guaranteed_gpus": 6}]},
            {"name": "b", "quotas": [{"flavor": A100, "guaranteed_gpus": 6}]},
        ]
    }
    b = export(fleet_of(cluster, teams), "kueue")
    assert sum(q["nvidia.com/mig-4g.40gb"] for q in kueue_nominal(b).values()) <= 16
    (warning,) = b.warnings
    assert warning.startswith(
        f"The guarantees of {A100} add up to 12 GPUs (a 6, b 6), but its whole GPUs and MIG "
        "slices in cluster 'lab' weigh 9.15 GPUs"
    )
    assert warning.endswith("Lower them to add up to at most 9.")


A100_LAYOUTS = [dict(layout.instances) for layout in layouts_for(A100)]


@settings(max_examples=150, deadline=None)
@given(
    whole_nodes=st.integers(0, 4),
    mig=st.lists(st.tuples(st.sampled_from(A100_LAYOUTS), st.integers(1, 4)), max_size=3),
    data=st.data(),
)
def test_guarantees_that_fit_the_gpus_fit_every_resource(
    whole_nodes: int, mig: list[tuple[dict[str, int], int]], data: st.DataObject
) -> None:
    """Any A100 cluster (whole GPUs and catalog MIG layouts) and any guarantees adding up to
    at most its GPUs: per resource, the Kueue nominalQuotas and Volcano deserved shares add
    up to at most the cluster's units, and where the resources weigh enough, each team's
    weigh back its guarantee."""
    nodes: list[dict[str, Any]] = [
        {"name": f"m{i}", "count": n, "accelerator": A100, "mig_layout": layout}
        for i, (layout, n) in enumerate(mig)
    ]
    if whole_nodes:
        nodes.append({"name": "w", "count": whole_nodes, "accelerator": A100})
    if not nodes:
        return
    cluster = {"name": "c", "nodes": nodes}
    (flavor,) = build_flavors(validate(ClusterSpec, {"kind": "cluster", **cluster}, "c")).values()
    n_teams = data.draw(st.integers(1, 5))
    amounts = data.draw(
        st.lists(st.integers(0, flavor.gpus), min_size=n_teams, max_size=n_teams).filter(
            lambda a: sum(a) <= flavor.gpus
        )
    )
    cohort = data.draw(st.sampled_from([None, "x"]))
    teams = {
        "teams": [
            {
                "name": f"t{i}",
                "cohort": cohort,
                "quotas": [{"flavor": A100, "guaranteed_gpus": g}],
            }
            for i, g in enumerate(amounts)
        ]
    }
    fleet = fleet_of(cluster, teams)
    capacity: dict[str, int] = {}
    for r in flavor.resources:
        name = "nvidia.com/gpu" if r.profile is None else f"nvidia.com/mig-{r.profile}"
        capacity[name.replace("+", ".")] = r.capacity
    holds = sum(r.capacity * r.milli for r in flavor.resources)
    for quotas in (
        kueue_nominal(export(fleet, "kueue")),
        volcano_deserved(export(fleet, "volcano")),
    ):
        for resource, has in capacity.items():
            assert sum(q.get(resource, 0) for q in quotas.values()) <= has, resource
        if holds >= sum(amounts) * 1000:
            weighs = sorted(
                gpus_of(sum(n * milli(r) for r, n in q.items())) for q in quotas.values()
            )
            assert weighs == sorted(amounts)
