"""Every emitted Kubernetes object against the upstream CRDs (or focused checks for core kinds).

CRD kinds: JSON Schema of the version written, no field the API server would prune,
and each CEL rule through its Python equivalent (crd.py). Core kinds have no CRD here;
`core_problems` checks what their API would reject or what the export promises.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from gpufleet.export.k8s import MEMBER_ROLE, PRIORITY_CAP_QUOTA, TEAM_LABEL, team_group

from .crd import CORE_KINDS, has_crd, problems, storage_version
from .scenarios import K8S_TARGETS, SCENARIOS, documents

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
RESOURCE = re.compile(r"requests\.(nvidia\.com/(gpu|mig-\d+g\.\d+gb(\.me)?)|amd\.com/gpu)")
CASES = [
    pytest.param(name, target, id=f"{name}-{target}")
    for name, scenario in SCENARIOS.items()
    for target in scenario.targets
    if target in K8S_TARGETS
]


def metadata_problems(obj: dict[str, Any]) -> list[str]:
    meta = obj.get("metadata", {})
    name = meta.get("name", "")
    out: list[str] = []
    pattern = DNS_LABEL if obj["kind"] == "Namespace" else DNS_SUBDOMAIN
    if not pattern.fullmatch(name) or len(name) > (63 if obj["kind"] == "Namespace" else 253):
        out.append(f"{obj['kind']} name {name!r} is not a valid object name")
    if "namespace" in meta and not DNS_LABEL.fullmatch(meta["namespace"]):
        out.append(f"namespace {meta['namespace']!r} is not a DNS label")
    for key, value in (meta.get("labels") or {}).items():
        if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value) or len(value) > 63:
            out.append(f"label {key}={value!r} is not valid")
    out += [
        f"annotation {k} is not a string"
        for k, v in (meta.get("annotations") or {}).items()
        if not isinstance(v, str)
    ]
    return out


def priority_cap_problems(obj: dict[str, Any]) -> list[str]:
    """The priority cap admits no pod of the classes above the team's cap: pods 0, scoped
    to those PriorityClasses."""
    out: list[str] = []
    (expr,) = obj["spec"]["scopeSelector"]["matchExpressions"]
    if obj["spec"]["hard"] != {"pods": 0} or expr["scopeName"] != "PriorityClass":
        out.append("the priority cap admits no pod of the classes it names")
    if expr["operator"] != "In" or not expr["values"]:
        out.append("the priority cap names the classes above the team's cap")
    return out


def core_problems(obj: dict[str, Any]) -> list[str]:
    """What the Kubernetes API (or the export's promise) would reject for core kinds."""
    kind, meta = obj["kind"], obj["metadata"]
    out: list[str] = []
    if kind == "Namespace":
        if obj["apiVersion"] != "v1" or TEAM_LABEL not in meta["labels"]:
            out.append("a team Namespace is v1 and carries the team label")
    elif kind == "ResourceQuota" and meta["name"] == PRIORITY_CAP_QUOTA:
        out += priority_cap_problems(obj)
    elif kind == "ResourceQuota":
        hard = obj["spec"]["hard"]
        if not hard or not all(RESOURCE.fullmatch(k) for k in hard):
            out.append(f"ResourceQuota caps GPU requests only: {sorted(hard)}")
        if not all(isinstance(v, int) and v >= 0 for v in hard.values()):
            out.append("ResourceQuota hard values are whole, non-negative counts")
    elif kind == "Role":
        for rule in obj["rules"]:
            if not (rule["apiGroups"] and rule["resources"] and rule["verbs"]):
                out.append(f"Role rule incomplete: {rule}")
            if "*" in rule["verbs"] or "*" in rule["resources"]:
                out.append("Role grants a wildcard")
    elif kind == "RoleBinding":
        (subject,) = obj["subjects"]
        if obj["roleRef"] != {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": MEMBER_ROLE,
        }:
            out.append("RoleBinding binds the namespace's member Role")
        expected = team_group(meta["labels"][TEAM_LABEL])
        if subject != {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": expected}:
            out.append(f"RoleBinding subject is the team's group {expected}: {subject}")
    elif kind == "NetworkPolicy":
        spec = obj["spec"]
        team = meta["labels"].get(TEAM_LABEL)
        if spec["podSelector"] != {} or spec["policyTypes"] != ["Ingress"]:
            out.append("the isolation policy selects every pod and restricts ingress")
        froms = [f for rule in spec["ingress"] for f in rule["from"]]
        if {"podSelector": {}} not in froms:
            out.append("same-namespace traffic is allowed")
        for f in froms:
            allowed = f in (
                {"podSelector": {}},
                {"namespaceSelector": {"matchLabels": {TEAM_LABEL: team}}},
            )
            if not allowed:
                out.append(f"ingress from more than pods of this team's namespaces: {f}")
    elif kind == "PriorityClass":
        if meta["name"].startswith("system-"):
            out.append("the API server keeps the system- prefix for its built-in classes")
        if not isinstance(obj["value"], int) or abs(obj["value"]) > 1_000_000_000:
            out.append("PriorityClass value is an int within the user range")
        if obj["preemptionPolicy"] not in ("PreemptLowerPriority", "Never"):
            out.append("preemptionPolicy is PreemptLowerPriority or Never")
        if obj["globalDefault"] is not False:
            out.append("gpufleet never sets a global default class")
    elif kind == "ConfigMap":
        for key, text in obj["data"].items():
            if not isinstance(text, str) or not isinstance(yaml.safe_load(text), dict):
                out.append(f"ConfigMap data {key} is a YAML document")
    return out


@pytest.mark.parametrize(("scenario", "target"), CASES)
def test_every_object_validates(scenario: str, target: str) -> None:
    objs = documents(SCENARIOS[scenario].bundle(target))
    assert objs
    found: list[str] = []
    for name, obj in objs:
        found += [f"{name}: {p}" for p in metadata_problems(obj)]
        if has_crd(obj):
            found += [f"{name}: {p}" for p in problems(obj)]
        else:
            assert obj["kind"] in CORE_KINDS, f"{name}: {obj['kind']} has neither CRD nor check"
            found += [f"{name}: {p}" for p in core_problems(obj)]
    assert found == []


@pytest.mark.parametrize(
    "kind",
    ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "Topology"],
)
def test_kueue_objects_use_the_storage_version(kind: str) -> None:
    objs = [o for _, o in documents(SCENARIOS["sched-mig"].bundle("kueue")) if o["kind"] == kind]
    assert objs
    version = storage_version("kueue.x-k8s.io", kind)
    assert {o["apiVersion"] for o in objs} == {f"kueue.x-k8s.io/{version}"}


def _first(target: str, kind: str) -> dict[str, Any]:
    return next(o for _, o in documents(SCENARIOS["sched-mig"].bundle(target)) if o["kind"] == kind)


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *head, last = path.split(".")
    node: Any = out
    for part in head:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


DELETE = object()

# Broken objects the checks must reject: without these the validation could pass anything.
BROKEN = [
    pytest.param(
        "kueue", "ClusterQueue", "spec.queueingStrategy", "Fastest", "queueingStrategy", id="enum"
    ),
    pytest.param(
        "kueue",
        "ClusterQueue",
        "spec.fairShare",
        {"weight": 1},
        "fairShare",
        id="misspelt-field-pruned",
    ),
    pytest.param(
        "kueue", "ClusterQueue", "spec.cohortName", DELETE, "CEL", id="borrowing-without-cohort"
    ),
    pytest.param(
        "kueue",
        "ClusterQueue",
        "spec.preemption.reclaimWithinCohort",
        "Never",
        "CEL",
        id="borrow-within-cohort-needs-reclaim",
    ),
    pytest.param(
        "kueue",
        "ClusterQueue",
        "spec.resourceGroups.0.coveredResources",
        ["nvidia.com/gpu", "cpu"],
        "CEL",
        id="covered-resources-count",
    ),
    pytest.param(
        "kueue", "ResourceFlavor", "spec.nodeLabels", {}, "CEL", id="topology-needs-node-labels"
    ),
    pytest.param("kueue", "WorkloadPriorityClass", "value", "high", "value", id="type"),
    pytest.param("volcano", "Queue", "spec.weight", 0, "weight", id="volcano-weight-minimum"),
    pytest.param(
        "volcano", "HyperNode", "spec.members.0.selector", {}, "CEL", id="hypernode-selector"
    ),
    pytest.param(
        "kai", "Queue", "spec.resources.gpu.quota", -2, "quota", id="kai-transcribed-minimum"
    ),
    pytest.param(
        "kai",
        "Queue",
        "spec.resources.gpus",
        {"quota": 1},
        "gpus",
        id="kai-transcribed-unknown-field",
    ),
]


@pytest.mark.parametrize(("target", "kind", "path", "value", "mentions"), BROKEN)
def test_validation_rejects_broken_objects(
    target: str, kind: str, path: str, value: Any, mentions: str
) -> None:
    obj = _first(target, kind)
    if kind == "ClusterQueue" and path == "spec.cohortName":
        obj = next(
            o
            for _, o in documents(SCENARIOS["sched-mig"].bundle("kueue"))
            if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "research"
        )
    assert problems(obj) == []
    found = problems(_set(obj, path, value))
    assert any(mentions in p for p in found), found


def test_core_checks_reject_broken_objects() -> None:
    objs = {o["kind"]: o for _, o in documents(SCENARIOS["sched-mig"].bundle("kueue"))}
    quota = _set(objs["ResourceQuota"], "spec.hard", {"requests.cpu": 4})
    policy = _set(
        objs["NetworkPolicy"], "spec.ingress", [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]
    )
    binding = _set(objs["RoleBinding"], "subjects", [{"kind": "User", "name": "bob"}])
    assert core_problems(quota)
    assert core_problems(policy)
    assert core_problems(binding)
    assert metadata_problems(_set(objs["Namespace"], "metadata.name", "Team_A"))
