"""Volcano: Queues (scheduling.volcano.sh/v1beta1), PriorityClasses, HyperNodes and the
volcano-scheduler ConfigMap whose actions and plugin tiers follow the chosen profile.

Volcano's queues count resource names, not GPU models, so a team gets one queue
per accelerator it has quota for, `<team>-<accelerator>`, pinned to that
accelerator's nodes by node-group affinity (the `nodegroup` plugin and the
`volcano.sh/nodegroup-name` node label). Quotas map to the capacity plugin:
`deserved` = guarantee, `capability` = the borrowing ceiling, `guarantee` = the
part of the guarantee never lent out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpufleet.errors import UserError
from gpufleet.export.bundle import Bundle, Origin, dump_yaml, yaml_files
from gpufleet.export.k8s import (
    Obj,
    check_label_value,
    cluster_notes,
    k8s_name,
    label_script,
    namespaces,
    node_topology_labels,
    obj,
    priority_cap_notes,
    priority_class_objs,
    quantity,
    resource_name,
    tenancy,
    unique_names,
)
from gpufleet.export.kueue import node_labels as kueue_node_labels
from gpufleet.export.model import Flavor, Fleet, Resource, active_preemption, integer_weights

API = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
SCHEDULER_CONFIGMAP = "volcano-scheduler-configmap"
SCHEDULER_NAMESPACE = "volcano-system"

VOLCANO_JOB_RULES: list[Obj] = [
    {
        "apiGroups": ["batch.volcano.sh"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["scheduling.volcano.sh"],
        "resources": ["podgroups", "queues"],
        "verbs": ["get", "list", "watch"],
    },
]


def node_group_name(flavor: Flavor) -> str:
    return check_label_value(k8s_name(flavor.accelerator, "accelerator"), "node group")


def queue_name(team_k8s: str, flavor: Flavor) -> str:
    return k8s_name(f"{team_k8s}-{flavor.accelerator}", "queue", dots=True)


def _resources(flavor: Flavor, units: Mapping[Resource, int]) -> dict[str, int | str]:
    return {resource_name(r, flavor): quantity(n) for r, n in units.items()}


def queues(fleet: Fleet, names: Mapping[str, str]) -> list[Obj]:
    reclaimable = "quota-reclaim" in active_preemption(fleet)
    dequeue = "fifo" if fleet.profile.head_of_line == "strict" else "traverse"
    weights = integer_weights([t.weight for t in fleet.teams])
    out: list[Obj] = []
    for team, weight in zip(fleet.teams, weights, strict=True):
        for q in fleet.quotas[team.name]:
            spec: Obj = {
                "weight": weight,
                "deserved": _resources(q.flavor, q.guaranteed_units),
                "capability": _resources(q.flavor, q.ceiling_units),
            }
            if q.kept:
                spec["guarantee"] = {"resource": _resources(q.flavor, q.kept_units)}
            spec["reclaimable"] = reclaimable
            spec["dequeueStrategy"] = dequeue
            spec["affinity"] = {
                "nodeGroupAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [node_group_name(q.flavor)]
                }
            }
            out.append(
                obj(
                    API,
                    "Queue",
                    queue_name(names[team.name], q.flavor),
                    annotations={
                        "gpufleet.io/team": team.name,
                        "gpufleet.io/accelerator": q.flavor.accelerator,
                    },
                    spec=spec,
                )
            )
    return out


def hypernodes(fleet: Fleet, notes: list[str]) -> list[Obj]:
    """One HyperNode per topology group, tier 1 just above the nodes; nodes by label."""
    labels = node_topology_labels(fleet)
    levels = fleet.cluster.levels[:-1]
    depth = len(levels)
    full = [n for n in fleet.cluster.nodes if len(labels[n.name]) == depth]
    if len(full) < len(fleet.cluster.nodes):
        notes.append(
            "Nodes without a place at every topology level are in no HyperNode: Volcano's "
            "network-topology-aware scheduling ignores them."
        )
    paths: dict[tuple[str, ...], None] = {}
    for node in full:
        for i in range(1, depth + 1):
            paths.setdefault(tuple(node.path[:i]), None)
    names = unique_names(["/".join(p) for p in paths], "topology group", dots=True)
    out: list[Obj] = []
    for i in range(depth, 0, -1):  # tier 1 (just above the nodes) first
        tier = depth - i + 1
        for path in (p for p in paths if len(p) == i):
            if i == depth:
                match = labels[next(n.name for n in full if n.path == path)]
                members: list[Obj] = [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}
                ]
            else:
                members = [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": names["/".join(c)]}}}
                    for c in paths
                    if len(c) == i + 1 and c[:i] == path
                ]
            out.append(
                obj(
                    HYPERNODE_API,
                    "HyperNode",
                    names["/".join(path)],
                    spec={"tier": tier, "tierName": levels[i - 1], "members": members},
                )
            )
    return out


def scheduler_conf(fleet: Fleet, topology: bool, notes: list[str]) -> dict[str, object]:
    """Actions and plugin tiers for the profile (design 0011 has the table)."""
    p = fleet.profile
    preempt = active_preemption(fleet)
    actions = ["enqueue", "allocate"]
    if "quota-reclaim" in preempt:
        actions.append("reclaim")
    if "priority" in preempt:
        actions.append("preempt")
        notes.append(
            "Volcano's preempt action works within a queue and reclaim across queues over "
            "their deserved share; gpufleet's priority preemption reaches any team's jobs."
        )
    actions.append("backfill")
    first: list[str] = []
    if p.queue_order != "fifo":
        first.append("priority")
    if p.gang:
        first.append("gang")
    first.append("conformance")
    second: list[str] = []
    if p.queue_order in ("fair-share", "multifactor"):
        second.append("drf")
    second += ["predicates", "capacity", "nodegroup", "nodeorder"]
    if p.placement in ("topology-best-fit", "binpack"):
        second.append("binpack")
    if p.placement == "topology-best-fit" and topology:
        second.append("network-topology-aware")
    if p.queue_order in ("tiresias", "multifactor"):
        notes.append(
            f"Queue order {p.queue_order} has no Volcano plugin: jobs are ordered by priority "
            + (
                "then dominant resource share (drf)."
                if p.queue_order == "multifactor"
                else "then creation time."
            )
        )
    if p.queue_order == "fair-share":
        notes.append(
            "drf orders jobs by their current dominant resource share, without "
            "gpufleet's decayed usage history."
        )
    if p.placement == "fgd":
        notes.append(
            "Fragmentation-gradient placement (fgd) has no Volcano plugin: nodeorder "
            "scores nodes instead."
        )
    if p.placement == "topology-best-fit":
        notes.append(
            "Topology packing needs jobs to ask for it (Job/PodGroup "
            "spec.networkTopology, mode hard or soft)."
        )
    if p.head_of_line == "backfill":
        notes.append(
            "Volcano's backfill action places only best-effort pods (no resource requests): "
            "gpufleet's EASY backfill reservations have no equivalent."
        )
    return {
        "actions": ", ".join(actions),
        "tiers": [
            {"plugins": [{"name": n} for n in first]},
            {"plugins": [{"name": n} for n in second]},
        ],
    }


def overcommit_warnings(fleet: Fleet) -> tuple[str, ...]:
    """Volcano's capacity plugin takes deserved shares past the cluster (reclaim then cannot
    give each queue its share: a warning), but a queue's `guarantee` is reserved for it out
    of the cluster's capacity, so guarantees never lent that add up past it are refused."""
    for o in fleet.overcommits:
        if o.kept > o.cluster_gpus:
            raise UserError(
                f"export volcano: the guarantees of {o.flavor} that are never lent add up to "
                f"{o.kept:,} GPUs, but cluster '{fleet.cluster_spec.name}' has "
                f"{o.cluster_gpus:,}; a Volcano queue's guarantee is reserved out of the "
                "cluster's capacity, so they cannot add up past it: lower the guarantees, or "
                "let the teams lend part of them (a cohort, lending_limit_gpus), so that what "
                f"they keep adds up to at most {o.cluster_gpus:,}"
            )
    return fleet.overcommit_warnings(
        "Volcano's deserved shares add up past the cluster too: reclaim cannot bring every "
        "queue to its deserved share."
    )


def export_volcano(fleet: Fleet, *, per_project: bool = False) -> Bundle:
    teams = fleet.require_teams("volcano")
    origin = Origin.of(fleet, "volcano")
    warnings = overcommit_warnings(fleet)
    names = unique_names([t.name for t in teams.teams], "team")
    notes = cluster_notes(fleet)
    notes += [
        "Each team has one queue per accelerator, <team>-<accelerator>, bound to that "
        "accelerator's nodes by nodeGroupAffinity (nodes labelled volcano.sh/nodegroup-name "
        "by label-nodes.sh); jobs name the queue of the accelerator they want.",
        "Queue weights are written, but the capacity plugin shares by deserved and "
        "capability, not by weight (weights count only with the proportion plugin).",
        "Volcano queues are not tied to namespaces: any namespace may submit to any queue; "
        "the ResourceQuotas cap what each team's namespaces request.",
    ]
    if len({t.cohort for t in teams.teams}) > 1 or any(t.cohort is None for t in teams.teams):
        notes.append(
            "Volcano has no cohorts: every queue may take idle capacity up to its capability; "
            "gpufleet's cohort boundaries survive only as those caps."
        )
    if any(not c.preemptible for c in fleet.priority_classes):
        notes.append(
            "Kubernetes PriorityClasses cannot say 'not preemptible': mark such jobs' pods "
            'with the annotation volcano.sh/preemptable: "false".'
        )
    topo = hypernodes(fleet, notes) if any(node_topology_labels(fleet).values()) else []
    conf = scheduler_conf(fleet, bool(topo), notes)
    configmap = obj(
        "v1",
        "ConfigMap",
        SCHEDULER_CONFIGMAP,
        namespace=SCHEDULER_NAMESPACE,
        data={"volcano-scheduler.conf": dump_yaml(conf)},
    )
    spaces = namespaces(fleet, per_project)
    docs: dict[str, Sequence[Obj]] = {
        "queues.yaml": queues(fleet, names),
        "priority-classes.yaml": priority_class_objs(
            fleet, preempt="priority" in active_preemption(fleet)
        ),
        "scheduler-configmap.yaml": [configmap],
    }
    if topo:
        docs["hypernodes.yaml"] = topo
    docs.update(tenancy(fleet, spaces, VOLCANO_JOB_RULES, priority_caps=True))
    notes += priority_cap_notes(fleet, enforced=True)
    files = yaml_files(origin, docs)
    labels = kueue_node_labels(fleet)
    for node in fleet.cluster.nodes:
        flavor = fleet.flavors[node.accelerator]
        labels[node.name] = {**labels[node.name], NODEGROUP_LABEL: node_group_name(flavor)}
    files["label-nodes.sh"] = label_script(origin.header(), labels)
    return Bundle(origin, files, tuple(dict.fromkeys(notes)), warnings)
