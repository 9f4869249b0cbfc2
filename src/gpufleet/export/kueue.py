"""Kueue (kueue.x-k8s.io/v1beta2, the CRDs' storage version): the teams as ClusterQueues.

- a ResourceFlavor per accelerator (whole GPUs) and per (accelerator, MIG profile), selected
  by GPU feature discovery's `nvidia.com/gpu.product` (plus `nvidia.com/mig.config` when one
  mig-parted config holds that profile);
- a resource group per resource name (`nvidia.com/gpu`, each `nvidia.com/mig-<profile>`),
  since Kueue counts each name separately where gpufleet weighs slices into one quota
  (`model.Flavor.split`);
- a ClusterQueue per team: nominalQuota = guarantee, borrowingLimit = limit - guarantee,
  lendingLimit, preemption and queueing strategy from the profile, fairSharing.weight;
- a Cohort per cohort, a LocalQueue per namespace, WorkloadPriorityClasses, and a
  Topology from the cluster's topology levels for Topology Aware Scheduling.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from gpufleet.errors import UserError
from gpufleet.export.bundle import Bundle, Origin, yaml_files
from gpufleet.export.k8s import (
    ACCELERATOR_KEY,
    MIG_CONFIG_LABEL,
    MIG_PROFILE_KEY,
    TEAM_LABEL,
    Obj,
    cluster_notes,
    has_topology,
    k8s_name,
    label_script,
    mig_name,
    namespaces,
    node_topology_labels,
    obj,
    priority_cap_notes,
    product_labels,
    quantity,
    resource_name,
    tenancy,
    topology_label,
    unique_names,
    workload_class_name,
)
from gpufleet.export.migparted import config_names, group_layout
from gpufleet.export.model import (
    Flavor,
    Fleet,
    Resource,
    TeamQuota,
    active_preemption,
    preemptible_ceiling,
)
from gpufleet.sched.preempt import MIN_RUNTIME_S

API = "kueue.x-k8s.io/v1beta2"
TEAM_KEY = "gpufleet.io/team"
DEFAULT_PRIORITY_KEY = "gpufleet.io/default-priority"
PROJECTS_KEY = "gpufleet.io/projects"  # a JSON list
COHORT_KEY = "gpufleet.io/cohort"
PRIORITY_CLASS_KEY = "gpufleet.io/priority-class"
PREEMPTIBLE_KEY = "gpufleet.io/preemptible"
INT32 = 2**31 - 1

KUEUE_JOB_RULES: list[Obj] = [
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads", "localqueues"],
        "verbs": ["get", "list", "watch"],
    }
]


def flavor_name(flavor: Flavor, resource: Resource) -> str:
    base = k8s_name(flavor.accelerator, "accelerator", dots=True)
    if resource.profile is None:
        return base
    return f"{base}-mig-{mig_name(resource.profile)}"


def _flavor_topology(fleet: Fleet, flavor: Flavor) -> bool:
    """Whether every node of the flavor has a place at every level (TAS needs the labels)."""
    labels = node_topology_labels(fleet)
    depth = len(fleet.cluster.levels) - 1
    nodes = [n for n in fleet.cluster.nodes if n.accelerator == flavor.accelerator]
    return all(len(labels[n.name]) == depth for n in nodes)


def resource_flavors(fleet: Fleet, topology: str | None, notes: list[str]) -> list[Obj]:
    configs = config_names(fleet)
    out: list[Obj] = []
    for flavor in fleet.flavors.values():
        tas = topology is not None and _flavor_topology(fleet, flavor)
        if topology is not None and not tas:
            notes.append(
                f"Flavor {flavor.accelerator}: some of its nodes have no place in the topology, "
                "so its ResourceFlavors do not name the Topology (no Topology Aware Scheduling)."
            )
        for resource in flavor.resources:
            node_labels = product_labels(fleet, flavor)
            annotations = {ACCELERATOR_KEY: flavor.accelerator}
            if resource.profile is not None:
                annotations[MIG_PROFILE_KEY] = resource.profile
                holding = {
                    configs[g.name]
                    for g in fleet.cluster_spec.node_groups
                    if g.accelerator == flavor.accelerator
                    and resource.profile in dict(group_layout(g) or ())
                }
                if len(holding) == 1:
                    node_labels[MIG_CONFIG_LABEL] = holding.pop()
            spec: Obj = {"nodeLabels": node_labels}
            if tas:
                spec["topologyName"] = topology
            out.append(
                obj(
                    API,
                    "ResourceFlavor",
                    flavor_name(flavor, resource),
                    annotations=annotations,
                    spec=spec,
                )
            )
    return out


def preemption(fleet: Fleet, notes: list[str]) -> Obj:
    """The profile's preemption plugins as Kueue's preemption policy (design 0011)."""
    kinds = active_preemption(fleet)
    classes = fleet.priority_classes
    threshold = preemptible_ceiling(classes)
    if not kinds or threshold is None:
        return {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    out: Obj = {
        "withinClusterQueue": "LowerPriority" if "priority" in kinds else "Never",
        "reclaimWithinCohort": "Any" if "quota-reclaim" in kinds else "LowerPriority",
    }
    if "priority" in kinds:
        # Kueue's threshold is a priority, not a kind of class: above the lowest
        # non-preemptible class it would let a borrowing workload preempt that class's
        # workloads in other ClusterQueues, which gpufleet never does. So it stops below
        # that class, giving up (noted) borrowing preemption of preemptible classes above it.
        fixed = min((c.value for c in classes if not c.preemptible), default=None)
        below = [c for c in classes if c.preemptible and (fixed is None or c.value < fixed)]
        safe = max(below, key=lambda c: (c.value, c.name), default=None)
        if safe is not None:
            out["borrowWithinCohort"] = {
                "policy": "LowerPriority",
                "maxPriorityThreshold": safe.value,
            }
            notes.append(
                "gpufleet's priority preemption may evict lower-priority jobs of any team; "
                "Kueue preempts within the ClusterQueue (withinClusterQueue: LowerPriority) "
                f"and, while borrowing, in the cohort up to priority {safe.value} "
                f"(borrowWithinCohort), class {safe.name}."
            )
        above = sorted(c.name for c in classes if c.preemptible and c not in below)
        if above:
            lowest = min((c for c in classes if not c.preemptible), key=lambda c: c.value)
            instead = (
                "left out (no preemption while borrowing)"
                if safe is None
                else f"set below {lowest.name}, at {safe.value}"
            )
            notes.append(
                f"A preemptible class ({', '.join(above)}) ranks above a non-preemptible one "
                f"({lowest.name}), and borrowWithinCohort's maxPriorityThreshold is a priority, "
                f"not a kind of class: at {max(c.value for c in classes if c.preemptible)} it "
                f"would let a borrowing workload preempt {lowest.name} workloads of other "
                f"ClusterQueues, which gpufleet never does. It is {instead}, so borrowing "
                f"workloads do not preempt {', '.join(above)} workloads of other "
                "ClusterQueues either, as a higher class may in gpufleet."
            )
        top = max(c.value for c in classes)
        exposed = [c.name for c in classes if not c.preemptible and c.value < top]
        if exposed:
            notes.append(
                "Kueue has no non-preemptible priority class: within a ClusterQueue, "
                f"workloads of {', '.join(exposed)} can be preempted by a higher class."
            )
    if "quota-reclaim" in kinds and any(not c.preemptible for c in classes):
        notes.append(
            "reclaimWithinCohort: Any reclaims borrowed quota from workloads of any class; "
            "gpufleet never evicts non-preemptible jobs, even borrowing ones."
        )
    if "las" in kinds:
        notes.append(
            "gpufleet's Tiresias profile evicts jobs that have had more GPU time "
            "(least-attained-service preemption); Kueue has no such policy, so the exported "
            "queues order and reclaim but never preempt by attained service."
        )
    notes.append(
        f"Kueue has no minimum runtime before preemption (gpufleet: {MIN_RUNTIME_S:.0f} s); "
        "the checkpoint grace period is the pods' terminationGracePeriodSeconds."
    )
    return out


def _quota_entries(q: TeamQuota, cohort: bool) -> dict[str, Obj]:
    """resource name -> its ClusterQueue entry for this quota's flavor."""
    nominal = q.guaranteed_units
    borrowing = q.flavor.split(q.borrowing_limit) if q.borrowing_limit is not None else None
    lending = q.lending_units()
    out: dict[str, Obj] = {}
    for resource in q.flavor.resources:
        entry: Obj = {"name": resource_name(resource, q.flavor), "nominalQuota": nominal[resource]}
        if cohort and borrowing is not None:
            entry["borrowingLimit"] = borrowing[resource]
        if cohort and lending is not None:
            entry["lendingLimit"] = lending[resource]
        out[flavor_name(q.flavor, resource)] = entry
    return out


def resource_groups(fleet: Fleet, team: str, cohort: bool) -> list[Obj]:
    groups: dict[str, list[Obj]] = {}
    for q in fleet.quotas[team]:
        for flavor, entry in _quota_entries(q, cohort).items():
            groups.setdefault(entry["name"], []).append({"name": flavor, "resources": [entry]})
    if len(groups) > 16:
        raise UserError(
            f"team {team}: its quotas need {len(groups)} Kueue resource groups (one per GPU "
            "resource name); a ClusterQueue takes at most 16"
        )
    return [{"coveredResources": [name], "flavors": flavors} for name, flavors in groups.items()]


def cluster_queues(
    fleet: Fleet, names: dict[str, str], cohorts: dict[str, str], notes: list[str]
) -> list[Obj]:
    policy = preemption(fleet, notes)
    strategy = "StrictFIFO" if fleet.profile.head_of_line == "strict" else "BestEffortFIFO"
    out: list[Obj] = []
    for team in fleet.teams:
        annotations = {TEAM_KEY: team.name, DEFAULT_PRIORITY_KEY: team.default_priority}
        if team.projects:
            annotations[PROJECTS_KEY] = json.dumps(list(team.projects))
        spec: Obj = {}
        if team.cohort is not None:
            annotations[COHORT_KEY] = team.cohort
            spec["cohortName"] = cohorts[team.cohort]
        elif any(q.max_gpus is not None and q.max_gpus > q.guaranteed_gpus for q in team.quotas):
            notes.append(
                f"Team {team.name} has no cohort, so it never borrows (in gpufleet as in Kueue); "
                "its limits are not exported."
            )
        spec["namespaceSelector"] = {"matchLabels": {TEAM_LABEL: names[team.name]}}
        spec["queueingStrategy"] = strategy
        spec["preemption"] = policy
        spec["fairSharing"] = {"weight": quantity(team.weight)}
        spec["resourceGroups"] = resource_groups(fleet, team.name, team.cohort is not None)
        out.append(obj(API, "ClusterQueue", names[team.name], annotations=annotations, spec=spec))
    return out


def workload_priority_classes(fleet: Fleet) -> list[Obj]:
    out: list[Obj] = []
    names = unique_names(
        [c.name for c in fleet.priority_classes], "priority class", namer=workload_class_name
    )
    for pc in sorted(fleet.priority_classes, key=lambda c: (-c.value, c.name)):
        if not -INT32 - 1 <= pc.value <= INT32:
            raise UserError(f"priority class {pc.name}: value {pc.value} does not fit an int32")
        out.append(
            obj(
                API,
                "WorkloadPriorityClass",
                names[pc.name],
                annotations={
                    PRIORITY_CLASS_KEY: pc.name,
                    PREEMPTIBLE_KEY: "true" if pc.preemptible else "false",
                },
                value=pc.value,
                description=f"gpufleet priority class {pc.name}"
                + ("" if pc.preemptible else " (not preemptible in gpufleet)"),
            )
        )
    return out


def profile_notes(fleet: Fleet) -> list[str]:
    p = fleet.profile
    notes: list[str] = []
    if p.head_of_line == "backfill":
        notes.append(
            "EASY backfill reservations have no Kueue equivalent: BestEffortFIFO admits what "
            "fits without holding GPUs for a blocked gang."
        )
    if p.queue_order == "fair-share":
        notes.append(
            "Turn on fair sharing in Kueue's Configuration (fairSharing.enable: true) for the "
            "weights to count; Kueue shares by current dominant resource share, without "
            "gpufleet's decayed usage history."
        )
    elif p.queue_order in ("tiresias", "multifactor"):
        notes.append(
            f"Queue order {p.queue_order} has no Kueue equivalent: a ClusterQueue orders by "
            "priority, then creation time."
        )
    elif p.queue_order == "fifo":
        notes.append(
            "Kueue always orders by priority before creation time: FIFO holds only "
            "when every workload has the same priority class."
        )
    if not p.guaranteed_first:
        notes.append("Kueue always looks at workloads that fit without borrowing first.")
    if p.placement == "topology-best-fit":
        notes.append(
            "Topology packing needs the podset annotations "
            "(kueue.x-k8s.io/podset-required-topology or -preferred-topology) on each job."
        )
    else:
        notes.append(
            f"Placement {p.placement} is kube-scheduler's choice of node "
            "(NodeResourcesFit scoring), not Kueue's."
        )
    if p.gang:
        notes.append(
            "Kueue admits a workload's quota all at once; enable waitForPodsReady so "
            "a gang that only partly starts is evicted."
        )
    notes.append(
        "ClusterQueues cover GPU resources only: exclude cpu, memory and ephemeral-storage in "
        "Kueue's Configuration (resources.excludeResourcePrefixes) or add them to the queues."
    )
    return notes


def topology_object(fleet: Fleet) -> Obj:
    name = k8s_name(fleet.cluster_spec.name, "cluster name", dots=True)
    levels = [{"nodeLabel": topology_label(level)} for level in fleet.cluster.levels]
    return obj(API, "Topology", name, spec={"levels": levels})


def export_kueue(fleet: Fleet, *, per_project: bool = False) -> Bundle:
    teams = fleet.require_teams("kueue")
    origin = Origin.of(fleet, "kueue")
    names = unique_names([t.name for t in teams.teams], "team")
    cohorts = unique_names(sorted({t.cohort for t in teams.teams if t.cohort}), "cohort", dots=True)
    notes = cluster_notes(fleet) + profile_notes(fleet)
    topology = topology_object(fleet) if has_topology(fleet) else None
    flavors = resource_flavors(fleet, topology["metadata"]["name"] if topology else None, notes)
    queues = cluster_queues(fleet, names, cohorts, notes)
    spaces = namespaces(fleet, per_project)
    local = [
        obj(API, "LocalQueue", ns.team_k8s, namespace=ns.name, spec={"clusterQueue": ns.team_k8s})
        for ns in spaces
    ]
    docs: dict[str, Sequence[Obj]] = {
        "resource-flavors.yaml": flavors,
        "cluster-queues.yaml": queues,
        "local-queues.yaml": local,
        "workload-priority-classes.yaml": workload_priority_classes(fleet),
    }
    if cohorts:
        docs["cohorts.yaml"] = [obj(API, "Cohort", c, spec={}) for c in cohorts.values()]
    if topology is not None:
        docs["topology.yaml"] = [topology]
    docs.update(tenancy(fleet, spaces, KUEUE_JOB_RULES))
    notes += priority_cap_notes(fleet, enforced=False)
    files = yaml_files(origin, docs)
    labels = node_labels(fleet)
    if any(labels.values()):
        files["label-nodes.sh"] = label_script(origin.header(), labels)
    warnings = fleet.overcommit_warnings(
        "Kueue takes nominalQuota past the nodes' capacity (a cohort's quotas are not checked "
        "against it), so a workload admitted within its team's nominalQuota may wait as "
        "pending pods."
    )
    return Bundle(origin, files, tuple(dict.fromkeys(notes)), warnings)


def node_labels(fleet: Fleet) -> dict[str, dict[str, str]]:
    """Topology labels, plus `gpufleet.io/accelerator` where no GFD label selects the nodes."""
    out = node_topology_labels(fleet)
    for node in fleet.cluster.nodes:
        flavor = fleet.flavors[node.accelerator]
        selected = product_labels(fleet, flavor)
        if ACCELERATOR_KEY in selected:
            out[node.name] = {**out[node.name], ACCELERATOR_KEY: node.accelerator}
    return out
