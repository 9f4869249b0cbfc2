"""Kubernetes pieces every Kubernetes target shares: names, GPU resources, labels, tenancy.

Kueue, Volcano and KAI all sit on the same cluster: the NVIDIA GPU Operator's
device plugin (mixed MIG strategy, so a slice is `nvidia.com/mig-<profile>`),
GPU feature discovery's node labels, and one namespace per team. Those
conventions live here once; each target adds its own scheduler objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.errors import UserError
from gpufleet.export.model import Flavor, Fleet, Resource, allowed_classes

Obj = dict[str, Any]

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpufleet"}
TEAM_LABEL = "gpufleet.io/team"
PROJECT_LABEL = "gpufleet.io/project"
ACCELERATOR_KEY = "gpufleet.io/accelerator"  # node label and object annotation
MIG_PROFILE_KEY = "gpufleet.io/mig-profile"  # object annotation (a '+' is no label value)
TOPOLOGY_PREFIX = "topology.gpufleet.io/"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MEMBER_ROLE = "gpufleet-team-member"
USER_PRIORITY_MAX = 1_000_000_000  # PriorityClass values above are reserved for the system
ISOLATION_POLICY = "gpufleet-team-isolation"


def team_group(team_k8s_name: str) -> str:
    """The identity-provider group whose members are the team (RoleBinding subject)."""
    return f"gpufleet:team:{team_k8s_name}"


# Device-plugin resource names by catalog vendor (NVIDIA, AMD ROCm, Intel Gaudi, Google TPU,
# AWS Neuron device plugins).
DEVICE_RESOURCES = {
    "NVIDIA": "nvidia.com/gpu",
    "AMD": "amd.com/gpu",
    "Intel": "habana.ai/gaudi",
    "Google": "google.com/tpu",
    "AWS": "aws.amazon.com/neuron",
}

# GPU feature discovery's `nvidia.com/gpu.product`: the product name nvidia-smi reports with
# spaces replaced by '-'. Only NVIDIA-H100-NVL is confirmed by a source read here (a node
# label quoted in NVIDIA/dcgm-exporter#397); the others follow that rule from the product
# names and are unverified. A node group's own `labels: {nvidia.com/gpu.product: ...}` wins.
GPU_PRODUCTS = {
    "a100-sxm4-40gb": "NVIDIA-A100-SXM4-40GB",
    "a100-sxm4-80gb": "NVIDIA-A100-SXM4-80GB",
    "a100-pcie-80gb": "NVIDIA-A100-80GB-PCIe",
    "h100-sxm5-80gb": "NVIDIA-H100-80GB-HBM3",
    "h100-pcie-80gb": "NVIDIA-H100-PCIe",
    "h100-nvl-94gb": "NVIDIA-H100-NVL",
    "h200-sxm-141gb": "NVIDIA-H200",
    "b200-sxm-192gb": "NVIDIA-B200",
    "gb200": "NVIDIA-GB200",
    "l40s": "NVIDIA-L40S",
    "l4": "NVIDIA-L4",
    "a10g": "NVIDIA-A10G",
}

_NAME_RUN = re.compile(r"[^a-z0-9]+")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _dns_label(part: str) -> str:
    return _NAME_RUN.sub("-", part).strip("-")


def k8s_name(name: str, what: str, *, dots: bool = False) -> str:
    """A gpufleet name as a Kubernetes object name: lowercase, runs of other characters as '-'.

    Namespaces need DNS-1123 labels (at most 63, no dots); cluster-scoped objects may use
    DNS-1123 subdomains (`dots=True`, e.g. a flavor named after a MIG profile): dot-separated
    labels, each a DNS label, so each part between dots is normalised on its own and empty
    parts are dropped (`tier..1` -> `tier.1`, `gold. premium` -> `gold.premium`; a '-' next
    to a dot is no DNS label). The result is checked against the API server's patterns.
    """
    lowered = name.lower()
    if dots:
        out = ".".join(p for p in (_dns_label(p) for p in lowered.split(".")) if p)
        pattern, limit = _DNS_SUBDOMAIN, 253
    else:
        out = _dns_label(lowered)
        pattern, limit = _DNS_LABEL, 63
    if not pattern.fullmatch(out) or len(out) > limit:
        raise UserError(
            f"{what} '{name}' cannot be a Kubernetes name (letters, digits and '-'"
            + (", in parts separated by '.'" if dots else "")
            + f", at most {limit} characters): rename it"
        )
    return out


def unique_names(
    names: Iterable[str],
    what: str,
    *,
    dots: bool = False,
    namer: Callable[[str], str] | None = None,
) -> dict[str, str]:
    """`k8s_name` (or `namer`) of each, refusing two names that would become the same
    object."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in names:
        k = namer(name) if namer is not None else k8s_name(name, what, dots=dots)
        if k in seen and seen[k] != name:
            raise UserError(
                f"{what}s '{seen[k]}' and '{name}' would both be named '{k}' in Kubernetes; "
                "rename one"
            )
        seen[k] = name
        out[name] = k
    return out


def check_label_value(value: str, what: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise UserError(
            f"{what} '{value}' is not a valid Kubernetes label value (letters, digits, "
            "'-', '_', '.', starting and ending alphanumeric, at most 63 characters)"
        )
    return value


def mig_name(profile: str) -> str:
    """A MIG profile where only [-._a-z0-9] may appear: `+me` becomes `.me` (mig-parted's
    config names do the same, e.g. all-1g.10gb.me)."""
    return profile.replace("+", ".")


def resource_name(resource: Resource, flavor: Flavor) -> str:
    """The extended resource a pod requests for one unit of `resource`."""
    if resource.profile is not None:
        return f"nvidia.com/mig-{mig_name(resource.profile)}"
    found = DEVICE_RESOURCES.get(flavor.vendor)
    if found is None:
        raise UserError(
            f"{flavor.accelerator}: no Kubernetes device-plugin resource is known for "
            f"vendor {flavor.vendor}"
        )
    return found


def product_labels(fleet: Fleet, flavor: Flavor) -> dict[str, str]:
    """The node labels that select this accelerator's nodes (a ResourceFlavor's nodeLabels).

    NVIDIA: GPU feature discovery's product label, from the node groups' own labels when
    they give it, else the table above; other vendors (and unknown NVIDIA products): the
    `gpufleet.io/accelerator` label that label-nodes.sh sets.
    """
    given = {
        g.labels[PRODUCT_LABEL]
        for g in fleet.cluster_spec.node_groups
        if g.accelerator == flavor.accelerator and PRODUCT_LABEL in g.labels
    }
    if len(given) > 1:
        raise UserError(
            f"node groups of {flavor.accelerator} give different {PRODUCT_LABEL} labels "
            f"({', '.join(sorted(given))}); one accelerator is one flavor"
        )
    if given:
        return {PRODUCT_LABEL: check_label_value(given.pop(), PRODUCT_LABEL)}
    if flavor.vendor == "NVIDIA" and flavor.accelerator in GPU_PRODUCTS:
        return {PRODUCT_LABEL: GPU_PRODUCTS[flavor.accelerator]}
    return {ACCELERATOR_KEY: flavor.accelerator}


def obj(
    api_version: str,
    kind: str,
    name: str,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **fields: Any,
) -> Obj:
    """One Kubernetes object, keys in the order people read them (golden-file stable)."""
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**MANAGED_BY, **(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **fields}


def quantity(value: float | int) -> int | str:
    """A number as a Kubernetes quantity: an int when whole, else its decimal text."""
    if float(value).is_integer():
        return int(value)
    return repr(float(value))


def cluster_notes(fleet: Fleet, *, whole_gpus: bool = True, split: bool = True) -> list[str]:
    """What the node groups say that an engine's objects cannot: GPU fractions (where the
    engine counts `nvidia.com/gpu` whole), spot nodes, and a quota split over resources."""
    notes: list[str] = []
    for group in fleet.cluster_spec.node_groups:
        if group.fractions and whole_gpus:
            notes.append(
                f"Node group {group.name} shares GPUs by fraction in gpufleet; Kubernetes "
                "counts nvidia.com/gpu whole (time-slicing or MPS is device-plugin config)."
            )
        if group.capacity == "spot":
            notes.append(
                f"Node group {group.name} is spot capacity: gpufleet places only spot-tolerant "
                "jobs there; add a taint to those nodes and tolerations to such jobs."
            )
    if split and any(len(f.resources) > 1 for f in fleet.flavors.values()):
        notes.append(
            "A gpufleet quota counts whole GPUs and MIG slices of one accelerator together; "
            "here it is split over the resources in proportion to their capacity in the "
            "cluster (slices weighed by compute share), so each part is a separate limit."
        )
    return notes


# -- topology labels -------------------------------------------------------------------------


def topology_label(level: str) -> str:
    if level == "node":
        return HOSTNAME_LABEL
    if len(level) > 63 or not _LABEL_NAME.fullmatch(level):
        raise UserError(f"topology level '{level}' cannot be part of a Kubernetes label key")
    return TOPOLOGY_PREFIX + level


def node_topology_labels(fleet: Fleet) -> dict[str, dict[str, str]]:
    """Each node's labels for the levels above 'node' where it has a place ('-' = none)."""
    levels = fleet.cluster.levels[:-1]
    keys = [topology_label(level) for level in levels]
    out: dict[str, dict[str, str]] = {}
    for node in fleet.cluster.nodes:
        labels: dict[str, str] = {}
        for key, level, value in zip(keys, levels, node.path, strict=True):
            if value != "-":
                labels[key] = check_label_value(value, f"node {node.name}: topology {level}")
        out[node.name] = labels
    return out


def has_topology(fleet: Fleet) -> bool:
    return any(labels for labels in node_topology_labels(fleet).values())


def label_script(header: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> str:
    """`kubectl label` commands, one node per line, in cluster order."""
    lines = [
        "#!/bin/sh",
        *header,
        "# Node names are gpufleet's (<node group>-<i>): replace them with your nodes' names.",
        "set -eu",
    ]
    for node, node_labels in labels.items():
        if node_labels:
            pairs = " ".join(f"{k}={v}" for k, v in node_labels.items())
            lines.append(f"kubectl label node --overwrite {node} {pairs}")
    return "\n".join(lines) + "\n"


# -- tenancy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    team: str  # gpufleet team name
    team_k8s: str
    project: str | None = None


# Namespaces of Kubernetes itself and of the operators these exports run beside: a team
# there would get a NetworkPolicy selecting every pod (cutting CoreDNS or a scheduler off),
# quotas and RBAC. `kube-` is reserved to Kubernetes as a whole.
RESERVED_NAMESPACES = frozenset(
    {
        "default",
        "gpu-operator",
        "nvidia-gpu-operator",
        "nvidia-network-operator",
        "kueue-system",
        "volcano-system",
        "volcano-monitoring",
        "kai-scheduler",
        "cert-manager",
    }
)


def check_namespace(ns: str, what: str) -> str:
    """Refuse a namespace Kubernetes or a GPU/scheduler operator owns."""
    if ns in RESERVED_NAMESPACES or ns.startswith("kube-") or ns.startswith("openshift"):
        raise UserError(
            f"{what} would be namespace '{ns}', which belongs to Kubernetes or an operator; "
            "the export would put a NetworkPolicy selecting every pod there (cutting off "
            "its services), a ResourceQuota and RBAC: rename it"
        )
    return ns


def namespaces(fleet: Fleet, per_project: bool) -> tuple[Namespace, ...]:
    """A namespace per team (named as the team), and `<team>-<project>` per project if asked;
    none may be a namespace of Kubernetes or an operator (`check_namespace`)."""
    teams = unique_names([t.name for t in fleet.teams], "team")
    out: list[Namespace] = []
    for team in fleet.teams:
        k = check_namespace(teams[team.name], f"team {team.name}")
        out.append(Namespace(k, team.name, k))
        if per_project:
            for project in team.projects:
                ns = k8s_name(f"{k}-{project}", f"namespace of project {project}")
                out.append(
                    Namespace(
                        check_namespace(ns, f"project {project} of team {team.name}"),
                        team.name,
                        k,
                        project,
                    )
                )
    names = [ns.name for ns in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UserError(f"namespaces named twice (a team and a project?): {', '.join(repeated)}")
    return tuple(out)


def ceilings_by_resource(fleet: Fleet, team: str) -> dict[str, int]:
    """Most units of each GPU resource name the team may request (0 where it has no quota)."""
    out: dict[str, int] = {}
    for flavor in fleet.flavors.values():
        for resource in flavor.resources:
            out.setdefault(resource_name(resource, flavor), 0)
    for q in fleet.quotas.get(team, ()):
        for resource, units in q.ceiling_units.items():
            out[resource_name(resource, q.flavor)] += units
    return out


def namespace_labels(ns: Namespace) -> dict[str, str]:
    labels = {TEAM_LABEL: ns.team_k8s}
    if ns.project is not None:
        labels[PROJECT_LABEL] = check_label_value(
            k8s_name(ns.project, f"project {ns.project}"), "project"
        )
    return labels


def workload_class_name(name: str) -> str:
    """A priority class as a Kueue WorkloadPriorityClass: a DNS subdomain that is also a
    label value (at most 63 characters), since workloads name it in the label
    `kueue.x-k8s.io/priority-class`; a longer name would make an object no job can use."""
    k = k8s_name(name, "priority class", dots=True)
    if len(k) > 63 or not _LABEL_VALUE.fullmatch(k):
        raise UserError(
            f"priority class '{name}' would be named '{k}' ({len(k)} characters), but jobs "
            "name their Kueue class in the label kueue.x-k8s.io/priority-class, whose value "
            "is at most 63 characters: rename it shorter"
        )
    return k


def priority_class_name(name: str) -> str:
    """A priority class as a scheduling.k8s.io PriorityClass (Volcano, KAI): a DNS subdomain
    without the `system-` prefix, which the API server keeps for its built-in classes
    (ValidatePriorityClass) and refuses for any other."""
    k = k8s_name(name, "priority class", dots=True)
    if k.startswith("system-"):
        raise UserError(
            f"priority class '{name}' would be the Kubernetes PriorityClass '{k}', but "
            "Kubernetes keeps the 'system-' prefix for its own classes "
            "(system-cluster-critical, system-node-critical) and refuses it: rename it "
            f"(e.g. '{k.removeprefix('system-')}')"
        )
    return k


PRIORITY_CAP_QUOTA = "gpufleet-priority-cap"


def priority_cap_quota(fleet: Fleet, ns: Namespace) -> Obj | None:
    """A ResourceQuota that admits no pod of a class above the team's cap in its namespace
    (`pods: 0` scoped to those PriorityClasses), as gpufleet's control plane refuses them;
    None when the team may use every class."""
    team = next(t for t in fleet.teams if t.name == ns.team)
    allowed = {c.name for c in allowed_classes(fleet, team)}
    above = sorted(
        priority_class_name(c.name) for c in fleet.priority_classes if c.name not in allowed
    )
    if not above:
        return None
    return obj(
        "v1",
        "ResourceQuota",
        PRIORITY_CAP_QUOTA,
        namespace=ns.name,
        labels={TEAM_LABEL: ns.team_k8s},
        spec={
            "hard": {"pods": 0},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": above}
                ]
            },
        },
    )


def priority_cap_notes(fleet: Fleet, *, enforced: bool) -> list[str]:
    """What NOTES.md says of the teams' priority caps: how they are enforced (`enforced`:
    by `priority_cap_quota`), or that the target cannot (Kueue)."""
    capped = [
        f"{t.name} up to {allowed[-1].name}"
        for t in fleet.teams
        if len(allowed := allowed_classes(fleet, t)) < len(fleet.priority_classes)
    ]
    if not capped:
        return []
    if enforced:
        return [
            "A team may use the priority classes up to its max_priority_class (default: its "
            f"default class), as in gpufleet ({'; '.join(capped)}): a ResourceQuota "
            f"{PRIORITY_CAP_QUOTA} in each of its namespaces admits no pod of a higher "
            "PriorityClass (pods: 0, scoped by PriorityClass). It binds the pods' "
            "priorityClassName, for everyone: gpufleet's admins may use any class, so run "
            "such jobs from another namespace."
        ]
    return [
        "Kueue cannot cap the priority classes a team uses: a workload names any "
        "WorkloadPriorityClass in its kueue.x-k8s.io/priority-class label, which no "
        "ResourceQuota scope selects (they select pods' PriorityClass). gpufleet allows "
        f"{'; '.join(capped)}: enforce it with an admission policy on that label if needed."
    ]


def tenancy(
    fleet: Fleet,
    spaces: Sequence[Namespace],
    job_rules: Sequence[Obj],
    *,
    priority_caps: bool = False,
) -> dict[str, list[Obj]]:
    """Namespaces, GPU ResourceQuotas at the borrowing ceiling, member Roles and RoleBindings,
    and NetworkPolicies that keep other teams' pods out; one list per file. With
    `priority_caps` (targets whose pods name a PriorityClass), a ResourceQuota per namespace
    refusing pods of the classes above the team's cap (`priority_cap_quota`)."""
    ns_objs: list[Obj] = []
    quotas: list[Obj] = []
    roles: list[Obj] = []
    bindings: list[Obj] = []
    policies: list[Obj] = []
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log", "events"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["batch"],
            "resources": ["jobs", "cronjobs"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        *job_rules,
    ]
    for ns in spaces:
        labels = namespace_labels(ns)
        team = {TEAM_LABEL: ns.team_k8s}
        ns_objs.append(obj("v1", "Namespace", ns.name, labels=labels))
        hard = {f"requests.{r}": n for r, n in ceilings_by_resource(fleet, ns.team).items()}
        quotas.append(
            obj(
                "v1",
                "ResourceQuota",
                "gpufleet-gpus",
                namespace=ns.name,
                labels=team,
                spec={"hard": hard},
            )
        )
        cap = priority_cap_quota(fleet, ns) if priority_caps else None
        if cap is not None:
            quotas.append(cap)
        roles.append(
            obj("rbac.authorization.k8s.io/v1", "Role", MEMBER_ROLE, namespace=ns.name, rules=rules)
        )
        bindings.append(
            obj(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                MEMBER_ROLE,
                namespace=ns.name,
                labels=team,
                subjects=[
                    {
                        "kind": "Group",
                        "apiGroup": "rbac.authorization.k8s.io",
                        "name": team_group(ns.team_k8s),
                    }
                ],
                roleRef={
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": MEMBER_ROLE,
                },
            )
        )
        policies.append(
            obj(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                ISOLATION_POLICY,
                namespace=ns.name,
                labels=team,
                spec={
                    "podSelector": {},
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {"from": [{"podSelector": {}}]},
                        {
                            "from": [
                                {"namespaceSelector": {"matchLabels": {TEAM_LABEL: ns.team_k8s}}}
                            ]
                        },
                    ],
                },
            )
        )
    return {
        "namespaces.yaml": ns_objs,
        "resource-quotas.yaml": quotas,
        "roles.yaml": roles,
        "role-bindings.yaml": bindings,
        "network-policies.yaml": policies,
    }


def priority_class_objs(
    fleet: Fleet, value_of: Mapping[str, int] | None = None, *, preempt: bool = True
) -> list[Obj]:
    """scheduling.k8s.io/v1 PriorityClasses from the teams' priority classes, highest first.

    Kubernetes has no "cannot be preempted" flag (preemptionPolicy says whether a pod
    may preempt others), so preemptibility goes into an annotation and the description;
    `value_of` lets a target remap values (KAI reads preemptibility from the value).
    """
    out: list[Obj] = []
    names = unique_names(
        [c.name for c in fleet.priority_classes], "priority class", namer=priority_class_name
    )
    for pc in sorted(fleet.priority_classes, key=lambda c: (-c.value, c.name)):
        value = pc.value if value_of is None else value_of[pc.name]
        if abs(value) > USER_PRIORITY_MAX:
            raise UserError(
                f"priority class {pc.name}: value {value} is beyond Kubernetes' user range "
                f"(at most {USER_PRIORITY_MAX:,} either way; higher is kept for system classes)"
            )
        out.append(
            obj(
                "scheduling.k8s.io/v1",
                "PriorityClass",
                names[pc.name],
                annotations={"gpufleet.io/preemptible": "true" if pc.preemptible else "false"},
                value=value,
                globalDefault=False,
                preemptionPolicy="PreemptLowerPriority" if preempt else "Never",
                description=f"gpufleet priority class {pc.name} (value {pc.value}, "
                + ("preemptible)" if pc.preemptible else "not preemptible)"),
            )
        )
    return out
