"""A multi-team plan's answer as the files the rest of gpufleet reads: ``cluster.yaml`` (the
nodes the quotas are for) and ``teams.yaml`` (the printed quotas, one cohort), so that
``gpufleet export kueue|volcano|kai|slurm cluster.yaml --teams teams.yaml --out DIR`` turns
them into each engine's units (Kueue nominalQuota/borrowingLimit, Volcano deserved/
capability, KAI quota/limit, Slurm GrpTRES) and ``gpufleet serve`` runs them.

They are built from the same variant the quota check simulated (`fleet_quotas.quota_check_variant`),
so the files say what was checked: the training pool's guarantee and limit per team, and in a
mix each team's guarantee of the service pool. Both are validated with the spec models before
they are returned, so a file written here always loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpufleet.plan.fleet_model import FleetPlan
from gpufleet.plan.fleet_quotas import quota_check_variant
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.fleet import FleetPlanSpec
from gpufleet.specs.teams import TeamsSpec

COHORT = "plan"


def answer_specs(spec: FleetPlanSpec, base_dir: Path, plan: FleetPlan) -> dict[str, str]:
    """{"cluster.yaml": text, "teams.yaml": text}; {} when the plan has no quotas."""
    if plan.quotas is None or plan.recommendation is None:
        return {}
    variant, nodes = quota_check_variant(spec, base_dir, plan)
    groups: list[dict[str, Any]] = []
    if variant.service_pool is not None:
        acc, gpn, count = variant.service_pool
        groups.append({"name": "svc", "count": count, "accelerator": acc, "gpus_per_node": gpn})
    groups.append(
        {
            "name": "n",
            "count": nodes,
            "accelerator": variant.accelerator,
            "gpus_per_node": variant.gpus_per_node,
        }
    )
    cluster = {
        "kind": "cluster",
        "name": plan.name,
        "topology_levels": ["node"],
        "node_groups": groups,
    }
    assert variant.quotas is not None
    teams = []
    for name, weight, priority in variant.teams:
        guaranteed, limit = variant.quotas[name]
        quotas: list[dict[str, Any]] = [
            {
                "flavor": variant.accelerator,
                "guaranteed_gpus": guaranteed,
                "limit_gpus": max(limit, guaranteed),
            }
        ]
        if variant.service_pool is not None:
            own = (variant.service_quotas or {}).get(name, 0)
            quotas.append({"flavor": variant.service_pool[0], "guaranteed_gpus": own})
        teams.append(
            {
                "name": name,
                "cohort": COHORT,
                "weight": weight,
                "default_priority": priority,
                "quotas": quotas,
            }
        )
    teams_doc = {"kind": "teams", "teams": teams}
    ClusterSpec.model_validate(cluster)  # what is written must load
    TeamsSpec.model_validate(teams_doc)
    q = plan.quotas
    head = (
        f"# Written by `gpufleet plan` ({plan.generated_by}) for plan {plan.name!r}.\n"
        f"# {q.verdict}\n"
    )
    if not q.recommended:
        head += (
            "# These quotas did NOT meet every target in their check run: not a recommendation.\n"
        )
    cluster_head = head + (
        "# Whole GPUs only: the services' MIG cuts and the network topology are not in this\n"
        "# file (add mig_layout and topology to the node groups as your site has them).\n"
    )
    teams_head = head + (
        "# Export: gpufleet export kueue cluster.yaml --teams teams.yaml --out DIR\n"
        "# (or volcano, kai, slurm): each engine's quota units from these guarantees and limits.\n"
    )
    return {
        "cluster.yaml": cluster_head + yaml.safe_dump(cluster, sort_keys=False),
        "teams.yaml": teams_head + yaml.safe_dump(teams_doc, sort_keys=False),
    }
