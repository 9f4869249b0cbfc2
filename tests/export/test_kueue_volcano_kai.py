"""What the Kubernetes targets say, checked against the teams model (tables of cases)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.catalog.mig import layouts_for
from gpufleet.errors import UserError
from gpufleet.export.kai import kai_priorities
from gpufleet.export.model import Flavor, Resource, gpus_of, integer_weights
from gpufleet.sched.quota import slice_milli
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import PriorityClass

from .scenarios import SCENARIOS, documents, export, fleet_of

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def objects(scenario: str, target: str, kind: str) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for _, o in documents(SCENARIOS[scenario].bundle(target))
        if o["kind"] == kind
    }


def entries(cq: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """flavor/resource -> the ClusterQueue's quota entry."""
    return {
        f"{f['name']}/{r['name']}": r
        for rg in cq["spec"]["resourceGroups"]
        for f in rg["flavors"]
        for r in f["resources"]
    }


def test_kueue_quotas_follow_the_teams() -> None:
    cqs = objects("h100-no-mig", "kueue", "ClusterQueue")
    pretrain = entries(cqs["pretrain"])[f"{H100}/nvidia.com/gpu"]
    # guarantee 32, limit 48 (borrowing 16), lends at most 16
    assert pretrain == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 32,
        "borrowingLimit": 16,
        "lendingLimit": 16,
    }
    # borrowing with no limit: no borrowingLimit (Kueue: up to what the cohort has idle)
    assert entries(cqs["finetune"])[f"{H100}/nvidia.com/gpu"] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 16,
    }
    # no cohort: neither limit may be set (Kueue's CEL rule), and none is needed
    assert "cohortName" not in cqs["serving"]["spec"]
    assert entries(cqs["serving"])[f"{H100}/nvidia.com/gpu"] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 16,
    }
    assert cqs["serving"]["spec"]["fairSharing"] == {"weight": "1.5"}
    assert cqs["pretrain"]["spec"]["namespaceSelector"] == {
        "matchLabels": {"gpufleet.io/team": "pretrain"}
    }


def test_kueue_mig_quota_is_split_by_capacity_and_weighs_back() -> None:
    cq = objects("sched-mig", "kueue", "ClusterQueue")["prod"]
    got = entries(cq)
    # 64 of the cluster's 64 A100s, all cut all-balanced (2 x 1g, 1 x 2g, 1 x 3g per GPU)
    slices = {
        p: got[f"{A100}-mig-{p}/nvidia.com/mig-{p}"]["nominalQuota"]
        for p in ("1g.10gb", "2g.20gb", "3g.40gb")
    }
    assert slices == {"1g.10gb": 128, "2g.20gb": 64, "3g.40gb": 64}
    milli = sum(n * slice_milli(A100, p) for p, n in slices.items())
    assert gpus_of(milli) == 64


def test_kueue_flavors_select_nodes_by_gfd_labels() -> None:
    flavors = objects("sched-mig", "kueue", "ResourceFlavor")
    assert flavors[H100]["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"
    }
    assert flavors[f"{A100}-mig-3g.40gb"]["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/mig.config": "all-balanced",
    }
    assert {f["spec"].get("topologyName") for f in flavors.values()} == {"lab"}
    (topology,) = objects("sched-mig", "kueue", "Topology").values()
    assert topology["spec"]["levels"] == [
        {"nodeLabel": "topology.gpufleet.io/block"},
        {"nodeLabel": "topology.gpufleet.io/leaf"},
        {"nodeLabel": "kubernetes.io/hostname"},
    ]


def test_a_node_group_label_overrides_the_product_table() -> None:
    fleet = fleet_of(
        {
            "nodes": [
                {
                    "name": "g",
                    "count": 1,
                    "accelerator": H100,
                    "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-custom"},
                }
            ]
        },
        {"teams": [{"name": "t", "quota": {H100: 8}}]},
    )
    (flavor,) = [o for _, o in documents(export(fleet, "kueue")) if o["kind"] == "ResourceFlavor"]
    assert flavor["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-custom"
    }


# profile -> (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort?, queueingStrategy)
KUEUE_PREEMPTION = [
    ("default", "LowerPriority", "Any", True, "BestEffortFIFO"),
    ("kueue-like", "LowerPriority", "Any", True, "BestEffortFIFO"),
    ("slurm-like", "LowerPriority", "LowerPriority", True, "BestEffortFIFO"),
    ("tiresias", "Never", "Any", False, "BestEffortFIFO"),
    ("fifo", "Never", "Never", False, "BestEffortFIFO"),
    ("strict-fifo", "Never", "Never", False, "StrictFIFO"),
]


@pytest.mark.parametrize(("profile", "within", "reclaim", "borrow", "strategy"), KUEUE_PREEMPTION)
def test_kueue_preemption_follows_the_profile(
    profile: str, within: str, reclaim: str, borrow: bool, strategy: str
) -> None:
    fleet = fleet_of(
        {"nodes": [{"name": "g", "count": 2, "accelerator": H100}]},
        {
            "teams": [
                {"name": "a", "cohort": "c", "quota": {H100: 8}},
                {"name": "b", "cohort": "c", "quota": {H100: 8}},
            ]
        },
        profile,
    )
    cq = next(o for _, o in documents(export(fleet, "kueue")) if o["kind"] == "ClusterQueue")
    p = cq["spec"]["preemption"]
    assert (p["withinClusterQueue"], p["reclaimWithinCohort"]) == (within, reclaim)
    assert ("borrowWithinCohort" in p) == borrow
    if borrow:  # victims up to the highest preemptible class (standard, 500)
        assert p["borrowWithinCohort"] == {"policy": "LowerPriority", "maxPriorityThreshold": 500}
    assert cq["spec"]["queueingStrategy"] == strategy


def test_no_preemptible_class_means_no_preemption() -> None:
    fleet = fleet_of(
        {"nodes": [{"name": "g", "count": 1, "accelerator": H100}]},
        {
            "priority_classes": [{"name": "only", "value": 1, "preemptible": False}],
            "teams": [{"name": "a", "quota": {H100: 8}, "default_priority": "only"}],
        },
    )
    cq = next(o for _, o in documents(export(fleet, "kueue")) if o["kind"] == "ClusterQueue")
    assert cq["spec"]["preemption"] == {
        "withinClusterQueue": "Never",
        "reclaimWithinCohort": "Never",
    }


# profile -> (actions, first tier, second tier)
VOLCANO = [
    (
        "default",
        "enqueue, allocate, reclaim, preempt, backfill",
        ["priority", "gang", "conformance"],
        [
            "drf",
            "predicates",
            "capacity",
            "nodegroup",
            "nodeorder",
            "binpack",
            "network-topology-aware",
        ],
    ),
    (
        "k8s-default",
        "enqueue, allocate, preempt, backfill",
        ["priority", "conformance"],
        ["predicates", "capacity", "nodegroup", "nodeorder"],
    ),
    (
        "fifo",
        "enqueue, allocate, backfill",
        ["gang", "conformance"],
        ["predicates", "capacity", "nodegroup", "nodeorder", "binpack", "network-topology-aware"],
    ),
    (
        "binpack",
        "enqueue, allocate, reclaim, preempt, backfill",
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "capacity", "nodegroup", "nodeorder", "binpack"],
    ),
]


@pytest.mark.parametrize(("profile", "actions", "first", "second"), VOLCANO)
def test_volcano_scheduler_follows_the_profile(
    profile: str, actions: str, first: list[str], second: list[str]
) -> None:
    import yaml

    fleet = SCENARIOS["sched-mig"].fleet()
    fleet = fleet_of(
        fleet.cluster_spec.model_dump(exclude={"kind"}),
        fleet.teams_spec.model_dump(exclude={"kind"}) if fleet.teams_spec else None,
        profile,
    )
    (cm,) = [o for _, o in documents(export(fleet, "volcano")) if o["kind"] == "ConfigMap"]
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    assert conf["actions"] == actions
    assert [[p["name"] for p in t["plugins"]] for t in conf["tiers"]] == [first, second]


def test_volcano_queues_per_team_and_accelerator() -> None:
    queues = objects("sched-mig", "volcano", "Queue")
    assert sorted(queues) == [
        "prod-a100-sxm4-80gb",
        "prod-h100-sxm5-80gb",
        "research-h100-sxm5-80gb",
    ]
    prod = queues["prod-h100-sxm5-80gb"]["spec"]
    # guarantee 64 of which 32 are never lent; the ceiling is its own 64 + research's 0 lent
    assert prod["deserved"] == {"nvidia.com/gpu": 64}
    assert prod["guarantee"] == {"resource": {"nvidia.com/gpu": 32}}
    assert prod["capability"] == {"nvidia.com/gpu": 128}
    research = queues["research-h100-sxm5-80gb"]["spec"]
    assert research["capability"] == {"nvidia.com/gpu": 96}  # 64 + borrowing limit 32
    assert "guarantee" not in research  # lends all of it
    assert research["affinity"]["nodeGroupAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [H100]
    }


def test_kai_queues_parent_and_leaves() -> None:
    queues = objects("h100-no-mig", "kai", "Queue")
    assert queues["pretrain"]["spec"]["resources"]["gpu"] == {
        "quota": 32,
        "limit": 48,
        "overQuotaWeight": 3,
    }
    leaf = queues[f"pretrain-{H100}"]["spec"]
    assert leaf["parentQueue"] == "pretrain"
    assert leaf["resources"]["gpu"] == {"quota": 32, "limit": 48, "overQuotaWeight": 3}
    assert queues["serving"]["spec"]["resources"]["gpu"]["overQuotaWeight"] == 1.5


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text("abcdefgh", min_size=1, max_size=6), st.integers(-5, 2000), st.booleans()
        ),
        min_size=1,
        max_size=6,
        unique_by=lambda t: t[0],
    )
)
def test_kai_priorities_put_preemptibility_on_the_right_side_of_100(
    classes: list[tuple[str, int, bool]],
) -> None:
    pcs = [PriorityClass(name=n, value=v, preemptible=p) for n, v, p in classes]
    values = kai_priorities(pcs)
    for c in pcs:
        assert (values[c.name] < 100) == c.preemptible
        assert values[c.name] >= 0
    for a in pcs:  # order kept within each kind
        for b in pcs:
            if a.preemptible == b.preemptible and a.value < b.value:
                assert values[a.name] < values[b.name]


A100_LAYOUTS = [dict(layout.instances) for layout in layouts_for(A100)]


@settings(max_examples=300, deadline=None)
@given(
    whole=st.integers(0, 4096),
    groups=st.lists(st.tuples(st.sampled_from(A100_LAYOUTS), st.integers(1, 4096)), max_size=3),
    fraction=st.floats(0, 1.5),
)
def test_split_weighs_back_to_the_same_gpus(
    whole: int, groups: list[tuple[dict[str, int], int]], fraction: float
) -> None:
    """Flavor.split spreads N GPUs over resources so that import reads N back, for any mix
    of whole GPUs and catalog MIG layouts (the ones a cluster spec can use)."""
    slices: dict[str, int] = {}
    for layout, n_gpus in groups:
        for profile, count in layout.items():
            slices[profile] = slices.get(profile, 0) + count * n_gpus
    resources = [Resource(A100, None, whole, 1000)] if whole else []
    resources += [Resource(A100, p, n, slice_milli(A100, p)) for p, n in slices.items()]
    gpus = whole + sum(n for _, n in groups)
    if not resources:
        return
    flavor = Flavor(A100, "NVIDIA", gpus, tuple(resources), ("g",))
    n = int(gpus * fraction)
    units = flavor.split(n)
    assert all(u >= 0 for u in units.values())
    assert gpus_of(sum(u * r.milli for r, u in units.items())) == n


@pytest.mark.parametrize(
    ("weights", "ints"),
    [
        ([1, 2, 0.5], [2, 4, 1]),
        ([1.5, 1], [3, 2]),
        ([3, 3], [1, 1]),
        ([1 / 3, 1], [1, 3]),
        ([1e-3, 1000], [1, 65535]),
    ],
)
def test_integer_weights_keep_the_ratios(weights: list[float], ints: list[int]) -> None:
    assert integer_weights(weights) == ints


def test_every_profile_exports() -> None:
    for profile in PROFILES:
        fleet = fleet_of(
            {"nodes": [{"name": "g", "count": 1, "accelerator": H100}]},
            {"teams": [{"name": "a", "quota": {H100: 8}}]},
            profile,
        )
        for target in ("kueue", "volcano", "kai", "slurm"):
            assert export(fleet, target).files


def test_team_names_that_collide_in_kubernetes_are_refused() -> None:
    fleet = fleet_of(
        {"nodes": [{"name": "g", "count": 1, "accelerator": H100}]},
        {"teams": [{"name": "ML", "quota": {H100: 4}}, {"name": "ml", "quota": {H100: 4}}]},
    )
    with pytest.raises(UserError, match="would both be named 'ml'"):
        export(fleet, "kueue")


def test_volcano_and_kai_namespaces_admit_no_pod_above_the_teams_class_cap() -> None:
    """gpufleet's control plane refuses a class above a team's max_priority_class (default:
    its default class); pods name their PriorityClass, so a ResourceQuota scoped to the
    classes above the cap (pods: 0) says the same. Kueue's class is a label no quota scope
    selects: its NOTES.md says so."""
    for target in ("volcano", "kai"):
        caps = {
            o["metadata"]["namespace"]: o["spec"]
            for _, o in documents(SCENARIOS["h100-no-mig"].bundle(target))
            if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "gpufleet-priority-cap"
        }
        above = {ns: s["scopeSelector"]["matchExpressions"][0]["values"] for ns, s in caps.items()}
        assert above == {
            "pretrain": ["critical"],  # cap batch-high (1500), its default
            "pretrain-llm-70b": ["critical"],
            "pretrain-llm-405b": ["critical"],
            "finetune": ["batch-high", "critical", "serving"],  # cap scavenger
            "serving": ["batch-high", "critical"],  # cap serving (1000)
        }, target
        assert all(s["hard"] == {"pods": 0} for s in caps.values())
    kueue = SCENARIOS["h100-no-mig"].bundle("kueue")
    assert not [o for _, o in documents(kueue) if o["metadata"]["name"] == "gpufleet-priority-cap"]
    assert any(n.startswith("Kueue cannot cap the priority classes") for n in kueue.notes)


@pytest.mark.parametrize(
    ("classes", "threshold"),
    [
        # batch-high (preemptible, 1500) above serving (not preemptible, 1000): a threshold of
        # 1500 would let borrowing workloads preempt serving ones, which gpufleet never does
        (
            [
                ("critical", 2000, False),
                ("high", 1500, True),
                ("serving", 1000, False),
                ("scavenger", 10, True),
            ],
            10,
        ),
        ([("top", 100, False), ("mid", 50, True), ("low", 1, True)], 50),
        ([("fixed", 10, False), ("above", 50, True)], None),  # nothing below the fixed class
    ],
)
def test_kueue_borrowing_never_preempts_a_non_preemptible_class(
    classes: list[tuple[str, int, bool]], threshold: int | None
) -> None:
    fleet = fleet_of(
        {"nodes": [{"name": "g", "count": 2, "accelerator": H100}]},
        {
            "priority_classes": [{"name": n, "value": v, "preemptible": p} for n, v, p in classes],
            "teams": [
                {"name": t, "cohort": "c", "quota": {H100: 8}, "default_priority": classes[-1][0]}
                for t in ("a", "b")
            ],
        },
        "kueue-like",
    )
    cq = next(o for _, o in documents(export(fleet, "kueue")) if o["kind"] == "ClusterQueue")
    borrow = cq["spec"]["preemption"].get("borrowWithinCohort")
    if threshold is None:
        assert borrow is None
    else:
        assert borrow == {"policy": "LowerPriority", "maxPriorityThreshold": threshold}
