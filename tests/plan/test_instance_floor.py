"""A workload is rented on instances that can hold its tensor-parallel group.

A review of `make run` (examples/plan-pretrain-70b.yaml: a 2,560-H100 run laid out tp=4,
pp=5, dp=128, and a tp=1 chat service): the Cloud options table listed 2,563 × p5.4xlarge
(1 H100 each) at $17,633/h, cheaper than the 321 × p5.48xlarge beside it, though a
tensor-parallel group of 4 must sit inside one instance's NVLink domain. The price table
chose the same way: with `providers: [aws]`, p5.4xlarge and p5.48xlarge cost $6.88 per
GPU-hour alike, the smaller won the tie, and the run was costed on 2,563 one-GPU
instances. For A10G, L4 and L40S the 1-GPU instance is also the cheapest per GPU by far
(g6e.xlarge $1.861 against g6e.12xlarge's $2.623), so a service needing tp 4 there would be
costed at a price no instance that runs it has. Every figure here is recomputed from the
catalog rows by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpufleet.catalog.instances import get_instance, load_instances
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost import HOURS_PER_YEAR, ON_DEMAND, Demand, cost_breakdown
from gpufleet.plan.cost.instances import instance_floor, node_local_group
from gpufleet.plan.cost.prices import cloud_price_offers, cloud_prices
from gpufleet.plan.model import WorkloadChoice
from gpufleet.plan.planner import plan
from gpufleet.specs.load import load
from gpufleet.specs.plan import PlanSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
H100 = "h100-sxm5-80gb"
L40S = "l40s"
H3 = 3 * HOURS_PER_YEAR


def _choice(
    accelerator: str, gpus: int, kind: str = "training", name: str = "w", **parallelism: int
) -> WorkloadChoice:
    return WorkloadChoice(
        workload=name,
        kind=kind,
        accelerator=accelerator,
        gpus=gpus,
        parallelism=dict(parallelism),
        metrics={},
        gpu_hours=None,
        cost_usd=None,
        meets_constraints=True,
    )


def _gpus_of(provider: str, instance: str, region: str) -> float:
    return float(get_instance(provider, instance, region).accelerators_count or 0)


def _cheapest_per_gpu(accelerator: str, provider: str, min_gpus: int) -> float:
    """The catalog's lowest on-demand price per GPU of `accelerator` at `provider` on whole
    instances of at least `min_gpus` GPUs, read from instances.csv directly."""
    return min(
        float(r.on_demand_usd_per_hour) / float(r.accelerators_count)
        for r in load_instances()
        if r.accelerator == accelerator
        and r.provider == provider
        and r.is_whole_price
        and r.on_demand_usd_per_hour is not None
        and (r.accelerators_count or 0) >= max(1, min_gpus)
    )


def test_the_70b_cloud_table_lists_no_instance_smaller_than_its_tp_group() -> None:
    """`make run`'s plan: no Cloud options row rents fewer than 4 GPUs per instance, and the
    log says p5.4xlarge was left out for pretrain-70b's tensor-parallel group of 4."""
    result = plan(load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml"))
    run = next(c for c in result.recommendation.workloads if c.kind == "training")
    assert run.parallelism["tp"] == 4
    offers = [o for rows in result.cloud.values() for o in rows]
    assert offers
    for o in offers:
        assert _gpus_of(o.provider, o.instance, o.region) >= 4, o.instance
    assert "p5.4xlarge" not in {o.instance for o in offers}
    assert any(o.instance == "p5.48xlarge" for o in result.cloud["aws"])
    line = next(a for a in result.assumptions if a.name == f"{H100} cloud options")
    assert line.value == "instances of at least 4 GPUs"
    assert "aws p5.4xlarge (1 GPU) left out: pretrain-70b's tensor-parallel group of 4" in (
        line.source
    )


def test_an_aws_h100_run_is_costed_on_the_8_gpu_instance_its_tp_group_needs() -> None:
    """AWS only: p5.4xlarge ties p5.48xlarge at $6.88 per GPU-hour and won the tie, so the
    run was costed on 2,563 one-GPU instances ($34,499,124 on demand). It is rented as the
    Cloud options table and the sentence say: the chat's 3 GPUs on 1 p5.48xlarge every hour
    and the run on 320 for its wall clock, at the row's $55.04 per instance-hour."""
    spec = load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml").model_copy(
        update={"providers": ["aws"], "accelerators": [H100], "deployment": "cloud"}
    )
    result = plan(spec)
    run = next(c for c in result.recommendation.workloads if c.kind == "training")
    chat = next(c for c in result.recommendation.workloads if c.kind == "inference")
    assert (run.parallelism["tp"], chat.parallelism["tp"]) == (4, 1)
    assert run.gpu_hours is not None
    row = get_instance("aws", "p5.48xlarge", "us-east-1")
    assert row.accelerators_count == 8
    assert row.on_demand_usd_per_hour is not None
    hours = spec.horizon_years * HOURS_PER_YEAR
    instance_hours = math.ceil(chat.gpus / 8) * hours + math.ceil(run.gpus / 8) * (
        run.gpu_hours / run.gpus
    )
    assert result.cost.mix["instance_gpus"] == 8
    assert result.cost.on_demand == pytest.approx(
        instance_hours * float(row.on_demand_usd_per_hour)
    )
    # one GPU at a time, as p5.4xlarge rents them, is less: the idle GPUs are now paid for
    per_gpu = get_instance("aws", "p5.4xlarge", "us-east-1").on_demand_usd_per_hour
    assert per_gpu is not None
    assert result.cost.on_demand > (chat.gpus * hours + run.gpu_hours) * float(per_gpu)
    assert result.recommendation.why[0].startswith(
        f"renting takes 2,568 × {H100} as 321 × 8-GPU p5.48xlarge (aws "
    )
    on_demand = next(a for a in result.assumptions if a.name == f"{H100} on-demand price")
    assert "instances of at least 4 GPUs" in on_demand.source
    assert "aws p5.4xlarge (1 GPU) left out" in on_demand.source
    assert "p5.48xlarge" in on_demand.source


def test_an_l40s_price_for_tp_4_comes_from_a_4_gpu_instance() -> None:
    """The cheapest L40S per GPU is g6e.xlarge (1 GPU, $1.861/h); a tp=4 group needs
    g6e.12xlarge or larger, whose lowest price per GPU is the catalog row's $/h over 4."""
    log = Assumptions()
    one = cloud_prices(L40S, ("aws",), (), Assumptions())[ON_DEMAND]
    four = cloud_prices(L40S, ("aws",), (), log, min_gpus=4)[ON_DEMAND]
    assert one == pytest.approx(_cheapest_per_gpu(L40S, "aws", 1))
    assert four == pytest.approx(_cheapest_per_gpu(L40S, "aws", 4))
    assert four == pytest.approx(10.49264 / 4)  # g6e.12xlarge, us-east-1/-2, us-west-2
    assert four > 1.4 * one
    for offer in cloud_price_offers(L40S, ("aws",), (), min_gpus=4).values():
        assert offer.gpus >= 4, offer
    source = {a.name: a.source for a in log.frozen()}[f"{L40S} on-demand price"]
    assert "instances of at least 4 GPUs" in source
    assert "aws g6e.xlarge (1 GPU)" in source
    assert "g6e.12xlarge" in source


def test_an_l40s_tp_4_service_costs_its_4_gpu_instances() -> None:
    """8 L40S serving every hour as two tp=4 replicas: 2 × g6e.12xlarge for 3 years at the
    row's hourly price, not 8 × g6e.xlarge at the 1-GPU price."""
    service = _choice(L40S, 8, kind="inference", name="chat-70b", tp=4, replicas=2)
    floor = instance_floor([service])
    assert (floor.gpus, floor.why) == (4, "chat-70b's replica's tensor-parallel group of 4")
    demand = Demand(L40S, 8, 0.0, 0.0, 0.0, H3)
    cost = cost_breakdown(
        demand, Assumptions(), providers=("aws",), deployment="cloud", min_gpus=floor.gpus
    )
    offer = cloud_price_offers(L40S, ("aws",), (), min_gpus=floor.gpus)[ON_DEMAND]
    row = get_instance("aws", offer.instance, offer.region)
    assert row.accelerators_count == 4
    assert row.on_demand_usd_per_hour is not None
    assert cost.on_demand == pytest.approx(2 * float(row.on_demand_usd_per_hour) * H3)
    assert cost.mix["instance_gpus"] == 4
    at_one_gpu = cost_breakdown(demand, Assumptions(), providers=("aws",), deployment="cloud")
    assert at_one_gpu.on_demand == pytest.approx(8 * 1.861 * H3)
    assert cost.on_demand is not None
    assert at_one_gpu.on_demand is not None
    assert cost.on_demand > 1.4 * at_one_gpu.on_demand


def test_a_tp_1_workload_may_still_rent_a_1_gpu_instance() -> None:
    """Nothing changes for work without a group to keep together: a tp=1 L40S service is
    priced on g6e.xlarge, and an AWS H100 chat service's table keeps p5.4xlarge, which
    rents its 3 GPUs without 5 idle."""
    service = _choice(L40S, 2, kind="inference", tp=1, replicas=2)
    assert instance_floor([service]).gpus == 1
    offer = cloud_price_offers(L40S, ("aws",), (), min_gpus=1)[ON_DEMAND]
    assert (offer.instance, offer.gpus) == ("g6e.xlarge", 1)
    spec = load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml")
    chat_only = spec.model_copy(
        update={
            "providers": ["aws"],
            "accelerators": [H100],
            "deployment": "cloud",
            "workloads": [w for w in spec.workloads if w.kind == "inference"],
        }
    )
    result = plan(chat_only)
    assert result.recommendation.workloads[0].parallelism["tp"] == 1
    assert "p5.4xlarge" in {o.instance for o in result.cloud["aws"]}
    assert result.cost.mix["instance_gpus"] == 1
    assert not any(a.name.endswith("cloud options") for a in result.assumptions)


def test_the_group_kept_on_one_instance_is_the_one_the_estimate_timed_on_nvlink() -> None:
    """Beyond tp, the spans the training estimate times on the scale-up link (within the
    accelerator's scale-up domain, 8 for H100, 1 for L40S) stay on one instance; larger
    ones were timed on the network and may span instances."""
    cases = [
        # (choice, GPUs kept together): the MoE example's expert group
        (_choice(H100, 1280, tp=1, cp=2, ep=8, pp=5, dp=64), 8),
        # pretrain-405b: tp 8; tp × cp = 32 crosses nodes in the estimate
        (_choice(H100, 16384, tp=8, cp=4, pp=16, dp=64), 8),
        # a small run's whole data-parallel ring fits one 8-GPU node
        (_choice(H100, 8, tp=2, dp=4), 8),
        # pretrain-8b: tp 2, its 256-way ring crosses nodes
        (_choice(H100, 512, tp=2, dp=256), 2),
        # L40S has no NVLink (domain 1): its context-parallel group runs on the network
        (_choice(L40S, 16, tp=1, cp=2, pp=2, dp=4), 1),
        # not sized
        (_choice(H100, 0), 1),
    ]
    for choice, gpus in cases:
        assert node_local_group(choice)[0] == gpus, choice.parallelism
    mixed = [
        _choice(H100, 3, kind="inference", name="chat", tp=1, replicas=3),
        _choice(H100, 2560, name="pretrain-70b", tp=4, pp=5, dp=128, cp=1, ep=1),
    ]
    floor = instance_floor(mixed)
    assert (floor.gpus, floor.why) == (4, "pretrain-70b's tensor-parallel group of 4")
