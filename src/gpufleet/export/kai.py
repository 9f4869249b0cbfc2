"""NVIDIA KAI-Scheduler: Queues (scheduling.run.ai/v2) with quota, limit and over-quota weight.

A team is a parent queue (its totals) with one leaf queue per accelerator,
`<team>-<accelerator>`, since only leaf queues take jobs and KAI's queues count
GPUs without telling models apart. KAI counts GPUs in units (fractions too), so
a gpufleet quota maps without splitting it over MIG resources. KAI reads
preemptibility from the priority value (below 100: preemptible), so the
priority classes are renumbered when their values do not already follow that rule.

The KAI CRDs are not in this repository: the objects are checked against a
schema transcribed from KAI's documentation (tests/export/crds/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpufleet.export.bundle import Bundle, Origin, yaml_files
from gpufleet.export.k8s import (
    Obj,
    check_label_value,
    cluster_notes,
    k8s_name,
    label_script,
    namespaces,
    obj,
    priority_cap_notes,
    priority_class_objs,
    tenancy,
    unique_names,
)
from gpufleet.export.kueue import node_labels
from gpufleet.export.model import Fleet, active_preemption
from gpufleet.specs.teams import PriorityClass

API = "scheduling.run.ai/v2"
QUEUE_LABEL = "kai.scheduler/queue"
NON_PREEMPTIBLE_FROM = 100  # KAI: priority >= 100 is not preemptible

KAI_JOB_RULES: list[Obj] = [
    {
        "apiGroups": ["scheduling.run.ai"],
        "resources": ["podgroups", "queues"],
        "verbs": ["get", "list", "watch"],
    }
]
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def kai_priorities(classes: Sequence[PriorityClass]) -> dict[str, int]:
    """Values that put preemptible classes below 100 and the others at 100 or more, keeping
    the order within each kind; the original values when they already do."""
    if all((c.value < NON_PREEMPTIBLE_FROM) == c.preemptible and c.value >= 0 for c in classes):
        return {c.name: c.value for c in classes}
    out: dict[str, int] = {}
    soft = sorted((c for c in classes if c.preemptible), key=lambda c: (c.value, c.name))
    hard = sorted((c for c in classes if not c.preemptible), key=lambda c: (c.value, c.name))
    for i, c in enumerate(soft):
        out[c.name] = 1 + round(i * 98 / (len(soft) - 1)) if len(soft) > 1 else 50
    for i, c in enumerate(hard):
        out[c.name] = NON_PREEMPTIBLE_FROM + 25 * i
    return out


def leaf_name(team_k8s: str, accelerator: str) -> str:
    """A leaf queue's name, which pods give as a label value (`kai.scheduler/queue`)."""
    return check_label_value(k8s_name(f"{team_k8s}-{accelerator}", "queue", dots=True), "queue")


def _gpu(quota: int, limit: int, weight: float) -> Obj:
    w: int | float = int(weight) if float(weight).is_integer() else weight
    return {"quota": quota, "limit": limit, "overQuotaWeight": w}


def queues(fleet: Fleet, names: Mapping[str, str]) -> list[Obj]:
    out: list[Obj] = []
    for team in fleet.teams:
        quotas = fleet.quotas[team.name]
        parent = names[team.name]
        total = sum(q.guaranteed for q in quotas)
        ceiling = sum(q.ceiling for q in quotas)
        out.append(
            obj(
                API,
                "Queue",
                parent,
                annotations={"gpufleet.io/team": team.name},
                spec={
                    "displayName": team.name,
                    "resources": {
                        "gpu": _gpu(total, ceiling, team.weight),
                        "cpu": dict(UNLIMITED),
                        "memory": dict(UNLIMITED),
                    },
                },
            )
        )
        for q in quotas:
            out.append(
                obj(
                    API,
                    "Queue",
                    leaf_name(parent, q.flavor.accelerator),
                    annotations={
                        "gpufleet.io/team": team.name,
                        "gpufleet.io/accelerator": q.flavor.accelerator,
                    },
                    spec={
                        "displayName": f"{team.name} {q.flavor.accelerator}",
                        "parentQueue": parent,
                        "resources": {
                            "gpu": _gpu(q.guaranteed, q.ceiling, team.weight),
                            "cpu": dict(UNLIMITED),
                            "memory": dict(UNLIMITED),
                        },
                    },
                )
            )
    return out


def export_kai(fleet: Fleet, *, per_project: bool = False) -> Bundle:
    teams = fleet.require_teams("kai")
    origin = Origin.of(fleet, "kai")
    names = unique_names([t.name for t in teams.teams], "team")
    values = kai_priorities(fleet.priority_classes)
    notes = cluster_notes(fleet, whole_gpus=False, split=False)
    notes += [
        "Each team is a parent queue with a leaf queue per accelerator, <team>-<accelerator>; "
        f"pods pick a leaf with the label {QUEUE_LABEL} and their accelerator with a "
        "nodeSelector (KAI queues do not select nodes).",
        "cpu and memory are unlimited in every queue (quota and limit -1): gpufleet's teams "
        "hold GPUs only.",
        "KAI shares over-quota GPUs among all queues by overQuotaWeight: it has no cohorts "
        "and no lending limits.",
        "Preemption, reclaim, minimum runtimes (preemptMinRuntime, reclaimMinRuntime) and "
        "placement are KAI scheduler settings, not written here; gpufleet's profile "
        f"{fleet.profile_name} is not translated.",
        "MIG slices count against a queue's gpu units as KAI accounts them (not checked "
        "against KAI's code).",
    ]
    renamed = {c.name: values[c.name] for c in fleet.priority_classes if values[c.name] != c.value}
    if renamed:
        notes.append(
            "KAI treats priority 100 and above as non-preemptible, so the classes were "
            "renumbered: "
            + ", ".join(f"{c.name} {c.value} -> {values[c.name]}" for c in fleet.priority_classes)
            + "."
        )
    order = [c.name for c in sorted(fleet.priority_classes, key=lambda c: (c.value, c.name))]
    new_order = sorted(order, key=lambda n: (values[n], n))
    if order != new_order:
        notes.append(
            "A preemptible class ranks above a non-preemptible one in gpufleet; in KAI every "
            "non-preemptible class ranks above the preemptible ones."
        )
    spaces = namespaces(fleet, per_project)
    docs: dict[str, Sequence[Obj]] = {
        "queues.yaml": queues(fleet, names),
        "priority-classes.yaml": priority_class_objs(
            fleet, values, preempt="priority" in active_preemption(fleet)
        ),
    }
    docs.update(tenancy(fleet, spaces, KAI_JOB_RULES, priority_caps=True))
    notes += priority_cap_notes(fleet, enforced=True)
    files = yaml_files(origin, docs)
    labels = node_labels(fleet)
    if any(labels.values()):
        files["label-nodes.sh"] = label_script(origin.header(), labels)
    warnings = fleet.overcommit_warnings(
        "KAI takes queue quotas past the cluster's GPUs, so a queue within its quota may still "
        "wait for GPUs other queues hold."
    )
    return Bundle(origin, files, tuple(dict.fromkeys(notes)), warnings)
