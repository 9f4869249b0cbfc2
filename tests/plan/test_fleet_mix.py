"""Accelerator mixes in a multi-team plan: services on one accelerator, training on another."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet import plan_fleet
from gpufleet.plan.fleet_model import FleetPlan
from gpufleet.plan.fleet_setup import (
    Candidate,
    build_cluster,
    build_teams,
    draw_workload,
    make_variant,
    mix_candidate,
    prepare_candidate,
)
from gpufleet.report.fleet import write_fleet_reports

from .fleet_cases import spec, tiny

A100_40 = "a100-sxm4-40gb"
H100 = "h100-sxm5-80gb"
H200 = "h200-sxm-141gb"


def _big_service_data() -> dict[str, Any]:
    """TINY on A100-40GB or H200, alpha serving a 405B model an A100-40GB node cannot hold."""
    data = tiny(accelerators=[A100_40, H200])
    data["teams"][0]["workloads"][1] = {
        "kind": "inference",
        "name": "big",
        "model": {"preset": "llama-3.1-405b"},
        "precision": "fp8",
        "request_rate": 0.5,
        "slo": {"ttft_p99_ms": 3000},
    }
    return data


@pytest.fixture(scope="module")
def big_plan() -> FleetPlan:
    return plan_fleet(spec(_big_service_data()), Path(), seeds=2)


def _candidates(data: dict[str, Any]) -> dict[str, Candidate]:
    s = spec(data)
    return {a: prepare_candidate(s, a, [], Assumptions()) for a in s.accelerators}


def test_a_mix_serves_what_the_cheap_accelerator_cannot(big_plan: FleetPlan) -> None:
    base = {
        c.label: c
        for c in big_plan.candidates
        if c.profile in ("", "default") and c.arrival_scale == 1.0
    }
    assert base[A100_40].status == "infeasible"
    assert "alpha/big on a100-sxm4-40gb: cannot serve it" in base[A100_40].problems[0]
    assert base[H200].status == "met"
    mix = base[f"{A100_40} + {H200}"]
    assert mix.status == "met"
    assert mix.service_accelerator == H200
    assert mix.service_gpus == 8  # one H200 node holds the TP-8 replica
    assert mix.gpus == (mix.nodes or 0) * 8 + 8
    rec = big_plan.recommendation
    assert rec is not None
    assert (rec.accelerator, rec.service_accelerator) == (A100_40, H200)
    assert mix.cost is not None
    assert base[H200].cost is not None
    assert mix.cost.total_usd is not None
    assert base[H200].cost.total_usd is not None
    assert mix.cost.total_usd < base[H200].cost.total_usd
    assert "for the services" in rec.cluster_text
    # the reverse mix (training on H200, services on A100-40GB) cannot serve the model
    assert f"{H200} + {A100_40}" not in base


def test_a_mixs_quotas_partition_each_pool_and_are_verified(big_plan: FleetPlan) -> None:
    rec, quotas = big_plan.recommendation, big_plan.quotas
    assert rec is not None
    assert quotas is not None
    assert sum(q.guaranteed_by_accelerator[H200] for q in quotas.teams) == rec.service_gpus
    assert sum(q.guaranteed_by_accelerator[A100_40] for q in quotas.teams) == (
        rec.gpus - rec.service_gpus
    )
    alpha = next(q for q in quotas.teams if q.team == "alpha")
    assert alpha.guaranteed_by_accelerator[H200] == 8  # the only team with a service
    assert all(q.guaranteed_gpus == sum(q.guaranteed_by_accelerator.values()) for q in quotas.teams)
    assert quotas.verified is not None
    assert quotas.verified.gpus == rec.gpus


def test_the_policy_and_sensitivity_runs_are_of_the_mix(big_plan: FleetPlan) -> None:
    others = [c for c in big_plan.candidates if c.profile == "k8s-default" or c.arrival_scale != 1]
    assert others
    assert all(c.service_accelerator == H200 and c.accelerator == A100_40 for c in others)
    assert big_plan.policies
    assert big_plan.sensitivity


def test_the_report_names_both_pools(big_plan: FleetPlan, tmp_path: Path) -> None:
    paths = write_fleet_reports(big_plan, tmp_path, pdf=False)
    md = paths["md"].read_text(encoding="utf-8")
    assert f"{A100_40} + {H200}" in md
    assert f"8 × {H200} for the services" in md
    assert f"8 {H200} for the services" in md  # the candidates table


def test_the_sentences_split_a_mixs_gpus_by_pool(big_plan: FleetPlan) -> None:
    """Only the training pool is searched, so "one node fewer" is one of its nodes, and the
    GPU counts name both pools rather than a total that hides the fixed service pool."""
    rec = big_plan.recommendation
    assert rec is not None
    sized = [s for s in big_plan.sensitive_to if "node" in s]
    assert sized
    for sentence in sized:
        assert f"{A100_40} node" in sentence
        if "GPUs" in sentence and "k8s-default" not in sentence:
            assert f"× {A100_40} + 8 × {H200}" in sentence, sentence


def test_mixes_false_searches_single_accelerators_only() -> None:
    data = _big_service_data()
    data["mixes"] = False
    data["accelerators"] = [H100, H200]
    plan = plan_fleet(spec(data), Path(), seeds=1)
    assert all(c.service_accelerator is None for c in plan.candidates)
    assert "not searched" in str(plan.method["mixes"])


def test_the_service_pool_is_the_peak_in_whole_nodes_as_the_profile_runs_it() -> None:
    data = tiny(accelerators=[H100, "a100-sxm4-80gb"])  # alpha's 8B chat fits a MIG slice
    c = _candidates(data)
    services = c["a100-sxm4-80gb"]
    assert services.services[0].mig_profile is not None
    mix = mix_candidate(c[H100], services)
    assert mix is not None
    assert mix.service_pool is not None
    assert mix.label == f"{H100} + a100-sxm4-80gb"
    assert mix.service_pool.nodes == math.ceil(services.mig_gpus / 8) == 1
    slices = sum(s.replicas for s in services.services)
    assert mix.service_pool.whole_only_nodes == math.ceil(slices / 8)
    assert mix.min_nodes == c[H100].largest_gang_nodes  # no service GPUs in the searched pool
    assert mix_candidate(c[H100], c[H100]) is None
    no_services = tiny(accelerators=[H100, "a100-sxm4-80gb"])
    no_services["teams"][0]["workloads"] = no_services["teams"][0]["workloads"][:1]
    c2 = _candidates(no_services)
    assert mix_candidate(c2[H100], c2["a100-sxm4-80gb"]) is None


def test_a_mix_variant_pins_every_job_to_its_pool() -> None:
    data = tiny(accelerators=[H100, "a100-sxm4-80gb"])
    c = _candidates(data)
    mix = mix_candidate(c[H100], c["a100-sxm4-80gb"])
    assert mix is not None
    s = spec(data)
    v = make_variant(s, mix, [], profile="default")
    assert v.service_pool == ("a100-sxm4-80gb", 8, 1)
    jobs = draw_workload(v, 0).jobs
    assert {j.accelerators for j in jobs if j.kind == "inference"} == {("a100-sxm4-80gb",)}
    assert {j.accelerators for j in jobs if j.kind != "inference"} == {(H100,)}
    cluster = build_cluster(v, 3)
    assert [n.accelerator for n in cluster.nodes] == ["a100-sxm4-80gb", H100, H100, H100]
    assert cluster.nodes[0].mig
    assert not any(n.mig for n in cluster.nodes[1:])
    open_teams = build_teams(v, cluster)
    assert {q.flavor: q.guaranteed_gpus for q in open_teams.teams[0].quotas} == {
        "a100-sxm4-80gb": 32,
        H100: 32,
    }
    k8s = make_variant(s, mix, [], profile="k8s-default")
    assert k8s.service_pool == ("a100-sxm4-80gb", 8, mix.service_pool.whole_only_nodes)  # type: ignore[union-attr]
    quoted = make_variant(
        s,
        mix,
        [],
        profile="default",
        quotas={"alpha": (8, 16), "beta": (16, 24)},
        service_quotas={"alpha": 8, "beta": 0},
        tag="|q",
    )
    teams = {t.name: t for t in build_teams(quoted, build_cluster(quoted, 3)).teams}
    assert {q.flavor: q.guaranteed_gpus for q in teams["alpha"].quotas} == {
        H100: 8,
        "a100-sxm4-80gb": 8,
    }
    assert teams["beta"].quota_for(H100).limit_gpus == 24  # type: ignore[union-attr]
    assert teams["alpha"].cohort == "plan"


def test_one_accelerator_plans_are_unchanged_by_mixes() -> None:
    """A single candidate has no mix: the same variant keys and cluster as before."""
    c = _candidates(tiny())
    (only,) = c.values()
    v = make_variant(spec(tiny()), only, [], profile="default")
    assert v.key == f"{H100}|default|x1"
    assert v.service_pool is None
    assert [n.accelerator for n in build_cluster(v, 2).nodes] == [H100, H100]
